"""The steps of an exported counterexample: each operation of a shrunk program and the
reference's outcome, written as scenario steps (:mod:`.export` assembles the file).

Values are written as a reader of the scenario format reads them back: payloads as
``payload`` definitions, signatures as ``signature`` definitions, parameters tagged
where YAML would misread them, refusals with every part of the reference's error.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import yaml

from kvconform.differential.compare import error_parts
from kvconform.differential.yaml_dump import _Dumper, _Flow, _FlowList
from kvconform.protocol import operations as ops
from kvconform.protocol.codec import geometry_to_wire, signature_to_wire
from kvconform.values import (
    Fault,
    LayerDesc,
    MixOp,
    ModelSpec,
    Ok,
    Outcome,
    Param,
    Payload,
    Refused,
    Signature,
)

_IMPLIED_FIELDS = {"unsupported_format": "format_version", "capacity_exceeded": "max_seq_len"}


class ExportError(ValueError):
    """A program that cannot be written as a scenario (it has no reference answer to expect)."""


# Steps ---------------------------------------------------------------------------


class _Steps:
    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.payloads: dict[Payload, str] = {}
        self.signatures: dict[Signature, str] = {}
        #: Relation reads: table -> [(value name, the reference's value)].
        self.reads: dict[str, list[tuple[str, int]]] = {}
        #: The value name bound by each relation read, by operation index.
        self.names: dict[int, str] = {}
        self.reads_last_name = ""

    def step(self, verb: str, args: Any) -> None:
        self.steps.append({verb: _Flow(args) if isinstance(args, dict) else args})

    def add(self, index: int, op: ops.Op, outcome: Outcome) -> None:
        number = index + 1
        if not isinstance(outcome, Ok | Refused):
            raise ExportError(f"operation {number} ({op.name}) has no reference answer")
        fault = outcome.fault if isinstance(outcome, Refused) else None
        value = outcome.value if isinstance(outcome, Ok) else None
        handler = getattr(self, f"_{type(op).__name__}", None)
        refusable = ops.CacheAppend | ops.CacheReplaceLayer | ops.Measure | ops.Stamp | ops.Verify
        if fault is not None and handler is not None and not isinstance(op, refusable):
            raise ExportError(f"operation {number} ({op.name}) was refused; no verb expects that")
        if handler is None:
            self._operation(number, op, value, fault)
        else:
            handler(number, op, value, fault)
        if type(op) in (ops.ModelInstanceId, ops.CacheAllocId, ops.PlanKey):
            self.names[index] = self.reads_last_name

    # identity

    def _ModelNew(self, n: int, op: ops.ModelNew, value: object, fault: Fault | None) -> None:
        self.step(op.name, {"as": op.handle, **_model(op.spec)})

    def _ModelReload(self, n: int, op: ops.ModelReload, value: object, fault: Fault | None) -> None:
        self.step(op.name, {"model": op.model, "as": op.handle})

    def _ModelSetHook(
        self, n: int, op: ops.ModelSetHook, value: object, fault: Fault | None
    ) -> None:
        self.step(op.name, {"model": op.model, "hook": op.hook, "present": op.present})

    def _ModelInstanceId(
        self, n: int, op: ops.ModelInstanceId, value: object, fault: Fault | None
    ) -> None:
        name = f"instance_{n}"
        self.step(op.name, {"model": op.model, "as": name})
        self._read("instance", name, value)

    def _CacheNew(self, n: int, op: ops.CacheNew, value: object, fault: Fault | None) -> None:
        self.step(op.name, {"as": op.handle, **geometry_to_wire(op.geometry)})

    def _CacheNewPlaced(
        self, n: int, op: ops.CacheNewPlaced, value: object, fault: Fault | None
    ) -> None:
        self.step(
            op.name,
            {
                "as": op.handle,
                **geometry_to_wire(op.geometry),
                "residency": op.residency,
                "layer_storage": _FlowList(op.layer_storage),
            },
        )

    def _CacheAppend(self, n: int, op: ops.CacheAppend, value: object, fault: Fault | None) -> None:
        args: dict[str, Any] = {"cache": op.cache, "tokens": op.tokens}
        if fault is not None:
            args["expect_error"] = _error(fault)
        self.step(op.name, args)

    def _CacheTruncate(
        self, n: int, op: ops.CacheTruncate, value: object, fault: Fault | None
    ) -> None:
        self.step(op.name, {"cache": op.cache, "to": op.length})

    def _CacheClear(self, n: int, op: ops.CacheClear, value: object, fault: Fault | None) -> None:
        self.step(op.name, {"cache": op.cache})

    def _CacheReplaceLayer(
        self, n: int, op: ops.CacheReplaceLayer, value: object, fault: Fault | None
    ) -> None:
        args: dict[str, Any] = {"cache": op.cache, "layer": op.layer}
        for name in ("n_kv_heads", "head_dim", "max_seq_len"):
            if getattr(op, name) is not None:
                args[name] = getattr(op, name)
        if fault is not None:
            args["expect_error"] = _error(fault)
        self.step(op.name, args)

    def _CacheAllocId(
        self, n: int, op: ops.CacheAllocId, value: object, fault: Fault | None
    ) -> None:
        name = f"alloc_{n}"
        self.step(op.name, {"cache": op.cache, "as": name})
        self._read("alloc", name, value)

    def _CacheLen(self, n: int, op: ops.CacheLen, value: object, fault: Fault | None) -> None:
        self.step(op.name, {"cache": op.cache, "expect": value})

    def _Drop(self, n: int, op: ops.Drop, value: object, fault: Fault | None) -> None:
        self.step(op.name, op.handle)

    # plan

    def _SessionNew(self, n: int, op: ops.SessionNew, value: object, fault: Fault | None) -> None:
        self.step(
            op.name,
            {"as": op.handle, "model": op.model, "cache": op.cache, "step_tokens": op.step_tokens},
        )

    def _SessionValid(
        self, n: int, op: ops.SessionValid, value: object, fault: Fault | None
    ) -> None:
        expect = "valid" if value is True else "invalid"
        self.step(op.name, {**_question(op), "expect": expect})

    def _SessionValidity(
        self, n: int, op: ops.SessionValidity, value: object, fault: Fault | None
    ) -> None:
        self.step(op.name, {**_question(op), "expect": value})

    def _operation(self, n: int, op: ops.Op, value: object, fault: Fault | None) -> None:
        """A step for an operation with no writer of its own, in the form the scenario
        compiler reads from the operation table: its fields by name (a new handle is
        ``as``), then ``expect_error``, ``expect`` (a count or a boolean) or, for a value
        compared by relation, ``as``."""
        spec = ops.BY_CLASS[type(op)]
        args: dict[str, Any] = {}
        for f in spec.fields:
            raw = getattr(op, f.name)
            if f.kind == "new_handle":
                args["as"] = raw
            elif f.optional and (f.kind != "count_or_null" or f.added) and raw is None:
                continue  # (an added field is left out at its default, PROTO-31)
            else:
                args[f.name] = _FlowList(raw) if isinstance(raw, tuple) else raw
        if fault is not None:
            args["expect_error"] = _error(fault)
        elif spec.result in ("count", "bool"):
            args["expect"] = value
        elif spec.result != "null":
            raise ExportError(
                f"operation {n} ({op.name}): a {spec.result} result has no scenario form "
                "without a writer of its own in kvconform.differential.export"
            )
        self.step(op.name, args)

    def _PlanKey(self, n: int, op: ops.PlanKey, value: object, fault: Fault | None) -> None:
        i = op.identity
        name = f"key_{n}"
        self.step(
            op.name,
            {
                "as": name,
                **_model(i.model),
                "instance": i.instance,
                "alloc": i.alloc,
                **geometry_to_wire(i.geometry),
                "step_tokens": i.step_tokens,
            },
        )
        self._read("key", name, value)

    # hash

    def _Hash(self, n: int, op: ops.Hash, value: object, fault: Fault | None) -> None:
        assert isinstance(value, tuple)
        self.step(
            op.name,
            {"ops": [_mix(m) for m in op.program], "expect": [f"0x{v:016x}" for v in value]},
        )

    # signature and verify

    def _Measure(self, n: int, op: ops.Measure, value: object, fault: Fault | None) -> None:
        self._measuring("measure", op, value, fault)

    def _Stamp(self, n: int, op: ops.Stamp, value: object, fault: Fault | None) -> None:
        self._measuring("stamp", op, value, fault)

    def _measuring(
        self, verb: str, op: ops.Measure | ops.Stamp, value: object, fault: Fault | None
    ) -> None:
        args: dict[str, Any] = {"model": op.model, "payload": self._payload(op.payload)}
        if op.layout is not None:  # a writer of version 2 supplies it (PROF-6)
            args["layout"] = _Flow(
                {"block_size": op.layout.block_size, "sliding_window": op.layout.sliding_window}
            )
        args.update(self._result(value, fault))
        self.step(verb, args)

    def _Verify(self, n: int, op: ops.Verify, value: object, fault: Fault | None) -> None:
        args: dict[str, Any] = {
            "recorded": None if op.recorded is None else self._signature(op.recorded),
            "payload": self._payload(op.payload),
            "expected": self._signature(op.expected),
        }
        args.update(self._result(value, fault))
        self.step(op.name, args)

    def _result(self, value: object, fault: Fault | None) -> dict[str, Any]:
        if fault is not None:
            return {"expect_error": _error(fault)}
        assert isinstance(value, Signature)
        return {"expect": self._signature(value)}

    def _signature(self, sig: Signature) -> str:
        name = self.signatures.get(sig)
        if name is None:
            name = self.signatures[sig] = f"signature_{len(self.signatures) + 1}"
            fields = signature_to_wire(sig)
            assert fields is not None
            layout = fields.pop("layout", None)  # written as its two keys (§4.6)
            self.step("signature", {"as": name, **fields, **(layout or {})})
        return name

    def _payload(self, payload: Payload) -> str:
        name = self.payloads.get(payload)
        if name is None:
            name = self.payloads[payload] = f"payload_{len(self.payloads) + 1}"
            self.step("payload", {"as": name, **payload_args(payload)})
        return name

    # relations

    def _read(self, table: str, name: str, value: object) -> None:
        assert isinstance(value, int)
        self.reads.setdefault(table, []).append((name, value))
        self.reads_last_name = name

    def close_relations(self) -> None:
        for table in ("instance", "alloc", "key"):
            reads = self.reads.get(table, [])
            classes: dict[int, list[str]] = {}
            for name, value in reads:
                classes.setdefault(value, []).append(name)
            for names in classes.values():
                if len(names) > 1:
                    self.step("same", _FlowList(names))
            representatives = [classes[v][0] for v in sorted(classes)]
            if len(representatives) > 1:
                relation = "differ" if table == "key" else "increasing"
                if table == "key":
                    representatives = [names[0] for names in classes.values()]
                self.step(relation, _FlowList(representatives))


def _question(op: ops.SessionValid | ops.SessionValidity) -> dict[str, Any]:
    """The arguments of a question about a held plan: the plan, model, cache and step."""
    s = op.step
    step = {
        "token_ids": list(s.token_ids),
        "write_offset": s.write_offset,
        "rope": {"theta": s.rope_theta, "scaling": s.rope_scaling},
        "mask": list(s.mask),
    }
    return {"session": op.session, "model": op.model, "cache": op.cache, "step": step}


def _model(spec: ModelSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"family": spec.family}
    if spec.params:
        out["params"] = {name: param(value) for name, value in spec.params}
    if spec.hooks:
        out["hooks"] = dict(spec.hooks)
    return out


#: Strings a YAML reader could take for a number (the compiler asks for them tagged).
_NUMBERLIKE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(inf|nan)", re.IGNORECASE)


def param(value: Param) -> Any:
    """A structural parameter as a scenario writes it, so that it reads back the same:
    a float whose bits YAML would not keep (a NaN payload) by its bit pattern, a
    string that reads like a number tagged ``{str: ...}``."""
    if isinstance(value, float):
        bits = int.from_bytes(struct.pack("<d", value), "little")
        back = yaml.safe_load(yaml.dump(value, Dumper=_Dumper))
        if isinstance(back, float) and struct.pack("<d", back) == struct.pack("<d", value):
            return value
        return {"f64": f"0x{bits:016x}"}
    if isinstance(value, str) and _NUMBERLIKE.fullmatch(value.strip()):
        return {"str": value}
    return value


def _mix(op: MixOp) -> dict[str, Any]:
    if op.kind == "bytes":
        assert isinstance(op.value, bytes)
        out: dict[str, Any] = {"op": "bytes", "hex": op.value.hex()}
        if op.repeat != 1:
            out["repeat"] = op.repeat
        return out
    if op.kind == "f64":
        assert isinstance(op.value, int)
        return {"op": "f64", "bits": f"0x{op.value:016x}"}
    if op.kind == "finish":
        return {"op": "finish"}
    return {"op": op.kind, "value": op.value}


def _error(fault: Fault) -> dict[str, Any]:
    """``expect_error`` with every part the kind carries (ERR-2)."""
    out: dict[str, Any] = {"kind": fault.kind}
    if fault.field is not None and fault.kind not in _IMPLIED_FIELDS:
        out["field"] = fault.field
    if fault.layer is not None:
        out["layer"] = fault.layer
    out.update(error_parts(fault.values))
    return out


# Payloads -----------------------------------------------------------------------


def _layer(n_kv_heads: int, head_dim: int, tokens: int) -> LayerDesc:
    size = n_kv_heads * head_dim * tokens
    return LayerDesc(n_kv_heads, head_dim, tokens, size, size)


def _apply(current: LayerDesc, override: Mapping[str, int]) -> LayerDesc:
    """What the scenario compiler makes of one ``layers`` override (conformance/INTERPRETING.md)."""
    per_token = current.n_kv_heads * current.head_dim
    tokens = current.k_len // per_token if per_token else 0
    if any(name in override for name in ("n_kv_heads", "head_dim", "tokens")):
        current = _layer(
            override.get("n_kv_heads", current.n_kv_heads),
            override.get("head_dim", current.head_dim),
            override.get("tokens", tokens),
        )
    claims = {k: override[k] for k in ("seq_len", "k_len", "v_len", "v_head_dim") if k in override}
    return replace(current, **claims)


def _override(index: int, layer: LayerDesc, base: LayerDesc) -> dict[str, int]:
    """The shortest ``layers`` entry that turns ``base`` into ``layer``."""
    shape = {
        name: getattr(layer, name)
        for name in ("n_kv_heads", "head_dim")
        if getattr(layer, name) != getattr(base, name)
    }
    best: dict[str, int] | None = None
    for candidate in ({**shape, "tokens": layer.seq_len}, shape):
        made = _apply(base, candidate)
        full = {
            **candidate,
            **{
                k: getattr(layer, k)
                for k in ("seq_len", "k_len", "v_len", "v_head_dim")
                if getattr(layer, k) != getattr(made, k)
            },
        }
        if _apply(base, full) == layer and (best is None or len(full) < len(best)):
            best = full
    assert best is not None
    return {"layer": index, **best}


def payload_args(payload: Sequence[LayerDesc]) -> dict[str, Any]:
    """``payload`` verb arguments that describe exactly these layers."""
    if not payload:
        return {"n_layers": 0, "n_kv_heads": 1, "head_dim": 1, "tokens": 0}
    first = payload[0]
    base = _layer(first.n_kv_heads, first.head_dim, first.seq_len)
    if base != first:
        per_token = first.n_kv_heads * first.head_dim
        tokens = first.k_len // per_token if per_token else 0
        base = _layer(first.n_kv_heads, first.head_dim, tokens)
    args: dict[str, Any] = {
        "n_layers": len(payload),
        "n_kv_heads": base.n_kv_heads,
        "head_dim": base.head_dim,
        "tokens": base.seq_len,
    }
    overrides = [_override(i, layer, base) for i, layer in enumerate(payload) if layer != base]
    if overrides:
        args["layers"] = overrides
    return args
