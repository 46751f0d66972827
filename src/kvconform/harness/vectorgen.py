#!/usr/bin/env python3
"""Write the known-answer vector files in ``vectors/`` from the reference hasher.

Usage::

    python -m kvconform.harness.vectorgen            # (re)write the vector files
    python -m kvconform.harness.vectorgen --check    # exit 1, naming each drifted file,
                                          # if the committed files differ

Three files are produced (the format is documented in ``vectors/README.md``):

- ``fnv1a64-published.json``: the 124 published FNV-1a 64 answers from the FNV
  reference code. The expected values are copied from the published table, and
  generation fails unless the reference hasher reproduces every one of them.
- ``fnv1a64-fold.json``: raw byte folds (HASH-14): every single byte, multi-byte
  UTF-8 sequences, and inputs longer than 1 MiB.
- ``encoding.json``: programs of mix operations covering each op kind and its
  edge cases (HASH-1 .. HASH-9).

The published table is read from ``--tsv`` (default: the ``shared/`` folder
beside the checkout). When that file is not reachable, the published rows are
read back from the committed ``fnv1a64-published.json`` instead, so ``--check``
still verifies the reference against the published answers and the file's
canonical form.
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import kvconform

REPO_ROOT = kvconform.data_root()
VECTORS_DIR = REPO_ROOT / "vectors"
FORMAT = "kvconform-vectors/1"
TSV_NAME = "fnv1a64-published-vectors.tsv"
DEFAULT_TSV = REPO_ROOT.parent / "shared" / "reference-data" / TSV_NAME

PUBLISHED_FILE = "fnv1a64-published.json"
FOLD_FILE = "fnv1a64-fold.json"
ENCODING_FILE = "encoding.json"

U64_MAX = (1 << 64) - 1
MIB = 1 << 20

Op = dict[str, Any]
Vector = dict[str, Any]


class Hasher(Protocol):
    """The part of the reference ``KeyHasher`` the generator drives."""

    def mix_bytes(self, data: bytes) -> Any: ...
    def mix_str(self, text: str) -> Any: ...
    def mix_u64(self, value: int) -> Any: ...
    def mix_f64_bits(self, bits: int) -> Any: ...
    def mix_present(self, present: bool) -> Any: ...
    def mix_instance(self, instance_id: int) -> Any: ...
    def finish(self) -> int: ...


def _load_hasher() -> Callable[[], Hasher]:
    """The reference ``KeyHasher``."""
    from kvconform_reference.hasher import KeyHasher

    factory: Callable[[], Hasher] = KeyHasher
    return factory


# --------------------------------------------------------------------------
# Op constructors and the program runner
# --------------------------------------------------------------------------


def op_bytes(data: bytes, repeat: int = 1) -> Op:
    op: Op = {"op": "bytes", "hex": data.hex()}
    if repeat != 1:
        op["repeat"] = repeat
    return op


def op_str(value: str) -> Op:
    return {"op": "str", "value": value}


def op_u64(value: int) -> Op:
    if not 0 <= value <= U64_MAX:
        raise ValueError(f"u64 out of range: {value}")
    return {"op": "u64", "value": str(value)}


def op_f64(bits: int) -> Op:
    if not 0 <= bits <= U64_MAX:
        raise ValueError(f"f64 bit pattern out of range: {bits:#x}")
    return {"op": "f64", "bits": f"0x{bits:016x}"}


def op_present(value: bool) -> Op:
    return {"op": "present", "value": value}


def op_instance(value: int) -> Op:
    if not 0 <= value <= U64_MAX:
        raise ValueError(f"instance id out of range: {value}")
    return {"op": "instance", "value": str(value)}


def op_finish() -> Op:
    return {"op": "finish"}


def f64_bits(value: float) -> int:
    bits: int = struct.unpack("<Q", struct.pack("<d", value))[0]
    return bits


def hex64(value: int) -> str:
    return f"0x{value:016x}"


def _parse_u64(text: Any) -> int:
    if not isinstance(text, str) or not text.isdigit() or not text.isascii():
        raise ValueError(f"u64 must be a decimal digit string, got {text!r}")
    value = int(text)
    if value > U64_MAX:
        raise ValueError(f"u64 out of range: {text}")
    return value


def _op_payload(op: Op) -> bytes:
    """The raw bytes of a ``bytes`` op, with its repeat applied."""
    hex_text = op["hex"]
    if not isinstance(hex_text, str) or hex_text != hex_text.lower():
        raise ValueError(f"bytes.hex must be lowercase hex: {hex_text!r}")
    repeat = op.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise ValueError(f"bytes.repeat must be an integer >= 1: {repeat!r}")
    return bytes.fromhex(hex_text) * repeat


def run_program(new_hasher: Callable[[], Hasher], ops: Sequence[Op]) -> list[str]:
    """Run a hash program with the reference hasher; the values its finish ops read."""
    if not ops or ops[-1] != op_finish():
        raise ValueError("a program must end with a finish op")
    hasher = new_hasher()
    out: list[str] = []
    for op in ops:
        kind = op["op"]
        if kind == "bytes":
            hasher.mix_bytes(_op_payload(op))
        elif kind == "str":
            hasher.mix_str(op["value"])
        elif kind == "u64":
            hasher.mix_u64(_parse_u64(op["value"]))
        elif kind == "f64":
            bits = op["bits"]
            if not re.fullmatch(r"0x[0-9a-f]{16}", bits):
                raise ValueError(f"f64.bits must be 0x + 16 lowercase hex digits: {bits!r}")
            hasher.mix_f64_bits(int(bits, 16))
        elif kind == "present":
            if not isinstance(op["value"], bool):
                raise ValueError(f"present.value must be a boolean: {op['value']!r}")
            hasher.mix_present(op["value"])
        elif kind == "instance":
            hasher.mix_instance(_parse_u64(op["value"]))
        elif kind == "finish":
            out.append(hex64(hasher.finish()))
        else:
            raise ValueError(f"unknown op {kind!r}")
    return out


# --------------------------------------------------------------------------
# Requirement derivation
# --------------------------------------------------------------------------

_OP_REQUIRES: dict[str, tuple[str, ...]] = {
    "bytes": ("HASH-14",),
    "str": ("HASH-5", "HASH-4"),
    "u64": ("HASH-4",),
    "f64": ("HASH-6", "HASH-4"),
    "present": ("HASH-7", "HASH-5", "HASH-4"),
    "instance": ("HASH-8", "HASH-5", "HASH-4"),
    "finish": (),
}


def _sort_requirements(ids: Iterable[str]) -> list[str]:
    return sorted(set(ids), key=lambda rid: (rid.split("-")[0], int(rid.split("-")[1])))


def derive_requires(ops: Sequence[Op], extra: Iterable[str] = ()) -> list[str]:
    """The HASH requirements a program exercises.

    Every program starts from the offset basis (HASH-1) and pins a byte-exact
    value (HASH-11). Any mixed byte brings in the fold step and its wrapping
    (HASH-2, HASH-3). A finish op that is not the program's only one exercises
    HASH-9. A u64 of 2^63 or more exercises the unsigned range (HASH-12); a
    non-ASCII string, strings as Unicode scalar values (HASH-13).
    """
    req: set[str] = {"HASH-1", "HASH-11", *extra}
    mixes_bytes = False
    for op in ops:
        req.update(_OP_REQUIRES[op["op"]])
        if op["op"] in ("u64", "instance") and _parse_u64(op["value"]) >= 1 << 63:
            req.add("HASH-12")  # the top half of the range mixes as unsigned
        if op["op"] == "str" and not op["value"].isascii():
            req.add("HASH-13")  # every Unicode scalar value, astral ones included
        if op["op"] == "bytes":
            mixes_bytes = mixes_bytes or bool(_op_payload(op))
        elif op["op"] != "finish":
            mixes_bytes = True
    if mixes_bytes:
        req.update(("HASH-2", "HASH-3"))
    if sum(1 for op in ops if op["op"] == "finish") > 1:
        req.add("HASH-9")
    return _sort_requirements(req)


@dataclass
class Builder:
    """Builds vectors, computing expected values with the reference hasher."""

    new_hasher: Callable[[], Hasher]

    def vector(
        self,
        vid: str,
        ops: Sequence[Op],
        catches: str,
        note: str | None = None,
        expect: Sequence[str] | None = None,
        extra_requires: Iterable[str] = (),
        **extra: Any,
    ) -> Vector:
        computed = run_program(self.new_hasher, ops)
        if expect is not None and list(expect) != computed:
            raise AssertionError(
                f"{vid}: the reference hasher gives {computed}, the published answer is "
                f"{list(expect)}"
            )
        vec: Vector = {
            "id": vid,
            "ops": list(ops),
            "expect": list(expect) if expect is not None else computed,
            "requires": derive_requires(ops, extra_requires),
            "catches": catches,
        }
        if note is not None:
            vec["note"] = note
        vec.update(extra)
        return vec


def make_file(name: str, description: str, source: str, vectors: list[Vector]) -> dict[str, Any]:
    ids = [v["id"] for v in vectors]
    if len(set(ids)) != len(ids):
        raise AssertionError(f"{name}: duplicate vector ids")
    requires = _sort_requirements(r for v in vectors for r in v["requires"])
    return {
        "format": FORMAT,
        "file": name,
        "description": description,
        "source": source,
        "requires": requires,
        "vectors": vectors,
    }


# --------------------------------------------------------------------------
# fnv1a64-published.json
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class PublishedRow:
    data: bytes
    result: str
    source_form: str


_C_ESCAPES = {"n": b"\n", "t": b"\t", "r": b"\r", "0": b"\0", "\\": b"\\", '"': b'"'}


def _c_string(body: str) -> bytes:
    """Decode the body of a C string literal as the published table writes it."""
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out += ch.encode("ascii")
            i += 1
        elif body[i + 1] == "x":
            out.append(int(body[i + 2 : i + 4], 16))
            i += 4
        else:
            out += _C_ESCAPES[body[i + 1]]
            i += 2
    return bytes(out)


_REPEAT_FORM = re.compile(r'R(\d+)\("(.*)"\)')
_PLAIN_FORM = re.compile(r'"(.*)"(\+NUL)?')


def parse_source_form(form: str) -> tuple[bytes, int]:
    """``(unit, repeat)`` such that ``unit * repeat`` is the input the form names."""
    m = _REPEAT_FORM.fullmatch(form)
    if m:
        return _c_string(m.group(2)), int(m.group(1))
    m = _PLAIN_FORM.fullmatch(form)
    if m:
        return _c_string(m.group(1)) + (b"\0" if m.group(2) else b""), 1
    raise ValueError(f"unrecognized source form {form!r}")


def read_tsv(path: Path) -> list[PublishedRow]:
    rows: list[PublishedRow] = []
    for line in path.read_text(encoding="ascii").splitlines():
        if not line or line.startswith("#"):
            continue
        hex_in, result, form = line.split("\t")
        rows.append(PublishedRow(bytes.fromhex(hex_in), result, form))
    return rows


def read_committed_published(path: Path) -> list[PublishedRow]:
    """The published rows as the committed vector file records them."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    rows: list[PublishedRow] = []
    for vec in doc["vectors"]:
        data = b"".join(_op_payload(op) for op in vec["ops"] if op["op"] == "bytes")
        rows.append(PublishedRow(data, vec["expect"][0], vec["source_form"]))
    return rows


