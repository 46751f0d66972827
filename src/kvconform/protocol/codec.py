"""The wire form of everything that crosses the stdio protocol (spec/protocol.md).

Operations travel field by field, each field by its kind in the operation
table (:mod:`.operations`); results by the operation's result kind; the
handshake as an :class:`~kvconform.values.AdapterInfo`. Every 64-bit integer
travels as a decimal string and every keyed binary64 float as its bit pattern
(``"0x"`` + 16 hex digits), so no JSON parser loses precision. The harness
(:mod:`.client`) and the reference server (:mod:`.server`) share this one
definition.
"""

from __future__ import annotations

import json
import typing
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from json import encoder as _json_encoder
from json.scanner import make_scanner
from types import MappingProxyType
from typing import Any

import kvconform
from kvconform import limits
from kvconform.protocol.operations import BY_CLASS, BY_NAME, FieldKind, Op, ResultKind
from kvconform.rendering import clip as clip  # re-exported: the protocol clips with it
from kvconform.rendering import one_line
from kvconform.values import (
    CLASSES,
    VALIDITY_OUTCOMES,
    AdapterInfo,
    Broken,
    Fault,
    Geometry,
    LayerDesc,
    Layout,
    MixOp,
    ModelSpec,
    Ok,
    Outcome,
    Param,
    Payload,
    PlanIdentity,
    Refused,
    Signature,
    StepInputs,
)

#: Protocol 1, whose wire form this codec reads and writes; protocol 2 is this form
#: with every count as a decimal string (:mod:`.v2`, which lists the versions spoken).
PROTOCOL_VERSION = 1
#: The four response forms; exactly one appears next to ``seq``.
RESPONSE_FORMS = ("ok", "error", "unsupported", "failure")


class WireError(ValueError):
    """A message that does not have the shape the protocol gives it."""


# Values ---------------------------------------------------------------------------


def u64_to_wire(value: int) -> str:
    return str(value)


_U64_LIMIT = 1 << 64


def u64_of(text: object) -> int | None:
    """The value of a u64 as PROTO-17 and ``common.schema.json#/$defs/u64`` write it.

    ASCII decimal digits, no sign, no leading zero, at most 20 digits, at most
    2^64 - 1; anything else (``"²"``, Arabic-Indic digits, ``"007"``, 5,000
    digits) is ``None``. The length is checked before any conversion.
    """
    if (
        type(text) is not str
        or not 0 < len(text) <= 20
        or not text.isascii()
        or not text.isdigit()
        or (text[0] == "0" and len(text) > 1)
    ):
        return None
    number = int(text)
    return number if number < _U64_LIMIT else None


def u64_from_wire(value: object, where: str) -> int:
    number = u64_of(value)
    if number is None:
        raise WireError(
            f"{where}: expected an unsigned 64-bit integer as decimal digits "
            f"(0 to 18446744073709551615, no leading zero), got {clip(repr(value))}"
        )
    return number


def bits_to_wire(bits: int) -> str:
    return f"0x{bits:016x}"


def bits_from_wire(value: object, where: str) -> int:
    if not isinstance(value, str) or not value.startswith("0x") or len(value) != 18:
        raise WireError(f"{where}: expected '0x' and 16 hex digits, got {clip(repr(value))}")
    try:
        return int(value, 16)
    except ValueError:
        raise WireError(
            f"{where}: expected '0x' and 16 hex digits, got {clip(repr(value))}"
        ) from None


def _mix_to_wire(op: MixOp) -> dict[str, Any]:
    if op.kind == "bytes":
        assert isinstance(op.value, bytes)
        out: dict[str, Any] = {"op": "bytes", "hex": op.value.hex()}
        if op.repeat != 1:
            out["repeat"] = op.repeat
        return out
    if op.kind in ("u64", "instance"):
        assert isinstance(op.value, int)
        return {"op": op.kind, "value": u64_to_wire(op.value)}
    if op.kind == "f64":
        assert isinstance(op.value, int)
        return {"op": "f64", "bits": bits_to_wire(op.value)}
    if op.kind == "finish":
        return {"op": "finish"}
    return {"op": op.kind, "value": op.value}


def _mix_from_wire(raw: Mapping[str, Any], where: str) -> MixOp:
    kind = raw.get("op")
    if kind == "bytes":
        repeat = raw.get("repeat", 1)
        if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
            raise WireError(f"{where}.repeat: expected a positive integer")
        try:
            data = bytes.fromhex(raw["hex"])
        except (KeyError, TypeError, ValueError):
            raise WireError(f"{where}.hex: expected a hex string") from None
        return MixOp("bytes", data, repeat)
    if kind == "str":
        if not isinstance(raw.get("value"), str):
            raise WireError(f"{where}.value: expected a string")
        return MixOp("str", raw["value"])
    if kind in ("u64", "instance"):
        return MixOp(kind, u64_from_wire(raw.get("value"), f"{where}.value"))
    if kind == "f64":
        return MixOp("f64", bits_from_wire(raw.get("bits"), f"{where}.bits"))
    if kind == "present":
        if not isinstance(raw.get("value"), bool):
            raise WireError(f"{where}.value: expected true or false")
        return MixOp("present", raw["value"])
    if kind == "finish":
        return MixOp("finish")
    raise WireError(f"{where}.op: unknown mix op {clip(repr(kind))}")


def param_to_wire(value: Param) -> dict[str, str]:
    if isinstance(value, str):
        return {"str": value}
    if isinstance(value, float):
        from struct import pack

        return {"f64": bits_to_wire(int.from_bytes(pack("<d", value), "little"))}
    return {"u64": u64_to_wire(value)}


