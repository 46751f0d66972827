"""Every value the suite shows a person, rendered the same way in every report.

Language-neutral on purpose: an engineer of a Rust, C++ or JavaScript engine reads
JSON, not Python. Objects are JSON objects with the field names of the protocol
(spec/protocol.md), strings are JSON strings, ``None`` is ``null``, integers
(counts, ids, versions) are decimal, byte strings are ``0x`` and their hex digits,
and hash values (a list of u64 results) are 16-digit hexadecimal, as FNV-1a vectors
are conventionally written. Nothing here is ever parsed back (ERR-7).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Mapping
from functools import cache


def render(value: object) -> str:
    """``value`` as a person reads it in a report: JSON style, one line."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)  # nan, inf: JSON has no spelling for them
        return json.dumps(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(render(v) for v in value) + "]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: getattr(value, f.name)
            for f in dataclasses.fields(value)
            if not (f.name == "layout" and getattr(value, f.name) is None)  # a v1 signature
        }
        return render(fields)
    return json.dumps(str(value), ensure_ascii=False)


def clip(text: str, limit: int = 200) -> str:
    """``text``, cut to ``limit`` characters with a note of its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def clip_middle(text: str, limit: int = 2000) -> str:
    """``text`` cut in its middle to about ``limit`` characters, with a note of its length:
    its start and its end are kept, so an error that quotes a long path or value before
    saying what is wrong with it still says it."""
    if len(text) <= limit:
        return text
    tail = limit // 4
    return f"{text[: limit - tail]}... ({len(text)} characters) ...{text[-tail:]}"


def render_hashes(values: tuple[int, ...]) -> str:
    """A list of u64 hash results: 16 hexadecimal digits each."""
    return "[" + ", ".join(f"0x{v:016x}" for v in values) + "]"


# Untrusted text (spec/security.md): inert in a terminal and on one line ------------

#: Tab and newline, the two control characters :func:`visible` keeps.
_KEPT = {ord("\t"): None, ord("\n"): None}


@cache
def _unshowable() -> re.Pattern[str]:
    """What :func:`visible` escapes (compiled when first needed: most text has none of it)."""
    return re.compile(
        r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
        # directional marks, embeddings, overrides and isolates, which can make the
        # harness's own words that follow read reversed (CVE-2021-42574), and the
        # Unicode line and paragraph separators, which break a line in some viewers
        r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
        # noncharacters, which a terminal shows as nothing or as a box (a trial's
        # counterexample printed U+10FFFF raw, invisible)
        r"\ufdd0-\ufdef"
        + "".join(f"\\U{plane:04x}fffe\\U{plane:04x}ffff" for plane in range(1, 17))
        + "]"
    )


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:
        return f"\\U{code:08x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character and lone surrogate written as an escape."""
    if text.isascii() and text.translate(_KEPT).isprintable():
        return text  # ASCII without a control character but tab and newline: as it is
    return _unshowable().sub(_escape, text)


def one_line(text: str) -> str:
    """:func:`visible`, with line breaks and tabs as escapes too: for a single console line."""
    return visible(text).replace("\n", "\\n").replace("\t", "\\t")