def _published_catches(row: PublishedRow, repeat: int) -> str:
    data = row.data
    if not data:
        return (
            "a wrong offset basis (0 as in FNV-0, the 32-bit basis 0x811c9dc5, or a "
            "byte-swapped constant)"
        )
    parts: list[str] = []
    if any(data):
        # xor with 0x00 changes nothing, so on all-zero input FNV-1 and FNV-1a agree.
        parts.append("FNV-1 order (multiply before xor)")
    else:
        parts.append("a wrong prime")
    if len(data) > 1:
        parts.append("multiplication not wrapped modulo 2^64 (or done in 32 bits)")
    if any(b >= 0x80 for b in data):
        parts.append("bytes read as signed char (sign-extended before the xor)")
    if row.source_form.endswith("+NUL"):
        parts.append("the input treated as a C string (its trailing 0x00 byte dropped)")
    elif b"\0" in data:
        parts.append("a NUL byte skipped or treated as the end of the input")
    if repeat > 1:
        parts.append(f"state lost or reset across a long input ({len(data)} bytes)")
    return "; ".join(parts)


def build_published(b: Builder, rows: list[PublishedRow]) -> dict[str, Any]:
    if len(rows) != 124:
        raise AssertionError(f"expected 124 published vectors, found {len(rows)}")
    vectors: list[Vector] = []
    for n, row in enumerate(rows, start=1):
        unit, repeat = parse_source_form(row.source_form)
        if unit * repeat != row.data:
            raise AssertionError(
                f"published row {n}: source form {row.source_form} does not match its hex"
            )
        ops = [op_bytes(unit, repeat) if repeat > 1 else op_bytes(row.data), op_finish()]
        note = None
        if not row.data:
            note = (
                "The offset basis itself. FNV-1 and FNV-1a agree on the empty input, so "
                "this vector alone cannot tell the two orders apart."
            )
        elif not any(row.data):
            note = (
                "All bytes are 0x00, on which FNV-1 and FNV-1a agree (xor with zero changes "
                "nothing): this vector cannot tell the two orders apart."
            )
        vectors.append(
            b.vector(
                f"fnv1a64.published.{n:03d}",
                ops,
                _published_catches(row, repeat),
                note=note,
                expect=[row.result],
                source_form=row.source_form,
            )
        )
    return make_file(
        PUBLISHED_FILE,
        "The published FNV-1a 64 known-answer vectors: raw byte folds from the offset "
        "basis with no delimiter (HASH-14). Expected values are the published answers, "
        "not values computed here; the generator checks the reference reproduces them.",
        "Landon Curt Noll's FNV reference code, test_fnv.c, table fnv1a_64_vector "
        "(via shared/reference-data/fnv1a64-published-vectors.tsv)",
        vectors,
    )


