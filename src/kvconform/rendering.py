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
from collections.abc import Mapping


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


def render_hashes(values: tuple[int, ...]) -> str:
    """A list of u64 hash results: 16 hexadecimal digits each."""
    return "[" + ", ".join(f"0x{v:016x}" for v in values) + "]"
