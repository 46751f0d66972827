//! A KV cache with real storage and an allocation id (spec/identity.md, ALLOC).
//!
//! The rule this module instantiates is ALLOC-13: an operation that puts new
//! storage under any layer mints a new allocation id; one that leaves every
//! layer's storage in place, or is refused, does not. Storage is always held
//! as `f32` whatever the declared `dtype` (the element type is recorded and
//! keyed, which is all the specification observes).
//!
//! A cache also has a *placement* (class `plan_validity`): where its KV lives
//! (its residency) and, per layer, a label standing for the fingerprint of
//! that layer's K and V storage. A guarded rebind compares these (contract,
//! `session_rebind`).

use crate::errors::{Field, KvError};
use crate::identity::mint_alloc;

/// Element types a cache may declare (the vocabulary of SIG-14).
pub const DTYPES: [&str; 3] = ["f32", "f16", "bf16"];

/// The most elements (K and V, all layers) one cache may hold in this adapter.
/// A guard against a request that would exhaust memory, not a rule of the spec.
pub const MAX_ELEMENTS: u128 = 1 << 28;

/// The most layers one cache may have in this adapter (the same kind of
/// guard: a cache of empty layers still costs memory per layer).
pub const MAX_LAYERS: u64 = 1 << 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub n_layers: u64,
    pub n_kv_heads: u64,
    pub head_dim: u64,
    pub max_seq_len: u64,
    pub dtype: String,
}

impl Geometry {
    /// Elements in one layer's K (or V) buffer.
    fn layer_elements(&self) -> u128 {
        self.n_kv_heads as u128 * self.head_dim as u128 * self.max_seq_len as u128
    }

    /// Elements per position in one layer.
    fn width(&self) -> usize {
        // Only reached with storage present, i.e. within MAX_ELEMENTS; saturate
        // so a cache with no layers and absurd head counts cannot overflow.
        usize::try_from(self.n_kv_heads as u128 * self.head_dim as u128).unwrap_or(usize::MAX)
    }
}

/// One layer's storage: its own shape and its two buffers, laid out
/// position-major (`[position][head][dim]`), so a position is one slice.
#[derive(Debug)]
struct LayerStorage {
    n_kv_heads: u64,
    head_dim: u64,
    max_seq_len: u64,
    k: Vec<f32>,
    v: Vec<f32>,
}

impl LayerStorage {
    fn fresh(n_kv_heads: u64, head_dim: u64, max_seq_len: u64) -> LayerStorage {
        let n = (n_kv_heads * head_dim * max_seq_len) as usize;
        LayerStorage {
            n_kv_heads,
            head_dim,
            max_seq_len,
            k: vec![0.0; n],
            v: vec![0.0; n],
        }
    }

    fn of(g: &Geometry) -> LayerStorage {
        LayerStorage::fresh(g.n_kv_heads, g.head_dim, g.max_seq_len)
    }
}

/// Where a cache's KV lives and what its storage is, as a guarded rebind
/// sees it (contract, `cache_new_placed`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The device the KV is resident on; `None` when it is not known.
    pub residency: Option<String>,
    /// One label per layer standing for the storage fingerprint of that
    /// layer's K and V buffers (dtype, encoding, backend, extent): equal
    /// labels mean interchangeable storage.
    pub layer_storage: Vec<String>,
}

impl Placement {
    /// What `cache_new` gives: residency "default", every layer "default".
    pub fn default_for(n_layers: u64) -> Placement {
        Placement {
            residency: Some("default".to_string()),
            layer_storage: vec!["default".to_string(); n_layers as usize],
        }
    }
}

fn check_layer_count(g: &Geometry) -> Result<(), String> {
    if g.n_layers > MAX_LAYERS {
        return Err(format!(
            "a cache of {} layers has more than this adapter allocates ({MAX_LAYERS})",
            g.n_layers
        ));
    }
    Ok(())
}

#[derive(Debug)]
pub struct KvCache {
    geometry: Geometry,
    layers: Vec<LayerStorage>,
    len: u64,
    alloc: u64,
    placement: Placement,
}