# --------------------------------------------------------------------------
# fnv1a64-fold.json
# --------------------------------------------------------------------------


def build_fold(b: Builder) -> dict[str, Any]:
    vectors: list[Vector] = []
    for byte in range(256):
        note: str | None = None
        if byte == 0:
            catches = "a NUL byte skipped (C-string handling); a wrong prime"
            note = (
                "xor with 0x00 changes nothing, so FNV-1 and FNV-1a agree on this input; "
                "it cannot tell the two orders apart."
            )
        elif byte >= 0x80:
            catches = (
                "bytes read as signed char (0x80..0xff sign-extended before the xor); "
                "FNV-1 order (multiply before xor)"
            )
        else:
            catches = "FNV-1 order (multiply before xor)"
        vectors.append(
            b.vector(
                f"fnv1a64.fold.byte.{byte:02x}",
                [op_bytes(bytes([byte])), op_finish()],
                catches,
                note=note,
            )
        )

    utf8_cases: list[tuple[str, str, str]] = [
        ("e-acute", "é", "U+00E9, a 2-byte sequence"),
        ("euro", "€", "U+20AC, a 3-byte sequence"),
        ("g-clef", "𝄞", "U+1D11E, a 4-byte sequence (a surrogate pair in UTF-16)"),
        ("cjk", "日本語", "three 3-byte sequences"),
        ("mixed", "aé€𝄞z", "1-, 2-, 3- and 4-byte sequences together"),
    ]
    for name, text, what in utf8_cases:
        vectors.append(
            b.vector(
                f"fnv1a64.fold.utf8.{name}",
                [op_bytes(text.encode("utf-8")), op_finish()],
                "folding code points, UTF-16 units or Latin-1 instead of UTF-8 bytes; "
                "bytes read as signed char",
                note=f"The UTF-8 bytes of {text!r} ({what}), folded raw with no length.",
            )
        )

    vectors.append(
        b.vector(
            "fnv1a64.fold.repeat.ab-x3",
            [op_bytes(b"ab", 3), op_finish()],
            "an adapter applying 'repeat' to the hash instead of to the bytes, or ignoring it",
            note='Equals the raw fold of "ababab".',
        )
    )
    long_cases: list[tuple[str, bytes, int, str]] = [
        ("a-1mib", b"a", MIB, "byte 0x61 repeated 1048576 times (exactly 1 MiB)"),
        ("zero-1mib", b"\0", MIB, "byte 0x00 repeated 1048576 times (exactly 1 MiB)"),
        (
            "utf8-pattern",
            "€𝄞".encode(),
            MIB // 7 + 1,
            f"the 7 UTF-8 bytes of '€𝄞' repeated {MIB // 7 + 1} times "
            f"({7 * (MIB // 7 + 1)} bytes, just over 1 MiB)",
        ),
        (
            "byte-ramp",
            bytes(range(256)),
            MIB // 256 + 1,
            f"bytes 0x00..0xff repeated {MIB // 256 + 1} times ({256 * (MIB // 256 + 1)} bytes)",
        ),
    ]
    for name, unit, repeat, what in long_cases:
        parts = ["state truncated, reset or chunked incorrectly over a long input"]
        if any(unit):
            parts.append("FNV-1 order (multiply before xor)")
        if any(byte >= 0x80 for byte in unit):
            parts.append("bytes read as signed char")
        if 0 in unit:
            parts.append("NUL bytes skipped or treated as the end of the input")
        vectors.append(
            b.vector(
                f"fnv1a64.fold.long.{name}",
                [op_bytes(unit, repeat), op_finish()],
                "; ".join(parts),
                note=f"Raw fold of {what}.",
            )
        )
    return make_file(
        FOLD_FILE,
        "Raw FNV-1a 64 byte folds (HASH-14) computed with the reference hasher: every "
        "single byte, multi-byte UTF-8 sequences as raw bytes, and inputs over 1 MiB.",
        "generated by vectors/generate.py with reference/hasher.py",
        vectors,
    )


