"""Counterexamples as scenario files: a shrunk generated program, replayable by any runner.

A counterexample found by the generated checks (:mod:`.generated`) is a program
of operations and the reference's outcome for each. :func:`scenario_document`
writes it as a scenario (format ``scenarios/2``) whose steps replay the program
and whose expectations are the reference's answers:

- a validity check expects ``valid`` or ``invalid``; a length read expects its value;
- a refused operation expects the reference's error with every part
  (``expect_error``: kind, field, layer, values);
- an id read binds a name, and relations close the scenario: ``same`` for ids
  the reference gave equal, ``increasing`` over the distinct ones in the
  reference's order (so the reference's order type is asserted and nothing
  else, CONF-12); plan keys get ``same`` and ``differ``;
- a measured, stamped or verified signature is a ``signature`` definition the
  step expects; payloads are ``payload`` definitions;
- hash programs expect the reference's values.

So the file passes on the reference and fails on the implementation that
produced the counterexample. Nothing here needs Hypothesis.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import yaml

from kvconform.differential import prefix
from kvconform.differential.compare import Mismatch, error_parts
from kvconform.files import write_atomic
from kvconform.protocol import operations as ops
from kvconform.protocol.codec import geometry_to_wire, signature_to_wire
from kvconform.rendering import clip, one_line
from kvconform.values import (
    OPTIONS,
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

SCENARIO_FORMAT = "scenarios/2"

#: Error kinds whose field the kind implies; their ``expect_error`` carries no ``field``.
_IMPLIED_FIELDS = {"unsupported_format": "format_version", "capacity_exceeded": "max_seq_len"}
#: The requirement a scenario of a class cites when the disagreement names none.
_CLASS_REQUIREMENT = {
    "hash": "HASH-11",
    "identity": "ALLOC-13",
    "plan": "PLAN-4",
    "signature": "SIG-2",
    "verify": "VERIFY-9",
    "prefix_cache": "PREFIX-2",
}


class CounterexampleLike(Protocol):
    """What the exporter needs of a counterexample (``differential.engine.Counterexample``)."""

    @property
    def property_id(self) -> str: ...
    @property
    def program(self) -> tuple[ops.Op, ...]: ...
    @property
    def expected(self) -> tuple[Outcome, ...]: ...
    @property
    def mismatch(self) -> Mismatch: ...


class ExportError(ValueError):
    """A program that cannot be written as a scenario (it has no reference answer to expect)."""


class _Flow(dict):  # type: ignore[type-arg]
    """A mapping written in flow style: one step on one line."""


class _FlowList(list):  # type: ignore[type-arg]
    """A list written in flow style."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        """A scalar with a character that is not printable (a bidirectional control, a
        noncharacter, a format character) is written with every character outside ASCII
        escaped: the file means the same, and reads in review as it means (no text
        reversed or hidden by the adapter's words)."""
        if text.isprintable() and "\ufeff" not in text:
            super().write_double_quoted(text, split)
            return
        allow, self.allow_unicode = self.allow_unicode, False
        try:
            super().write_double_quoted(text, split)
        finally:
            self.allow_unicode = allow


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """Plain or quoted as PyYAML likes, unless a character could be lost: line and
    paragraph separators, NEL, a BOM, controls and other non-printables are written
    escaped in double quotes (a quoted scalar folds a raw line break on reading)."""
    style = None if text.isprintable() and "\ufeff" not in text else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(
    _Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data.items(), True)
)
_Dumper.add_representer(
    _FlowList, lambda d, data: d.represent_sequence("tag:yaml.org,2002:seq", data, True)
)


@dataclass(frozen=True)
class Exported:
    """A scenario document and where the disagreeing operation landed in it."""

    document: dict[str, Any]
    scenario_id: str
    area: str
    #: The step (1-based) that replays the operation the implementation got wrong.
    step: int


def scenario_document(
    cx: CounterexampleLike,
    *,
    seed: int | None = None,
    examples: int | None = None,
    adapter: str = "the implementation",
    options: Mapping[str, str] | None = None,
    block_format: tuple[int, Sequence[int]] = (1, (1,)),
) -> Exported:
    """The scenario file that replays ``cx`` and expects the reference's answers.

    ``options`` are the implementation's declared answers: the program was drawn where
    they agree with the reference's, so the scenario assumes the ones that differ from
    the defaults (CONF-6), and never judges another declaration by them. Likewise a
    program of blocks for another ``block_format`` than profile v1 (the version written,
    the versions read) states it as its ``format`` (PROF-3, CONF-11).
    """
    builder = _Steps()
    step_of: dict[int, int] = {}
    for index, (op, outcome) in enumerate(zip(cx.program, cx.expected, strict=True)):
        builder.add(index, op, outcome)
        step_of[index] = len(builder.steps)
    builder.close_relations()
    cls = _class_of(cx.program)
    area = _area_of(cls, cx.program)
    body = json.dumps(builder.steps, sort_keys=True, ensure_ascii=False, default=str)
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()[:10]
    scenario_id = f"{area}.generated.{digest}"
    mismatch = cx.mismatch
    step = step_of.get(mismatch.index, len(builder.steps))
    verb = next(iter(builder.steps[step - 1]))
    requires = _known_requirements(mismatch.requires) or [_CLASS_REQUIREMENT[cls]]
    origin = (
        f"{cx.property_id}"
        + (f", seed {seed}" if seed is not None else "")
        + (f", {examples} examples" if examples is not None else "")
    )
    if mismatch.related_to is not None and mismatch.relations is not None:
        this, other = builder.names.get(mismatch.index), builder.names.get(mismatch.related_to)
        want, have = mismatch.relations
        what = (
            f"the reference gives {this} {want} {other}; {adapter} gives {this} "
            f"{have or 'no comparable value'} {other}"
        )
    else:
        what = f"the reference answers {mismatch.expected}; {adapter} answered {mismatch.actual}"
    why = (
        f"Found by the generated differential check {origin} against {adapter}, and shrunk: "
        f"at step {step} ({verb}) {what}. Every expectation here is the reference's answer."
    )
    decisions = prefix.decisions(cls, requires)
    scenario = {
        "id": scenario_id,
        "title": f"Generated counterexample: {adapter} disagrees with the reference at step "
        f"{step} ({verb})",
        "class": cls,
        # A generated check compares with the reference under the implementation's own
        # declarations, so its verdict rests on the seeds unless a requirement it bears
        # on states one of this specification's decisions (CONF-8).
        "basis": _FlowList(decisions) if decisions else "seed",
        "requires": _FlowList(requires),
        **(
            {"options": a}
            if (a := prefix.assumed(_assumed_options(options), options, cx.program))
            else {}
        ),
        **_format_of(cx.program, block_format),
        "why": why,
        "steps": builder.steps,
    }
    document = {
        "kvconform": SCENARIO_FORMAT,
        "area": area,
        "description": "A shrunk counterexample of the generated checks, exported as a "
        "regression scenario.",
        "scenarios": [scenario],
    }
    return Exported(document, scenario_id, area, step)


