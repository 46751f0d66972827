//! The known-answer vectors in `../../vectors/`, checked without the Python
//! harness: read with this crate's own JSON reader (`json.rs`) and run through
//! its own hasher (`hasher.rs`). Tests only.
//!
//! Each file is a `kvconform-vectors/1` document (`vectors/README.md`): a list
//! of vectors, each a hash program (`ops`) and the values its `finish` ops
//! read (`expect`, `0x` and 16 lowercase hex digits).

use std::path::{Path, PathBuf};

use crate::hasher::KeyHasher;
use crate::json::{parse, Json};

/// The vector files, all of which must be present.
pub const FILES: [&str; 3] = [
    "fnv1a64-published.json",
    "fnv1a64-fold.json",
    "encoding.json",
];

/// One vector, as the file writes it.
pub struct Vector {
    pub file: &'static str,
    pub id: String,
    /// The program, undecoded (the protocol test feeds it to its own decoder).
    pub ops: Json,
    pub expect: Vec<u64>,
}

/// The vectors folder of the checkout.
pub fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vectors")
}

/// How many `"id"` keys a file's text holds, counted on the raw text without
/// the JSON reader: the number of vectors a reader must find. Only vectors
/// have an `id`, and inside a JSON string a quote is escaped (`\"`), so the
/// four characters `"id"` followed by `:` occur only as a key.
fn count_id_keys(text: &str) -> usize {
    text.match_indices("\"id\"")
        .filter(|(at, m)| text[at + m.len()..].trim_start().starts_with(':'))
        .count()
}

/// Every vector of every file, and the number of `"id"` keys in their texts.
/// Panics, naming the file, if a file is missing or malformed.
pub fn load() -> (Vec<Vector>, usize) {
    let dir = dir();
    let mut vectors = Vec::new();
    let mut ids_in_text = 0;
    for file in FILES {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        ids_in_text += count_id_keys(&text);
        let doc = parse(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(
            doc.get("format").and_then(Json::as_str),
            Some("kvconform-vectors/1"),
            "{file}: format"
        );
        assert_eq!(doc.get("file").and_then(Json::as_str), Some(file), "{file}");
        let list = doc
            .get("vectors")
            .and_then(Json::as_array)
            .unwrap_or_else(|| panic!("{file}: no vectors list"));
        assert!(!list.is_empty(), "{file}: no vectors");
        for (n, v) in list.iter().enumerate() {
            let id = v
                .get("id")
                .and_then(Json::as_str)
                .unwrap_or_else(|| panic!("{file}: vector #{n} has no id"))
                .to_string();
            let expect = v
                .get("expect")
                .and_then(Json::as_array)
                .unwrap_or_else(|| panic!("vector {id}: no expect list"))
                .iter()
                .map(|x| hex64(x.as_str().unwrap_or(""), &format!("vector {id}: expect")))
                .collect();
            let ops = v
                .get("ops")
                .unwrap_or_else(|| panic!("vector {id}: no ops"))
                .clone();
            vectors.push(Vector {
                file,
                id,
                ops,
                expect,
            });
        }
    }
    (vectors, ids_in_text)
}

/// `0x` and exactly 16 lowercase hex digits.
fn hex64(s: &str, at: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) if h.len() == 16 && h.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) => {
            u64::from_str_radix(h, 16).expect("16 hex digits")
        }
        _ => panic!("{at}: {s:?} is not 0x and 16 lowercase hex digits"),
    }
}

/// Decimal digits only (no sign, no spaces), 0 to 2^64-1.
fn decimal(s: &str, at: &str) -> u64 {
    assert!(
        !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()),
        "{at}: {s:?} is not a decimal digit string"
    );
    s.parse()
        .unwrap_or_else(|_| panic!("{at}: {s} is out of the u64 range"))
}

