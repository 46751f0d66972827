"""Operations: what a scenario asks an implementation to do (spec/protocol.md).

Each operation is a frozen value. The in-process driver dispatches it to a
Python adapter method of the same name; the stdio driver sends its wire form
(:func:`to_wire`) and the stdio server decodes it again (:func:`from_wire`).
Handles (``handle``, ``model``, ``cache``, ``session``) are names chosen by the
harness, so a whole scenario can be sent before any answer is read.

On the wire, every 64-bit integer travels as a decimal string and every
binary64 float that is keyed travels as its bit pattern (``"0x"`` + 16 hex
digits), so no JSON parser loses precision.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from kvconform.values import (
    Fault,
    Geometry,
    LayerDesc,
    MixOp,
    ModelSpec,
    Param,
    Payload,
    PlanIdentity,
    Signature,
    StepInputs,
)


class WireError(ValueError):
    """A message that does not have the shape the protocol gives it."""


@dataclass(frozen=True)
class Op:
    """Base of every operation. ``name`` is the adapter method and the wire ``op``."""

    name: ClassVar[str] = ""
    #: The conformance class that must be declared to run this operation.
    needs: ClassVar[str] = ""


@dataclass(frozen=True)
class Hash(Op):
    name: ClassVar[str] = "hash"
    needs: ClassVar[str] = "hash"
    program: tuple[MixOp, ...]


@dataclass(frozen=True)
class ModelNew(Op):
    name: ClassVar[str] = "model_new"
    needs: ClassVar[str] = "identity"
    handle: str
    spec: ModelSpec


@dataclass(frozen=True)
class ModelReload(Op):
    name: ClassVar[str] = "model_reload"
    needs: ClassVar[str] = "identity"
    model: str
    handle: str


@dataclass(frozen=True)
class ModelSetHook(Op):
    name: ClassVar[str] = "model_set_hook"
    needs: ClassVar[str] = "identity"
    model: str
    hook: str
    present: bool


@dataclass(frozen=True)
class ModelInstanceId(Op):
    name: ClassVar[str] = "model_instance_id"
    needs: ClassVar[str] = "identity"
    model: str


@dataclass(frozen=True)
class CacheNew(Op):
    name: ClassVar[str] = "cache_new"
    needs: ClassVar[str] = "identity"
    handle: str
    geometry: Geometry


@dataclass(frozen=True)
class CacheAppend(Op):
    name: ClassVar[str] = "cache_append"
    needs: ClassVar[str] = "identity"
    cache: str
    tokens: int


@dataclass(frozen=True)
class CacheTruncate(Op):
    name: ClassVar[str] = "cache_truncate"
    needs: ClassVar[str] = "identity"
    cache: str
    length: int


@dataclass(frozen=True)
class CacheClear(Op):
    name: ClassVar[str] = "cache_clear"
    needs: ClassVar[str] = "identity"
    cache: str


@dataclass(frozen=True)
class CacheReplaceLayer(Op):
    """Replace one layer's storage; ``None`` shape fields mean "the cache's own"."""

    name: ClassVar[str] = "cache_replace_layer"
    needs: ClassVar[str] = "identity"
    cache: str
    layer: int
    n_kv_heads: int | None = None
    head_dim: int | None = None
    max_seq_len: int | None = None


@dataclass(frozen=True)
class CacheAllocId(Op):
    name: ClassVar[str] = "cache_alloc_id"
    needs: ClassVar[str] = "identity"
    cache: str


@dataclass(frozen=True)
class CacheLen(Op):
    name: ClassVar[str] = "cache_len"
    needs: ClassVar[str] = "identity"
    cache: str


@dataclass(frozen=True)
class PlanKey(Op):
    name: ClassVar[str] = "plan_key"
    needs: ClassVar[str] = "plan"
    identity: PlanIdentity


@dataclass(frozen=True)
class SessionNew(Op):
    name: ClassVar[str] = "session_new"
    needs: ClassVar[str] = "plan"
    handle: str
    model: str
    cache: str
    step_tokens: int = 1


@dataclass(frozen=True)
class SessionValid(Op):
    name: ClassVar[str] = "session_valid"
    needs: ClassVar[str] = "plan"
    session: str
    model: str
    cache: str
    step: StepInputs


@dataclass(frozen=True)
class Drop(Op):
    """Release a model, cache or session; the harness keeps no reference after it."""

    name: ClassVar[str] = "drop"
    needs: ClassVar[str] = "identity"
    handle: str


@dataclass(frozen=True)
class Measure(Op):
    name: ClassVar[str] = "measure"
    needs: ClassVar[str] = "signature"
    model: str
    payload: Payload


@dataclass(frozen=True)
class Stamp(Op):
    name: ClassVar[str] = "stamp"
    needs: ClassVar[str] = "signature"
    model: str
    payload: Payload


@dataclass(frozen=True)
class Verify(Op):
    name: ClassVar[str] = "verify"
    needs: ClassVar[str] = "verify"
    recorded: Signature | None
    payload: Payload
    expected: Signature


OPERATIONS: dict[str, type[Op]] = {
    cls.name: cls
    for cls in (
        Hash,
        ModelNew,
        ModelReload,
        ModelSetHook,
        ModelInstanceId,
        CacheNew,
        CacheAppend,
        CacheTruncate,
        CacheClear,
        CacheReplaceLayer,
        CacheAllocId,
        CacheLen,
        PlanKey,
        SessionNew,
        SessionValid,
        Drop,
        Measure,
        Stamp,
        Verify,
    )
}