def param_from_wire(raw: object, where: str) -> Param:
    if isinstance(raw, Mapping) and len(raw) == 1:
        ((tag, value),) = raw.items()
        if tag == "str" and isinstance(value, str):
            return value
        if tag == "u64":
            return u64_from_wire(value, f"{where}.u64")
        if tag == "f64":
            from struct import unpack

            bits = bits_from_wire(value, f"{where}.f64")
            return float(unpack("<d", bits.to_bytes(8, "little"))[0])
    raise WireError(f"{where}: expected {{'u64'|'f64'|'str': value}}, got {clip(repr(raw))}")


def _model_to_wire(spec: ModelSpec) -> dict[str, Any]:
    return {
        "family": spec.family,
        "params": {name: param_to_wire(value) for name, value in spec.params},
        "hooks": dict(spec.hooks),
    }


def _model_from_wire(raw: Mapping[str, Any], where: str) -> ModelSpec:
    params = _mapping(raw.get("params", {}), f"{where}.params")
    hooks = _mapping(raw.get("hooks", {}), f"{where}.hooks")
    for name, present in hooks.items():
        if not isinstance(present, bool):
            raise WireError(f"{where}.hooks.{name}: expected true or false")
    return ModelSpec(
        family=_str(raw.get("family"), f"{where}.family"),
        params=tuple(
            (name, param_from_wire(value, f"{where}.params.{name}"))
            for name, value in params.items()
        ),
        hooks=tuple(hooks.items()),
    )


def _step_to_wire(step: StepInputs) -> dict[str, Any]:
    return {
        "token_ids": list(step.token_ids),
        "write_offset": step.write_offset,
        "rope": {"theta": step.rope_theta, "scaling": step.rope_scaling},
        "mask": list(step.mask),
    }


def _step_from_wire(raw: Mapping[str, Any], where: str) -> StepInputs:
    rope = _mapping(raw.get("rope", {}), f"{where}.rope")
    return StepInputs(
        token_ids=tuple(_int(t, f"{where}.token_ids") for t in raw.get("token_ids", [1])),
        write_offset=_int(raw.get("write_offset", 0), f"{where}.write_offset"),
        rope_theta=float(rope.get("theta", 10000.0)),
        rope_scaling=None if rope.get("scaling") is None else float(rope["scaling"]),
        mask=tuple(_int(m, f"{where}.mask") for m in raw.get("mask", [])),
    )


def geometry_to_wire(g: Geometry) -> dict[str, Any]:
    """A cache's geometry as its wire fields (also a scenario step's arguments)."""
    return {
        "n_layers": g.n_layers,
        "n_kv_heads": g.n_kv_heads,
        "head_dim": g.head_dim,
        "max_seq_len": g.max_seq_len,
        "dtype": g.dtype,
    }


def _geometry_from_wire(raw: Mapping[str, Any], where: str) -> Geometry:
    return Geometry(
        n_layers=_int(raw.get("n_layers"), f"{where}.n_layers"),
        n_kv_heads=_int(raw.get("n_kv_heads"), f"{where}.n_kv_heads"),
        head_dim=_int(raw.get("head_dim"), f"{where}.head_dim"),
        max_seq_len=_int(raw.get("max_seq_len"), f"{where}.max_seq_len"),
        dtype=_str(raw.get("dtype", "f32"), f"{where}.dtype"),
    )


def _identity_to_wire(identity: PlanIdentity) -> dict[str, Any]:
    return {
        "model": _model_to_wire(identity.model),
        "instance": u64_to_wire(identity.instance),
        "alloc": u64_to_wire(identity.alloc),
        "geometry": geometry_to_wire(identity.geometry),
        "step_tokens": identity.step_tokens,
    }


def _identity_from_wire(raw: Mapping[str, Any], where: str) -> PlanIdentity:
    return PlanIdentity(
        model=_model_from_wire(_mapping(raw.get("model"), f"{where}.model"), f"{where}.model"),
        instance=u64_from_wire(raw.get("instance"), f"{where}.instance"),
        alloc=u64_from_wire(raw.get("alloc"), f"{where}.alloc"),
        geometry=_geometry_from_wire(
            _mapping(raw.get("geometry"), f"{where}.geometry"), f"{where}.geometry"
        ),
        step_tokens=_int(raw.get("step_tokens"), f"{where}.step_tokens"),
    )


def _layer_to_wire(layer: LayerDesc) -> dict[str, int]:
    out = {
        "n_kv_heads": layer.n_kv_heads,
        "head_dim": layer.head_dim,
        "seq_len": layer.seq_len,
        "k_len": layer.k_len,
        "v_len": layer.v_len,
    }
    if layer.v_head_dim is not None:  # added after protocol 1: only when stated (PROTO-31)
        out["v_head_dim"] = layer.v_head_dim
    return out


def _payload_to_wire(payload: Payload) -> list[dict[str, int]]:
    return [_layer_to_wire(layer) for layer in payload]


def _payload_from_wire(raw: object, where: str) -> Payload:
    if not isinstance(raw, list):
        raise WireError(f"{where}: expected a list of layers")
    layers = []
    for index, item in enumerate(raw):
        at = f"{where}[{index}]"
        item = _mapping(item, at)
        v_head_dim = item.get("v_head_dim")
        layers.append(
            LayerDesc(
                **{
                    name: _int(item.get(name), f"{at}.{name}")
                    for name in ("n_kv_heads", "head_dim", "seq_len", "k_len", "v_len")
                },
                v_head_dim=None if v_head_dim is None else _int(v_head_dim, f"{at}.v_head_dim"),
            )
        )
    return tuple(layers)


