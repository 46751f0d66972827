"""The Rust skeleton: a Cargo project, std only, built with ``cargo build --offline``.

Its JSON reader is the least the protocol's requests need: it checks a request line
is one JSON object and hands out each member as raw JSON text; the skeleton reads
``seq``, ``op`` and ``protocol`` from it and treats the rest as opaque.
"""

from __future__ import annotations

import json

from kvconform.skeletons._common import (
    Plan,
    classes_note,
    comment,
    describe,
    fill,
    format_note,
    header_lines,
)

MAIN = r"""@@HEADER@@

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::panic::{self, AssertUnwindSafe};

const NAME: &str = @@NAME@@;
const VERSION: &str = "0.1.0";
/// The protocol version this adapter speaks (spec/protocol.md).
const PROTOCOL: u64 = 1;
@@CLASSES_NOTE@@
const CLASSES: &[&str] = @@CLASSES@@;
@@FORMAT_NOTE@@
const FORMAT_WRITES: Option<u64> = @@FORMAT_WRITES@@;
const FORMAT_READS: &[u64] = &[@@FORMAT_READS@@];
/// The answers you declare where the specification admits more than one (CONF-6; the
/// values are in spec/README.md), as (option, value) pairs, such as
/// `("truncate_past_length", "refuse")`. An option left out takes its default.
const OPTIONS: &[(&str, &str)] = &[];
/// What your types hold where it narrows what the suite may send (CONF-7), as a JSON
/// object, such as `{"uint_bits":32}`: the table of hello in spec/protocol.md lists them.
const CAPABILITIES: &str = "{}";

/// The operations of the classes not claimed, with their class: answered unsupported.
const UNCLAIMED: &[(&str, &str)] = @@UNCLAIMED@@;

/// One answer, in one of the four forms of spec/protocol.md ("Requests and responses").
enum Answer {
    /// Success, with the operation's value as JSON text: `null`, `"42"` (64-bit
    /// integers travel as decimal strings), `true`, an object, ...
    Ok(String),
    /// A refusal the specification defines (PROTO-21): an error object as JSON text,
    /// see [`error`].
    Error(String),
    /// An operation of a class this adapter does not claim (PROTO-23).
    Unsupported(String),
    /// The adapter itself failed: a panic, an unknown handle, a bad request.
    Failure(String),
}

/// A refusal the specification defines (ERR-8 kinds; PROTO-21); `values` is a JSON
/// object as text, such as `{"capacity":8,"requested":9}`.
#[allow(dead_code)]
fn error(
    kind: &str,
    field: Option<&str>,
    layer: Option<u64>,
    values: &str,
    message: &str,
) -> Answer {
    Answer::Error(format!(
        "{{\"kind\":{},\"field\":{},\"layer\":{},\"values\":{},\"message\":{}}}",
        quote(kind),
        field.map_or("null".to_string(), quote),
        layer.map_or("null".to_string(), |n| n.to_string()),
        values,
        quote(message)
    ))
}

/// REPLACE every use: the answer of an operation not written yet.
fn not_implemented(op: &str) -> Answer {
    Answer::Failure(format!("not implemented: {op}"))
}

/// What the adapter keeps between requests.
#[derive(Default)]
struct State {
    /// The objects your implementation makes, by the handle name the harness chose
    /// (PROTO-15): bound by the operations with a `handle` field, released by `drop`
    /// and by `reset`. Answer a failure to a request naming a handle not in it.
    /// REPLACE `String` with your implementation's models, caches and sessions.
    handles: HashMap<String, String>,
}

impl State {
    /// The end of a program: release every handle as drop would (PROTO-16). Keep id
    /// counters and everything else: ids are never reset.
    fn reset(&mut self) {
        self.handles.clear();
    }
}

/// The operations of the claimed classes: REPLACE each arm with a call on your
/// implementation. `request.field("name")` is a field's raw JSON text; read it with
/// [`string_value`], [`integer_value`], [`members`] and [`elements`], or swap this
/// reader for a JSON library once you add dependencies. `None`: not an operation of
/// a claimed class.
#[allow(unused_variables)]
fn operation(state: &mut State, op: &str, request: &Request) -> Option<Answer> {
    Some(match op {
@@OPERATIONS@@
        _ => return None,
    })
}

/// Many hash programs in one request (PROTO-20).
#[allow(unused_variables)]
fn hash_batch(state: &mut State, request: &Request) -> Answer {
@@HASH_BATCH@@
}

/// The handshake (PROTO-10, PROTO-11): the description of this adapter.
fn hello(request: &Request) -> Answer {
    let wanted = request.field("protocol").unwrap_or("null");
    if integer_value(wanted) != Ok(PROTOCOL) {
        return Answer::Failure(format!(
            "protocol {wanted} is not supported: {NAME} speaks protocol {PROTOCOL}"
        ));
    }
    let classes: Vec<String> = CLASSES.iter().map(|c| quote(c)).collect();
    let reads: Vec<String> = FORMAT_READS.iter().map(|v| v.to_string()).collect();
    let options: Vec<String> = OPTIONS
        .iter()
        .map(|(name, value)| format!("{}:{}", quote(name), quote(value)))
        .collect();
    Answer::Ok(format!(
        "{{\"name\":{},\"version\":{},\"language\":\"rust\",\"protocol\":{PROTOCOL},\
         \"classes\":[{}],\"format\":{{\"writes\":{},\"reads\":[{}]}},\
         \"options\":{{{}}},\"capabilities\":{CAPABILITIES}}}",
        quote(NAME),
        quote(VERSION),
        classes.join(","),
        FORMAT_WRITES.map_or("null".to_string(), |v| v.to_string()),
        reads.join(","),
        options.join(",")
    ))
}

fn answer(state: &mut State, op: &str, request: &Request) -> Answer {
    match op {
        "hello" => hello(request),
        "reset" => {
            state.reset();
            Answer::Ok("null".to_string())
        }
        // main exits once the answer is written (PROTO-24).
        "shutdown" => Answer::Ok("null".to_string()),
        "hash_batch" => hash_batch(state, request),
        _ => {
            if let Some(answer) = operation(state, op, request) {
                answer
            } else if let Some((_, class)) = UNCLAIMED.iter().find(|(name, _)| *name == op) {
                Answer::Unsupported(format!(
                    "{op} needs the class {class}, which {NAME} does not claim"
                ))
            } else {
                Answer::Failure(format!("unknown operation {}", quote(op)))
            }
        }
    }
}

/// One request line to one response line, and whether it answered `shutdown`.
fn serve(state: &mut State, line: &[u8]) -> (String, bool) {
    let text = match std::str::from_utf8(line) {
        Ok(text) => text.trim_end_matches(['\n', '\r']),
        Err(e) => return failed(None, &format!("the request is not UTF-8: {e}")),
    };
    let request = match members(text) {
        Ok(members) => Request { members },
        Err(e) => return failed(None, &format!("the request is not JSON: {e}")),
    };
    let Some(seq) = request.field("seq").and_then(|raw| integer_value(raw).ok()) else {
        return failed(None, "the request has no 'seq' (a non-negative integer)");
    };
    let Some(op) = request.field("op").and_then(|raw| string_value(raw).ok()) else {
        return failed(Some(seq), "the request has no 'op' (a string)");
    };
    // One answer per request, always: a panic becomes a failure (PROTO-22).
    let answer = panic::catch_unwind(AssertUnwindSafe(|| answer(state, &op, &request)))
        .unwrap_or_else(|payload| {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            Answer::Failure(format!("{op} panicked: {what}"))
        });
    let done = op == "shutdown" && matches!(answer, Answer::Ok(_));
    (response(Some(seq), &answer), done)
}

/// A request answered with a failure.
fn failed(seq: Option<u64>, message: &str) -> (String, bool) {
    (response(seq, &Answer::Failure(message.to_string())), false)
}

fn response(seq: Option<u64>, answer: &Answer) -> String {
    let seq = seq.map_or("null".to_string(), |n| n.to_string());
    match answer {
        Answer::Ok(value) => format!("{{\"seq\":{seq},\"ok\":{value}}}"),
        Answer::Error(object) => format!("{{\"seq\":{seq},\"error\":{object}}}"),
        Answer::Unsupported(text) => format!("{{\"seq\":{seq},\"unsupported\":{}}}", quote(text)),
        Answer::Failure(text) => format!("{{\"seq\":{seq},\"failure\":{}}}", quote(text)),
    }
}

fn main() {
    let mut input = io::stdin().lock();
    // Nothing but responses goes to standard output (PROTO-1): log with eprintln!.
    let mut out = io::stdout().lock();
    let mut state = State::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        match input.read_until(b'\n', &mut line) {
            Ok(0) => return, // end of input: the harness is gone (PROTO-24)
            Ok(_) => {}
            Err(e) => {
                eprintln!("{NAME}: cannot read standard input: {e}");
                std::process::exit(1);
            }
        }
        let (text, done) = serve(&mut state, &line);
        // Never hold a response back (PROTO-4).
        if let Err(e) = writeln!(out, "{text}").and_then(|_| out.flush()) {
            eprintln!("{NAME}: cannot write standard output: {e}");
            std::process::exit(1);
        }
        if done {
            return;
        }
    }
}

// --- a minimal JSON reader and writer ---------------------------------------------

/// A request: its members, each as raw JSON text.
struct Request<'a> {
    members: Vec<(String, &'a str)>,
}

impl<'a> Request<'a> {
    /// The raw JSON text of the member `name`, if the request has it.
    fn field(&self, name: &str) -> Option<&'a str> {
        self.members
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, raw)| *raw)
    }
}

/// The members of a JSON object, each as (key, raw JSON text of its value). A key
/// holding an unpaired surrogate is an error, as in [`string_value`]: parameter and
/// hook names are keys, and a name with no UTF-8 form is refused (HASH-13), never
/// read as another name.
fn members(text: &str) -> Result<Vec<(String, &str)>, String> {
    let mut reader = Reader { text, at: 0 };
    reader.space();
    reader.expect(b'{')?;
    let mut found = Vec::new();
    reader.space();
    if !reader.eat(b'}') {
        loop {
            reader.space();
            let key = reader.string(true)?;
            reader.space();
            reader.expect(b':')?;
            reader.space();
            let start = reader.at;
            reader.value(0)?;
            found.push((key, &text[start..reader.at]));
            reader.space();
            if reader.eat(b'}') {
                break;
            }
            reader.expect(b',')?;
        }
    }
    reader.end()?;
    Ok(found)
}

/// The elements of a JSON array, each as raw JSON text.
#[allow(dead_code)]
fn elements(text: &str) -> Result<Vec<&str>, String> {
    let mut reader = Reader { text, at: 0 };
    reader.space();
    reader.expect(b'[')?;
    let mut found = Vec::new();
    reader.space();
    if !reader.eat(b']') {
        loop {
            reader.space();
            let start = reader.at;
            reader.value(0)?;
            found.push(&text[start..reader.at]);
            reader.space();
            if reader.eat(b']') {
                break;
            }
            reader.expect(b',')?;
        }
    }
    reader.end()?;
    Ok(found)
}

/// A JSON string's value; a string holding an unpaired surrogate (a HASH-13 probe:
/// it has no UTF-8 form) is an error, to be answered as a refusal.
fn string_value(raw: &str) -> Result<String, String> {
    let mut reader = Reader { text: raw, at: 0 };
    reader.space();
    let value = reader.string(true)?;
    reader.end()?;
    Ok(value)
}

/// A non-negative JSON integer (a count, `seq`); 64-bit ids travel as strings instead.
fn integer_value(raw: &str) -> Result<u64, String> {
    let digits = raw.trim_matches([' ', '\t', '\n', '\r']);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected a non-negative integer, got {digits}"));
    }
    digits.parse::<u64>().map_err(|e| format!("{digits}: {e}"))
}

/// `text` as a JSON string.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// How deeply arrays and objects may nest in a request.
const MAX_DEPTH: usize = 128;

struct Reader<'a> {
    text: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> bool {
        let found = self.peek() == Some(byte);
        if found {
            self.at += 1;
        }
        found
    }

    fn expect(&mut self, byte: u8) -> Result<(), String> {
        if self.eat(byte) {
            Ok(())
        } else {
            Err(self.unexpected(&format!("'{}'", byte as char)))
        }
    }

    fn unexpected(&self, wanted: &str) -> String {
        match self.peek() {
            Some(b) => format!(
                "expected {wanted} at byte {}, found {:?}",
                self.at, b as char
            ),
            None => format!("expected {wanted} at byte {}, found the end", self.at),
        }
    }

    fn space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn end(&mut self) -> Result<(), String> {
        self.space();
        if self.at == self.text.len() {
            Ok(())
        } else {
            Err(self.unexpected("the end"))
        }
    }

    fn value(&mut self, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("nested too deeply".to_string());
        }
        match self.peek() {
            Some(b'{') => self.sequence(b'}', true, depth),
            Some(b'[') => self.sequence(b']', false, depth),
            Some(b'"') => self.string(false).map(|_| ()),
            Some(b't') => self.word("true"),
            Some(b'f') => self.word("false"),
            Some(b'n') => self.word("null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => Err(self.unexpected("a value")),
        }
    }

    /// An object (`keyed`) or an array, skipped.
    fn sequence(&mut self, close: u8, keyed: bool, depth: usize) -> Result<(), String> {
        self.at += 1;
        self.space();
        if self.eat(close) {
            return Ok(());
        }
        loop {
            self.space();
            if keyed {
                self.string(false)?;
                self.space();
                self.expect(b':')?;
                self.space();
            }
            self.value(depth + 1)?;
            self.space();
            if self.eat(close) {
                return Ok(());
            }
            self.expect(b',')?;
        }
    }

    fn word(&mut self, word: &str) -> Result<(), String> {
        if self.text.as_bytes()[self.at..].starts_with(word.as_bytes()) {
            self.at += word.len();
            Ok(())
        } else {
            Err(self.unexpected(word))
        }
    }

    fn digits(&mut self) -> Result<(), String> {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        if self.at == start {
            Err(self.unexpected("a digit"))
        } else {
            Ok(())
        }
    }

    fn number(&mut self) -> Result<(), String> {
        self.eat(b'-');
        if !self.eat(b'0') {
            self.digits()?;
        }
        if self.eat(b'.') {
            self.digits()?;
        }
        if self.eat(b'e') || self.eat(b'E') {
            if !self.eat(b'+') {
                self.eat(b'-');
            }
            self.digits()?;
        }
        Ok(())
    }

    fn hex4(&mut self) -> Result<u32, String> {
        match self.text.get(self.at..self.at + 4) {
            Some(hex) if hex.bytes().all(|b| b.is_ascii_hexdigit()) => {
                self.at += 4;
                Ok(u32::from_str_radix(hex, 16).unwrap_or(0))
            }
            _ => Err(self.unexpected("4 hex digits")),
        }
    }

    /// A string's value. An unpaired surrogate is an error when `strict`, else it
    /// reads as U+FFFD (when the string is only skipped).
    fn string(&mut self, strict: bool) -> Result<String, String> {
        self.expect(b'"')?;
        let mut out = String::new();
        loop {
            let Some(c) = self.text[self.at..].chars().next() else {
                return Err(self.unexpected("the end of the string"));
            };
            self.at += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\\' => out.push(self.escape(strict)?),
                c if c < ' ' => return Err(format!("a control character at byte {}", self.at)),
                c => out.push(c),
            }
        }
    }

    /// The character of an escape, after its backslash.
    fn escape(&mut self, strict: bool) -> Result<char, String> {
        let Some(e) = self.peek() else {
            return Err(self.unexpected("an escape"));
        };
        self.at += 1;
        Ok(match e {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => return self.unicode_escape(strict),
            _ => return Err(format!("an invalid escape at byte {}", self.at - 1)),
        })
    }

    /// The character of a `\u` escape (two of them for a surrogate pair), after `\u`.
    fn unicode_escape(&mut self, strict: bool) -> Result<char, String> {
        let unit = self.hex4()?;
        let mut code = Some(unit);
        if (0xD800..0xDC00).contains(&unit) {
            code = None;
            if self.text[self.at..].starts_with("\\u") {
                let save = self.at;
                self.at += 2;
                let low = self.hex4()?;
                if (0xDC00..0xE000).contains(&low) {
                    code = Some(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00));
                } else {
                    self.at = save;
                }
            }
        }
        match code.and_then(char::from_u32) {
            Some(c) => Ok(c),
            None if strict => Err(format!(
                "the string holds an unpaired surrogate \\u{unit:04x}, which has no UTF-8 form"
            )),
            None => Ok('\u{fffd}'),
        }
    }
}
"""

