//! Block signatures measured from the payload (spec/signature.md, SIG and
//! PROF; profile v2 as in the contract "Profile v2 measuring").
//!
//! Measuring believes the buffers and checks the claims: the declared shape
//! and position claim of each layer are compared against the lengths of its
//! real `k` and `v` buffers. Nothing here takes an expected signature (SIG-2).
//! Under profile v2 the writer supplies the layout as well as the model, and
//! the layout is carried unchanged into the signature.

use crate::errors::{Field, KvError, Val};

/// The block format versions this implementation knows the rules of.
pub const DEFINED_VERSIONS: [u64; 2] = [1, 2];

/// The element type of payload buffers under every profile (PROF-2).
pub const ELEMENT: &str = "f32";

/// The two upstream v2 lines (contract, option `profile_v2_revision`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Revision {
    /// antonellof: a split K/V head width is refused with its own error, and
    /// a layer's claim is named `positions`.
    #[default]
    SplitWidth,
    /// GQAdonis: one head width; a split payload is a ragged `v_length`, and
    /// a layer's claim is named `seq_len`.
    LayoutOnly,
}

impl Revision {
    pub fn name(self) -> &'static str {
        match self {
            Revision::SplitWidth => "split_width",
            Revision::LayoutOnly => "layout_only",
        }
    }

    pub fn from_name(name: &str) -> Option<Revision> {
        [Revision::SplitWidth, Revision::LayoutOnly]
            .into_iter()
            .find(|r| r.name() == name)
    }
}

/// What this implementation declares about block formats (PROF-1, PROF-3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// The one version written.
    pub writes: u64,
    /// The explicit set of versions read (VERIFY-3), sorted; contains `writes`.
    pub reads: Vec<u64>,
    /// How version 2 treats head widths and names the position claim.
    pub revision: Revision,
}

impl Profile {
    /// Profile v1: writes 1, reads exactly {1} (PROF-2).
    pub fn v1() -> Profile {
        Profile {
            writes: 1,
            reads: vec![1],
            revision: Revision::default(),
        }
    }

    /// The rules a writer measures under for `stamp` and `measure`: a v2
    /// writer needs the layout it cuts blocks under, a v1 writer has none.
    /// A mismatch is a usage error, not a refusal of the payload.
    pub fn writer_rules(&self, layout: Option<Layout>) -> Result<Rules, String> {
        match (self.writes, layout) {
            (2, Some(layout)) => Ok(Rules::V2 {
                layout,
                revision: self.revision,
            }),
            (2, None) => Err("layout: missing; a writer of format version 2 needs one".into()),
            (_, Some(_)) => Err("layout: a writer of format version 1 takes none".into()),
            (_, None) => Ok(Rules::V1),
        }
    }

    /// The rules a stored block is measured under: those of the version its
    /// stamp records, with the recorded layout (SIG-12; contract "Profile v2
    /// verify", step 3), never the expectation's. A readable stamp carries a
    /// layout exactly when it records version 2 (the protocol refuses any
    /// other stamp as malformed); one that does not is measured as v1, which
    /// then contradicts its version.
    pub fn recorded_rules(&self, stamp: &Signature) -> Rules {
        match (stamp.format_version, stamp.layout) {
            (2, Some(layout)) => Rules::V2 {
                layout,
                revision: self.revision,
            },
            _ => Rules::V1,
        }
    }
}

/// A v2 block layout: `None` for no sliding window (full causal attention),
/// which is a value of its own and never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub block_size: u64,
    pub sliding_window: Option<u64>,
}

impl Layout {
    /// Layout validity (contract "Profile v2 measuring", step 1; PROF-7), in
    /// order: a zero block, a zero window, a window that is not a whole
    /// number of blocks. A window equal to the block is fine.
    pub fn check(&self) -> Result<(), KvError> {
        let refuse = |field, remainder| KvError::BadLayout {
            field,
            block_size: self.block_size,
            sliding_window: self.sliding_window,
            remainder,
        };
        if self.block_size == 0 {
            return Err(refuse(Field::BlockSize, None));
        }
        match self.sliding_window {
            None => Ok(()),
            Some(0) => Err(refuse(Field::SlidingWindow, None)),
            Some(w) if w % self.block_size != 0 => {
                Err(refuse(Field::SlidingWindow, Some(w % self.block_size)))
            }
            Some(_) => Ok(()),
        }
    }
}