def layout_to_wire(layout: Layout | None) -> dict[str, Any] | None:
    if layout is None:
        return None
    return {"block_size": layout.block_size, "sliding_window": layout.sliding_window}


def layout_from_wire(raw: object, where: str) -> Layout:
    raw = _mapping(raw, where)
    for member in ("block_size", "sliding_window"):
        if member not in raw:  # absent is never "no window" (PROF-10): null says that
            raise WireError(f"{where}.{member}: missing")
    window = raw["sliding_window"]
    return Layout(
        block_size=_int(raw["block_size"], f"{where}.block_size"),
        sliding_window=None if window is None else _int(window, f"{where}.sliding_window"),
    )


def _layout_or_null(raw: object, where: str) -> Layout | None:
    return None if raw is None else layout_from_wire(raw, where)


def signature_to_wire(sig: Signature | None) -> dict[str, Any] | None:
    if sig is None:
        return None
    out: dict[str, Any] = {  # by hand: dataclasses.asdict deep-copies every member
        "format_version": sig.format_version,
        "model": sig.model,
        "n_layers": sig.n_layers,
        "n_kv_heads": sig.n_kv_heads,
        "head_dim": sig.head_dim,
        "dtype": sig.dtype,
        "tokens": sig.tokens,
    }
    if sig.layout is not None:  # a version-2 signature (PROF-5); v1 has no layout member
        out["layout"] = layout_to_wire(sig.layout)
    return out


def signature_from_wire(raw: object, where: str) -> Signature:
    raw = _mapping(raw, where)
    return Signature(
        format_version=_int(raw.get("format_version"), f"{where}.format_version"),
        model=_str(raw.get("model"), f"{where}.model"),
        n_layers=_int(raw.get("n_layers"), f"{where}.n_layers"),
        n_kv_heads=_int(raw.get("n_kv_heads"), f"{where}.n_kv_heads"),
        head_dim=_int(raw.get("head_dim"), f"{where}.head_dim"),
        dtype=_str(raw.get("dtype"), f"{where}.dtype"),
        tokens=_int(raw.get("tokens"), f"{where}.tokens"),
        layout=None
        if raw.get("layout") is None
        else layout_from_wire(raw["layout"], f"{where}.layout"),
    )


def fault_to_wire(fault: Fault) -> dict[str, Any]:
    return {
        "kind": fault.kind,
        "field": fault.field,
        "layer": fault.layer,
        "values": {
            name: list(value) if isinstance(value, tuple) else value
            for name, value in fault.values.items()
        },
        "message": fault.message,
    }


def fault_from_wire(raw: object, where: str) -> Fault:
    raw = _mapping(raw, where)
    values = _mapping(raw.get("values", {}), f"{where}.values")
    layer = raw.get("layer")
    field_name = raw.get("field")
    for name, value in values.items():
        problem = error_value_problem(value)
        if problem is not None:
            raise WireError(f"{where}.values.{clip(name, 60)}: {problem}")
    return Fault(
        kind=_str(raw.get("kind"), f"{where}.kind"),
        field=None if field_name is None else _str(field_name, f"{where}.field"),
        layer=None if layer is None else _int(layer, f"{where}.layer"),
        values={
            name: tuple(value) if isinstance(value, list) else value
            for name, value in values.items()
        },
        message=_str(raw.get("message", ""), f"{where}.message"),
    )


def error_value_problem(value: object) -> str | None:
    """Why ``value`` cannot be one of an error's values (PROTO-21), or ``None``.

    A value is a scalar (an integer or a string; ``null``, a boolean or a number with a
    fraction is left for the judge to find unequal) or a list of integers
    (``layer_shape``, ``readable``); an object or a nested list never is.
    """
    kind = type(value)  # exact: a subclass's own comparisons must never run in the judge
    if kind is list or kind is tuple:
        if all(type(item) is int for item in value):  # type: ignore[attr-defined]
            return None
        return "expected an integer, a string or a list of integers; got a list of other things"
    if value is None or kind in (str, int, float, bool):
        return None
    return f"expected an integer, a string or a list of integers; got {kind.__name__}"


def fault_problem(fault: Fault) -> str | None:
    """Why an in-process adapter's ``fault`` could not have come over the wire, or
    ``None``: in process a refusal is held to the types of PROTO-21 too, exactly (a
    subclass of ``str`` or of :class:`Fault` is no wire value: none of its own
    comparisons, hashing or printing may run in the judge)."""
    if type(fault) is not Fault:
        return f"it is a {type(fault).__name__}, a subclass of Fault, not a Fault"
    if type(fault.kind) is not str:
        return f"its kind is a {type(fault.kind).__name__}, not a string"
    if fault.field is not None and type(fault.field) is not str:
        return f"its field is a {type(fault.field).__name__}, not a string"
    if fault.layer is not None and type(fault.layer) is not int:
        return f"its layer is a {type(fault.layer).__name__}, not a non-negative integer"
    if fault.layer is not None and fault.layer < 0:
        return f"its layer is {fault.layer}, not a non-negative integer"
    if type(fault.message) is not str:
        return f"its message is a {type(fault.message).__name__}, not a string"
    if type(fault.values) not in (dict, MappingProxyType):
        return f"its values are a {type(fault.values).__name__}, not a mapping"
    for name, value in fault.values.items():
        if type(name) is not str:
            return f"a value is named by a {type(name).__name__}, not a string"
        problem = error_value_problem(value)
        if problem is not None:
            return f"its value {clip(name, 60)}: {problem}"
    return None


