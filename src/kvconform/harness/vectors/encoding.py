"""``encoding.json``: each vector's inputs are data, read back from the file and checked;
only ``expect`` (and a missing ``requires``) is computed."""

from __future__ import annotations

import re
from typing import Any

from kvconform.harness.vectors.files import (
    ENCODING_FILE,
    GENERATED_SOURCE,
    Builder,
    InputError,
    make_file,
)
from kvconform.harness.vectors.programs import REQUIREMENT, Vector, canonical_op

#: A vector's fields in encoding.json, in the order they are written.
ENCODING_FIELDS = ("id", "ops", "expect", "requires", "catches", "note")
#: The fields a vector file may have at top level, in the order they are written.
FILE_FIELDS = ("format", "file", "description", "source", "requires", "vectors")
ID_PATTERN = re.compile(r"[a-z0-9]+(\.[a-z0-9-]+)+")
ENCODING_ID_PREFIX = "encoding."


def _requires_input(raw: Any) -> list[str] | None:
    """A vector's hand-written ``requires``, or None when it has none."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"requires must be a non-empty list, got {raw!r}")
    for rid in raw:
        if not isinstance(rid, str) or not REQUIREMENT.fullmatch(rid):
            raise ValueError(f"requires: {rid!r} is not a HASH requirement id")
    if len(set(raw)) != len(raw):
        raise ValueError("requires lists a requirement twice")
    return list(raw)


def encoding_vector(b: Builder, index: int, raw: Any) -> Vector:
    """One vector of encoding.json from its inputs, with ``expect`` computed."""
    where = f"{ENCODING_FILE}: vector #{index}"
    if not isinstance(raw, dict):
        raise InputError(f"{where}: a vector must be an object")
    vid = raw.get("id")
    if (
        not isinstance(vid, str)
        or not ID_PATTERN.fullmatch(vid)
        or not vid.startswith(ENCODING_ID_PREFIX)
    ):
        raise InputError(f"{where}: id {vid!r} is not of the form encoding.<topic>.<name>")
    where = f"{ENCODING_FILE}: {vid}"
    unknown = sorted(set(raw) - set(ENCODING_FIELDS))
    if unknown:
        raise InputError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}")
    catches = raw.get("catches")
    if not isinstance(catches, str) or not catches.strip():
        raise InputError(f"{where}: catches must be a non-empty string")
    note = raw.get("note")
    if note is not None and (not isinstance(note, str) or not note.strip()):
        raise InputError(f"{where}: note, when given, must be a non-empty string")
    ops_raw = raw.get("ops")
    if not isinstance(ops_raw, list) or not ops_raw:
        raise InputError(f"{where}: ops must be a non-empty list of ops")
    try:
        ops = [canonical_op(op) for op in ops_raw]
        requires = _requires_input(raw.get("requires"))
        return b.vector(vid, ops, catches, note=note, requires=requires)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from exc


def build_encoding(b: Builder, committed: Any) -> dict[str, Any]:
    """encoding.json from the inputs in ``committed`` (the file as read), ``expect`` computed."""
    if not isinstance(committed, dict) or not isinstance(committed.get("vectors"), list):
        raise InputError(f'{ENCODING_FILE}: expected an object with a "vectors" list')
    unknown = sorted(set(committed) - set(FILE_FIELDS))
    if unknown:
        raise InputError(f"{ENCODING_FILE}: unknown top-level field(s) {', '.join(unknown)}")
    description = committed.get("description")
    if not isinstance(description, str) or not description.strip():
        raise InputError(f"{ENCODING_FILE}: description must be a non-empty string")
    vectors = [encoding_vector(b, n, raw) for n, raw in enumerate(committed["vectors"])]
    return make_file(ENCODING_FILE, description, GENERATED_SOURCE, vectors)