/// The measuring rules of one format version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rules {
    /// SIG-4 .. SIG-10: any depth, the claim named `seq_len`.
    V1,
    /// The contract's "Profile v2 measuring": a valid layout, one whole
    /// block, and the head width and claim name of the revision.
    V2 { layout: Layout, revision: Revision },
}

impl Rules {
    /// Whether a V head width other than `head_dim` is refused by name.
    fn refuses_split_width(self) -> bool {
        matches!(
            self,
            Rules::V2 {
                revision: Revision::SplitWidth,
                ..
            }
        )
    }

    /// The field a layer's position claim is reported as.
    fn claim(self) -> Field {
        if self.refuses_split_width() {
            Field::Positions
        } else {
            Field::SeqLen
        }
    }
}

/// One stored layer: declared shape, a position claim (`seq_len` on the
/// wire in every profile), and real buffers.
#[derive(Clone, Debug)]
pub struct StoredLayer {
    pub n_kv_heads: u64,
    pub head_dim: u64,
    /// The declared V head width; `None` means equal to `head_dim`. Only the
    /// `split_width` revision of v2 looks at it: otherwise the `v` buffer's
    /// length alone speaks for the V width.
    pub v_head_dim: Option<u64>,
    pub seq_len: u64,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
}

/// A signature (SIG-1), with the layout of profile v2 (PROF-5). A v1
/// signature has no layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signature {
    pub format_version: u64,
    pub model: String,
    pub n_layers: u64,
    pub n_kv_heads: u64,
    pub head_dim: u64,
    pub dtype: String,
    pub tokens: u64,
    pub layout: Option<Layout>,
}

impl Signature {
    /// The fields in the comparison order of VERIFY-4 and VERIFY-5, then,
    /// for a v2 signature, `block_size` and `sliding_window` (contract
    /// "Profile v2 verify", step 4).
    pub fn fields(&self) -> Vec<(Field, Val)> {
        let mut fields = vec![
            (Field::FormatVersion, Val::Int(self.format_version as u128)),
            (Field::Model, Val::Text(self.model.clone())),
            (Field::NLayers, Val::Int(self.n_layers as u128)),
            (Field::NKvHeads, Val::Int(self.n_kv_heads as u128)),
            (Field::HeadDim, Val::Int(self.head_dim as u128)),
            (Field::Dtype, Val::Text(self.dtype.clone())),
            (Field::Tokens, Val::Int(self.tokens as u128)),
        ];
        if let Some(layout) = self.layout {
            fields.push((Field::BlockSize, Val::Int(layout.block_size as u128)));
            fields.push((Field::SlidingWindow, Val::Window(layout.sliding_window)));
        }
        fields
    }

    /// The first field, in order, where `self` and `other` differ:
    /// `(field, self's value, other's value)`. Windows compare exactly: no
    /// window equals only no window. Signatures of one version have the same
    /// fields; should one have a layout and the other not, with every common
    /// field equal, the difference is reported on `block_size`, the absent
    /// layout's side as no value.
    pub fn first_difference(&self, other: &Signature) -> Option<(Field, Val, Val)> {
        let (mine, theirs) = (self.fields(), other.fields());
        let common = mine
            .iter()
            .zip(&theirs)
            .find(|((_, a), (_, b))| a != b)
            .map(|((field, a), (_, b))| (*field, a.clone(), b.clone()));
        common.or_else(|| match mine.len().cmp(&theirs.len()) {
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => {
                Some((Field::BlockSize, mine[7].1.clone(), Val::Window(None)))
            }
            std::cmp::Ordering::Less => {
                Some((Field::BlockSize, Val::Window(None), theirs[7].1.clone()))
            }
        })
    }
}

