//! The key hasher (spec/hash.md): FNV-1a 64 and the canonical encoding.
//!
//! Every primitive is expressed through one byte fold, `fold`, so the byte
//! layout of each encoding rule is visible in one line each.

/// FNV-1a 64 offset basis (HASH-1).
pub const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV 64-bit prime (HASH-1).
pub const PRIME: u64 = 0x0000_0100_0000_01b3;

/// A running FNV-1a 64 state. There is no address or pointer primitive (PLAN-8).
#[derive(Clone, Debug)]
pub struct KeyHasher {
    state: u64,
}

impl Default for KeyHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl KeyHasher {
    pub fn new() -> Self {
        KeyHasher {
            state: OFFSET_BASIS,
        }
    }

    /// The raw byte fold (HASH-2, HASH-3, HASH-14): no count, delimiter or marker.
    pub fn fold(&mut self, bytes: &[u8]) -> &mut Self {
        let mut s = self.state;
        for &b in bytes {
            s ^= b as u64;
            s = s.wrapping_mul(PRIME);
        }
        self.state = s;
        self
    }

    /// Eight little-endian bytes, always (HASH-4).
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.fold(&v.to_le_bytes())
    }

    /// UTF-8 bytes, then their byte count as a u64 (HASH-5). A Rust `&str`
    /// is UTF-8 by construction, so HASH-13's refusal happens earlier, where
    /// text becomes a `str` (the JSON reader refuses unpaired surrogates).
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.fold(s.as_bytes()).u64(s.len() as u64)
    }

    /// The binary64 bit pattern as a u64, never normalised (HASH-6).
    pub fn f64_bits(&mut self, bits: u64) -> &mut Self {
        self.u64(bits)
    }

    /// A float by value (the protocol sends bit patterns; tests use values).
    #[cfg(test)]
    pub fn f64(&mut self, x: f64) -> &mut Self {
        self.f64_bits(x.to_bits())
    }

    /// Presence is `str("some")` or `str("none")`, never silence (HASH-7).
    pub fn present(&mut self, present: bool) -> &mut Self {
        self.str(if present { "some" } else { "none" })
    }

    /// `str("instance")` then the id (HASH-8).
    pub fn instance(&mut self, id: u64) -> &mut Self {
        self.str("instance").u64(id)
    }

    /// The current value; the state is left as it is (HASH-9).
    pub fn finish(&self) -> u64 {
        self.state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(bytes: &[u8]) -> u64 {
        KeyHasher::new().fold(bytes).finish()
    }

    #[test]
    fn published_vectors() {
        assert_eq!(raw(b""), 0xcbf29ce484222325);
        assert_eq!(raw(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(raw(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn strings_are_count_suffixed() {
        let ab_c = KeyHasher::new().str("ab").str("c").finish();
        let a_bc = KeyHasher::new().str("a").str("bc").finish();
        assert_eq!(ab_c, 0x5091916f8ceeb7b0);
        assert_eq!(a_bc, 0xd3effa61b782f8b8);
        assert_ne!(ab_c, a_bc);
        // Without counts the two pairs collide: the bug HASH-5 prevents.
        let raw_ab_c = KeyHasher::new().fold(b"ab").fold(b"c").finish();
        let raw_a_bc = KeyHasher::new().fold(b"a").fold(b"bc").finish();
        assert_eq!(raw_ab_c, raw_a_bc);
        assert_eq!(raw_ab_c, 0xe71fa2190541574b);
    }

    #[test]
    fn worked_examples_of_the_spec() {
        assert_eq!(KeyHasher::new().u64(1).finish(), 0x89cd31291d2aefa4);
        assert_eq!(KeyHasher::new().u64(1 << 56).finish(), 0xa8c7f732281a3812);
        assert_eq!(KeyHasher::new().f64(0.0).finish(), 0xa8c7f832281a39c5);
        assert_eq!(KeyHasher::new().f64(-0.0).finish(), 0xa8c7783228196045);
        assert_eq!(KeyHasher::new().str("").finish(), 0xa8c7f832281a39c5);
        assert_eq!(
            KeyHasher::new().f64_bits(0x7ff8000000000000).finish(),
            0xaa96293229a2e940
        );
        assert_eq!(
            KeyHasher::new().f64_bits(0x7ff8000000000001).finish(),
            0x8d1818291ff72671
        );
        assert_eq!(KeyHasher::new().present(true).finish(), 0xb44eb8f658970175);
        assert_eq!(KeyHasher::new().present(false).finish(), 0x985368c238dbbb5f);
        assert_eq!(KeyHasher::new().instance(1).finish(), 0x249b0f642a4191fb);
    }

    #[test]
    fn finish_does_not_reset() {
        let mut h = KeyHasher::new();
        h.str("qwen3");
        let first = h.finish();
        assert_eq!(first, 0x6977452ecf55939a);
        assert_eq!(h.finish(), first);
        h.u64(32);
        assert_eq!(h.finish(), 0x5ca8232ba561cefa);
    }

    #[test]
    fn fnv1_order_would_differ() {
        // FNV-1 (multiply, then xor) on "a" gives another value (HASH-2).
        let fnv1 = (OFFSET_BASIS.wrapping_mul(PRIME)) ^ 0x61;
        assert_eq!(fnv1, 0xaf63bd4c8601b7be);
        assert_ne!(raw(b"a"), fnv1);
    }
}
