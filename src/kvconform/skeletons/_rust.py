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
    template,
)

MAIN = template("rust-main.rs.in")

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