/// Measure a payload under `rules` (SIG-4 .. SIG-10, SIG-12, SIG-15; for v2
/// the contract's "Profile v2 measuring", steps 1 to 5). The writer supplies
/// only `model` (SIG-3) and, under v2, the layout inside `rules` (PROF-6).
pub fn measure(rules: Rules, model: &str, layers: &[StoredLayer]) -> Result<Signature, KvError> {
    // v2 step 1: the layout, before the payload is looked at.
    if let Rules::V2 { layout, .. } = rules {
        layout.check()?;
    }

    // Step 2 (SIG-5, SIG-6, SIG-15).
    let first = layers.first().ok_or(KvError::EmptyPayload)?;
    let (h, d) = (first.n_kv_heads, first.head_dim);
    let width = h as u128 * d as u128;
    // No heads or no dimension; a width no u64 holds cannot be measured.
    if h == 0 || d == 0 || width > u64::MAX as u128 {
        return Err(KvError::DegenerateLayer {
            n_kv_heads: h,
            head_dim: d,
        });
    }

    // Step 3, layer by layer in index order (SIG-9): the shape (SIG-8), then
    // the layer's own measurement (SIG-7), then its depth against layer 0.
    let tokens = measure_layer(rules, 0, first, width)?;
    for (index, layer) in layers.iter().enumerate().skip(1) {
        if (layer.n_kv_heads, layer.head_dim) != (h, d) {
            return Err(ragged(
                index,
                Field::LayerShape,
                Val::Shape(h as u128, d as u128),
                Val::Shape(layer.n_kv_heads as u128, layer.head_dim as u128),
            ));
        }
        let t = measure_layer(rules, index, layer, width)?;
        if t != tokens {
            return Err(ragged(
                index,
                Field::TokenCount,
                Val::Int(tokens),
                Val::Int(t),
            ));
        }
    }
    // k lengths are `usize`, so a token count always fits in a u64.
    let tokens = tokens as u64;

    let (format_version, layout) = match rules {
        Rules::V1 => (1, None),
        Rules::V2 { layout, .. } => {
            // v2 step 4: exactly one whole block (PROF-8, PROF-9).
            if tokens != layout.block_size {
                return Err(KvError::BlockSizeMismatch {
                    block_size: layout.block_size,
                    tokens,
                });
            }
            (2, Some(layout))
        }
    };
    Ok(Signature {
        format_version,
        model: model.to_string(),
        n_layers: layers.len() as u64,
        n_kv_heads: h,
        head_dim: d,
        dtype: ELEMENT.to_string(),
        tokens,
        layout,
    })
}

/// Stamping is measuring; the writer supplies only the model and, under
/// v2, the layout (SIG-13, PROF-6).
pub fn stamp(rules: Rules, model: &str, layers: &[StoredLayer]) -> Result<Signature, KvError> {
    measure(rules, model, layers)
}

