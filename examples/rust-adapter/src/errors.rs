//! The closed set of typed refusals (spec/errors.md, ERR-8 .. ERR-7).
//!
//! The typed error is the answer; its message is rendered from it (ERR-7) and
//! is worded independently of the reference's. Every message names its field
//! and contains every scalar value (ERR-13).
//!
//! Profile v2 adds `bad_layout`, `split_kv_head_width` and
//! `block_size_mismatch`, and class `plan_validity` the refusals of a guarded
//! rebind (contract "Profile v2 measuring" and "Operations", `session_rebind`).

use crate::json::Json;

/// The canonical field identifiers of ERR-3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    FormatVersion,
    Model,
    NLayers,
    NKvHeads,
    HeadDim,
    Dtype,
    Tokens,
    LayerShape,
    KLength,
    VLength,
    SeqLen,
    TokenCount,
    MaxSeqLen,
    /// Profile v2: the layout's block size (a signature field).
    BlockSize,
    /// Profile v2: the layout's sliding window (a signature field).
    SlidingWindow,
    /// Profile v2, revision `split_width`: a layer's position claim.
    Positions,
}

impl Field {
    pub fn name(self) -> &'static str {
        match self {
            Field::FormatVersion => "format_version",
            Field::Model => "model",
            Field::NLayers => "n_layers",
            Field::NKvHeads => "n_kv_heads",
            Field::HeadDim => "head_dim",
            Field::Dtype => "dtype",
            Field::Tokens => "tokens",
            Field::LayerShape => "layer_shape",
            Field::KLength => "k_length",
            Field::VLength => "v_length",
            Field::SeqLen => "seq_len",
            Field::TokenCount => "token_count",
            Field::MaxSeqLen => "max_seq_len",
            Field::BlockSize => "block_size",
            Field::SlidingWindow => "sliding_window",
            Field::Positions => "positions",
        }
    }
}

/// A value an error carries (ERR-4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    /// A count, length, index or version.
    Int(u128),
    /// A `model` or `dtype`.
    Text(String),
    /// A layer's `[n_kv_heads, head_dim]`.
    Shape(u128, u128),
    /// A sliding window, `None` for none (full causal attention): JSON null.
    Window(Option<u64>),
}

impl Val {
    fn to_json(&self) -> Json {
        match self {
            Val::Int(n) => int(*n),
            Val::Text(s) => Json::Str(s.clone()),
            Val::Shape(h, d) => Json::Arr(vec![int(*h), int(*d)]),
            Val::Window(w) => window_json(*w),
        }
    }

    /// How a message shows the value: integers in decimal, strings verbatim.
    fn show(&self) -> String {
        match self {
            Val::Int(n) => n.to_string(),
            Val::Text(s) => format!("\"{s}\""),
            Val::Shape(h, d) => format!("{h} kv heads of width {d}"),
            Val::Window(w) => show_window(*w),
        }
    }
}

/// A window on the wire: its width, or null for none.
fn window_json(w: Option<u64>) -> Json {
    w.map_or(Json::Null, Json::from)
}

/// A window in a message. No window is rendered unlike any number (contract
/// "Profile v2 verify", step 5; PROF-10).
fn show_window(w: Option<u64>) -> String {
    match w {
        Some(w) => w.to_string(),
        None => "none (full causal)".to_string(),
    }
}

/// One of a layer's two KV slots (contract, `session_rebind` step 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    K,
    V,
}

impl Slot {
    pub fn name(self) -> &'static str {
        match self {
            Slot::K => "k",
            Slot::V => "v",
        }
    }
}

