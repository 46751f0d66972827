//! Block signatures measured from the payload (spec/signature.md, SIG and PROF).
//!
//! Measuring believes the buffers and checks the claims: the declared shape
//! and `seq_len` of each layer are compared against the lengths of its real
//! `k` and `v` buffers. Nothing here takes an expected signature (SIG-2).

use crate::errors::{Field, KvError, Val};

/// A block format profile (PROF-1).
pub struct Profile {
    /// The one version written (PROF-3).
    pub writes: u64,
    /// The explicit set of versions read (VERIFY-3), sorted.
    pub reads: &'static [u64],
    /// The element type of payload buffers.
    pub element: &'static str,
}

/// Profile v1: writes 1, reads exactly {1}, f32 payloads (PROF-2).
pub const V1: Profile = Profile {
    writes: 1,
    reads: &[1],
    element: "f32",
};

/// The profile this implementation declares.
pub const PROFILE: &Profile = &V1;

/// One stored layer: declared shape, a claimed `seq_len`, and real buffers.
#[derive(Clone, Debug)]
pub struct StoredLayer {
    pub n_kv_heads: u64,
    pub head_dim: u64,
    pub seq_len: u64,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
}

/// A signature (SIG-1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub format_version: u64,
    pub model: String,
    pub n_layers: u64,
    pub n_kv_heads: u64,
    pub head_dim: u64,
    pub dtype: String,
    pub tokens: u64,
}

impl Signature {
    /// The fields in the comparison order of VERIFY-4 and VERIFY-5.
    pub fn fields(&self) -> [(Field, Val); 7] {
        [
            (Field::FormatVersion, Val::Int(self.format_version as u128)),
            (Field::Model, Val::Text(self.model.clone())),
            (Field::NLayers, Val::Int(self.n_layers as u128)),
            (Field::NKvHeads, Val::Int(self.n_kv_heads as u128)),
            (Field::HeadDim, Val::Int(self.head_dim as u128)),
            (Field::Dtype, Val::Text(self.dtype.clone())),
            (Field::Tokens, Val::Int(self.tokens as u128)),
        ]
    }

    /// The first field, in order, where `self` and `other` differ:
    /// `(field, self's value, other's value)`.
    pub fn first_difference(&self, other: &Signature) -> Option<(Field, Val, Val)> {
        self.fields()
            .into_iter()
            .zip(other.fields())
            .find(|((_, a), (_, b))| a != b)
            .map(|((field, a), (_, b))| (field, a, b))
    }
}

/// Measure a payload under the layout of `version` (SIG-4 .. SIG-10, SIG-12).
/// The writer supplies only `model` (SIG-3); it is kept byte for byte.
pub fn measure_as(version: u64, model: &str, layers: &[StoredLayer]) -> Result<Signature, KvError> {
    let first = layers.first().ok_or(KvError::EmptyPayload)?; // SIG-5
    let (h, d) = (first.n_kv_heads, first.head_dim);
    let width = h as u128 * d as u128;
    // SIG-6: no heads or no dimension; SIG-15: a width no u64 holds cannot be measured.
    if h == 0 || d == 0 || width > u64::MAX as u128 {
        return Err(KvError::DegenerateLayer {
            n_kv_heads: h,
            head_dim: d,
        });
    }
    let tokens = measure_layer(0, first, width)?;
    for (index, layer) in layers.iter().enumerate().skip(1) {
        // SIG-8, then SIG-7, then the depth check, layer by layer (SIG-9).
        if (layer.n_kv_heads, layer.head_dim) != (h, d) {
            return Err(ragged(
                index,
                Field::LayerShape,
                Val::Shape(h as u128, d as u128),
                Val::Shape(layer.n_kv_heads as u128, layer.head_dim as u128),
            ));
        }
        let t = measure_layer(index, layer, width)?;
        if t != tokens {
            return Err(ragged(
                index,
                Field::TokenCount,
                Val::Int(tokens),
                Val::Int(t),
            ));
        }
    }
    Ok(Signature {
        format_version: version,
        model: model.to_string(),
        n_layers: layers.len() as u64,
        n_kv_heads: h,
        head_dim: d,
        dtype: PROFILE.element.to_string(),
        tokens: tokens as u64,
    })
}

/// Measure a payload as the version this implementation writes.
pub fn measure(model: &str, layers: &[StoredLayer]) -> Result<Signature, KvError> {
    measure_as(PROFILE.writes, model, layers)
}

/// Stamping is measuring; only `model` comes from the writer (SIG-13).
pub fn stamp(model: &str, layers: &[StoredLayer]) -> Result<Signature, KvError> {
    measure(model, layers)
}

