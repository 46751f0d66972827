"""``fnv1a64-published.json``: the published FNV-1a 64 answers, read from the published
table (or from the committed file when the table is not reachable), each checked
against the reference hasher."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvconform.harness.vectors.files import PUBLISHED_FILE, Builder, make_file
from kvconform.harness.vectors.programs import Vector, _op_payload, op_bytes, op_finish


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