impl KvCache {
    /// Allocate fresh storage and mint an allocation id (ALLOC-2), placed
    /// as `cache_new` places it (`Placement::default_for`).
    pub fn new(geometry: Geometry) -> Result<KvCache, String> {
        check_layer_count(&geometry)?;
        let placement = Placement::default_for(geometry.n_layers);
        KvCache::placed(geometry, placement)
    }

    /// `cache_new_placed`: an ordinary cache with a fresh allocation id and
    /// the given placement, which must label every layer exactly once.
    pub fn placed(geometry: Geometry, placement: Placement) -> Result<KvCache, String> {
        check_layer_count(&geometry)?;
        if placement.layer_storage.len() as u128 != geometry.n_layers as u128 {
            return Err(format!(
                "layer_storage: {} labels for a cache of {} layers (n_layers)",
                placement.layer_storage.len(),
                geometry.n_layers
            ));
        }
        if !DTYPES.contains(&geometry.dtype.as_str()) {
            return Err(format!(
                "dtype {:?} is not one of f32, f16, bf16 (a usage error, ALLOC-14)",
                geometry.dtype
            ));
        }
        let total = geometry.layer_elements() * 2 * geometry.n_layers as u128;
        if total > MAX_ELEMENTS {
            return Err(format!(
                "a cache of {total} elements is larger than this adapter allocates ({MAX_ELEMENTS})"
            ));
        }
        let layers = (0..geometry.n_layers)
            .map(|_| LayerStorage::of(&geometry))
            .collect();
        Ok(KvCache {
            geometry,
            layers,
            len: 0,
            alloc: mint_alloc(),
            placement,
        })
    }

