//! A small JSON reader and writer, enough for the adapter protocol.
//!
//! Objects keep their members in document order (a `Vec`, not a map): the
//! protocol's objects are small, and order-preserving output keeps responses
//! readable. When a key appears twice, lookups see the last occurrence, which
//! is what Python's `json` module does.
//!
//! Numbers are kept as `Int` when the literal is an integer that fits in an
//! `i128` (every u64 does), and as `Float` otherwise. The protocol sends every
//! 64-bit quantity as a decimal string, so integers here are small counts.

use std::fmt::Write as _;

#[derive(Debug, Clone, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// The member `key` of an object (the last one, should it repeat).
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(members) => members.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Json::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Json]> {
        match self {
            Json::Arr(items) => Some(items),
            _ => None,
        }
    }

    pub fn as_object(&self) -> Option<&[(String, Json)]> {
        match self {
            Json::Obj(members) => Some(members),
            _ => None,
        }
    }

    /// A short name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Int(_) => "an integer",
            Json::Float(_) => "a float",
            Json::Str(_) => "a string",
            Json::Arr(_) => "an array",
            Json::Obj(_) => "an object",
        }
    }

    /// Build an object from `(name, value)` pairs.
    pub fn obj<I, K>(members: I) -> Json
    where
        I: IntoIterator<Item = (K, Json)>,
        K: Into<String>,
    {
        Json::Obj(members.into_iter().map(|(k, v)| (k.into(), v)).collect())
    }

    /// Serialise on one line (no newlines anywhere: strings escape them).
    pub fn to_line(&self) -> String {
        let mut out = String::new();
        write_value(&mut out, self);
        out
    }
}

impl From<u64> for Json {
    fn from(v: u64) -> Json {
        Json::Int(v as i128)
    }
}

impl From<u32> for Json {
    fn from(v: u32) -> Json {
        Json::Int(v as i128)
    }
}

impl From<usize> for Json {
    fn from(v: usize) -> Json {
        Json::Int(v as i128)
    }
}

impl From<bool> for Json {
    fn from(v: bool) -> Json {
        Json::Bool(v)
    }
}

impl From<&str> for Json {
    fn from(v: &str) -> Json {
        Json::Str(v.to_string())
    }
}

impl From<String> for Json {
    fn from(v: String) -> Json {
        Json::Str(v)
    }
}

// Writing ---------------------------------------------------------------------

fn write_value(out: &mut String, value: &Json) {
    match value {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Int(i) => {
            let _ = write!(out, "{i}");
        }
        Json::Float(f) => write_float(out, *f),
        Json::Str(s) => write_string(out, s),
        Json::Arr(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Json::Obj(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_string(out, k);
                out.push_str(": ");
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

fn write_float(out: &mut String, f: f64) {
    if !f.is_finite() {
        // JSON has no NaN or infinity; nothing in the protocol sends one back.
        out.push_str("null");
    } else if f == f.trunc() && f.abs() < 1e16 {
        let _ = write!(out, "{f:.1}");
    } else {
        // Rust's shortest round-trip form; exponents use `e`, which JSON accepts.
        let _ = write!(out, "{f:?}");
    }
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            // Other controls, and the two separators some line readers split on.
            c if (c as u32) < 0x20 || c == '\u{2028}' || c == '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

// Reading ---------------------------------------------------------------------

/// Why a text is not JSON, and where (byte offset).
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    pub offset: usize,
    pub what: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid JSON at byte {}: {}", self.offset, self.what)
    }
}

/// How the reader treats a `\uXXXX` escape naming an unpaired surrogate.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Surrogates {
    /// Refuse the document: the string has no UTF-8 form (HASH-13).
    Refuse,
    /// Substitute U+FFFD. Used only to salvage a request's `seq` so that
    /// the refusal can still be answered in order; never to run the request.
    Replace,
}

/// Parse one complete JSON document (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Json, ParseError> {
    parse_with(text, Surrogates::Refuse)
}

pub fn parse_with(text: &str, surrogates: Surrogates) -> Result<Json, ParseError> {
    let mut p = Parser {
        b: text.as_bytes(),
        i: 0,
        depth: 0,
        surrogates,
    };
    p.ws();
    let value = p.value()?;
    p.ws();
    if p.i != p.b.len() {
        return Err(p.err("trailing characters after the value"));
    }
    Ok(value)
}

const MAX_DEPTH: usize = 128;

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
    depth: usize,
    surrogates: Surrogates,
}

