//! Models and held decode plans (spec/plan.md, PLAN).
//!
//! The validity key is composed differently from the reference on purpose
//! (PLAN-3 leaves the composition to the implementation). Every component is
//! introduced by a section number, every string is preceded by its byte
//! length (on top of the length `str` already appends), and every list by
//! its count, so the encoding can be decoded left to right and is injective
//! (PLAN-16) without relying on the suffix counts of `str`:
//!
//! ```text
//! text(s)  = u64(len(s)) str(s)
//! key      = text("kvconform-rust-adapter/plan-key/2")
//!            u64(1) text(family)
//!            u64(2) u64(#params)  { text(name) u64(tag) value }  by name; tag 1 = u64,
//!                                                                 2 = f64 bits, 3 = text
//!            u64(3) u64(#hooks)   { text(name) present(attached) } by name
//!            u64(4) instance(model instance id)
//!            u64(5) u64(n_layers) u64(n_kv_heads) u64(head_dim) u64(max_seq_len) text(dtype)
//!            u64(6) u64(tokens per step)
//!            u64(7) u64(allocation id)
//! ```
//!
//! The allocation id comes last, so everything before it, the *structure*,
//! is one running hash state that a held plan keeps: the plan can then tell
//! "only the allocation changed" from "something structural changed"
//! (contract, `session_validity`), and can adopt another allocation after a
//! guarded rebind without keeping the model or the cache (PLAN-14).
//!
//! Under `plan_key_window: structure` a parameter named exactly
//! `sliding_window` is left out of section 2 (count included); under `keyed`
//! it is keyed like any other.
//!
//! Per-step inputs (token values, RoPE base and scaling, mask values, the
//! write offset) and the cache's length never reach the hasher (PLAN-6,
//! PLAN-7); weights enter only through the instance id (PLAN-8).

use std::collections::BTreeMap;

use crate::config::WindowKeying;
use crate::errors::{KvError, Slot};
use crate::hasher::KeyHasher;
use crate::identity::mint_instance;
use crate::kv_cache::{Geometry, KvCache, Placement};

/// The model parameter `plan_key_window: structure` leaves out of the key.
pub const WINDOW_PARAM: &str = "sliding_window";

/// A structural parameter (PLAN-15).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Param {
    U64(u64),
    /// A binary64 float, kept as its bit pattern so no value is normalised (HASH-6).
    F64Bits(u64),
    Str(String),
}

/// Family, structural parameters and hook settings, as a model is constructed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    pub family: String,
    pub params: BTreeMap<String, Param>,
    pub hooks: BTreeMap<String, bool>,
}

/// A constructed model: where it came from, its live hook state, its id.
#[derive(Debug)]
pub struct Model {
    source: ModelSpec,
    hooks: BTreeMap<String, bool>,
    instance: u64,
}

impl Model {
    /// Construct a model: a new instance id (ID-1), never derived from the
    /// configuration (ID-4).
    pub fn new(spec: ModelSpec) -> Model {
        let hooks = spec.hooks.clone();
        Model {
            source: spec,
            hooks,
            instance: mint_instance(),
        }
    }

    /// Construct the same model again from its source: a new id (ID-6). The
    /// source is the configuration it was built from, so hooks toggled on the
    /// old instance since then are not carried over.
    pub fn reload(&self) -> Model {
        Model::new(self.source.clone())
    }

