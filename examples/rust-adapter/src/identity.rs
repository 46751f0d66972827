//! Never-recycled identities (spec/identity.md, ID and ALLOC-1).
//!
//! Each kind of id has its own process-wide counter. The starting values and
//! steps are deliberately unlike the reference's (which starts at 1 and steps
//! by 1): ID-8 makes them free, and the suite judges ids only by equality and
//! order (CONF-4), so a different numbering must pass.

use std::sync::atomic::{AtomicU64, Ordering};

/// A lock-free counter that mints strictly increasing, nonzero values and
/// refuses to wrap around (wrapping would reissue an id, ID-3).
pub struct Counter {
    next: AtomicU64,
    step: u64,
}

impl Counter {
    pub const fn new(start: u64, step: u64) -> Counter {
        assert!(start >= 1 && step >= 1);
        Counter {
            next: AtomicU64::new(start),
            step,
        }
    }

    /// Draw the next id. Concurrent callers get pairwise distinct values, and
    /// each caller's own draws increase (ID-5): one atomic read-modify-write.
    pub fn mint(&self) -> u64 {
        match self
            .next
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| {
                v.checked_add(self.step)
            }) {
            Ok(id) => id,
            // 2^64 constructions in one process: refuse rather than wrap.
            Err(_) => panic!("identity counter exhausted; refusing to reissue an id"),
        }
    }
}

/// Model instance ids (ID-1 .. ID-8).
pub static INSTANCE_IDS: Counter = Counter::new(1_000_001, 3);
/// KV allocation ids (ALLOC-1): a separate sequence with its own numbering.
pub static ALLOC_IDS: Counter = Counter::new(7_000_003, 7);

pub fn mint_instance() -> u64 {
    INSTANCE_IDS.mint()
}

pub fn mint_alloc() -> u64 {
    ALLOC_IDS.mint()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_nonzero_and_increase() {
        let a = mint_instance();
        let b = mint_instance();
        assert!(a != 0 && b > a);
        let x = mint_alloc();
        let y = mint_alloc();
        assert!(x != 0 && y > x);
    }

    #[test]
    fn concurrent_mints_are_distinct_and_ordered_per_thread() {
        let counter: &'static Counter = Box::leak(Box::new(Counter::new(5, 2)));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                std::thread::spawn(move || {
                    let ids: Vec<u64> = (0..2000).map(|_| counter.mint()).collect();
                    assert!(ids.windows(2).all(|w| w[0] < w[1]));
                    ids
                })
            })
            .collect();
        let mut all = HashSet::new();
        for t in threads {
            for id in t.join().unwrap() {
                assert!(all.insert(id), "id {id} issued twice");
            }
        }
        assert_eq!(all.len(), 16000);
    }

    #[test]
    fn exhaustion_refuses_instead_of_wrapping() {
        let counter = Counter::new(u64::MAX - 1, 1);
        assert_eq!(counter.mint(), u64::MAX - 1);
        // The next draw would need a successor of u64::MAX: refused.
        let wrapped = std::panic::catch_unwind(|| counter.mint());
        assert!(wrapped.is_err());
    }
}
