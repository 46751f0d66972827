"""Protocol 2: protocol 1 with every count written as a decimal string (spec/protocol.md).

Protocol 2 changes one thing: every JSON integer of a request or a response body in
protocol 1 (counts, lengths, indices, shapes, token counts, versions, an error's layer
and values, a mix op's ``repeat``) travels as a string of decimal digits in the form of
PROTO-17, so an adapter can read every line with its language's built-in JSON reader
(JavaScript's ``JSON.parse`` rounds integers above 2^53). The envelope (``seq``), the
``hello`` exchange and the ``rope`` floats of a step are as in protocol 1.

The harness and the reference server keep one codec, that of protocol 1
(:mod:`.codec`): this module turns a protocol-1 body into its protocol-2 form, and a
protocol-2 body back into the protocol-1 form that codec reads. Going back, a count
must be a string (a JSON number where protocol 2 has a string is malformed: PROTO-28),
and a string must be where a count is; nothing else is rewritten, so every other check
stays the codec's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvconform.protocol.codec import WireError, clip, u64_of
from kvconform.protocol.operations import BY_NAME, FieldKind, Op

#: The protocol versions this harness and the reference server speak, oldest first.
VERSIONS = (1, 2)
#: The newest: what the harness offers first in ``hello`` (PROTO-32).
NEWEST = VERSIONS[-1]

#: Members whose subtree is never rewritten: a step's ``rope`` holds binary64 numbers,
#: not counts, and travels as JSON numbers in both versions (PROTO-33).
_NOT_COUNTS = frozenset({"rope"})


def counts_to_strings(value: Any) -> Any:
    """``value`` (a protocol-1 request or response body) in its protocol-2 form: every
    integer (not a boolean) as its decimal string, except under ``rope``."""
    kind = type(value)
    if kind is int:
        return str(value)
    if kind is dict:
        return {
            key: item if key in _NOT_COUNTS else counts_to_strings(item)
            for key, item in value.items()
        }
    if kind is list or kind is tuple:
        return [counts_to_strings(item) for item in value]
    return value


def count_of(raw: object, where: str) -> int:
    """A count as protocol 2 writes it: decimal digits, no sign, no leading zero, at most
    2^64 - 1 (PROTO-33); :class:`~.codec.WireError` for anything else, a JSON number too."""
    number = u64_of(raw)
    if number is None:
        shown = "a JSON number" if type(raw) in (int, float) else "not a count"
        raise WireError(
            f"{where}: protocol 2 carries a count as a string of decimal digits "
            f"(PROTO-33); got {clip(repr(raw))} ({shown})"
        )
    return number


def _counts(raw: object, names: tuple[str, ...], where: str, nullable: tuple[str, ...] = ()) -> Any:
    """``raw`` with each of ``names`` present read back as a count (``null`` kept for
    ``nullable``); anything but an object is left for the codec to refuse."""
    if not isinstance(raw, Mapping):
        return raw
    out = dict(raw)
    for name in names:
        if name in out and not (out[name] is None and name in nullable):
            out[name] = count_of(out[name], f"{where}.{name}")
    return out


def _count_list(raw: object, where: str) -> Any:
    if not isinstance(raw, list):
        return raw
    return [count_of(item, f"{where}[{i}]") for i, item in enumerate(raw)]


_GEOMETRY = ("n_layers", "n_kv_heads", "head_dim", "max_seq_len")
_LAYER = ("n_kv_heads", "head_dim", "seq_len", "k_len", "v_len", "v_head_dim")
_SIGNATURE = ("format_version", "n_layers", "n_kv_heads", "head_dim", "tokens")
_LAYOUT = ("block_size", "sliding_window")


def _layout(raw: object, where: str) -> Any:
    return _counts(raw, _LAYOUT, where, nullable=("sliding_window",))


def _signature(raw: object, where: str) -> Any:
    out = _counts(raw, _SIGNATURE, where)
    if isinstance(out, dict) and out.get("layout") is not None:
        out["layout"] = _layout(out["layout"], f"{where}.layout")
    return out


def _payload(raw: object, where: str) -> Any:
    if not isinstance(raw, list):
        return raw
    return [_counts(layer, _LAYER, f"{where}[{i}]") for i, layer in enumerate(raw)]


def _program(raw: object, where: str) -> Any:
    if not isinstance(raw, list):
        return raw
    return [_counts(mix, ("repeat",), f"{where}[{i}]") for i, mix in enumerate(raw)]


def _step(raw: object, where: str) -> Any:
    out = _counts(raw, ("write_offset",), where)
    if isinstance(out, dict):
        for name in ("token_ids", "mask"):
            if name in out:
                out[name] = _count_list(out[name], f"{where}.{name}")
    return out


def _identity(raw: object, where: str) -> Any:
    out = _counts(raw, ("step_tokens",), where)
    if isinstance(out, dict) and "geometry" in out:
        out["geometry"] = _counts(out["geometry"], _GEOMETRY, f"{where}.geometry")
    return out


def _unchanged(raw: object, where: str) -> Any:
    return raw


_FIELDS: dict[FieldKind, Any] = {
    "count": count_of,
    "count_or_null": lambda raw, where: None if raw is None else count_of(raw, where),
    "geometry": lambda raw, where: _counts(raw, _GEOMETRY, where),
    "plan_identity": _identity,
    "step": _step,
    "payload": _payload,
    "signature": _signature,
    "signature_or_null": lambda raw, where: None if raw is None else _signature(raw, where),
    "layout_or_null": lambda raw, where: None if raw is None else _layout(raw, where),
    "program": _program,
    "new_handle": _unchanged,
    "handle": _unchanged,
    "released": _unchanged,
    "str": _unchanged,
    "bool": _unchanged,
    "model_spec": _unchanged,  # its u64 parameters are strings in both versions
    "str_or_null": _unchanged,
    "str_list": _unchanged,
}


def request_from_v2(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A protocol-2 request in its protocol-1 form (what the reference server decodes);
    :class:`~.codec.WireError` names a count that is not a decimal string."""
    name = raw.get("op")
    out = dict(raw)
    if name == "hash_batch":
        programs = out.get("programs")
        if isinstance(programs, list):
            out["programs"] = [_program(p, f"programs[{i}]") for i, p in enumerate(programs)]
        return out
    spec = BY_NAME.get(name) if isinstance(name, str) else None
    if spec is None:
        return out
    for field in spec.fields:
        if field.name in out:
            out[field.name] = _FIELDS[field.kind](out[field.name], f"{spec.name}.{field.name}")
    return out