def _format_of(
    program: Sequence[ops.Op], block_format: tuple[int, Sequence[int]]
) -> dict[str, Any]:
    """The ``format`` a program of blocks assumes, unless it is profile v1's (CONF-11)."""
    writes, reads = block_format[0], sorted(block_format[1])
    blocks = any(isinstance(op, ops.Measure | ops.Stamp | ops.Verify) for op in program)
    if not blocks or (writes, reads) == (1, [1]):
        return {}
    return {"format": _Flow({"writes": writes, "reads": _FlowList(reads)})}


def _assumed_options(options: Mapping[str, str] | None) -> dict[str, str]:
    """The declared option values a scenario file can assume: those other than the default,
    but ``replace_layer_order``, which a scenario never assumes (a refusal's field is
    re-expressed under the declared order instead, conformance/INTERPRETING.md §6.2)."""
    return {
        name: value
        for name, value in sorted((options or {}).items())
        if name in OPTIONS and name != "replace_layer_order" and value != OPTIONS[name].default
    }


def dump(exported: Exported, header: str = "") -> str:
    """The scenario file's text."""
    text = yaml.dump(
        exported.document,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        width=160,
        default_flow_style=False,
    )
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + text


def write_counterexample(
    cx: CounterexampleLike,
    directory: Path,
    *,
    seed: int | None = None,
    examples: int | None = None,
    adapter: str = "the implementation",
    options: Mapping[str, str] | None = None,
    block_format: tuple[int, Sequence[int]] = (1, (1,)),
) -> Path:
    """Write ``cx`` as ``DIRECTORY/<scenario id>.yaml``; return the path.

    :class:`OSError` if it cannot be written (the folder, a full disk, a path there that
    is not a regular file); a file already at the path is then left as it was.
    """
    exported = scenario_document(
        cx,
        seed=seed,
        examples=examples,
        adapter=adapter,
        options=options,
        block_format=block_format,
    )
    reproduce = (
        f"kvconform run --generated {examples} --seed {seed} --id {cx.property_id}"
        if seed is not None and examples is not None
        else ""
    )
    header = (
        f"Exported by kvconform's generated checks ({cx.property_id}) from a counterexample\n"
        f"against {one_line(clip(adapter, 200))}; expectations are the reference's answers.\n"
        + (f"Found by: {reproduce}\n" if reproduce else "")
        + "To keep it as your own regression test: commit it in your repository and run\n"
        "it with pytest, whose kvconform plugin collects it where it lies\n"
        "(pytest --kv-adapter-cmd '<your adapter>' <this folder>); the pinned suite is\n"
        "unchanged. To propose it for the suite: review id, title and why, move it to\n"
        f"conformance/scenarios/{exported.area}/ and refresh the manifest\n"
        "(python -m kvconform.harness.manifest)."
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{exported.scenario_id}.yaml"
    write_atomic(path, dump(exported, header))  # whole or not at all; never onto a FIFO
    return path


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
            elif f.optional and f.kind != "count_or_null" and raw is None:
                continue
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


def _class_of(program: Sequence[ops.Op]) -> str:
    needs = {op.needs for op in program}
    for cls in ("prefix_cache", "plan", "identity", "verify", "signature", "hash"):
        if cls in needs:
            return cls
    return "identity"


def _area_of(cls: str, program: Sequence[ops.Op]) -> str:
    """The scenarios folder a file belongs in: ``alloc`` for caches alone, else the class."""
    models = (ops.ModelNew, ops.ModelReload, ops.ModelSetHook, ops.ModelInstanceId)
    if cls == "identity" and not any(isinstance(op, models) for op in program):
        return "alloc"
    return "prefix" if cls == "prefix_cache" else cls


def _known_requirements(ids: Sequence[str]) -> list[str]:
    from kvconform.harness.suite import requirements

    try:
        known = requirements()
    except Exception:
        return list(ids)
    return [i for i in ids if i in known]