_Encoder = Callable[[Any], Any]
_Decoder = Callable[[Any, str], Any]


def _identity(value: Any) -> Any:
    return value


def _count_or_null(raw: object, where: str) -> int | None:
    return None if raw is None else _int(raw, where)


def _program_to_wire(program: Sequence[MixOp]) -> list[dict[str, Any]]:
    return [_mix_to_wire(op) for op in program]


def _program_from_wire(raw: object, where: str) -> tuple[MixOp, ...]:
    return tuple(
        _mix_from_wire(_mapping(item, f"{where}[{i}]"), f"{where}[{i}]")
        for i, item in enumerate(_list(raw, where))
    )


def _object(decode: Callable[[Mapping[str, Any], str], Any]) -> _Decoder:
    return lambda raw, where: decode(_mapping(raw, where), where)


def _signature_or_null(raw: object, where: str) -> Signature | None:
    return None if raw is None else signature_from_wire(raw, where)


#: How a field of each kind travels (:data:`~.operations.FieldKind`).
FIELD_CODECS: dict[FieldKind, tuple[_Encoder, _Decoder]] = {
    "new_handle": (_identity, lambda raw, where: _str(raw, where)),
    "handle": (_identity, lambda raw, where: _str(raw, where)),
    "released": (_identity, lambda raw, where: _str(raw, where)),
    "str": (_identity, lambda raw, where: _str(raw, where)),
    "bool": (_identity, lambda raw, where: _bool(raw, where)),
    "count": (_identity, lambda raw, where: _int(raw, where)),
    "count_or_null": (_identity, _count_or_null),
    "program": (_program_to_wire, _program_from_wire),
    "model_spec": (_model_to_wire, _object(_model_from_wire)),
    "geometry": (geometry_to_wire, _object(_geometry_from_wire)),
    "plan_identity": (_identity_to_wire, _object(_identity_from_wire)),
    "step": (_step_to_wire, _object(_step_from_wire)),
    "payload": (_payload_to_wire, _payload_from_wire),
    "signature": (signature_to_wire, signature_from_wire),
    "signature_or_null": (signature_to_wire, _signature_or_null),
    "layout_or_null": (layout_to_wire, _layout_or_null),
    "str_or_null": (_identity, lambda raw, where: None if raw is None else _str(raw, where)),
    "str_list": (
        list,
        lambda raw, where: tuple(_str(x, f"{where}[{i}]") for i, x in enumerate(_list(raw, where))),
    ),
}


def to_wire(op: Op) -> dict[str, Any]:
    """The JSON-ready form of ``op`` (without the sequence number)."""
    out: dict[str, Any] = {"op": op.name}
    for field in BY_CLASS[type(op)].fields if type(op) in BY_CLASS else ():  # a restart: none
        value = getattr(op, field.name)
        if field.added and value is None:  # left out at its default (PROTO-31)
            continue
        out[field.name] = FIELD_CODECS[field.kind][0](value)
    return out


def from_wire(raw: Mapping[str, Any]) -> Op:
    """Decode a request into an operation, or raise :class:`WireError`."""
    name = raw.get("op")
    spec = BY_NAME.get(name) if isinstance(name, str) else None
    if spec is None:
        raise WireError(f"op: unknown operation {clip(repr(name))}")
    kwargs: dict[str, Any] = {}
    for field in spec.fields:
        where = f"{spec.name}.{field.name}"
        if field.name not in raw:
            if field.optional:
                continue
            raise WireError(f"{where}: missing")
        kwargs[field.name] = FIELD_CODECS[field.kind][1](raw[field.name], where)
    return spec.cls(**kwargs)