impl<'a> Parser<'a> {
    fn err(&self, what: impl Into<String>) -> ParseError {
        ParseError {
            offset: self.i,
            what: what.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn expect_literal(&mut self, lit: &str, value: Json) -> Result<Json, ParseError> {
        if self.b[self.i..].starts_with(lit.as_bytes()) {
            self.i += lit.len();
            Ok(value)
        } else {
            Err(self.err(format!("expected `{lit}`")))
        }
    }

    fn value(&mut self) -> Result<Json, ParseError> {
        match self.peek() {
            None => Err(self.err("unexpected end of input")),
            Some(b'n') => self.expect_literal("null", Json::Null),
            Some(b't') => self.expect_literal("true", Json::Bool(true)),
            Some(b'f') => self.expect_literal("false", Json::Bool(false)),
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'[') => self.array(),
            Some(b'{') => self.object(),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(c) => Err(self.err(format!("unexpected character {:?}", c as char))),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err("nesting deeper than 128 levels"));
        }
        Ok(())
    }

    fn array(&mut self) -> Result<Json, ParseError> {
        self.enter()?;
        self.i += 1; // '['
        let mut items = Vec::new();
        self.ws();
        if self.peek() == Some(b']') {
            self.i += 1;
            self.depth -= 1;
            return Ok(Json::Arr(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    break;
                }
                _ => return Err(self.err("expected `,` or `]` in an array")),
            }
        }
        self.depth -= 1;
        Ok(Json::Arr(items))
    }

