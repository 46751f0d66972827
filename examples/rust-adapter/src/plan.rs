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
//! key      = text("kvconform-rust-adapter/plan-key/1")
//!            u64(1) text(family)
//!            u64(2) u64(#params)  { text(name) u64(tag) value }  by name; tag 1 = u64,
//!                                                                 2 = f64 bits, 3 = text
//!            u64(3) u64(#hooks)   { text(name) present(attached) } by name
//!            u64(4) instance(model instance id)
//!            u64(5) u64(allocation id)
//!            u64(6) u64(n_layers) u64(n_kv_heads) u64(head_dim) u64(max_seq_len) text(dtype)
//!            u64(7) u64(tokens per step)
//! ```
//!
//! Per-step inputs (token values, RoPE base and scaling, mask values, the
//! write offset) and the cache's length never reach the hasher (PLAN-6,
//! PLAN-7); weights enter only through the instance id (PLAN-8).

use std::collections::BTreeMap;

use crate::hasher::KeyHasher;
use crate::identity::mint_instance;
use crate::kv_cache::{Geometry, KvCache};

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
}

impl<'a> KeyParts<'a> {
    pub fn of(model: &'a Model, cache: &'a KvCache, step_tokens: u64) -> KeyParts<'a> {
        KeyParts {
            family: &model.source.family,
            params: &model.source.params,
            hooks: &model.hooks,
            instance: model.instance,
            alloc: cache.alloc_id(),
            geometry: cache.geometry(),
            step_tokens,
        }
    }

    /// The validity key (PLAN-1, PLAN-15, PLAN-3, PLAN-16).
    pub fn key(&self) -> u64 {
        fn text(h: &mut KeyHasher, s: &str) {
            h.u64(s.len() as u64).str(s);
        }
        let mut h = KeyHasher::new();
        text(&mut h, "kvconform-rust-adapter/plan-key/1");

        h.u64(1);
        text(&mut h, self.family);

        h.u64(2).u64(self.params.len() as u64);
        for (name, value) in self.params {
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
        h.u64(5).u64(self.alloc);

        let g = self.geometry;
        h.u64(6)
            .u64(g.n_layers)
            .u64(g.n_kv_heads)
            .u64(g.head_dim)
            .u64(g.max_seq_len);
        text(&mut h, &g.dtype);

        h.u64(7).u64(self.step_tokens);
        h.finish()
    }
}

/// A held decode plan. It keeps only its key: it neither owns nor borrows the
/// model or the cache, so it can outlive both and hides no release (PLAN-14).
#[derive(Debug)]
pub struct Session {
    key: u64,
}

impl Session {
    pub fn build(model: &Model, cache: &KvCache, step_tokens: u64) -> Session {
        Session {
            key: KeyParts::of(model, cache, step_tokens).key(),
        }
    }

    /// Valid iff the key recomputed for this model, this cache and the number
    /// of tokens in this step equals the recorded one (PLAN-4). Only the count
    /// of the step's tokens is given here: nothing else of a step could reach
    /// the key even by mistake (PLAN-6). Pure: no mint, no mutation (PLAN-13).
    pub fn valid_for(&self, model: &Model, cache: &KvCache, tokens_in_step: u64) -> bool {
        KeyParts::of(model, cache, tokens_in_step).key() == self.key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let plan = Session::build(&model, &cache, 1);
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
            }
            .key()
        };
        let changes: Vec<Box<dyn Fn(&mut ModelSpec, &mut Geometry, &mut [u64; 3])>> = vec![
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
            }
            .key()
        };
        assert_ne!(key(&a), key(&b));
    }
}