def _mapping(raw: object, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise WireError(f"{where}: expected an object")
    return raw


def _list(raw: object, where: str) -> list[Any]:
    if not isinstance(raw, list):
        raise WireError(f"{where}: expected a list")
    return raw


def _int(raw: object, where: str) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise WireError(f"{where}: expected a non-negative integer, got {clip(repr(raw))}")
    return raw


def _str(raw: object, where: str) -> str:
    if not isinstance(raw, str):
        raise WireError(f"{where}: expected a string, got {clip(repr(raw))}")
    return raw


def _bool(raw: object, where: str) -> bool:
    if not isinstance(raw, bool):
        raise WireError(f"{where}: expected true or false, got {clip(repr(raw))}")
    return raw


# Result codec ------------------------------------------------------------------


def _is_u64(value: object) -> bool:
    # exactly an int, as the wire carries it: a subclass's own comparisons are not run
    return type(value) is int and 0 <= value < 1 << 64


def _shown(value: object) -> str:
    """``repr(value)`` clipped, or its type's name if its own ``repr`` fails."""
    try:
        return clip(repr(value))
    except Exception:
        return f"a {type(value).__name__} whose repr() fails"


def result_type_problem(op: Op, value: object) -> str | None:
    """Why ``value`` is not what ``op`` returns (a Fault aside), or ``None`` if it is."""
    kind = type(op).result
    if kind == "null" or isinstance(value, Fault):
        return None
    if kind == "u64" and not _is_u64(value):
        return f"{op.name} returned {_shown(value)}, expected an unsigned 64-bit integer"
    if kind == "u64_list" and (
        type(value) not in (list, tuple) or not all(_is_u64(v) for v in value)  # type: ignore[attr-defined]
    ):
        return f"{op.name} returned {_shown(value)}, expected unsigned 64-bit integers"
    if kind == "count" and not _is_u64(value):
        return f"{op.name} returned {_shown(value)}, expected a non-negative integer"
    if kind == "bool" and not isinstance(value, bool):
        return f"{op.name} returned {_shown(value)}, expected true or false"
    if kind == "signature" and not isinstance(value, Signature):
        return f"{op.name} returned {_shown(value)}, expected a signature or a fault"
    if kind == "validity" and (type(value) is not str or value not in VALIDITY_OUTCOMES):
        outcomes = ", ".join(VALIDITY_OUTCOMES)
        return f"{op.name} returned {_shown(value)}, expected one of {outcomes}"
    return None


def result_to_wire(op: Op, value: object) -> dict[str, Any]:
    """The response body (without ``seq``) for an adapter method's return value.

    A :class:`~.values.Fault` becomes ``error``; any other value must have the
    type the operation returns (:func:`result_type_problem`), or
    :class:`TypeError` names the mismatch.
    """
    if isinstance(value, Fault):
        return {"error": fault_to_wire(value)}
    problem = result_type_problem(op, value)
    if problem is not None:
        raise TypeError(problem)
    kind = type(op).result
    if kind == "null":
        return {"ok": None}
    if kind == "u64":
        return {"ok": u64_to_wire(value)}  # type: ignore[arg-type]
    if kind == "u64_list":
        return {"ok": [u64_to_wire(v) for v in value]}  # type: ignore[attr-defined]
    if kind == "signature":
        return {"ok": signature_to_wire(value)}  # type: ignore[arg-type]
    return {"ok": value}  # a count or a boolean


def result_from_wire(op: Op, raw: object) -> object:
    """The Python value of an ``ok`` response to ``op``; :class:`~.WireError` if malformed."""
    kind = type(op).result
    where = f"{op.name} result"
    if kind == "null":
        if raw is not None:
            raise WireError(f"{where}: expected null, got {clip(repr(raw))}")
        return None
    if kind == "u64":
        return u64_from_wire(raw, where)
    if kind == "u64_list":
        if not isinstance(raw, list):
            raise WireError(f"{where}: expected a list of decimal strings, got {clip(repr(raw))}")
        return tuple(u64_from_wire(v, f"{where}[{i}]") for i, v in enumerate(raw))
    if kind == "count":
        if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
            raise WireError(f"{where}: expected a non-negative integer, got {clip(repr(raw))}")
        return raw
    if kind == "bool":
        if not isinstance(raw, bool):
            raise WireError(f"{where}: expected true or false, got {clip(repr(raw))}")
        return raw
    if kind == "validity":
        if raw not in VALIDITY_OUTCOMES:
            raise WireError(
                f"{where}: expected one of {', '.join(VALIDITY_OUTCOMES)}, got {clip(repr(raw))}"
            )
        return raw
    return signature_from_wire(raw, where)


_OK_NONE = Ok(None)
_OK_TRUE = Ok(True)
_OK_FALSE = Ok(False)


def _fast_null(raw: object) -> Outcome | None:
    return _OK_NONE if raw is None else None


def _fast_count(raw: object) -> Outcome | None:
    return Ok(raw) if type(raw) is int and raw >= 0 else None


def _fast_bool(raw: object) -> Outcome | None:
    return _OK_TRUE if raw is True else _OK_FALSE if raw is False else None


def _fast_u64(raw: object) -> Outcome | None:
    number = u64_of(raw)
    return None if number is None else Ok(number)


def _fast_u64_list(raw: object) -> Outcome | None:
    if type(raw) is not list:
        return None
    values = []
    for item in raw:
        number = u64_of(item)
        if number is None:
            return None
        values.append(number)
    return Ok(tuple(values))


def _fast_none(raw: object) -> Outcome | None:
    return None


#: The outcome of a well-formed ``ok`` value of each result kind, checked by its type
#: alone; ``None`` sends anything else (and every signature) to :func:`result_from_wire`,
#: which gives the same value or says what is wrong.
_FAST_OK: dict[str, Callable[[object], Outcome | None]] = {
    "null": _fast_null,
    "count": _fast_count,
    "bool": _fast_bool,
    "u64": _fast_u64,
    "u64_list": _fast_u64_list,
    "signature": _fast_none,
    "validity": _fast_none,
}
if set(_FAST_OK) != set(typing.get_args(ResultKind)):  # pragma: no cover
    raise RuntimeError("codec._FAST_OK does not cover every result kind of the table")
_NOTHING = object()


def outcome_of(op: Op, response: Mapping[str, Any]) -> Outcome:
    """The outcome a well-sequenced response gives ``op`` (a malformed body is Broken)."""
    if len(response) == 2:
        raw = response.get("ok", _NOTHING)
        if raw is not _NOTHING and "seq" in response:
            outcome = _FAST_OK[type(op).result](raw)
            if outcome is not None:
                return outcome
    forms = [key for key in response if key != "seq"]
    if len(forms) != 1 or forms[0] not in RESPONSE_FORMS:
        return Broken(
            f"malformed response to {op.name}: expected 'seq' and exactly one of "
            f"{', '.join(RESPONSE_FORMS)}; got members {sorted(response)}"
        )
    form = forms[0]
    body = response[form]
    try:
        if form == "ok":
            value = result_from_wire(op, body)
            return Ok(value)
        if form == "error":
            return Refused(fault_from_wire(body, "error"))
    except WireError as exc:
        return Broken(f"malformed response to {op.name}: {exc}")
    text = clip(body if isinstance(body, str) else _dumped(body), SHOWN_LIMIT)
    if form == "unsupported":
        return Broken(f"the adapter answered unsupported to {op.name}: {text}")
    return Broken(text if text else f"the adapter answered failure to {op.name} (no message)")


#: The most characters of an adapter's own text a failure keeps (a failure message,
#: an unsupported answer): enough for any message, not a report of megabytes.
SHOWN_LIMIT = limits.SHOWN_CHARS


def _dumped(body: object) -> str:
    try:
        return json.dumps(body)
    except (ValueError, RecursionError):
        return f"(a {type(body).__name__} nested too deeply to show)"


# Handshake codec ---------------------------------------------------------------


def hello_request(
    suite: str = kvconform.SUITE_VERSION, protocol: int = PROTOCOL_VERSION
) -> dict[str, Any]:
    return {"op": "hello", "protocol": protocol, "suite": suite}


def info_to_wire(info: AdapterInfo, protocol: int = PROTOCOL_VERSION) -> dict[str, Any]:
    """The ``ok`` value of a ``hello`` response, speaking ``protocol``."""
    return {
        "name": info.name,
        "version": info.version,
        "language": info.language,
        "protocol": protocol,
        "classes": sorted(info.classes),
        "format": {"writes": info.format_writes, "reads": sorted(info.format_reads)},
        # Declarations are optional on the wire (PROTO-35): what is left out is the default.
        **({"options": dict(info.options)} if info.options else {}),
        **({"capabilities": caps} if (caps := info.declared_capabilities()) else {}),
    }


#: The members of a ``hello`` answer (spec/protocol.md, PROTO-10, PROTO-35).
_INFO_MEMBERS = frozenset(
    ("name", "version", "language", "protocol", "classes", "format", "options", "capabilities")
)


#: The most characters of an adapter's name, version or language kept for reports.
INFO_TEXT_LIMIT = limits.INFO_TEXT_CHARS


def info_text(text: str) -> str:
    """An adapter's name, version or language as the harness keeps it: clipped to
    :data:`INFO_TEXT_LIMIT` characters, on one line, control characters escaped."""
    return one_line(clip(text, INFO_TEXT_LIMIT))


def _too_many(raw: Mapping[str, Any]) -> str | None:
    """Which list or mapping of a ``hello`` answer has more than
    :data:`~kvconform.limits.MAX_DECLARED_ENTRIES` entries, worded, or ``None``."""
    most = limits.MAX_DECLARED_ENTRIES
    fmt = raw.get("format")
    caps = raw.get("capabilities")
    schema = caps.get("key_schema") if isinstance(caps, Mapping) else None
    listed: list[tuple[str, object]] = [
        ("classes", raw.get("classes")),
        ("format.reads", fmt.get("reads") if isinstance(fmt, Mapping) else None),
        ("options", raw.get("options")),
        ("capabilities.dtypes", caps.get("dtypes") if isinstance(caps, Mapping) else None),
        ("capabilities.key_schema", schema),
    ]
    if isinstance(schema, Mapping) and len(schema) <= most:
        listed += [
            (f"capabilities.key_schema.{clip(ascii(family), 60)}", params)
            for family, params in schema.items()
        ]
    for where, value in listed:
        if isinstance(value, list | Mapping) and len(value) > most:
            return (
                f"{where}: {len(value)} entries, more than the {most} the harness accepts "
                "(spec/security.md)"
            )
    return None


def info_from_wire(raw: object, offered: int = PROTOCOL_VERSION) -> AdapterInfo:
    """An adapter's self-description from its ``hello`` answer to a ``hello`` that offered
    protocol ``offered``; :class:`~.WireError` if bad. The answer may name ``offered`` or
    an older version the harness speaks (PROTO-32): the caller reads which."""
    if not isinstance(raw, Mapping):
        raise WireError(f"hello result: expected an object, got {clip(repr(raw))}")
    unknown_members = sorted(set(raw) - _INFO_MEMBERS)
    if unknown_members:
        raise WireError(
            f"hello result: unknown member {clip(', '.join(map(repr, unknown_members)))} "
            f"(the members are {', '.join(sorted(_INFO_MEMBERS))}; PROTO-35)"
        )
    too_many = _too_many(raw)
    if too_many:  # before anything looks at the entries (limits.py)
        raise WireError(f"hello result.{too_many}")
    for name in ("name", "version", "language"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise WireError(f"hello result.{name}: expected a non-empty string")
    protocol = raw.get("protocol")
    if type(protocol) is not int or not PROTOCOL_VERSION <= protocol <= offered:  # not 1.0
        spoken = ", ".join(map(str, range(PROTOCOL_VERSION, offered + 1)))
        raise WireError(
            f"hello result.protocol: the harness offered protocol {offered} and speaks "
            f"{spoken}, the adapter answered {clip(ascii(protocol), 60)}"
        )
    classes = raw.get("classes")
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise WireError("hello result.classes: expected a list of class names")
    twice = sorted(c for c, n in Counter(classes).items() if n > 1)
    if twice:
        named = clip(", ".join(map(repr, twice)))  # adapter text: escaped and clipped
        raise WireError(f"hello result.classes: {named} listed more than once")
    unknown = sorted(set(classes) - set(CLASSES))
    if unknown:
        raise WireError(
            f"hello result.classes: unknown class {clip(', '.join(map(ascii, unknown)))} "
            f"(the classes are {', '.join(CLASSES)})"
        )
    fmt = raw.get("format")
    if not isinstance(fmt, Mapping):
        raise WireError("hello result.format: expected {writes, reads}")
    unknown_format = sorted(set(fmt) - {"writes", "reads"})
    if unknown_format:
        raise WireError(
            f"hello result.format: unknown member {clip(', '.join(map(repr, unknown_format)))} "
            "(the members are writes, reads; PROTO-35)"
        )
    writes = fmt.get("writes")
    reads = fmt.get("reads")
    if writes is not None and (not isinstance(writes, int) or isinstance(writes, bool)):
        raise WireError("hello result.format.writes: expected an integer or null")
    if not isinstance(reads, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in reads
    ):
        raise WireError("hello result.format.reads: expected a list of integers")
    if len(set(reads)) != len(reads):
        raise WireError("hello result.format.reads: a version listed more than once")
    options = raw.get("options", {})
    if not isinstance(options, Mapping) or not all(isinstance(v, str) for v in options.values()):
        raise WireError("hello result.options: expected an object of option names to strings")
    caps = raw.get("capabilities", {})
    if not isinstance(caps, Mapping):
        raise WireError("hello result.capabilities: expected an object")
    unknown_caps = sorted(set(caps) - {"raw_fold", "dtypes", "key_schema", "uint_bits"})
    if unknown_caps:
        raise WireError(
            f"hello result.capabilities: unknown capability "
            f"{clip(', '.join(map(ascii, unknown_caps)))} "
            "(the capabilities are raw_fold, dtypes, key_schema, uint_bits)"
        )
    uint_bits = caps.get("uint_bits", 64)
    if type(uint_bits) is not int or uint_bits not in (32, 53, 64):
        raise WireError("hello result.capabilities.uint_bits: expected 32, 53 or 64")
    raw_fold = caps.get("raw_fold", True)
    if not isinstance(raw_fold, bool):
        raise WireError("hello result.capabilities.raw_fold: expected true or false")
    dtypes = caps.get("dtypes")
    if dtypes is not None and (
        not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes)
    ):
        raise WireError("hello result.capabilities.dtypes: expected a list of dtype names")
    schema = caps.get("key_schema")
    if schema is not None and (
        not isinstance(schema, Mapping)
        or not all(
            isinstance(p, Mapping) and all(isinstance(t, str) for t in p.values())
            for p in schema.values()
        )
    ):
        raise WireError(
            "hello result.capabilities.key_schema: expected {family: {parameter: type}}"
        )
    info = AdapterInfo(  # an adapter's own words are kept short enough to show
        name=info_text(raw["name"]),
        version=info_text(raw["version"]),
        language=info_text(raw["language"]),
        classes=frozenset(classes),
        format_writes=writes,
        format_reads=frozenset(reads),
        options=dict(options),
        raw_fold=raw_fold,
        dtypes=None if dtypes is None else frozenset(dtypes),
        key_schema=None if schema is None else {f: dict(p) for f, p in schema.items()},
        uint_bits=uint_bits,
    )
    problems = info.problems()
    if problems:
        raise WireError(f"hello result.{problems[0]}")
    return info


_ENCODER = json.JSONEncoder(separators=(",", ":"))
_DECODER = json.JSONDecoder()
_DECODE = _DECODER.decode
#: The decoder's scanner (the C one when the interpreter has it): one value from an index,
#: what ``decode`` runs once it has skipped whitespace. (typeshed types its argument as
#: the scanner class itself; at run time it is the decoder whose settings it copies.)
_SCAN: Callable[[str, int], tuple[Any, int]] = make_scanner(_DECODER)  # type: ignore[arg-type]


def decode_line(line: bytes) -> Any:
    """The JSON value of one line; :class:`ValueError` if it is not UTF-8 JSON.

    Exactly :meth:`json.JSONDecoder.decode` (integers of any size stay exact,
    ``\\ud800`` escapes give lone surrogates, ``NaN`` is a float), without its
    set-up for a line that starts with its value; a line nested too deeply to
    decode is a :class:`ValueError` too.
    """
    try:
        text = line.decode()  # UTF-8
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:  # not a JSON value at index 0: let decode() say why
            return _DECODE(text)
        if end == len(text) or not text[end:].strip(" \t\n\r"):  # JSON whitespace after
            return value
        return _DECODE(text)  # for its "Extra data" error
    except RecursionError:
        raise ValueError("JSON nested too deeply to decode") from None


def _exact_u64(text: bytes) -> int | None:
    """The value of a u64 written exactly as PROTO-17 writes it, quotes included (else None)."""
    if len(text) < 3 or text[0] != 34 or text[-1] != 34:
        return None
    digits = text[1:-1]
    if not digits.isdigit() or len(digits) > 20 or (digits[0] == 48 and len(digits) > 1):
        return None  # bytes.isdigit: ASCII digits only
    number = int(digits)
    return number if number < _U64_LIMIT else None


def _exact_count(value: bytes, sep: bytes) -> Outcome | None:
    if value.isdigit() and len(value) <= 20 and (value[0] != 48 or len(value) == 1):
        return Ok(int(value))
    return None


def _exact_one_u64(value: bytes, sep: bytes) -> Outcome | None:
    number = _exact_u64(value)
    return None if number is None else Ok(number)


def _exact_u64_list(value: bytes, sep: bytes) -> Outcome | None:
    if value[:1] != b"[" or value[-1:] != b"]":
        return None
    inner = value[1:-1]
    if not inner:
        return Ok(())
    numbers = []
    for item in inner.split(sep):
        number = _exact_u64(item)
        if number is None:
            return None
        numbers.append(number)
    return Ok(tuple(numbers))


_EXACT_BOOLS = {b"true": _OK_TRUE, b"false": _OK_FALSE}

#: The outcome of an ``ok`` value in its usual spelling (no escapes, no spaces but the
#: separator's), read from the bytes; anything else is None and is decoded as JSON.
_EXACT_OK: dict[str, Callable[[bytes, bytes], Outcome | None]] = {
    "null": lambda value, sep: _OK_NONE if value == b"null" else None,
    "count": _exact_count,
    "bool": lambda value, sep: _EXACT_BOOLS.get(value),
    "u64": _exact_one_u64,
    "u64_list": _exact_u64_list,
    "signature": lambda value, sep: None,
    "validity": lambda value, sep: None,
}


#: The outcomes already read by :data:`_EXACT_OK`, by result kind and the bytes after
#: ``seq``. Such bytes are exactly ``,"ok":VALUE}`` (or with the spaces), so their
#: outcome does not depend on ``seq``; most answers recur (``null``, ``true``, small
#: counts), and a recurring one is judged by one lookup. Outcomes are immutable.
_EXACT_MEMO: dict[str, dict[bytes, Outcome]] = {kind: {} for kind in _EXACT_OK}
_MEMO_BYTES = 256
_MEMO_ENTRIES = 4096


def quick_outcome(op: Op, line: bytes, seq: int) -> Outcome | None:
    """The outcome of ``line`` if it is the usual answer to request ``seq`` for ``op``.

    The usual answer is ``{"seq": seq, "ok": value}`` in ASCII with a well-formed
    value; for it this is what :func:`decode_line` then :func:`outcome_of` give.
    Anything else is ``None``: the caller then decodes ``line`` and checks it in full.
    The usual spellings (compact, or with a space after each separator, no escapes)
    are read from the bytes without decoding (:data:`_EXACT_OK`, :data:`_EXACT_MEMO`);
    any other spelling is decoded as JSON.
    """
    kind = type(op).result
    fast = _FAST_OK[kind]
    if fast is _fast_none:
        return None
    cut = line.find(b",")
    if cut > 0 and line[-1:] == b"}":  # the usual answer, written compactly or with spaces
        head = line[:cut]
        if head == b'{"seq":%d' % seq or head == b'{"seq": %d' % seq:
            rest = line[cut:]
            memo = _EXACT_MEMO[kind]
            known = memo.get(rest)
            if known is not None:
                return known
            if rest.startswith(b',"ok":'):
                exact = _EXACT_OK[kind](rest[6:-1], b",")
            elif rest.startswith(b', "ok": '):
                exact = _EXACT_OK[kind](rest[8:-1], b", ")
            else:
                exact = None
            if exact is not None:
                if len(rest) <= _MEMO_BYTES:
                    if len(memo) >= _MEMO_ENTRIES:
                        memo.clear()
                    memo[rest] = exact
                return exact
    try:
        response, end = _SCAN(line.decode(), 0)
    except (ValueError, StopIteration, RecursionError):
        return None
    if end == len(line) and type(response) is dict and len(response) == 2:
        got = response.get("seq")
        if got == seq and type(got) is int:
            raw = response.get("ok", _NOTHING)
            if raw is not _NOTHING:
                return fast(raw)
    return None


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_c_make_encoder = getattr(_json_encoder, "c_make_encoder", None)
#: ``_ENCODER``'s output without its per-call set-up: the C encoder, made once (no
#: circular-reference bookkeeping; on any error :func:`encode_json` falls back to
#: ``_ENCODER``, which raises what it always raised).
_FAST_ENCODE: Callable[[Any, int], Sequence[str]] | None = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(
        None,  # markers: no circular-reference check
        _not_json,  # default
        _json_encoder.encode_basestring_ascii,  # ASCII only: \u escapes, even for "\ud800"
        None,  # indent
        ":",  # key separator
        ",",  # item separator
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan, as _ENCODER
    )
)