    fn object(&mut self) -> Result<Json, ParseError> {
        self.enter()?;
        self.i += 1; // '{'
        let mut members = Vec::new();
        self.ws();
        if self.peek() == Some(b'}') {
            self.i += 1;
            self.depth -= 1;
            return Ok(Json::Obj(members));
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("expected a string key in an object"));
            }
            let key = self.string()?;
            self.ws();
            if self.peek() != Some(b':') {
                return Err(self.err("expected `:` after an object key"));
            }
            self.i += 1;
            self.ws();
            let value = self.value()?;
            members.push((key, value));
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                _ => return Err(self.err("expected `,` or `}` in an object")),
            }
        }
        self.depth -= 1;
        Ok(Json::Obj(members))
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits = self
            .b
            .get(self.i..self.i + 4)
            .ok_or_else(|| self.err("truncated \\u escape"))?;
        let mut v = 0u32;
        for &d in digits {
            let n = (d as char)
                .to_digit(16)
                .ok_or_else(|| self.err("bad hex digit in \\u escape"))?;
            v = v * 16 + n;
        }
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.i += 1; // opening quote
        let mut out = String::new();
        loop {
            // Copy a run of plain bytes at once; the input is a &str, so the
            // run is valid UTF-8 as long as it stops at an ASCII byte.
            let start = self.i;
            while let Some(c) = self.peek() {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            out.push_str(std::str::from_utf8(&self.b[start..self.i]).expect("input is UTF-8"));
            match self.peek() {
                None => return Err(self.err("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let esc = self.peek().ok_or_else(|| self.err("unterminated escape"))?;
                    self.i += 1;
                    match esc {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\u{08}'),
                        b'f' => out.push('\u{0c}'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => {
                            let c = self.unicode_escape()?;
                            out.push(c);
                        }
                        other => {
                            self.i -= 1;
                            return Err(self.err(format!("unknown escape \\{}", other as char)));
                        }
                    }
                }
                Some(_) => return Err(self.err("unescaped control character in a string")),
            }
        }
    }

    /// After `\u`: one code point, joining a surrogate pair when there is one.
    fn unicode_escape(&mut self) -> Result<char, ParseError> {
        let at = self.i - 2;
        let first = self.hex4()?;
        let lone = |p: &Self, what: &str| -> Result<char, ParseError> {
            match p.surrogates {
                Surrogates::Replace => Ok('\u{fffd}'),
                Surrogates::Refuse => Err(ParseError {
                    offset: at,
                    what: format!("{what}: the string has no UTF-8 form"),
                }),
            }
        };
        match first {
            0xD800..=0xDBFF => {
                if self.b[self.i..].starts_with(b"\\u") {
                    let save = self.i;
                    self.i += 2;
                    let second = self.hex4()?;
                    if (0xDC00..=0xDFFF).contains(&second) {
                        let cp = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                        return Ok(char::from_u32(cp).expect("a joined pair is a scalar value"));
                    }
                    // Not a low surrogate: leave it to be read as its own escape.
                    self.i = save;
                }
                lone(self, &format!("unpaired high surrogate \\u{first:04x}"))
            }
            0xDC00..=0xDFFF => lone(self, &format!("unpaired low surrogate \\u{first:04x}")),
            cp => Ok(char::from_u32(cp).expect("not a surrogate")),
        }
    }

    fn number(&mut self) -> Result<Json, ParseError> {
        let start = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                while let Some(b'0'..=b'9') = self.peek() {
                    self.i += 1;
                }
            }
            _ => return Err(self.err("expected a digit")),
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            integral = false;
            self.i += 1;
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("expected a digit after `.`"));
            }
            while let Some(b'0'..=b'9') = self.peek() {
                self.i += 1;
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            integral = false;
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !matches!(self.peek(), Some(b'0'..=b'9')) {
                return Err(self.err("expected a digit in an exponent"));
            }
            while let Some(b'0'..=b'9') = self.peek() {
                self.i += 1;
            }
        }
        let text = std::str::from_utf8(&self.b[start..self.i]).expect("ASCII");
        if integral {
            if let Ok(i) = text.parse::<i128>() {
                return Ok(Json::Int(i));
            }
        }
        text.parse::<f64>()
            .map(Json::Float)
            .map_err(|_| ParseError {
                offset: start,
                what: format!("bad number {text}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> Json {
        let v = parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let again = parse(&v.to_line()).unwrap_or_else(|e| panic!("{}: {e}", v.to_line()));
        assert_eq!(v, again, "round trip of {text}");
        v
    }

    #[test]
    fn scalars() {
        assert_eq!(round_trip("null"), Json::Null);
        assert_eq!(round_trip(" true "), Json::Bool(true));
        assert_eq!(round_trip("false"), Json::Bool(false));
        assert_eq!(round_trip("0"), Json::Int(0));
        assert_eq!(round_trip("-17"), Json::Int(-17));
        assert_eq!(
            round_trip("18446744073709551615"),
            Json::Int(u64::MAX as i128)
        );
        assert_eq!(round_trip("10000.0"), Json::Float(10000.0));
        assert_eq!(round_trip("1e-5"), Json::Float(1e-5));
        assert_eq!(round_trip("-2.5E3"), Json::Float(-2500.0));
        assert_eq!(round_trip("8.0"), Json::Float(8.0));
    }

    #[test]
    fn float_output_is_shortest_round_trip() {
        for f in [1e-5, 0.1, 1.0 / 3.0, 500000.0, 1e300, -0.0, 123456789.123] {
            let line = Json::Float(f).to_line();
            assert_eq!(parse(&line).unwrap(), Json::Float(f), "{line}");
        }
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(round_trip(r#""a\"b\\c\/d""#), Json::Str("a\"b\\c/d".into()));
        assert_eq!(
            round_trip(r#""\b\f\n\r\t""#),
            Json::Str("\u{8}\u{c}\n\r\t".into())
        );
        assert_eq!(round_trip(r#""\u00e9\u4e2d""#), Json::Str("é中".into()));
        assert_eq!(round_trip("\"é中\""), Json::Str("é中".into()));
        // A surrogate pair joins into one supplementary code point.
        assert_eq!(round_trip(r#""\ud83d\ude00""#), Json::Str("😀".into()));
        assert_eq!(round_trip(r#""\uD834\uDD1E""#), Json::Str("𝄞".into()));
        // Control characters are escaped on output, so a response stays one line.
        let line = Json::Str("a\u{1}\nb".into()).to_line();
        assert_eq!(line, r#""a\u0001\nb""#);
        assert!(!line.contains('\n'));
    }

    #[test]
    fn unpaired_surrogates_are_refused_or_replaced() {
        for text in [
            r#""\ud800""#,
            r#""\udc00""#,
            r#""\ud800x""#,
            r#""\ud800\u0041""#,
        ] {
            assert!(parse(text).is_err(), "{text} must be refused");
            let salvaged = parse_with(text, Surrogates::Replace).unwrap();
            assert!(salvaged.as_str().unwrap().contains('\u{fffd}'));
        }
        assert_eq!(
            parse_with(r#""\ud800\u0041""#, Surrogates::Replace).unwrap(),
            Json::Str("\u{fffd}A".into())
        );
    }

    #[test]
    fn containers() {
        let v = round_trip(
            r#"{"seq": 3, "op": "hash", "program": [{"op": "finish"}], "x": {}, "y": []}"#,
        );
        assert_eq!(v.get("seq"), Some(&Json::Int(3)));
        assert_eq!(v.get("op").and_then(Json::as_str), Some("hash"));
        assert_eq!(
            v.get("program").and_then(Json::as_array).map(|a| a.len()),
            Some(1)
        );
        assert_eq!(v.get("missing"), None);
        // The last of repeated keys wins.
        assert_eq!(
            parse(r#"{"a": 1, "a": 2}"#).unwrap().get("a"),
            Some(&Json::Int(2))
        );
        // Member order is kept on output.
        let obj = Json::obj([("z", Json::Int(1)), ("a", Json::Null)]);
        assert_eq!(obj.to_line(), r#"{"z": 1, "a": null}"#);
    }

    #[test]
    fn malformed_documents() {
        for text in [
            "",
            "{",
            "[1,]",
            "{\"a\" 1}",
            "{\"a\":1,}",
            "01",
            "1.",
            "-",
            "tru",
            "\"abc",
            "\"a\u{1}b\"",
            "[1] [2]",
            "{1: 2}",
            "\"\\x\"",
            "\"\\u12\"",
            "nul",
        ] {
            assert!(parse(text).is_err(), "{text:?} must be refused");
        }
        let deep = "[".repeat(200) + &"]".repeat(200);
        assert!(parse(&deep).is_err());
    }
}