fn hex_bytes(s: &str, at: &str) -> Vec<u8> {
    assert!(
        s.len() % 2 == 0 && s.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')),
        "{at}: {s:?} is not lowercase hex digit pairs"
    );
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

fn field<'a>(op: &'a Json, name: &str, at: &str) -> &'a Json {
    op.get(name)
        .unwrap_or_else(|| panic!("{at}: missing field {name}"))
}

fn text<'a>(op: &'a Json, name: &str, at: &str) -> &'a str {
    field(op, name, at)
        .as_str()
        .unwrap_or_else(|| panic!("{at}: {name} is not a string"))
}

/// Run a vector's program from a fresh hasher: the values its `finish` ops read.
pub fn run(ops: &Json, id: &str) -> Vec<u64> {
    let ops = ops
        .as_array()
        .unwrap_or_else(|| panic!("vector {id}: ops is not a list"));
    let mut h = KeyHasher::new();
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let at = format!("vector {id}: ops[{i}]");
        match text(op, "op", &at) {
            "bytes" => {
                let unit = hex_bytes(text(op, "hex", &at), &at);
                let repeat = match op.get("repeat") {
                    None => 1,
                    Some(Json::Int(n)) if *n >= 1 => *n,
                    Some(other) => panic!("{at}: repeat {other:?} is not an integer >= 1"),
                };
                // Fed in pieces, never built as one buffer (the 1 MiB vectors).
                for _ in 0..repeat {
                    h.fold(&unit);
                }
            }
            "str" => {
                h.str(text(op, "value", &at));
            }
            "u64" => {
                h.u64(decimal(text(op, "value", &at), &at));
            }
            "f64" => {
                h.f64_bits(hex64(text(op, "bits", &at), &at));
            }
            "present" => {
                let present = field(op, "value", &at)
                    .as_bool()
                    .unwrap_or_else(|| panic!("{at}: value is not a boolean"));
                h.present(present);
            }
            "instance" => {
                h.instance(decimal(text(op, "value", &at), &at));
            }
            "finish" => out.push(h.finish()),
            other => panic!("{at}: unknown op {other:?}"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_keys_are_counted_on_the_raw_text() {
        assert_eq!(
            count_id_keys(r#"{"vectors": [{"id": "a"}, {"id" : "b"}]}"#),
            2
        );
        // An escaped quote inside a string is not a key.
        assert_eq!(count_id_keys(r#"{"note": "\"id\": 1", "file": "id"}"#), 0);
    }

    /// Every vector of the three files, through this crate's hasher, and
    /// exactly as many vectors as the files hold.
    #[test]
    fn every_vector_through_the_hasher() {
        let (vectors, ids_in_text) = load();
        let mut ran = 0;
        let mut per_file = [0usize; FILES.len()];
        for v in &vectors {
            let got = run(&v.ops, &v.id);
            assert_eq!(
                got.len(),
                v.expect.len(),
                "vector {} ({}): {} finish ops but {} expected values",
                v.id,
                v.file,
                got.len(),
                v.expect.len()
            );
            for (n, (g, w)) in got.iter().zip(&v.expect).enumerate() {
                assert_eq!(
                    g, w,
                    "vector {} ({}): finish #{n} reads {g:#018x}, expected {w:#018x}",
                    v.id, v.file
                );
            }
            ran += 1;
            per_file[FILES.iter().position(|f| *f == v.file).unwrap()] += 1;
        }
        assert_eq!(
            ran, ids_in_text,
            "ran {ran} vectors, the files hold {ids_in_text}"
        );
        assert!(per_file.iter().all(|&n| n > 0), "a file without vectors");
        let mut ids: Vec<&str> = vectors.iter().map(|v| v.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), ran, "vector ids are not unique");
        let counts: Vec<String> = FILES
            .iter()
            .zip(per_file)
            .map(|(f, n)| format!("{f} {n}"))
            .collect();
        eprintln!("{ran} known-answer vectors checked ({})", counts.join(", "));
    }
}
