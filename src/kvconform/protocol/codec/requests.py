"""The wire form of a request: each field of an operation by its kind in the operation
table (:data:`FIELD_CODECS`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kvconform.protocol.codec.scalars import WireError, _bool, _int, _list, _mapping, _str
from kvconform.protocol.codec.values import (
    _geometry_from_wire,
    _identity_from_wire,
    _identity_to_wire,
    _layout_or_null,
    _mix_from_wire,
    _mix_to_wire,
    _model_from_wire,
    _model_to_wire,
    _payload_from_wire,
    _payload_to_wire,
    _step_from_wire,
    _step_to_wire,
    geometry_to_wire,
    layout_to_wire,
    signature_from_wire,
    signature_to_wire,
)
from kvconform.protocol.operations import BY_CLASS, BY_NAME, FieldKind, Op
from kvconform.rendering import clip
from kvconform.values import MixOp, Signature

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


#: How a field of each kind travels (:data:`~kvconform.protocol.operations.FieldKind`).
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
