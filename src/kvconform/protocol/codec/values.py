"""The wire form of each value an operation carries (spec/protocol.md): programs, model
specs, steps, geometries, plan identities, payloads, layouts, signatures and faults, and
what a fault must be to cross the wire (PROTO-21)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kvconform.protocol.codec.scalars import (
    WireError,
    _int,
    _mapping,
    _str,
    bits_from_wire,
    bits_to_wire,
    u64_from_wire,
    u64_to_wire,
)
from kvconform.rendering import clip
from kvconform.values import (
    Fault,
    Geometry,
    LayerDesc,
    Layout,
    MixOp,
    ModelSpec,
    Param,
    Payload,
    PlanIdentity,
    Signature,
    StepInputs,
)


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