#: Error values that are strings in both versions: a storage or residency label, a
#: slot, and every value of an error about the ``model`` or the ``dtype`` (ERR-2).
_STRING_VALUES = frozenset({"which", "baked", "incoming"})
_STRING_FIELDS = frozenset({"model", "dtype"})


def _error(raw: object, where: str) -> Any:
    if not isinstance(raw, Mapping):
        return raw
    out = dict(raw)
    layer = out.get("layer")
    if layer is not None:
        out["layer"] = count_of(layer, f"{where}.layer")
    values = out.get("values")
    if isinstance(values, Mapping):
        strings = out.get("field") in _STRING_FIELDS
        read: dict[str, Any] = {}
        for name, value in values.items():
            at = f"{where}.values.{clip(str(name), 60)}"
            if value is None or strings or name in _STRING_VALUES:
                read[name] = value
            elif isinstance(value, list):
                read[name] = _count_list(value, at)
            else:
                read[name] = count_of(value, at)
        out["values"] = read
    return out


def response_from_v2(op: Op, response: Mapping[str, Any]) -> dict[str, Any]:
    """A protocol-2 response to ``op`` in its protocol-1 form (what the harness judges);
    :class:`~.codec.WireError` names a count that is not a decimal string."""
    out = dict(response)
    kind = type(op).result
    if "ok" in out:
        if kind == "count":
            out["ok"] = count_of(out["ok"], f"{op.name} result")
        elif kind == "signature":
            out["ok"] = _signature(out["ok"], f"{op.name} result")
    if "error" in out:
        out["error"] = _error(out["error"], "error")
    return out


__all__ = [
    "NEWEST",
    "VERSIONS",
    "count_of",
    "counts_to_strings",
    "request_from_v2",
    "response_from_v2",
]