fn int(n: u128) -> Json {
    Json::Int(i128::try_from(n).unwrap_or(i128::MAX))
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvError {
    Unmarked,
    UnsupportedFormat {
        found: u64,
        readable: Vec<u64>,
    },
    EmptyPayload,
    DegenerateLayer {
        n_kv_heads: u64,
        head_dim: u64,
    },
    RaggedPayload {
        layer: u64,
        field: Field,
        expected: Val,
        found: Val,
    },
    PayloadMismatch {
        field: Field,
        recorded: Val,
        actual: Val,
    },
    Incompatible {
        field: Field,
        expected: Val,
        found: Val,
    },
    CapacityExceeded {
        capacity: u64,
        requested: u128,
    },
    LayerOutOfRange {
        layer: u64,
        n_layers: u64,
    },
    LayerShapeMismatch {
        layer: u64,
        field: Field,
        expected: u64,
        found: u64,
    },
    /// Profile v2 measuring, step 1: `field` is `BlockSize` or `SlidingWindow`;
    /// `remainder` only for a window that is not a multiple of the block.
    BadLayout {
        field: Field,
        block_size: u64,
        sliding_window: Option<u64>,
        remainder: Option<u64>,
    },
    /// Profile v2 measuring, step 3 (revision `split_width` only).
    SplitKvHeadWidth {
        layer: u64,
        head_dim: u64,
        v_head_dim: u64,
    },
    /// Profile v2 measuring, step 4: not one whole block.
    BlockSizeMismatch {
        block_size: u64,
        tokens: u64,
    },
    /// `session_rebind` step 1.
    ResidencyUnknown,
    /// `session_rebind` step 2.
    ResidencyDiffers {
        baked: String,
        incoming: String,
    },
    /// `session_rebind` step 3: the incoming cache has no such layer.
    MissingSlot {
        layer: u64,
        which: Slot,
    },
    /// `session_rebind` step 3: the storage is not interchangeable.
    StorageDiffers {
        layer: u64,
        which: Slot,
        baked: String,
        incoming: String,
    },
}

impl KvError {
    pub fn kind(&self) -> &'static str {
        match self {
            KvError::Unmarked => "unmarked",
            KvError::UnsupportedFormat { .. } => "unsupported_format",
            KvError::EmptyPayload => "empty_payload",
            KvError::DegenerateLayer { .. } => "degenerate_layer",
            KvError::RaggedPayload { .. } => "ragged_payload",
            KvError::PayloadMismatch { .. } => "payload_mismatch",
            KvError::Incompatible { .. } => "incompatible",
            KvError::CapacityExceeded { .. } => "capacity_exceeded",
            KvError::LayerOutOfRange { .. } => "layer_out_of_range",
            KvError::LayerShapeMismatch { .. } => "layer_shape_mismatch",
            KvError::BadLayout { .. } => "bad_layout",
            KvError::SplitKvHeadWidth { .. } => "split_kv_head_width",
            KvError::BlockSizeMismatch { .. } => "block_size_mismatch",
            KvError::ResidencyUnknown => "residency_unknown",
            KvError::ResidencyDiffers { .. } => "residency_differs",
            KvError::MissingSlot { .. } => "missing_slot",
            KvError::StorageDiffers { .. } => "storage_differs",
        }
    }

    /// The field, per the table of ERR-2.
    pub fn field(&self) -> Option<Field> {
        match self {
            KvError::Unmarked | KvError::EmptyPayload | KvError::DegenerateLayer { .. } => None,
            KvError::LayerOutOfRange { .. }
            | KvError::SplitKvHeadWidth { .. }
            | KvError::BlockSizeMismatch { .. }
            | KvError::ResidencyUnknown
            | KvError::ResidencyDiffers { .. }
            | KvError::MissingSlot { .. }
            | KvError::StorageDiffers { .. } => None,
            KvError::BadLayout { field, .. } => Some(*field),
            KvError::UnsupportedFormat { .. } => Some(Field::FormatVersion),
            KvError::CapacityExceeded { .. } => Some(Field::MaxSeqLen),
            KvError::RaggedPayload { field, .. }
            | KvError::PayloadMismatch { field, .. }
            | KvError::Incompatible { field, .. }
            | KvError::LayerShapeMismatch { field, .. } => Some(*field),
        }
    }

    /// The layer, per the table of ERR-2.
    pub fn layer(&self) -> Option<u64> {
        match self {
            KvError::DegenerateLayer { .. } => Some(0),
            KvError::RaggedPayload { layer, .. }
            | KvError::LayerOutOfRange { layer, .. }
            | KvError::LayerShapeMismatch { layer, .. }
            | KvError::SplitKvHeadWidth { layer, .. }
            | KvError::MissingSlot { layer, .. }
            | KvError::StorageDiffers { layer, .. } => Some(*layer),
            _ => None,
        }
    }

    /// The values, per the table of ERR-2, in the forms of ERR-4.
    pub fn values(&self) -> Vec<(&'static str, Json)> {
        match self {
            KvError::Unmarked | KvError::EmptyPayload | KvError::ResidencyUnknown => vec![],
            KvError::UnsupportedFormat { found, readable } => {
                let mut sorted = readable.clone();
                sorted.sort_unstable();
                sorted.dedup();
                vec![
                    ("found", Json::from(*found)),
                    (
                        "readable",
                        Json::Arr(sorted.into_iter().map(Json::from).collect()),
                    ),
                ]
            }
            KvError::DegenerateLayer {
                n_kv_heads,
                head_dim,
            } => {
                vec![
                    ("n_kv_heads", Json::from(*n_kv_heads)),
                    ("head_dim", Json::from(*head_dim)),
                ]
            }
            KvError::RaggedPayload {
                expected, found, ..
            }
            | KvError::Incompatible {
                expected, found, ..
            } => {
                vec![("expected", expected.to_json()), ("found", found.to_json())]
            }
            KvError::PayloadMismatch {
                recorded, actual, ..
            } => {
                vec![
                    ("recorded", recorded.to_json()),
                    ("actual", actual.to_json()),
                ]
            }
            KvError::CapacityExceeded {
                capacity,
                requested,
            } => {
                vec![
                    ("capacity", Json::from(*capacity)),
                    ("requested", int(*requested)),
                ]
            }
            KvError::LayerOutOfRange { n_layers, .. } => vec![("n_layers", Json::from(*n_layers))],
            KvError::LayerShapeMismatch {
                expected, found, ..
            } => {
                vec![
                    ("expected", Json::from(*expected)),
                    ("found", Json::from(*found)),
                ]
            }
            KvError::BadLayout {
                block_size,
                sliding_window,
                remainder,
                ..
            } => {
                let mut values = vec![
                    ("block_size", Json::from(*block_size)),
                    ("sliding_window", window_json(*sliding_window)),
                ];
                if let Some(r) = remainder {
                    values.push(("remainder", Json::from(*r)));
                }
                values
            }
            KvError::SplitKvHeadWidth {
                head_dim,
                v_head_dim,
                ..
            } => vec![
                ("head_dim", Json::from(*head_dim)),
                ("v_head_dim", Json::from(*v_head_dim)),
            ],
            KvError::BlockSizeMismatch { block_size, tokens } => vec![
                ("block_size", Json::from(*block_size)),
                ("tokens", Json::from(*tokens)),
            ],
            KvError::ResidencyDiffers { baked, incoming } => vec![
                ("baked", Json::from(baked.as_str())),
                ("incoming", Json::from(incoming.as_str())),
            ],
            KvError::MissingSlot { which, .. } => vec![("which", Json::from(which.name()))],
            KvError::StorageDiffers {
                which,
                baked,
                incoming,
                ..
            } => vec![
                ("which", Json::from(which.name())),
                ("baked", Json::from(baked.as_str())),
                ("incoming", Json::from(incoming.as_str())),
            ],
        }
    }

    /// A message for people, derived from the typed parts only (ERR-13, ERR-7).
    pub fn message(&self) -> String {
        match self {
            KvError::Unmarked => {
                "refusing an unmarked block: it carries no stamp, so its layout would be a guess"
                    .to_string()
            }
            KvError::UnsupportedFormat { found, readable } => {
                let mut sorted = readable.clone();
                sorted.sort_unstable();
                let list: Vec<String> = sorted.iter().map(u64::to_string).collect();
                format!(
                    "the block's format_version {found} is not one this reader reads \
                     (it reads versions {{{}}})",
                    list.join(", ")
                )
            }
            KvError::EmptyPayload => {
                "the payload holds no layers, so there is no shape to measure".to_string()
            }
            KvError::DegenerateLayer {
                n_kv_heads,
                head_dim,
            } => format!(
                "layer 0 has zero width per token (n_kv_heads {n_kv_heads} times head_dim \
                 {head_dim}); token count cannot be measured"
            ),
            KvError::RaggedPayload {
                layer,
                field,
                expected,
                found,
            } => {
                let (e, f) = (expected.show(), found.show());
                let detail = match field {
                    Field::KLength => {
                        format!("k length {f} is not a whole number of tokens of width {e}")
                    }
                    Field::VLength => format!("v length {f} differs from the k length {e}"),
                    Field::SeqLen => {
                        format!("seq_len claims {f} positions but the buffers hold {e}")
                    }
                    Field::Positions => {
                        format!("positions claims {f} but the buffers hold {e} rows")
                    }
                    Field::LayerShape => {
                        format!("layer shape is {f} where layer 0 has {e}")
                    }
                    Field::TokenCount => {
                        format!("token count is {f} where layer 0 holds {e}")
                    }
                    other => format!("{} is {f}, expected {e}", other.name()),
                };
                format!(
                    "incoherent payload at layer {layer} ({}): {detail}",
                    field.name()
                )
            }
            KvError::PayloadMismatch {
                field,
                recorded,
                actual,
            } => format!(
                "the stamp misdescribes its payload: {} recorded as {} but measured as {}",
                field.name(),
                recorded.show(),
                actual.show()
            ),
            KvError::Incompatible {
                field,
                expected,
                found,
            } => format!(
                "block does not fit this reader: its {} is {}, the reader needs {}",
                field.name(),
                found.show(),
                expected.show()
            ),
            KvError::CapacityExceeded {
                capacity,
                requested,
            } => format!(
                "append refused: it would bring the cache to {requested} positions, \
                 beyond its max_seq_len capacity of {capacity}"
            ),
            KvError::LayerOutOfRange { layer, n_layers } => format!(
                "cannot replace layer {layer}: the cache has only {n_layers} layers (n_layers)"
            ),
            KvError::LayerShapeMismatch {
                layer,
                field,
                expected,
                found,
            } => format!(
                "replacement for layer {layer} has {} {found}, but the cache's is {expected}",
                field.name()
            ),
            KvError::BadLayout {
                field,
                block_size,
                sliding_window,
                remainder,
            } => {
                let window = show_window(*sliding_window);
                let why = match (field, remainder) {
                    (Field::BlockSize, _) => "block_size must be positive".to_string(),
                    (_, Some(r)) => format!(
                        "block_size {block_size} does not divide sliding_window {window} \
                         (remainder {r}), so a block would straddle the window edge"
                    ),
                    _ => {
                        "sliding_window 0 attends to nothing; no window is null, not 0".to_string()
                    }
                };
                format!(
                    "impossible block layout ({}): {why} \
                     [block_size {block_size}, sliding_window {window}]",
                    field.name()
                )
            }
            KvError::SplitKvHeadWidth {
                layer,
                head_dim,
                v_head_dim,
            } => format!(
                "layer {layer} splits its K and V head widths (head_dim {head_dim}, \
                 v_head_dim {v_head_dim}); the block format has one head width"
            ),
            KvError::BlockSizeMismatch { block_size, tokens } => format!(
                "not one whole block: the payload holds {tokens} tokens where the layout's \
                 block_size is {block_size}"
            ),
            KvError::ResidencyUnknown => {
                "rebind refused: the residency of the plan's KV or of the incoming cache \
                 is unknown"
                    .to_string()
            }
            KvError::ResidencyDiffers { baked, incoming } => format!(
                "rebind refused: the plan baked KV resident on \"{baked}\", \
                 the incoming cache is on \"{incoming}\""
            ),
            KvError::MissingSlot { layer, which } => format!(
                "rebind refused: the incoming cache has no layer {layer}, \
                 so slot {} of that layer is missing",
                which.name()
            ),
            KvError::StorageDiffers {
                layer,
                which,
                baked,
                incoming,
            } => format!(
                "rebind refused: slot {} of layer {layer} has storage \"{incoming}\" \
                 where the plan baked \"{baked}\"",
                which.name()
            ),
        }
    }

    /// The protocol form: `{"kind", "field", "layer", "values", "message"}`.
    pub fn to_json(&self) -> Json {
        Json::obj([
            ("kind", Json::from(self.kind())),
            (
                "field",
                self.field().map_or(Json::Null, |f| Json::from(f.name())),
            ),
            ("layer", self.layer().map_or(Json::Null, Json::from)),
            ("values", Json::obj(self.values())),
            ("message", Json::from(self.message())),
        ])
    }
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check the suite applies (ERR-13): field named in some spelling, every
    /// scalar value (and every number of a list) present as written.
    fn omissions(e: &KvError) -> Vec<String> {
        let msg = e.message();
        let squeeze = |s: &str| -> String {
            s.to_lowercase()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric())
                .collect()
        };
        let mut missing = vec![];
        if let Some(f) = e.field() {
            if !squeeze(&msg).contains(&squeeze(f.name())) {
                missing.push(f.name().to_string());
            }
        }
        for (name, value) in e.values() {
            let parts = match value {
                Json::Arr(items) => items,
                // "No window" may be rendered in any form (PROF-10).
                Json::Null => vec![],
                other => vec![other],
            };
            for p in parts {
                let text = match p {
                    Json::Str(s) => s,
                    other => other.to_line(),
                };
                if !msg.contains(&text) {
                    missing.push(format!("{name}={text}"));
                }
            }
        }
        missing
    }

    #[test]
    fn every_message_names_its_field_and_values() {
        let all = vec![
            KvError::Unmarked,
            KvError::UnsupportedFormat {
                found: 99,
                readable: vec![1],
            },
            KvError::UnsupportedFormat {
                found: 0,
                readable: vec![3, 1, 2],
            },
            KvError::EmptyPayload,
            KvError::DegenerateLayer {
                n_kv_heads: 2,
                head_dim: 0,
            },
            KvError::RaggedPayload {
                layer: 2,
                field: Field::LayerShape,
                expected: Val::Shape(2, 8),
                found: Val::Shape(0, 8),
            },
            KvError::RaggedPayload {
                layer: 0,
                field: Field::KLength,
                expected: Val::Int(16),
                found: Val::Int(60),
            },
            KvError::RaggedPayload {
                layer: 1,
                field: Field::SeqLen,
                expected: Val::Int(4),
                found: Val::Int(7),
            },
            KvError::RaggedPayload {
                layer: 1,
                field: Field::VLength,
                expected: Val::Int(64),
                found: Val::Int(8),
            },
            KvError::RaggedPayload {
                layer: 1,
                field: Field::TokenCount,
                expected: Val::Int(4),
                found: Val::Int(3),
            },
            KvError::PayloadMismatch {
                field: Field::Dtype,
                recorded: Val::Text("f16".into()),
                actual: Val::Text("f32".into()),
            },
            KvError::Incompatible {
                field: Field::Model,
                expected: Val::Text("Model-B \"x\"".into()),
                found: Val::Text("model-a".into()),
            },
            KvError::Incompatible {
                field: Field::HeadDim,
                expected: Val::Int(128),
                found: Val::Int(64),
            },
            KvError::CapacityExceeded {
                capacity: 8,
                requested: 9,
            },
            KvError::LayerOutOfRange {
                layer: 5,
                n_layers: 2,
            },
            KvError::LayerShapeMismatch {
                layer: 1,
                field: Field::MaxSeqLen,
                expected: 16,
                found: 32,
            },
            KvError::RaggedPayload {
                layer: 1,
                field: Field::Positions,
                expected: Val::Int(4),
                found: Val::Int(7),
            },
            KvError::Incompatible {
                field: Field::SlidingWindow,
                expected: Val::Window(None),
                found: Val::Window(Some(128)),
            },
            KvError::PayloadMismatch {
                field: Field::BlockSize,
                recorded: Val::Int(8),
                actual: Val::Int(4),
            },
            KvError::BadLayout {
                field: Field::BlockSize,
                block_size: 0,
                sliding_window: None,
                remainder: None,
            },
            KvError::BadLayout {
                field: Field::SlidingWindow,
                block_size: 16,
                sliding_window: Some(0),
                remainder: None,
            },
            KvError::BadLayout {
                field: Field::SlidingWindow,
                block_size: 48,
                sliding_window: Some(128),
                remainder: Some(32),
            },
            KvError::SplitKvHeadWidth {
                layer: 2,
                head_dim: 8,
                v_head_dim: 6,
            },
            KvError::BlockSizeMismatch {
                block_size: 8,
                tokens: 4,
            },
            KvError::ResidencyUnknown,
            KvError::ResidencyDiffers {
                baked: "cuda:0".into(),
                incoming: "cpu".into(),
            },
            KvError::MissingSlot {
                layer: 3,
                which: Slot::K,
            },
            KvError::StorageDiffers {
                layer: 1,
                which: Slot::V,
                baked: "f16/paged".into(),
                incoming: "f32/dense".into(),
            },
        ];
        for e in &all {
            assert!(
                omissions(e).is_empty(),
                "{:?}: {} misses {:?}",
                e,
                e.message(),
                omissions(e)
            );
            let wire = e.to_json();
            assert_eq!(wire.get("kind").and_then(Json::as_str), Some(e.kind()));
        }
    }

    #[test]
    fn new_kinds_carry_exactly_their_parts() {
        let parts = |e: &KvError| {
            let wire = e.to_json();
            let keys: Vec<String> = wire
                .get("values")
                .and_then(Json::as_object)
                .unwrap()
                .iter()
                .map(|(k, _)| k.clone())
                .collect();
            (
                wire.get("field").cloned().unwrap(),
                wire.get("layer").cloned().unwrap(),
                keys,
            )
        };
        let misaligned = KvError::BadLayout {
            field: Field::SlidingWindow,
            block_size: 48,
            sliding_window: Some(128),
            remainder: Some(32),
        };
        assert_eq!(
            parts(&misaligned),
            (
                Json::from("sliding_window"),
                Json::Null,
                vec![
                    "block_size".into(),
                    "sliding_window".into(),
                    "remainder".into()
                ]
            )
        );
        let zero = KvError::BadLayout {
            field: Field::BlockSize,
            block_size: 0,
            sliding_window: None,
            remainder: None,
        };
        let wire = zero.to_json();
        assert_eq!(
            wire.get("values").unwrap().get("sliding_window"),
            Some(&Json::Null)
        );
        assert_eq!(parts(&zero).2.len(), 2);
        let split = KvError::SplitKvHeadWidth {
            layer: 2,
            head_dim: 8,
            v_head_dim: 6,
        };
        assert_eq!(
            parts(&split),
            (
                Json::Null,
                Json::Int(2),
                vec!["head_dim".into(), "v_head_dim".into()]
            )
        );
        let slot = KvError::StorageDiffers {
            layer: 1,
            which: Slot::V,
            baked: "a".into(),
            incoming: "b".into(),
        };
        assert_eq!(
            slot.to_json().get("values").unwrap().get("which"),
            Some(&Json::from("v"))
        );
        assert_eq!(
            parts(&KvError::ResidencyUnknown),
            (Json::Null, Json::Null, vec![])
        );
    }

    #[test]
    fn readable_is_a_sorted_list() {
        let e = KvError::UnsupportedFormat {
            found: 7,
            readable: vec![3, 1, 2],
        };
        assert_eq!(
            e.to_json().get("values").unwrap().get("readable"),
            Some(&Json::Arr(vec![Json::Int(1), Json::Int(2), Json::Int(3)]))
        );
    }
}