# --------------------------------------------------------------------------
# encoding.json
# --------------------------------------------------------------------------


def _str_note(text: str) -> str:
    encoded = text.encode("utf-8")
    utf16 = len(text.encode("utf-16-le")) // 2

    def count(n: int, unit: str) -> str:
        return f"{n} {unit}" if n == 1 else f"{n} {unit}s"

    return (
        f"{text!r}: {count(len(encoded), 'UTF-8 byte')}, {count(len(text), 'code point')}, "
        f"{count(utf16, 'UTF-16 unit')}; the length mixed is {len(encoded)}."
    )


def build_encoding(b: Builder) -> dict[str, Any]:
    F = op_finish
    v: list[Vector] = []

    # ---- finish on an empty program, and raw bytes ops ----
    v.append(
        b.vector(
            "encoding.finish.empty",
            [F()],
            "a wrong offset basis; finish applying a finalizer",
            note="Nothing mixed: the value is the offset basis.",
        )
    )
    v.append(
        b.vector(
            "encoding.bytes.empty",
            [op_bytes(b""), F()],
            "an empty bytes op mixing a length or a marker",
            note="An empty raw fold changes nothing: the offset basis.",
        )
    )
    v.append(
        b.vector(
            "encoding.bytes.then-str",
            [op_bytes(b"ab"), op_str("c"), F()],
            "a raw bytes op given a length delimiter like a string",
            note='Raw "ab" with no length, then the string "c" with its length.',
        )
    )

    # ---- strings (HASH-5) ----
    v.append(
        b.vector(
            "encoding.str.ab-then-c",
            [op_str("ab"), op_str("c"), F()],
            "strings concatenated without a length delimiter; big-endian length; "
            "length mixed before the bytes",
            note="Differs from encoding.str.a-then-bc: the length delimiter separates them.",
        )
    )
    v.append(
        b.vector(
            "encoding.str.a-then-bc",
            [op_str("a"), op_str("bc"), F()],
            "strings concatenated without a length delimiter; big-endian length; "
            "length mixed before the bytes",
            note="Differs from encoding.str.ab-then-c: the length delimiter separates them.",
        )
    )
    v.append(
        b.vector(
            "encoding.str.empty",
            [op_str(""), F()],
            "the empty string mixing nothing (its zero length must still be mixed)",
            note=(
                "Eight zero bytes: the u64 length 0. With no type tag this equals "
                "encoding.u64.zero and encoding.f64.pos-zero."
            ),
        )
    )
    v.append(
        b.vector(
            "encoding.str.empty-twice",
            [op_str(""), op_str(""), F()],
            "the empty string mixing nothing; a 32-bit length (4 bytes instead of 8)",
            note="Sixteen zero bytes.",
        )
    )
    v.append(
        b.vector(
            "encoding.str.ascii",
            [op_str("qwen3"), F()],
            "length mixed before the bytes; big-endian length; a 32-bit length; "
            "a NUL terminator appended; FNV-1 order",
            note=_str_note("qwen3"),
        )
    )
    for name, text, catches in [
        ("e-acute", "é", "length counted in characters (code points) instead of UTF-8 bytes"),
        ("euro", "€", "length counted in characters or UTF-16 units instead of UTF-8 bytes"),
        (
            "g-clef",
            "𝄞",
            "length counted in UTF-16 units (2) or code points (1) instead of UTF-8 bytes (4)",
        ),
        (
            "mixed",
            "aé€𝄞",
            "length counted in code points (4) or UTF-16 units (5) instead of UTF-8 bytes "
            "(10); the string encoded as UTF-16 or Latin-1",
        ),
    ]:
        v.append(
            b.vector(f"encoding.str.{name}", [op_str(text), F()], catches, note=_str_note(text))
        )
    v.append(
        b.vector(
            "encoding.str.embedded-nul",
            [op_str("a\0b"), F()],
            "strings handled as NUL-terminated (stopping at the embedded U+0000)",
            note=_str_note("a\0b"),
        )
    )
    v.append(
        b.vector(
            "encoding.str.long-300",
            [op_str("x" * 300), F()],
            "the length mixed as a single byte or as a varint instead of 8 bytes",
            note="300 bytes: the length 300 = 0x012c needs two non-zero bytes.",
        )
    )

    # ---- u64 (HASH-4) ----
    u64_cases: list[tuple[str, int, str]] = [
        ("zero", 0, "zero mixed as nothing or as a single byte (trimming, varint)"),
        ("one", 1, "big-endian integers; varint or trimmed encoding"),
        ("255", 255, "varint encoding (255 needs two varint bytes); big-endian integers"),
        ("256", 256, "trimmed or varint encoding; big-endian integers"),
        ("2p32", 1 << 32, "integers truncated to 32 bits; big-endian integers"),
        ("2p63", 1 << 63, "signed 64-bit handling of the top bit; big-endian integers"),
        ("max", U64_MAX, "signed or 63-bit handling; a varint encoding (10 bytes)"),
        (
            "byte-order",
            0x0102030405060708,
            "big-endian integers; byte-swapped halves (mixed-endian)",
        ),
    ]
    for name, value, catches in u64_cases:
        v.append(
            b.vector(
                f"encoding.u64.{name}",
                [op_u64(value), F()],
                catches,
                note=f"u64 {value} = 0x{value:016x}.",
            )
        )

    # ---- f64 (HASH-6) ----
    f64_cases: list[tuple[str, int, str, str]] = [
        (
            "pos-zero",
            0x0000000000000000,
            "+0.0 (differs from encoding.f64.neg-zero)",
            "zero trimmed or mixed as nothing; with encoding.f64.neg-zero, any sign "
            "normalization of zero",
        ),
        (
            "neg-zero",
            0x8000000000000000,
            "-0.0 (differs from encoding.f64.pos-zero)",
            "-0.0 normalized to +0.0 (e.g. by hashing a value compared with ==)",
        ),
        ("one", f64_bits(1.0), "1.0", "floats mixed as decimal text or converted to an integer"),
        ("neg-one", f64_bits(-1.0), "-1.0", "the sign bit dropped; floats mixed as text"),
        ("nan-quiet", 0x7FF8000000000000, "the canonical quiet NaN", "floats mixed as text"),
        (
            "nan-negative",
            0xFFF8000000000000,
            "a quiet NaN with the sign bit set",
            "NaN canonicalized (sign bit cleared)",
        ),
        (
            "nan-payload",
            0x7FF8000000000001,
            "a quiet NaN with payload 1",
            "NaN canonicalized (payload discarded)",
        ),
        (
            "nan-signalling",
            0x7FF0000000000001,
            "a signalling NaN",
            "NaN canonicalized or quieted (signalling bit set) on the way to the bits",
        ),
        ("pos-inf", 0x7FF0000000000000, "+inf", "infinity mixed as text or clamped"),
        ("neg-inf", 0xFFF0000000000000, "-inf", "infinity mixed as text or clamped"),
        (
            "min-subnormal",
            0x0000000000000001,
            "the smallest subnormal 4.9e-324",
            "subnormals flushed to zero",
        ),
        (
            "max-subnormal",
            0x000FFFFFFFFFFFFF,
            "the largest subnormal",
            "subnormals flushed to zero",
        ),
        (
            "min-normal",
            0x0010000000000000,
            "the smallest normal 2.2250738585072014e-308",
            "floats narrowed to binary32 (underflows to 0)",
        ),
        (
            "max-finite",
            0x7FEFFFFFFFFFFFFF,
            "the largest finite 1.7976931348623157e308",
            "floats narrowed to binary32 (overflows to inf)",
        ),
        (
            "1e-5",
            f64_bits(1e-5),
            "1e-5 (an rms_norm_eps value)",
            "floats narrowed to binary32 or mixed as decimal text",
        ),
        (
            "1e-6",
            f64_bits(1e-6),
            "1e-6 (an rms_norm_eps value)",
            "floats narrowed to binary32 or mixed as decimal text; big-endian bits",
        ),
    ]
    for name, bits, what, catches in f64_cases:
        v.append(
            b.vector(
                f"encoding.f64.{name}",
                [op_f64(bits), F()],
                catches,
                note=f"{what}, bit pattern 0x{bits:016x}, mixed as that u64.",
            )
        )

    # ---- no type tag: u64 and f64 with the same bits ----
    one_bits = f64_bits(1.0)
    v.append(
        b.vector(
            "encoding.untagged.u64-with-f64-bits",
            [op_u64(one_bits), F()],
            "a type tag mixed before each value",
            note=(
                f"u64 {one_bits} has the bit pattern of 1.0. It encodes identically to "
                "encoding.untagged.f64-one (same expected value): the encoding has no type tag."
            ),
        )
    )
    v.append(
        b.vector(
            "encoding.untagged.f64-one",
            [op_f64(one_bits), F()],
            "a type tag mixed before each value",
            note=(
                "f64 1.0 encodes identically to encoding.untagged.u64-with-f64-bits (same "
                "expected value): the encoding has no type tag."
            ),
        )
    )

    # ---- presence (HASH-7) ----
    v.append(
        b.vector(
            "encoding.present.true",
            [op_present(True), F()],
            'presence mixed as a byte 1 or as a bool instead of the string "some"',
            note='Mixes the string "some" (4 bytes, then length 4).',
        )
    )
    v.append(
        b.vector(
            "encoding.present.false",
            [op_present(False), F()],
            'absent mixed as nothing, or as a byte 0, instead of the string "none"',
            note='Mixes the string "none"; never the offset basis.',
        )
    )
    v.append(
        b.vector(
            "encoding.present.false-then-str",
            [op_present(False), op_str("x"), F()],
            "absent mixed as nothing (this would equal the program str 'x' alone)",
        )
    )

    # ---- instance ids (HASH-8) ----
    for name, value in [("1", 1), ("2", 2), ("max", U64_MAX)]:
        v.append(
            b.vector(
                f"encoding.instance.{name}",
                [op_instance(value), F()],
                'the instance id mixed without its "instance" marker, or the marker '
                "without its length; a 32-bit id",
                note=f'The string "instance", then u64 {value}.',
            )
        )

    # ---- finish (HASH-9) ----
    v.append(
        b.vector(
            "encoding.finish.mid-sequence",
            [op_str("qwen3"), F(), op_u64(32), F()],
            "finish resetting the state, or finalizing it so later mixing starts elsewhere",
            note=(
                "The first value equals the program str 'qwen3' alone; the second equals "
                "str 'qwen3', u64 32 with no finish between them."
            ),
        )
    )
    v.append(
        b.vector(
            "encoding.finish.mid-sequence-reference",
            [op_str("qwen3"), op_u64(32), F()],
            "length mixed before the bytes; big-endian integers (this is also the value "
            "the second finish of encoding.finish.mid-sequence must read)",
        )
    )
    v.append(
        b.vector(
            "encoding.finish.twice",
            [op_str("a"), F(), F()],
            "finish mutating the state (a second read giving a different value)",
            note="Two finishes in a row read the same value.",
        )
    )

    # ---- realistic keys ----
    def model_key(family: str, alloc_id: int) -> list[Op]:
        return [
            op_str(family),
            op_u64(32),
            op_f64(f64_bits(1e-6)),
            op_present(False),
            op_instance(7),
            op_u64(alloc_id),
            F(),
        ]

    v.append(
        b.vector(
            "encoding.model-key.qwen3",
            model_key("qwen3", 3),
            "big-endian integers; length mixed before the bytes; absent mixed as nothing; "
            'the instance id mixed without its "instance" marker; floats narrowed to binary32',
            note=(
                "family 'qwen3', 32 layers, rms_norm_eps 1e-6, an absent optional hook, "
                "model instance 7, KV allocation id 3."
            ),
        )
    )
    v.append(
        b.vector(
            "encoding.model-key.llama",
            model_key("llama", 3),
            "the model family left out of the key",
            note="As encoding.model-key.qwen3 with family 'llama': the values differ.",
        )
    )
    v.append(
        b.vector(
            "encoding.model-key.qwen3-new-alloc",
            model_key("qwen3", 4),
            "the KV allocation id left out of the key",
            note="As encoding.model-key.qwen3 with KV allocation id 4: the values differ.",
        )
    )
    v.append(
        b.vector(
            "encoding.model-key.hook-present",
            [
                op_str("qwen3"),
                op_u64(32),
                op_f64(f64_bits(1e-6)),
                op_present(True),
                op_str("sliding_window"),
                op_u64(4096),
                op_instance(7),
                F(),
                op_u64(3),
                F(),
            ],
            "presence mixed as nothing; finish resetting the state",
            note=(
                "A present hook followed by its parameters; the first finish reads the "
                "model part, the second includes KV allocation id 3."
            ),
        )
    )

    return make_file(
        ENCODING_FILE,
        "Programs of mix operations covering every op kind of the canonical key "
        "encoding and its edge cases (HASH-1 .. HASH-9), computed with the reference "
        "hasher.",
        "generated by vectors/generate.py with reference/hasher.py",
        v,
    )


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------