/// The token count of one layer, from the length of its `k` buffer (SIG-7),
/// preceded under `split_width` by the V head width check (PROF-11).
fn measure_layer(
    rules: Rules,
    index: usize,
    layer: &StoredLayer,
    width: u128,
) -> Result<u128, KvError> {
    if rules.refuses_split_width() {
        let v_head_dim = layer.v_head_dim.unwrap_or(layer.head_dim);
        if v_head_dim != layer.head_dim {
            return Err(KvError::SplitKvHeadWidth {
                layer: index as u64,
                head_dim: layer.head_dim,
                v_head_dim,
            });
        }
    }
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
            rules.claim(),
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
            v_head_dim: None,
            seq_len,
            k: (0..k_len).map(|i| i as f32).collect(),
            v: (0..v_len).map(|i| -(i as f32)).collect(),
        }
    }

    /// 3 layers, 2 KV heads of dimension 8, 4 positions.
    pub fn block() -> Vec<StoredLayer> {
        (0..3).map(|_| layer(2, 8, 4, 64, 64)).collect()
    }

    pub fn v2(block_size: u64, sliding_window: Option<u64>, revision: Revision) -> Rules {
        Rules::V2 {
            layout: Layout {
                block_size,
                sliding_window,
            },
            revision,
        }
    }

    /// The v2 rules under which `block()` is one whole block, no window.
    pub fn flat4() -> Rules {
        v2(4, None, Revision::SplitWidth)
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
            layout: None,
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

    fn bad(field: Field, block_size: u64, window: Option<u64>, rem: Option<u64>) -> KvError {
        KvError::BadLayout {
            field,
            block_size,
            sliding_window: window,
            remainder: rem,
        }
    }

    fn measure_v1(model: &str, layers: &[StoredLayer]) -> Result<Signature, KvError> {
        measure(Rules::V1, model, layers)
    }

    #[test]
    fn the_examples_of_the_spec() {
        assert_eq!(measure_v1("model-a", &block()), Ok(sig(4)));
        assert_eq!(stamp(Rules::V1, "model-a", &block()), Ok(sig(4)));
        assert_eq!(measure_v1("model-a", &[]), Err(KvError::EmptyPayload));

        let mut b = block();
        b[0].head_dim = 0;
        assert_eq!(
            measure_v1("m", &b),
            Err(KvError::DegenerateLayer {
                n_kv_heads: 2,
                head_dim: 0
            })
        );

        let mut b = block();
        b[0] = layer(2, 8, 4, 60, 64);
        assert_eq!(
            measure_v1("m", &b),
            Err(ragged_at(0, Field::KLength, Val::Int(16), Val::Int(60)))
        );

        let mut b = block();
        b[0] = layer(2, 8, 4, 64, 8);
        assert_eq!(
            measure_v1("m", &b),
            Err(ragged_at(0, Field::VLength, Val::Int(64), Val::Int(8)))
        );

        let mut b = block();
        b[1].seq_len = 7;
        assert_eq!(
            measure_v1("m", &b),
            Err(ragged_at(1, Field::SeqLen, Val::Int(4), Val::Int(7)))
        );

        let mut b = block();
        b[2] = layer(2, 4, 4, 32, 32);
        assert_eq!(
            measure_v1("m", &b),
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
            measure_v1("m", &b),
            Err(ragged_at(1, Field::TokenCount, Val::Int(4), Val::Int(3)))
        );

        let mut b = block();
        b[2].n_kv_heads = 0;
        assert_eq!(
            measure_v1("m", &b),
            Err(ragged_at(
                2,
                Field::LayerShape,
                Val::Shape(2, 8),
                Val::Shape(0, 8)
            ))
        );

        let empty: Vec<StoredLayer> = (0..3).map(|_| layer(2, 8, 0, 0, 0)).collect();
        assert_eq!(measure_v1("model-a", &empty), Ok(sig(0)));
    }

    #[test]
    fn model_is_kept_byte_for_byte() {
        let s = measure_v1("  Model-A\u{301} ", &block()).unwrap();
        assert_eq!(s.model, "  Model-A\u{301} ");
        let s = measure(flat4(), "  Model-A\u{301} ", &block()).unwrap();
        assert_eq!(s.model, "  Model-A\u{301} ");
    }

    #[test]
    fn layout_validity_in_order() {
        let check = |bs, w| {
            Layout {
                block_size: bs,
                sliding_window: w,
            }
            .check()
        };
        // A zero block comes first, with or without a window.
        assert_eq!(check(0, None), Err(bad(Field::BlockSize, 0, None, None)));
        assert_eq!(
            check(0, Some(0)),
            Err(bad(Field::BlockSize, 0, Some(0), None))
        );
        assert_eq!(
            check(0, Some(128)),
            Err(bad(Field::BlockSize, 0, Some(128), None))
        );
        // A zero window is not "no window".
        assert_eq!(
            check(16, Some(0)),
            Err(bad(Field::SlidingWindow, 16, Some(0), None))
        );
        assert_eq!(check(16, None), Ok(()));
        // Misaligned, including a block larger than the window.
        assert_eq!(
            check(48, Some(128)),
            Err(bad(Field::SlidingWindow, 48, Some(128), Some(32)))
        );
        assert_eq!(
            check(256, Some(128)),
            Err(bad(Field::SlidingWindow, 256, Some(128), Some(128)))
        );
        assert_eq!(check(32, Some(128)), Ok(()));
        assert_eq!(check(128, Some(128)), Ok(()));
        assert_eq!(check(1, Some(4099)), Ok(()));
    }

    #[test]
    fn a_bad_layout_is_refused_before_the_payload_is_looked_at() {
        for revision in [Revision::SplitWidth, Revision::LayoutOnly] {
            assert_eq!(
                measure(v2(0, None, revision), "m", &[]),
                Err(bad(Field::BlockSize, 0, None, None))
            );
            let mut b = block();
            b[0].head_dim = 0;
            assert_eq!(
                measure(v2(3, Some(8), revision), "m", &b),
                Err(bad(Field::SlidingWindow, 3, Some(8), Some(2)))
            );
        }
    }

    #[test]
    fn a_v2_signature_carries_its_layout() {
        let rules = v2(4, Some(128), Revision::LayoutOnly);
        let s = stamp(rules, "model-a", &block()).unwrap();
        assert_eq!(
            s,
            Signature {
                format_version: 2,
                layout: Some(Layout {
                    block_size: 4,
                    sliding_window: Some(128)
                }),
                ..sig(4)
            }
        );
        let names: Vec<&str> = s.fields().iter().map(|(f, _)| f.name()).collect();
        assert_eq!(
            names,
            [
                "format_version",
                "model",
                "n_layers",
                "n_kv_heads",
                "head_dim",
                "dtype",
                "tokens",
                "block_size",
                "sliding_window"
            ]
        );
        assert_eq!(sig(4).fields().len(), 7);
    }

    #[test]
    fn a_v2_block_is_exactly_one_whole_block() {
        for revision in [Revision::SplitWidth, Revision::LayoutOnly] {
            assert!(measure(v2(4, Some(8), revision), "m", &block()).is_ok());
            // A stamp may not claim a block the payload lacks.
            assert_eq!(
                measure(v2(8, None, revision), "m", &block()),
                Err(KvError::BlockSizeMismatch {
                    block_size: 8,
                    tokens: 4
                })
            );
            assert_eq!(
                measure(v2(2, Some(8), revision), "m", &block()),
                Err(KvError::BlockSizeMismatch {
                    block_size: 2,
                    tokens: 4
                })
            );
            // Zero tokens are never a whole block (PROF-9).
            let empty: Vec<StoredLayer> = (0..3).map(|_| layer(2, 8, 0, 0, 0)).collect();
            assert_eq!(
                measure(v2(4, None, revision), "m", &empty),
                Err(KvError::BlockSizeMismatch {
                    block_size: 4,
                    tokens: 0
                })
            );
            // A fault in a layer is reported before the block size.
            let mut b = block();
            b[2] = layer(2, 8, 4, 64, 60);
            assert_eq!(
                measure(v2(8, None, revision), "m", &b),
                Err(ragged_at(2, Field::VLength, Val::Int(64), Val::Int(60)))
            );
            // The empty payload and a degenerate layer 0 as under v1.
            assert_eq!(
                measure(v2(4, None, revision), "m", &[]),
                Err(KvError::EmptyPayload)
            );
            let mut b = block();
            b[0].n_kv_heads = (1 << 63) + 1;
            b[0].head_dim = 2;
            assert_eq!(
                measure(v2(4, None, revision), "m", &b),
                Err(KvError::DegenerateLayer {
                    n_kv_heads: (1 << 63) + 1,
                    head_dim: 2
                })
            );
        }
        // Under v1 the same payload has any depth.
        assert_eq!(measure_v1("model-a", &block()), Ok(sig(4)));
    }

    /// Layer 1 stores V at width 6: 4 tokens of 2 heads give 48 elements.
    fn split_at_1() -> Vec<StoredLayer> {
        let mut b = block();
        b[1] = layer(2, 8, 4, 64, 48);
        b[1].v_head_dim = Some(6);
        b
    }

    #[test]
    fn split_width_is_named_under_split_width_only() {
        let split = KvError::SplitKvHeadWidth {
            layer: 1,
            head_dim: 8,
            v_head_dim: 6,
        };
        let ragged_v = ragged_at(1, Field::VLength, Val::Int(64), Val::Int(48));
        assert_eq!(
            measure(v2(4, None, Revision::SplitWidth), "m", &split_at_1()),
            Err(split.clone())
        );
        assert_eq!(
            measure(v2(4, None, Revision::LayoutOnly), "m", &split_at_1()),
            Err(ragged_v.clone())
        );
        assert_eq!(measure_v1("m", &split_at_1()), Err(ragged_v));

        // The width is checked before the layer's lengths, even a bad k.
        let mut b = split_at_1();
        b[1].k.truncate(60);
        assert_eq!(
            measure(v2(4, None, Revision::SplitWidth), "m", &b),
            Err(split)
        );
        // ... but after the layer's shape.
        let mut b = split_at_1();
        b[1].n_kv_heads = 4;
        assert!(matches!(
            measure(v2(4, None, Revision::SplitWidth), "m", &b),
            Err(KvError::RaggedPayload {
                field: Field::LayerShape,
                ..
            })
        ));
        // ... and, at layer 0, after the degenerate check.
        let mut b = block();
        b[0].head_dim = 0;
        b[0].v_head_dim = Some(8);
        assert!(matches!(
            measure(v2(4, None, Revision::SplitWidth), "m", &b),
            Err(KvError::DegenerateLayer { .. })
        ));
        // A zero V width against a real head width is a split, at layer 0.
        let mut b = block();
        b[0].v_head_dim = Some(0);
        assert_eq!(
            measure(v2(4, None, Revision::SplitWidth), "m", &b),
            Err(KvError::SplitKvHeadWidth {
                layer: 0,
                head_dim: 8,
                v_head_dim: 0
            })
        );
        // A stated width equal to head_dim is no split.
        let mut b = block();
        for l in &mut b {
            l.v_head_dim = Some(8);
        }
        assert!(measure(v2(4, None, Revision::SplitWidth), "m", &b).is_ok());
    }

    #[test]
    fn the_claim_is_named_by_the_revision() {
        let mut b = block();
        b[1].seq_len = 7;
        assert_eq!(
            measure(v2(4, None, Revision::SplitWidth), "m", &b),
            Err(ragged_at(1, Field::Positions, Val::Int(4), Val::Int(7)))
        );
        assert_eq!(
            measure(v2(4, None, Revision::LayoutOnly), "m", &b),
            Err(ragged_at(1, Field::SeqLen, Val::Int(4), Val::Int(7)))
        );
        assert_eq!(
            measure_v1("m", &b),
            Err(ragged_at(1, Field::SeqLen, Val::Int(4), Val::Int(7)))
        );
    }

    #[test]
    fn writers_need_exactly_their_layout() {
        let layout = Layout {
            block_size: 4,
            sliding_window: None,
        };
        let v1 = Profile::v1();
        assert_eq!(v1.writer_rules(None), Ok(Rules::V1));
        assert!(v1.writer_rules(Some(layout)).is_err());
        let v2 = Profile {
            writes: 2,
            reads: vec![1, 2],
            revision: Revision::LayoutOnly,
        };
        assert_eq!(
            v2.writer_rules(Some(layout)),
            Ok(Rules::V2 {
                layout,
                revision: Revision::LayoutOnly
            })
        );
        assert!(v2.writer_rules(None).is_err());
    }

    #[test]
    fn windows_compare_exactly() {
        let at = |w| Signature {
            format_version: 2,
            layout: Some(Layout {
                block_size: 4,
                sliding_window: w,
            }),
            ..sig(4)
        };
        assert_eq!(at(None).first_difference(&at(None)), None);
        assert_eq!(
            at(None).first_difference(&at(Some(128))),
            Some((
                Field::SlidingWindow,
                Val::Window(None),
                Val::Window(Some(128))
            ))
        );
        assert_eq!(
            at(Some(256)).first_difference(&at(Some(128))),
            Some((
                Field::SlidingWindow,
                Val::Window(Some(256)),
                Val::Window(Some(128))
            ))
        );
        // A v1 and a v2 signature differ on format_version first.
        assert_eq!(
            at(None).first_difference(&sig(4)),
            Some((Field::FormatVersion, Val::Int(2), Val::Int(1)))
        );
    }
}