# Wire encoding ---------------------------------------------------------------


def u64_to_wire(value: int) -> str:
    return str(value)


def u64_from_wire(value: object, where: str) -> int:
    if not isinstance(value, str) or not value.isdigit():
        raise WireError(f"{where}: expected a decimal string, got {value!r}")
    number = int(value)
    if number >= 1 << 64:
        raise WireError(f"{where}: {value} does not fit in 64 bits")
    return number


def bits_to_wire(bits: int) -> str:
    return f"0x{bits:016x}"


def bits_from_wire(value: object, where: str) -> int:
    if not isinstance(value, str) or not value.startswith("0x") or len(value) != 18:
        raise WireError(f"{where}: expected '0x' and 16 hex digits, got {value!r}")
    try:
        return int(value, 16)
    except ValueError:
        raise WireError(f"{where}: expected '0x' and 16 hex digits, got {value!r}") from None


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
    raise WireError(f"{where}.op: unknown mix op {kind!r}")


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
    raise WireError(f"{where}: expected {{'u64'|'f64'|'str': value}}, got {raw!r}")


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


def _geometry_to_wire(g: Geometry) -> dict[str, Any]:
    return dataclasses.asdict(g)


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
        "geometry": _geometry_to_wire(identity.geometry),
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


def _payload_to_wire(payload: Payload) -> list[dict[str, int]]:
    return [dataclasses.asdict(layer) for layer in payload]


def _payload_from_wire(raw: object, where: str) -> Payload:
    if not isinstance(raw, list):
        raise WireError(f"{where}: expected a list of layers")
    layers = []
    for index, item in enumerate(raw):
        at = f"{where}[{index}]"
        item = _mapping(item, at)
        layers.append(
            LayerDesc(
                **{
                    name: _int(item.get(name), f"{at}.{name}")
                    for name in ("n_kv_heads", "head_dim", "seq_len", "k_len", "v_len")
                }
            )
        )
    return tuple(layers)


def signature_to_wire(sig: Signature | None) -> dict[str, Any] | None:
    return None if sig is None else dataclasses.asdict(sig)


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


_Encoder = Callable[[Any], Any]
_Decoder = Callable[[Any, str], Any]

#: How each operation field travels, by field name.
_FIELD_CODECS: dict[str, tuple[_Encoder, _Decoder]] = {
    "program": (
        lambda program: [_mix_to_wire(op) for op in program],
        lambda raw, where: tuple(
            _mix_from_wire(_mapping(item, f"{where}[{i}]"), f"{where}[{i}]")
            for i, item in enumerate(_list(raw, where))
        ),
    ),
    "spec": (_model_to_wire, lambda raw, where: _model_from_wire(_mapping(raw, where), where)),
    "geometry": (
        _geometry_to_wire,
        lambda raw, where: _geometry_from_wire(_mapping(raw, where), where),
    ),
    "identity": (
        _identity_to_wire,
        lambda raw, where: _identity_from_wire(_mapping(raw, where), where),
    ),
    "step": (_step_to_wire, lambda raw, where: _step_from_wire(_mapping(raw, where), where)),
    "payload": (_payload_to_wire, _payload_from_wire),
    "recorded": (
        signature_to_wire,
        lambda raw, where: None if raw is None else signature_from_wire(raw, where),
    ),
    "expected": (signature_to_wire, signature_from_wire),
    "present": (lambda v: v, lambda raw, where: _bool(raw, where)),
}
_INT_FIELDS = {"tokens", "length", "layer", "n_kv_heads", "head_dim", "max_seq_len", "step_tokens"}


def to_wire(op: Op) -> dict[str, Any]:
    """The JSON-ready form of ``op`` (without the sequence number)."""
    out: dict[str, Any] = {"op": op.name}
    for f in dataclasses.fields(op):
        value = getattr(op, f.name)
        codec = _FIELD_CODECS.get(f.name)
        out[f.name] = codec[0](value) if codec else value
    return out


def from_wire(raw: Mapping[str, Any]) -> Op:
    """Decode a request into an operation, or raise :class:`WireError`."""
    name = raw.get("op")
    cls = OPERATIONS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise WireError(f"op: unknown operation {name!r}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        where = f"{name}.{f.name}"
        if f.name not in raw:
            if f.default is not dataclasses.MISSING:
                continue
            raise WireError(f"{where}: missing")
        value = raw[f.name]
        codec = _FIELD_CODECS.get(f.name)
        if codec:
            kwargs[f.name] = codec[1](value, where)
        elif f.name in _INT_FIELDS:
            kwargs[f.name] = None if value is None else _int(value, where)
        else:
            kwargs[f.name] = _str(value, where)
    return cls(**kwargs)


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
        raise WireError(f"{where}: expected a non-negative integer, got {raw!r}")
    return raw


def _str(raw: object, where: str) -> str:
    if not isinstance(raw, str):
        raise WireError(f"{where}: expected a string, got {raw!r}")
    return raw


def _bool(raw: object, where: str) -> bool:
    if not isinstance(raw, bool):
        raise WireError(f"{where}: expected true or false, got {raw!r}")
    return raw