    /// Attach or detach a hook in place; the instance id stays (ID-9).
    ///
    /// The hooks a model can carry are the ones its configuration declares,
    /// each keyed as `some` or `none` (HASH-7), so switching one back restores
    /// exactly the earlier key (PLAN-18). A hook the configuration does not
    /// declare is not a state of this model: toggling it is refused as a usage
    /// error (spec/plan.md, the note after PLAN-18) and changes nothing.
    pub fn set_hook(&mut self, hook: &str, present: bool) -> Result<(), String> {
        match self.hooks.get_mut(hook) {
            Some(state) => {
                *state = present;
                Ok(())
            }
            None => Err(format!(
                "the {} configuration declares no hook {hook:?}; declared: [{}]",
                self.source.family,
                self.hooks
                    .keys()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    pub fn instance_id(&self) -> u64 {
        self.instance
    }
}

/// Everything a key is computed from (PLAN-15), with explicit ids.
pub struct KeyParts<'a> {
    pub family: &'a str,
    pub params: &'a BTreeMap<String, Param>,
    pub hooks: &'a BTreeMap<String, bool>,
    pub instance: u64,
    pub alloc: u64,
    pub geometry: &'a Geometry,
    pub step_tokens: u64,
    pub window_keying: WindowKeying,
}

impl<'a> KeyParts<'a> {
    pub fn of(
        model: &'a Model,
        cache: &'a KvCache,
        step_tokens: u64,
        window_keying: WindowKeying,
    ) -> KeyParts<'a> {
        KeyParts {
            family: &model.source.family,
            params: &model.source.params,
            hooks: &model.hooks,
            instance: model.instance,
            alloc: cache.alloc_id(),
            geometry: cache.geometry(),
            step_tokens,
            window_keying,
        }
    }

    /// The validity key (PLAN-1, PLAN-15, PLAN-3, PLAN-16): the structure,
    /// then the allocation id.
    pub fn key(&self) -> u64 {
        with_alloc(self.structure(), self.alloc)
    }

    /// The parameters that are keyed, by name.
    fn keyed_params(&self) -> impl Iterator<Item = (&'a String, &'a Param)> + '_ {
        self.params.iter().filter(move |(name, _)| {
            self.window_keying == WindowKeying::Keyed || name.as_str() != WINDOW_PARAM
        })
    }

    /// Everything in the key but the allocation id, as a running hash state.
    fn structure(&self) -> KeyHasher {
        let mut h = KeyHasher::new();
        text(&mut h, "kvconform-rust-adapter/plan-key/2");

        h.u64(1);
        text(&mut h, self.family);

        h.u64(2).u64(self.keyed_params().count() as u64);
        for (name, value) in self.keyed_params() {
            text(&mut h, name);
            match value {
                Param::U64(v) => h.u64(1).u64(*v),
                Param::F64Bits(bits) => h.u64(2).f64_bits(*bits),
                Param::Str(s) => {
                    h.u64(3);
                    text(&mut h, s);
                    &mut h
                }
            };
        }

        h.u64(3).u64(self.hooks.len() as u64);
        for (name, attached) in self.hooks {
            text(&mut h, name);
            h.present(*attached);
        }

        h.u64(4).instance(self.instance);

        let g = self.geometry;
        h.u64(5)
            .u64(g.n_layers)
            .u64(g.n_kv_heads)
            .u64(g.head_dim)
            .u64(g.max_seq_len);
        text(&mut h, &g.dtype);

        h.u64(6).u64(self.step_tokens);
        h
    }
}

fn text(h: &mut KeyHasher, s: &str) {
    h.u64(s.len() as u64).str(s);
}

/// The key of a structure over a given allocation: its last section.
fn with_alloc(structure: KeyHasher, alloc: u64) -> u64 {
    let mut h = structure;
    h.u64(7).u64(alloc);
    h.finish()
}

/// A held plan's verdict on a model, a cache and a step (contract,
/// `session_validity`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// The key matches: reuse the plan.
    Valid,
    /// Everything but the allocation id matches: a guarded rebind may rescue
    /// the plan; without one it must not be reused.
    AllocationChanged,
    /// Something structural differs: rebuild.
    Stale,
}

impl Validity {
    pub fn name(self) -> &'static str {
        match self {
            Validity::Valid => "valid",
            Validity::AllocationChanged => "allocation_changed",
            Validity::Stale => "stale",
        }
    }
}