def encode_json(value: Any) -> str:
    """``value`` as compact ASCII-only JSON: the text ``json.JSONEncoder`` gives.

    :class:`TypeError` or :class:`ValueError` if ``value`` holds something JSON
    cannot carry.
    """
    if _FAST_ENCODE is not None:
        try:
            return "".join(_FAST_ENCODE(value, 0))
        except (TypeError, ValueError, RecursionError):
            pass  # the standard encoder raises the usual error, or encodes after all
    return _ENCODER.encode(value)


def request_tail(message: Op | Mapping[str, Any]) -> bytes:
    """The bytes of a request line after its ``seq`` member (see :func:`request_line`).

    Encode an operation or message once, then give it any number of sequence
    numbers; :class:`TypeError` or :class:`ValueError` as :func:`encode_line`.
    """
    text = encode_json(to_wire(message) if isinstance(message, Op) else message)
    if text == "{}":
        raise ValueError("a request has an 'op'")
    return (text[1:] + "\n").encode("ascii")


#: A request line: ``REQUEST_LINE % (seq, tail)`` is :func:`request_line`.
REQUEST_LINE = b'{"seq":%d,%s'


def request_line(seq: int, tail: bytes) -> bytes:
    """The request line ``seq`` of a message whose :func:`request_tail` is ``tail``:
    byte for byte what :func:`encode_line` gives."""
    return REQUEST_LINE % (seq, tail)


def encode_line(seq: int | None, message: Mapping[str, Any]) -> bytes:
    """One request or response line: ``seq`` first, compact JSON, ASCII only, newline.

    ASCII only (``\\u`` escapes) so that any string, even one holding an unpaired
    surrogate (HASH-13), can be written; :class:`TypeError` or :class:`ValueError`
    if ``message`` holds something JSON cannot carry.
    """
    return (encode_json({"seq": seq, **message}) + "\n").encode("ascii")