CARGO = """\
@@HEADER@@

[package]
name = "@@NAME@@"
version = "0.1.0"
edition = "2021"
publish = false

# std only: the skeleton needs no dependency (add serde_json here when you want one).
[dependencies]

# A workspace of its own, so it builds wherever the folder is.
[workspace]
"""

GITIGNORE = """\
# Written by `kvconform new-adapter`: Cargo's build output, nothing to replace here.
# The adapter is src/main.rs; its protocol is spec/protocol.md in kvconform.
/target
"""

_BATCH_CLAIMED = """\
    // REPLACE once the "hash" arm works: run it on each element of
    // `elements(request.field("programs").unwrap_or("[]"))` and answer
    // Answer::Ok with one array of u64 strings per program, or the first failure.
    not_implemented("hash_batch")"""

_BATCH_UNCLAIMED = """\
    Answer::Unsupported(format!(
        "hash_batch needs the class hash, which {NAME} does not claim"
    ))"""

_REPLACE = (
    "each arm of `operation` in src/main.rs (each answers not_implemented(...) now) "
    "with a call on your implementation, answering in one of the four forms of "
    "`Answer`: Ok, Error, Unsupported, Failure;",
    "hash_batch, when you claim hash (run the hash arm on each program);",
    "NAME and VERSION, and the package name in Cargo.toml;",
    "CLASSES and FORMAT_WRITES/FORMAT_READS if you claim other classes (add an arm "
    "for each operation of a class you add, and take it out of UNCLAIMED).",
)