/// A held decode plan. It keeps its key (as the structure's hash state and
/// the allocation id) and the placement of the KV it baked: it neither owns
/// nor borrows the model or the cache, so it can outlive both and hides no
/// release (PLAN-14).
#[derive(Debug)]
pub struct Session {
    structure: KeyHasher,
    alloc: u64,
    /// Residency and per-layer storage labels of the KV the plan reads.
    baked: Placement,
    window_keying: WindowKeying,
}

impl Session {
    pub fn build(
        model: &Model,
        cache: &KvCache,
        step_tokens: u64,
        window_keying: WindowKeying,
    ) -> Session {
        let parts = KeyParts::of(model, cache, step_tokens, window_keying);
        Session {
            structure: parts.structure(),
            alloc: parts.alloc,
            baked: cache.placement().clone(),
            window_keying,
        }
    }

    /// The key the plan records: its structure over the allocation it reads.
    fn key(&self) -> u64 {
        with_alloc(self.structure.clone(), self.alloc)
    }

    /// Valid iff the key recomputed for this model, this cache and the number
    /// of tokens in this step equals the recorded one (PLAN-4). Only the count
    /// of the step's tokens is given here: nothing else of a step could reach
    /// the key even by mistake (PLAN-6). Pure: no mint, no mutation (PLAN-13).
    pub fn valid_for(&self, model: &Model, cache: &KvCache, tokens_in_step: u64) -> bool {
        self.validity(model, cache, tokens_in_step) == Validity::Valid
    }

    /// Valid exactly when `valid_for` is (one comparison, not two); otherwise
    /// `AllocationChanged` when the structure matches, else `Stale`.
    pub fn validity(&self, model: &Model, cache: &KvCache, tokens_in_step: u64) -> Validity {
        let parts = KeyParts::of(model, cache, tokens_in_step, self.window_keying);
        if parts.key() == self.key() {
            Validity::Valid
        } else if parts.structure().finish() == self.structure.finish() {
            Validity::AllocationChanged
        } else {
            Validity::Stale
        }
    }