    /// Residency and storage labels. `clear` and `replace_layer` keep them:
    /// fresh buffers of the same geometry on the same device are storage of
    /// the same fingerprint, so a replaced layer keeps its label, and only
    /// the allocation id tells the new buffers from the old.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Reads have no side effect (ALLOC-12).
    pub fn alloc_id(&self) -> u64 {
        self.alloc
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    /// Release every layer's storage for fresh storage: length 0, new id
    /// (ALLOC-18). The placement is kept (see `placement`).
    pub fn clear(&mut self) {
        let fresh: Vec<LayerStorage> = (0..self.geometry.n_layers)
            .map(|_| LayerStorage::of(&self.geometry))
            .collect();
        self.layers = fresh;
        self.len = 0;
        self.alloc = mint_alloc();
    }

    /// Rewind. Beyond the current length this is a no-op (ALLOC-5, ALLOC-15).
    pub fn truncate(&mut self, length: u64) {
        if length < self.len {
            self.len = length;
        }
    }

    /// Write `tokens` positions into every layer's existing storage (ALLOC-7),
    /// or refuse the whole append when it would pass the capacity (ALLOC-16).
    pub fn append(&mut self, tokens: u64, fill: f32) -> Result<(), KvError> {
        let requested = self.len as u128 + tokens as u128;
        if requested > self.geometry.max_seq_len as u128 {
            return Err(KvError::CapacityExceeded {
                capacity: self.geometry.max_seq_len,
                requested,
            });
        }
        if !self.layers.is_empty() {
            let w = self.geometry.width();
            let (from, to) = (self.len as usize * w, requested as usize * w);
            for layer in &mut self.layers {
                layer.k[from..to].fill(fill);
                layer.v[from..to].fill(-fill);
            }
        }
        self.len = requested as u64;
        Ok(())
    }

    /// Put fresh storage of the given shape under one layer. Refused when the
    /// index is out of range (ALLOC-9) or the shape differs, checked in the
    /// order `n_kv_heads`, `head_dim`, `max_seq_len` (ALLOC-17); otherwise a
    /// new id, and the length is kept (ALLOC-4, ALLOC-11). The layer keeps
    /// its storage label (see `placement`).
    pub fn replace_layer(
        &mut self,
        layer: u64,
        n_kv_heads: u64,
        head_dim: u64,
        max_seq_len: u64,
    ) -> Result<(), KvError> {
        let n_layers = self.layers.len() as u64;
        if layer >= n_layers {
            return Err(KvError::LayerOutOfRange { layer, n_layers });
        }
        let current = &self.layers[layer as usize];
        let comparisons = [
            (Field::NKvHeads, current.n_kv_heads, n_kv_heads),
            (Field::HeadDim, current.head_dim, head_dim),
            (Field::MaxSeqLen, current.max_seq_len, max_seq_len),
        ];
        if let Some(&(field, expected, found)) = comparisons.iter().find(|(_, e, f)| e != f) {
            return Err(KvError::LayerShapeMismatch {
                layer,
                field,
                expected,
                found,
            });
        }
        self.layers[layer as usize] = LayerStorage::fresh(n_kv_heads, head_dim, max_seq_len);
        self.alloc = mint_alloc();
        Ok(())
    }

    /// The positions written so far in one layer (used by tests).
    #[cfg(test)]
    fn k_prefix(&self, layer: usize) -> &[f32] {
        &self.layers[layer].k[..self.len as usize * self.geometry.width()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry() -> Geometry {
        Geometry {
            n_layers: 2,
            n_kv_heads: 2,
            head_dim: 4,
            max_seq_len: 8,
            dtype: "f32".into(),
        }
    }

    #[test]
    fn which_operations_mint() {
        let mut c = KvCache::new(geometry()).unwrap();
        let id0 = c.alloc_id();
        c.append(5, 1.0).unwrap();
        assert_eq!((c.len(), c.alloc_id()), (5, id0));
        assert!(c.k_prefix(1).iter().all(|&x| x == 1.0));
        c.truncate(9);
        assert_eq!((c.len(), c.alloc_id()), (5, id0));
        c.truncate(2);
        assert_eq!((c.len(), c.alloc_id()), (2, id0));
        c.replace_layer(1, 2, 4, 8).unwrap();
        let id1 = c.alloc_id();
        assert!(id1 > id0);
        assert_eq!(c.len(), 2);
        c.clear();
        assert!(c.alloc_id() > id1);
        assert_eq!(c.len(), 0);
    }

    #[test]
    fn refusals_change_nothing() {
        let mut c = KvCache::new(geometry()).unwrap();
        c.append(5, 1.0).unwrap();
        let id = c.alloc_id();
        assert_eq!(
            c.append(4, 2.0),
            Err(KvError::CapacityExceeded {
                capacity: 8,
                requested: 9
            })
        );
        assert_eq!(
            c.replace_layer(2, 2, 4, 8),
            Err(KvError::LayerOutOfRange {
                layer: 2,
                n_layers: 2
            })
        );
        assert_eq!(
            c.replace_layer(0, 4, 2, 16),
            Err(KvError::LayerShapeMismatch {
                layer: 0,
                field: Field::NKvHeads,
                expected: 2,
                found: 4
            })
        );
        assert_eq!(
            c.replace_layer(1, 2, 4, 16),
            Err(KvError::LayerShapeMismatch {
                layer: 1,
                field: Field::MaxSeqLen,
                expected: 8,
                found: 16
            })
        );
        assert_eq!((c.len(), c.alloc_id()), (5, id));
        assert!(c.k_prefix(0).iter().all(|&x| x == 1.0));
        c.append(3, 3.0).unwrap();
        assert_eq!(c.len(), 8);
    }

    #[test]
    fn placement_is_given_kept_and_checked() {
        let c = KvCache::new(geometry()).unwrap();
        assert_eq!(c.placement(), &Placement::default_for(2));
        assert_eq!(c.placement().residency.as_deref(), Some("default"));

        let placed = Placement {
            residency: None,
            layer_storage: vec!["a".into(), "b".into()],
        };
        let mut c = KvCache::placed(geometry(), placed.clone()).unwrap();
        c.append(2, 1.0).unwrap();
        c.replace_layer(1, 2, 4, 8).unwrap();
        c.clear();
        assert_eq!(c.placement(), &placed);

        let short = Placement {
            residency: Some("cpu".into()),
            layer_storage: vec!["a".into()],
        };
        assert!(KvCache::placed(geometry(), short).is_err());
    }

    #[test]
    fn unknown_dtype_is_a_usage_error() {
        let mut g = geometry();
        g.dtype = "F32".into();
        assert!(KvCache::new(g).is_err());
    }
}