def _array(items: list[str]) -> str:
    """A slice literal as rustfmt lays it out: on one line when it fits in 60 columns."""
    line = "[" + ", ".join(items) + "]"
    if len(line) <= 60:
        return "&" + line
    return "&[\n" + "".join(f"    {item},\n" for item in items) + "]"


def _arm(op: str, doc: str) -> str:
    return f"{doc}\n        {json.dumps(op)} => not_implemented({json.dumps(op)}), // REPLACE"


def render(chosen: Plan) -> tuple[dict[str, str], str, str]:
    lines = header_lines(chosen, _REPLACE)
    main = fill(
        MAIN,
        HEADER="\n".join(f"//! {line}".rstrip() for line in lines),
        NAME=json.dumps(chosen.name),
        CLASSES_NOTE=comment(
            f"The conformance classes claimed (CONF-1): {classes_note(chosen)}.", "///"
        ),
        CLASSES=_array([json.dumps(c) for c in chosen.classes]),
        FORMAT_NOTE=comment(format_note(chosen), "///"),
        FORMAT_WRITES="None" if chosen.format_writes is None else f"Some({chosen.format_writes})",
        FORMAT_READS=", ".join(str(v) for v in chosen.format_reads),
        UNCLAIMED=_array(
            [f"({json.dumps(s.name)}, {json.dumps(s.needs)})" for s in chosen.unclaimed]
        ),
        OPERATIONS="\n".join(
            _arm(s.name, comment(describe(s), "        //", 96)) for s in chosen.claimed
        ),
        HASH_BATCH=_BATCH_CLAIMED if "hash" in chosen.classes else _BATCH_UNCLAIMED,
    )
    cargo = fill(
        CARGO,
        HEADER="\n".join(f"# {line}".rstrip() for line in lines),
        NAME=chosen.name,
    )
    files = {"Cargo.toml": cargo, ".gitignore": GITIGNORE, "src/main.rs": main}
    return files, "cargo build --offline", f"target/debug/{chosen.name}"