def render(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def build_all(tsv: Path | None, vectors_dir: Path = VECTORS_DIR) -> dict[str, str]:
    """Every vector file's name and its exact text."""
    b = Builder(_load_hasher())
    if tsv is not None and tsv.is_file():
        rows = read_tsv(tsv)
    else:
        committed = vectors_dir / PUBLISHED_FILE
        if not committed.is_file():
            raise SystemExit(
                f"vectorgen: the published table {tsv} is not reachable and "
                f"{committed.name} does not exist; pass --tsv"
            )
        print(
            f"vectorgen: {tsv} not reachable; reading the published rows from {committed.name}",
            file=sys.stderr,
        )
        rows = read_committed_published(committed)
    docs = [build_published(b, rows), build_fold(b), build_encoding(b)]
    all_ids = [v["id"] for d in docs for v in d["vectors"]]
    if len(set(all_ids)) != len(all_ids):
        raise AssertionError("vector ids are not unique across files")
    return {d["file"]: render(d) for d in docs}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 naming each file that differs from what would be written",
    )
    parser.add_argument(
        "--tsv",
        type=Path,
        default=DEFAULT_TSV,
        help=f"the published FNV-1a 64 table (default: {DEFAULT_TSV})",
    )
    parser.add_argument(
        "--vectors",
        type=Path,
        default=VECTORS_DIR,
        help=f"the vectors folder to write or check (default: {VECTORS_DIR})",
    )
    args = parser.parse_args(argv)
    files = build_all(args.tsv, args.vectors)
    drifted: list[str] = []
    for name, text in files.items():
        path = args.vectors / name
        current = path.read_text(encoding="utf-8") if path.is_file() else None
        if current == text:
            continue
        if args.check:
            drifted.append(name)
            state = "missing" if current is None else "differs from the generator's output"
            print(f"drifted: vectors/{name} ({state})", file=sys.stderr)
        else:
            path.write_text(text, encoding="utf-8", newline="\n")
            print(f"wrote vectors/{name}")
    if drifted:
        print("run: python -m kvconform.harness.vectorgen", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