/// The token count of one layer, from the length of its `k` buffer (SIG-7).
fn measure_layer(index: usize, layer: &StoredLayer, width: u128) -> Result<u128, KvError> {
    let k_len = layer.k.len() as u128;
    let v_len = layer.v.len() as u128;
    let partial_token = k_len % width; // `is_multiple_of` would need Rust 1.87
    if partial_token != 0 {
        return Err(ragged(
            index,
            Field::KLength,
            Val::Int(width),
            Val::Int(k_len),
        ));
    }
    if v_len != k_len {
        return Err(ragged(
            index,
            Field::VLength,
            Val::Int(k_len),
            Val::Int(v_len),
        ));
    }
    let tokens = k_len / width;
    if layer.seq_len as u128 != tokens {
        return Err(ragged(
            index,
            Field::SeqLen,
            Val::Int(tokens),
            Val::Int(layer.seq_len as u128),
        ));
    }
    Ok(tokens)
}

fn ragged(layer: usize, field: Field, expected: Val, found: Val) -> KvError {
    KvError::RaggedPayload {
        layer: layer as u64,
        field,
        expected,
        found,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn layer(h: u64, d: u64, seq_len: u64, k_len: usize, v_len: usize) -> StoredLayer {
        StoredLayer {
            n_kv_heads: h,
            head_dim: d,
            seq_len,
            k: (0..k_len).map(|i| i as f32).collect(),
            v: (0..v_len).map(|i| -(i as f32)).collect(),
        }
    }

    pub fn block() -> Vec<StoredLayer> {
        (0..3).map(|_| layer(2, 8, 4, 64, 64)).collect()
    }

    fn sig(tokens: u64) -> Signature {
        Signature {
            format_version: 1,
            model: "model-a".into(),
            n_layers: 3,
            n_kv_heads: 2,
            head_dim: 8,
            dtype: "f32".into(),
            tokens,
        }
    }

    fn ragged_at(layer: u64, field: Field, expected: Val, found: Val) -> KvError {
        KvError::RaggedPayload {
            layer,
            field,
            expected,
            found,
        }
    }

    #[test]
    fn the_examples_of_the_spec() {
        assert_eq!(measure("model-a", &block()), Ok(sig(4)));
        assert_eq!(stamp("model-a", &block()), Ok(sig(4)));
        assert_eq!(measure("model-a", &[]), Err(KvError::EmptyPayload));

        let mut b = block();
        b[0].head_dim = 0;
        assert_eq!(
            measure("m", &b),
            Err(KvError::DegenerateLayer {
                n_kv_heads: 2,
                head_dim: 0
            })
        );

        let mut b = block();
        b[0] = layer(2, 8, 4, 60, 64);
        assert_eq!(
            measure("m", &b),
            Err(ragged_at(0, Field::KLength, Val::Int(16), Val::Int(60)))
        );

        let mut b = block();
        b[0] = layer(2, 8, 4, 64, 8);
        assert_eq!(
            measure("m", &b),
            Err(ragged_at(0, Field::VLength, Val::Int(64), Val::Int(8)))
        );

        let mut b = block();
        b[1].seq_len = 7;
        assert_eq!(
            measure("m", &b),
            Err(ragged_at(1, Field::SeqLen, Val::Int(4), Val::Int(7)))
        );

        let mut b = block();
        b[2] = layer(2, 4, 4, 32, 32);
        assert_eq!(
            measure("m", &b),
            Err(ragged_at(
                2,
                Field::LayerShape,
                Val::Shape(2, 8),
                Val::Shape(2, 4)
            ))
        );

        let mut b = block();
        b[1] = layer(2, 8, 3, 48, 48);
        assert_eq!(
            measure("m", &b),
            Err(ragged_at(1, Field::TokenCount, Val::Int(4), Val::Int(3)))
        );

        let mut b = block();
        b[2].n_kv_heads = 0;
        assert_eq!(
            measure("m", &b),
            Err(ragged_at(
                2,
                Field::LayerShape,
                Val::Shape(2, 8),
                Val::Shape(0, 8)
            ))
        );

        let empty: Vec<StoredLayer> = (0..3).map(|_| layer(2, 8, 0, 0, 0)).collect();
        assert_eq!(measure("model-a", &empty), Ok(sig(0)));
    }

    #[test]
    fn model_is_kept_byte_for_byte() {
        let s = measure("  Model-A\u{301} ", &block()).unwrap();
        assert_eq!(s.model, "  Model-A\u{301} ");
    }
}