    /// A guarded rebind onto a cache placed as `incoming` with allocation id
    /// `alloc` (contract, `session_rebind`): refused, changing nothing,
    /// unless the residencies are known and equal and every slot the plan
    /// baked (each layer's K, then V, in index order) exists in the incoming
    /// cache with the same storage label. Only then does the plan adopt the
    /// cache's allocation id and storage. It never touches the structure, so
    /// a plan stale for a cache stays stale after any rebind.
    pub fn rebind(&mut self, incoming: &Placement, alloc: u64) -> Result<(), KvError> {
        let (Some(baked), Some(arriving)) = (&self.baked.residency, &incoming.residency) else {
            return Err(KvError::ResidencyUnknown);
        };
        if baked != arriving {
            return Err(KvError::ResidencyDiffers {
                baked: baked.clone(),
                incoming: arriving.clone(),
            });
        }
        for (layer, baked_label) in self.baked.layer_storage.iter().enumerate() {
            for which in [Slot::K, Slot::V] {
                let Some(label) = incoming.layer_storage.get(layer) else {
                    return Err(KvError::MissingSlot {
                        layer: layer as u64,
                        which,
                    });
                };
                if label != baked_label {
                    return Err(KvError::StorageDiffers {
                        layer: layer as u64,
                        which,
                        baked: baked_label.clone(),
                        incoming: label.clone(),
                    });
                }
            }
        }
        // All or nothing: every check passed, so adopt the allocation and the
        // storage of every slot the plan baked.
        let baked_layers = self.baked.layer_storage.len();
        self.baked.layer_storage = incoming.layer_storage[..baked_layers].to_vec();
        self.alloc = alloc;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One change to a key's parts: the model, the geometry, or the ids and step width.
    type Change = Box<dyn Fn(&mut ModelSpec, &mut Geometry, &mut [u64; 3])>;

    fn spec() -> ModelSpec {
        let mut params = BTreeMap::new();
        params.insert("n_layers".to_string(), Param::U64(2));
        params.insert(
            "rms_norm_eps".to_string(),
            Param::F64Bits(1e-5f64.to_bits()),
        );
        params.insert("mask".to_string(), Param::Str("sliding".into()));
        let mut hooks = BTreeMap::new();
        hooks.insert("logits".to_string(), true);
        ModelSpec {
            family: "llama".into(),
            params,
            hooks,
        }
    }

    fn geometry() -> Geometry {
        Geometry {
            n_layers: 2,
            n_kv_heads: 2,
            head_dim: 4,
            max_seq_len: 16,
            dtype: "f32".into(),
        }
    }

    #[test]
    fn plan_validity_follows_identity() {
        let mut model = Model::new(spec());
        let mut cache = KvCache::new(geometry()).unwrap();
        let plan = Session::build(&model, &cache, 1, WindowKeying::Keyed);
        assert!(plan.valid_for(&model, &cache, 1));
        assert!(!plan.valid_for(&model, &cache, 4));
        cache.append(6, 1.0).unwrap();
        cache.truncate(3);
        assert!(plan.valid_for(&model, &cache, 1));

        let twin = Model::new(spec());
        assert!(!plan.valid_for(&twin, &cache, 1));
        assert!(!plan.valid_for(&model.reload(), &cache, 1));

        model.set_hook("logits", false).unwrap();
        assert!(!plan.valid_for(&model, &cache, 1));
        model.set_hook("logits", true).unwrap();
        assert!(plan.valid_for(&model, &cache, 1));

        // A hook the configuration does not declare cannot be toggled, and
        // the refusal changes nothing.
        assert!(model.set_hook("sampler", true).is_err());
        assert!(plan.valid_for(&model, &cache, 1));

        let other = KvCache::new(geometry()).unwrap();
        assert!(!plan.valid_for(&model, &other, 1));
        cache.clear();
        assert!(!plan.valid_for(&model, &cache, 1));
    }

    #[test]
    fn every_component_moves_the_key() {
        let s = spec();
        let g = geometry();
        let base = KeyParts {
            family: &s.family,
            params: &s.params,
            hooks: &s.hooks,
            instance: 10,
            alloc: 20,
            geometry: &g,
            step_tokens: 1,
            window_keying: WindowKeying::Keyed,
        };
        let k0 = base.key();
        let with = |f: &dyn Fn(&mut ModelSpec, &mut Geometry, &mut [u64; 3])| {
            let (mut s2, mut g2, mut ids) = (s.clone(), g.clone(), [10, 20, 1]);
            f(&mut s2, &mut g2, &mut ids);
            KeyParts {
                family: &s2.family,
                params: &s2.params,
                hooks: &s2.hooks,
                instance: ids[0],
                alloc: ids[1],
                geometry: &g2,
                step_tokens: ids[2],
                window_keying: WindowKeying::Keyed,
            }
            .key()
        };
        let changes: Vec<Change> = vec![
            Box::new(|s, _, _| s.family = "qwen3".into()),
            Box::new(|s, _, _| {
                s.params
                    .insert("rms_norm_eps".into(), Param::F64Bits((-1e-5f64).to_bits()));
            }),
            Box::new(|s, _, _| {
                s.params.insert("n_layers".into(), Param::F64Bits(2));
            }),
            Box::new(|s, _, _| {
                s.params.insert("extra".into(), Param::Str(String::new()));
            }),
            Box::new(|s, _, _| {
                s.hooks.insert("logits".into(), false);
            }),
            Box::new(|s, _, _| {
                s.hooks.clear();
            }),
            Box::new(|_, _, ids| ids[0] = 11),
            Box::new(|_, _, ids| ids[1] = 21),
            Box::new(|_, _, ids| ids[2] = 4),
            Box::new(|_, g, _| g.n_layers = 3),
            Box::new(|_, g, _| g.n_kv_heads = 4),
            Box::new(|_, g, _| g.head_dim = 8),
            Box::new(|_, g, _| g.max_seq_len = 32),
            Box::new(|_, g, _| g.dtype = "bf16".into()),
        ];
        for (i, change) in changes.iter().enumerate() {
            assert_ne!(
                with(change.as_ref()),
                k0,
                "change {i} left the key unchanged"
            );
        }
        assert_eq!(with(&|_, _, _| {}), k0);
    }

    #[test]
    fn string_parameters_cannot_borrow_from_each_other() {
        let mut a = spec();
        let mut b = spec();
        a.params.insert("ab".into(), Param::Str("c".into()));
        b.params.insert("a".into(), Param::Str("bc".into()));
        let g = geometry();
        let key = |s: &ModelSpec| {
            KeyParts {
                family: &s.family,
                params: &s.params,
                hooks: &s.hooks,
                instance: 1,
                alloc: 2,
                geometry: &g,
                step_tokens: 1,
                window_keying: WindowKeying::Keyed,
            }
            .key()
        };
        assert_ne!(key(&a), key(&b));
    }

    fn rebind(plan: &mut Session, cache: &KvCache) -> Result<(), KvError> {
        plan.rebind(cache.placement(), cache.alloc_id())
    }

    fn placed(residency: Option<&str>, labels: &[&str]) -> KvCache {
        let mut g = geometry();
        g.n_layers = labels.len() as u64;
        KvCache::placed(
            g,
            Placement {
                residency: residency.map(String::from),
                layer_storage: labels.iter().map(|l| l.to_string()).collect(),
            },
        )
        .unwrap()
    }

    #[test]
    fn validity_tells_allocation_from_structure() {
        let model = Model::new(spec());
        let mut cache = KvCache::new(geometry()).unwrap();
        let plan = Session::build(&model, &cache, 1, WindowKeying::Keyed);
        assert_eq!(plan.validity(&model, &cache, 1), Validity::Valid);
        assert_eq!(plan.validity(&model, &cache, 4), Validity::Stale);
        let twin = KvCache::new(geometry()).unwrap();
        assert_eq!(plan.validity(&model, &twin, 1), Validity::AllocationChanged);
        let mut wide = geometry();
        wide.max_seq_len = 32;
        let wide = KvCache::new(wide).unwrap();
        assert_eq!(plan.validity(&model, &wide, 1), Validity::Stale);
        assert_eq!(
            plan.validity(&Model::new(spec()), &cache, 1),
            Validity::Stale
        );
        cache.clear();
        assert_eq!(
            plan.validity(&model, &cache, 1),
            Validity::AllocationChanged
        );
        // Always in step with session_valid.
        for (c, t) in [(&cache, 1), (&twin, 1), (&wide, 1), (&cache, 4)] {
            assert_eq!(
                plan.valid_for(&model, c, t),
                plan.validity(&model, c, t) == Validity::Valid
            );
        }
    }

    #[test]
    fn a_rebind_adopts_the_allocation_when_every_check_passes() {
        let model = Model::new(spec());
        let old = placed(Some("cuda:0"), &["paged", "paged"]);
        let mut plan = Session::build(&model, &old, 1, WindowKeying::Keyed);
        let new = placed(Some("cuda:0"), &["paged", "paged"]);
        assert_eq!(plan.validity(&model, &new, 1), Validity::AllocationChanged);
        assert_eq!(rebind(&mut plan, &new), Ok(()));
        assert_eq!(plan.validity(&model, &new, 1), Validity::Valid);
        assert!(plan.valid_for(&model, &new, 1));
        assert_eq!(plan.validity(&model, &old, 1), Validity::AllocationChanged);
        // A cleared cache keeps its placement, so the plan can come back.
        let mut cleared = new;
        cleared.clear();
        assert_eq!(rebind(&mut plan, &cleared), Ok(()));
        assert_eq!(plan.validity(&model, &cleared, 1), Validity::Valid);
    }

    #[test]
    fn rebind_refusals_in_order_and_all_or_nothing() {
        let model = Model::new(spec());
        let baked = placed(Some("cuda:0"), &["a", "b"]);
        let mut plan = Session::build(&model, &baked, 1, WindowKeying::Keyed);
        let refusals = [
            // 1. unknown residency, on either side, before anything else.
            (placed(None, &["x"]), KvError::ResidencyUnknown),
            // 2. another residency, before the slots.
            (
                placed(Some("cpu"), &["x"]),
                KvError::ResidencyDiffers {
                    baked: "cuda:0".into(),
                    incoming: "cpu".into(),
                },
            ),
            // 3. slots in layer order, K before V.
            (
                placed(Some("cuda:0"), &["a", "c"]),
                KvError::StorageDiffers {
                    layer: 1,
                    which: Slot::K,
                    baked: "b".into(),
                    incoming: "c".into(),
                },
            ),
            (
                placed(Some("cuda:0"), &["a"]),
                KvError::MissingSlot {
                    layer: 1,
                    which: Slot::K,
                },
            ),
            (
                placed(Some("cuda:0"), &["z"]),
                KvError::StorageDiffers {
                    layer: 0,
                    which: Slot::K,
                    baked: "a".into(),
                    incoming: "z".into(),
                },
            ),
        ];
        for (cache, refusal) in &refusals {
            assert_eq!(rebind(&mut plan, cache), Err(refusal.clone()));
            // Nothing changed: still valid for the baked cache only.
            assert_eq!(plan.validity(&model, &baked, 1), Validity::Valid);
        }
        // The plan's own residency unknown: refused whatever comes in.
        let unknown = placed(None, &["a", "b"]);
        let mut blind = Session::build(&model, &unknown, 1, WindowKeying::Keyed);
        assert_eq!(
            rebind(&mut blind, &placed(Some("cuda:0"), &["a", "b"])),
            Err(KvError::ResidencyUnknown)
        );
        assert_eq!(blind.validity(&model, &unknown, 1), Validity::Valid);
    }

    #[test]
    fn a_rebind_never_changes_structure() {
        let model = Model::new(spec());
        let baked = placed(Some("gpu"), &["s", "s"]);
        let mut plan = Session::build(&model, &baked, 1, WindowKeying::Keyed);
        // More layers, the baked ones interchangeable: the rebind passes,
        // but the plan stays stale for that cache.
        let deeper = placed(Some("gpu"), &["s", "s", "s"]);
        assert_eq!(plan.validity(&model, &deeper, 1), Validity::Stale);
        assert_eq!(rebind(&mut plan, &deeper), Ok(()));
        assert_eq!(plan.validity(&model, &deeper, 1), Validity::Stale);
        assert_eq!(
            plan.validity(&model, &baked, 1),
            Validity::AllocationChanged
        );
    }

    #[test]
    fn the_window_parameter_is_keyed_by_the_option() {
        let g = geometry();
        let key = |window: Option<u64>, keying| {
            let mut s = spec();
            if let Some(w) = window {
                s.params.insert(WINDOW_PARAM.into(), Param::U64(w));
            }
            s.params
                .insert("mask_structure".into(), Param::Str("split".into()));
            KeyParts {
                family: &s.family,
                params: &s.params,
                hooks: &s.hooks,
                instance: 1,
                alloc: 2,
                geometry: &g,
                step_tokens: 1,
                window_keying: keying,
            }
            .key()
        };
        let keyed = WindowKeying::Keyed;
        let structure = WindowKeying::Structure;
        assert_ne!(key(Some(128), keyed), key(Some(256), keyed));
        assert_ne!(key(Some(128), keyed), key(None, keyed));
        assert_eq!(key(Some(128), structure), key(Some(256), structure));
        assert_eq!(key(Some(128), structure), key(None, structure));
        // Only that exact name is left out; everything else still moves it.
        let mut s = spec();
        s.params.insert("Sliding_window".into(), Param::U64(128));
        let base = spec();
        let parts = |s: &ModelSpec| {
            KeyParts {
                family: &s.family,
                params: &s.params,
                hooks: &s.hooks,
                instance: 1,
                alloc: 2,
                geometry: &g,
                step_tokens: 1,
                window_keying: structure,
            }
            .key()
        };
        assert_ne!(parts(&s), parts(&base));
    }
}
