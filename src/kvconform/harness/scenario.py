"""Scenario files: loading, validation and compilation into cases.

A scenario file (format ``scenarios/2``, schema ``schema/scenarios.schema.json``)
holds scenarios; each compiles into a :class:`Case`: a program of operations
(:mod:`kvconform.protocol.operations`) and the checks that judge their outcomes
(:mod:`.checks`). A step's verb is the name of the operation it performs (the protocol's
``op``), or one of the verbs that define values (``payload``, ``signature``), assert
relations (``same``, ``differ``, ``nonzero``, ``increasing``), repeat steps (``repeat``)
or restart the implementation (``restart``, :mod:`.restart_step`): see :func:`verbs`.
Everything a reader can get wrong in a file -- a schema violation, a handle used before
it is made, a value name used twice -- is a :class:`SourceError` naming file, line, element.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import kvconform
from kvconform.harness.checks import (
    Answers,
    Check,
    ErrorIs,
    Expectation,
    OutcomeCheck,
    Refuses,
    RelationCheck,
    ShapeMismatchIs,
    SignatureIs,
    Succeeds,
    Validity,
    ValueIs,
    ValueRef,
    Where,
)
from kvconform.harness.restart_step import RestartStep
from kvconform.harness.yamlsource import Document, PathKey, SourceError, load_yaml, validate
from kvconform.protocol import operations as ops
from kvconform.values import (
    SHAPE_FIELDS,
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


@dataclass(frozen=True)
class Case:
    """One conformance case: a scenario or a known-answer vector."""

    id: str
    title: str
    cls: str
    requires: tuple[str, ...]
    why: str
    file: str
    line: int | None
    program: tuple[ops.Op, ...]
    checks: tuple[Check, ...]
    incident: str = ""
    #: The block format version the case assumes, if it depends on one (PROF-3).
    profile: int | None = None
    area: str = ""
    kind: str = "scenario"
    #: The decisions of this specification the verdict rests on (spec/README.md,
    #: Decisions); empty when it rests on the seeds' semantics alone (CONF-8).
    basis: tuple[str, ...] = ()
    #: The option values the case assumes (CONF-6).
    options: tuple[tuple[str, str], ...] = ()
    #: The version written and the readable set the case assumes, where it says
    #: (``format:`` in the file; PROF-3, CONF-11).
    format_writes: int | None = None
    format_reads: tuple[int, ...] | None = None
    #: Versions the readable set must contain, whatever else it holds.
    format_reads_include: tuple[int, ...] = ()
    #: How the case was rewritten into the shape an implementation declares, one line
    #: per rewriting (INTERPRETING.md §6.4); empty for a case judged as written.
    reexpressed: tuple[str, ...] = ()

    @property
    def basis_kind(self) -> str:
        """``seed`` or ``decision``: whether a failure breaks the seeds' semantics or a policy."""
        return "decision" if self.basis else "seed"

    @cached_property
    def file_name(self) -> str:
        """The file, relative to the suite's folders when it is one of theirs."""
        path = self.file if os.path.isabs(self.file) else str(Path(self.file).resolve())
        for root in _suite_roots(kvconform.data_root()):
            if path.startswith(root):
                return path[len(root) :].replace(os.sep, "/")
        return Path(path).name


@cache
def _suite_roots(data_root: Path) -> tuple[str, str]:
    """The folders a case file is named relative to, each ending in a separator."""
    root = data_root.resolve()
    return (str(root / "conformance") + os.sep, str(root) + os.sep)


#: Format ``scenarios/1`` named these operations otherwise; a file in that format
#: is read as ``scenarios/2`` with its verbs renamed (nothing else changed meaning).
LEGACY_VERBS = {
    "new_model": "model_new",
    "reload_model": "model_reload",
    "set_hook": "model_set_hook",
    "instance_id": "model_instance_id",
    "new_cache": "cache_new",
    "append": "cache_append",
    "truncate": "cache_truncate",
    "clear": "cache_clear",
    "replace_layer": "cache_replace_layer",
    "alloc_id": "cache_alloc_id",
    "new_session": "session_new",
    "check": "session_valid",
}


def verbs() -> tuple[str, ...]:
    """Every verb a step may use: the operations of the table and the verbs of the format."""
    own = {name[3:] for name in dir(_Compiler) if name.startswith("_v_")}
    return tuple(sorted(own | set(ops.BY_NAME)))


def migrate(document: Document) -> Document:
    """A ``scenarios/1`` document as ``scenarios/2``: verbs renamed, lines kept."""
    data = document.data
    if not isinstance(data, dict) or data.get("kvconform") != "scenarios/1":
        return document

    def rename(steps: object) -> object:
        if not isinstance(steps, list):
            return steps
        out = []
        for step in steps:
            if isinstance(step, dict) and len(step) == 1:
                ((verb, args),) = step.items()
                if verb == "repeat" and isinstance(args, dict):
                    args = {**args, "steps": rename(args.get("steps"))}
                step = {LEGACY_VERBS.get(verb, verb): args}
            out.append(step)
        return out

    scenarios = data.get("scenarios")
    if isinstance(scenarios, list):
        scenarios = [
            {**raw, "steps": rename(raw.get("steps"))} if isinstance(raw, dict) else raw
            for raw in scenarios
        ]
    migrated = {**data, "kvconform": "scenarios/2", "scenarios": scenarios}

    def key(path: PathKey) -> PathKey:
        return tuple(
            LEGACY_VERBS.get(part, part)
            if isinstance(part, str) and i >= 2 and path[i - 2] == "steps"
            else part
            for i, part in enumerate(path)
        )

    lines = {key(path): line for path, line in document.lines.items()}
    return Document(document.file, migrated, lines)


def load_scenario_file(path: Path) -> list[Case]:
    """Load, validate and compile every scenario in one file."""
    document = migrate(load_yaml(path))
    validate(document, "scenarios")
    area = document.data["area"]
    cases = []
    for index, raw in enumerate(document.data["scenarios"]):
        cases.append(_Compiler(document, ("scenarios", index), area).compile(raw))
    return cases


# Compilation -------------------------------------------------------------------

_Args = Mapping[str, Any]
#: The iteration of the enclosing ``repeat``, or ``None`` outside one.
_Iter = int | None


@dataclass
class _Scope:
    handles: dict[str, str] = field(default_factory=dict)  # live handle -> kind
    models: dict[str, ModelSpec] = field(default_factory=dict)
    caches: dict[str, Geometry] = field(default_factory=dict)
    sessions: dict[str, int] = field(default_factory=dict)  # -> step_tokens
    values: dict[str, list[ValueRef]] = field(default_factory=dict)
    collecting: set[str] = field(default_factory=set)
    bound_in_iteration: set[tuple[str, int]] = field(default_factory=set)
    payloads: dict[str, Payload] = field(default_factory=dict)
    signatures: dict[str, Signature] = field(default_factory=dict)
    keys: dict[str, PlanIdentity] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)  # every non-handle name defined


class _Compiler(RestartStep):
    def __init__(self, document: Document, base: PathKey, area: str) -> None:
        self.doc = document
        self.base = base
        self.area = area
        self.scope = _Scope()
        self.program: list[ops.Op] = []
        self.checks: list[Check] = []
        #: Caches cleared whose new id is still to be read (see :meth:`_v_cache_clear`).
        self.unread_clears: dict[str, Where] = {}

    def compile(self, raw: Mapping[str, Any]) -> Case:
        self._steps(raw["steps"], (*self.base, "steps"), label="step", iteration=None)
        for cleared in list(self.unread_clears):
            self._read_cleared(cleared)
        return Case(
            id=raw["id"],
            title=raw["title"],
            cls=raw["class"],
            requires=tuple(raw["requires"]),
            why=" ".join(raw["why"].split()),
            incident=raw.get("incident", ""),
            profile=raw.get("profile"),
            file=self.doc.file,
            line=self.doc.line_of(self.base),
            program=tuple(self.program),
            checks=tuple(self.checks),
            area=self.area,
            basis=() if raw["basis"] == "seed" else tuple(raw["basis"]),
            options=tuple(sorted(raw.get("options", {}).items())),
            format_writes=raw.get("format", {}).get("writes"),
            format_reads=(
                tuple(sorted(raw["format"]["reads"])) if "reads" in raw.get("format", {}) else None
            ),
            format_reads_include=tuple(sorted(raw.get("format", {}).get("reads_include", ()))),
        )

    # -- plumbing

    def _fail(self, path: PathKey, problem: str) -> SourceError:
        return self.doc.error(path, problem)

    def _emit(self, op: ops.Op, where: Where, expect: Expectation | None = None) -> int:
        self.program.append(op)
        index = len(self.program) - 1
        self.checks.append(OutcomeCheck(where, index, expect or Succeeds()))
        return index

    def _observe_id(self, op: ops.Op, where: Where, requirement: str) -> None:
        """Read the id an operation just minted and check it is not zero (ID-1, ALLOC-1).

        Every mint is observed, not only the ids a scenario names: a counter that
        starts at 0 hands 0 to the first object of the process alone, whichever
        scenario happens to make it. Reading an id changes nothing (ALLOC-12), except
        that it settles a lazy clear's pending mint (ALLOC-18), which is why a clear's
        id is read only later.
        """
        index = self._emit(op, where)
        ref = ValueRef(f"the id minted at {where.step}", index)
        self.checks.append(RelationCheck(where, "nonzero", (ref,), (requirement,)))

    def _handle(self, name: str, kind: str, path: PathKey) -> str:
        actual = self.scope.handles.get(name)
        if actual is None:
            raise self._fail(path, f"no live {kind} named {name!r} (made by an earlier step?)")
        if actual != kind:
            raise self._fail(path, f"{name!r} is a {actual}, not a {kind}")
        return name

    def _bind_handle(self, name: str, kind: str, path: PathKey, iteration: int | None) -> None:
        if name in self.scope.handles:
            raise self._fail(
                path, f"handle {name!r} is still live; drop it before reusing the name"
            )
        if name in self.scope.names:
            raise self._fail(path, f"{name!r} already names a value")
        self.scope.handles[name] = kind

    def _define(self, name: str, path: PathKey, iteration: int | None) -> None:
        if name in self.scope.handles:
            raise self._fail(path, f"{name!r} already names a handle")
        collected = iteration is not None and name in self.scope.collecting
        if name in self.scope.names and not collected:
            raise self._fail(path, f"{name!r} is defined twice")
        if iteration is not None and (name, iteration) in self.scope.bound_in_iteration:
            raise self._fail(path, f"{name!r} is bound twice in one iteration")
        self.scope.names.add(name)
        if iteration is not None:
            self.scope.collecting.add(name)
            self.scope.bound_in_iteration.add((name, iteration))

    def _bind_value(self, name: str, ref: ValueRef, path: PathKey, iteration: int | None) -> None:
        self._define(name, path, iteration)
        self.scope.values.setdefault(name, []).append(ref)

    # -- steps

    def _steps(
        self, steps: Sequence[Mapping[str, Any]], path: PathKey, label: str, iteration: int | None
    ) -> None:
        for number, step in enumerate(steps, start=1):
            ((verb, args),) = step.items()
            at = (*path, number - 1, verb)
            where = Where(self.doc.file, self.doc.line_of(at), f"{label} {number} ({verb})")
            compile_step = getattr(self, f"_v_{verb}", None)
            if compile_step is not None:
                compile_step(args, at, where, iteration)
            elif verb in ops.BY_NAME:
                self._operation(ops.BY_NAME[verb], args, at, where, iteration)
            else:
                raise self._fail(at, f"unknown verb {verb!r} (the verbs are {', '.join(verbs())})")

    def _operation(self, spec: ops.OpSpec, args: Any, at: PathKey, where: Where, it: _Iter) -> None:
        """A step for an operation with no verb of its own, read from the operation table.

        Its arguments are the operation's fields by name (a new handle is ``as``);
        ``expect`` gives a count's or a boolean's value, ``as`` binds a value to
        compare by relation, ``expect_error`` a refusal. Fields of structured kinds
        need a verb of their own.
        """
        if not isinstance(args, Mapping):
            raise self._fail(at, f"{spec.name} takes a mapping of its fields")
        allowed = {f.name for f in spec.fields if f.kind != "new_handle"}
        allowed |= {"as", "expect", "expect_error", "expect_refusal", "expect_answer"}
        for name in args:
            if name not in allowed:
                raise self._fail((*at, name), f"{spec.name} has no argument {name!r}")
        kwargs: dict[str, Any] = {}
        for f in spec.fields:
            path = (*at, "as" if f.kind == "new_handle" else f.name)
            raw = args.get("as" if f.kind == "new_handle" else f.name)
            if raw is None and f.optional and f.kind != "count_or_null":
                continue
            if f.kind == "new_handle":
                if not isinstance(raw, str):
                    raise self._fail(path, f"{spec.name} needs 'as', the name of what it makes")
                self._bind_handle(raw, spec.name.split("_")[0], path, it)
            elif f.kind in ("handle", "released"):
                if raw not in self.scope.handles:
                    raise self._fail(path, f"no live handle named {raw!r}")
                if f.kind == "released":
                    del self.scope.handles[raw]
            elif f.kind == "count_or_null" and raw is None:
                pass
            elif f.kind in ("count", "count_or_null"):
                if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
                    raise self._fail(path, f"{f.name} must be a non-negative integer")
            elif f.kind in ("str", "str_or_null", "bool"):
                wanted = bool if f.kind == "bool" else str
                if not isinstance(raw, wanted):
                    raise self._fail(path, f"{f.name} must be a {wanted.__name__}")
            else:
                raise self._fail(path, f"a field of kind {f.kind} needs a verb of its own")
            kwargs[f.name] = raw
        expect: Expectation | None = None
        given = [
            k for k in ("expect", "expect_error", "expect_refusal", "expect_answer") if k in args
        ]
        if len(given) > 1:
            raise self._fail(at, f"give one of {', '.join(given)}, not several")
        if args.get("expect_refusal") is True:
            expect = Refuses()
        elif args.get("expect_answer") is True:
            expect = Answers()
        elif "expect_error" in args:
            expect = self._error(args["expect_error"])
        elif "expect" in args:
            if spec.result not in ("count", "bool"):
                raise self._fail(
                    (*at, "expect"), f"a {spec.result} result is compared by relation: use 'as'"
                )
            expect = ValueIs(args["expect"])
        index = self._emit(spec.cls(**kwargs), where, expect)
        if "as" in args and spec.binds is None:
            if spec.result == "null":
                raise self._fail((*at, "as"), f"{spec.name} has no value to bind")
            self._bind_value(args["as"], ValueRef(args["as"], index), (*at, "as"), it)

    def _v_repeat(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        if it is not None:
            raise self._fail(at, "repeat cannot be nested")
        times = args["times"]
        for i in range(times):
            label = f"{where.step.split(' (')[0]}, iteration {i + 1}/{times}, step"
            self._steps(args["steps"], (*at, "steps"), label, iteration=i)

    # identity

    def _model_spec(
        self, args: Mapping[str, Any], at: PathKey, base: ModelSpec | None
    ) -> ModelSpec:
        if base is None and "family" not in args:
            raise self._fail(at, "a model needs a family (or 'like')")
        params = dict(base.params) if base else {}
        for name, raw in args.get("params", {}).items():
            params[name] = self._param(raw, (*at, "params", name))
        hooks = dict(base.hooks) if base else {}
        hooks.update(args.get("hooks", {}))
        return ModelSpec(
            family=args.get("family", base.family if base else ""),
            params=tuple(params.items()),
            hooks=tuple(hooks.items()),
        )

    def _param(self, raw: Any, path: PathKey) -> Param:
        """A structural parameter: u64, binary64 (or its bits, tagged) or string."""
        if isinstance(raw, Mapping):
            if "f64" in raw:
                return float(struct.unpack("<d", int(raw["f64"], 16).to_bytes(8, "little"))[0])
            return str(raw["str"])
        if isinstance(raw, str) and _NUMBERLIKE.fullmatch(raw.strip()):
            raise self._fail(
                path,
                f"{raw!r} reads as a number but YAML made it a string (write 1.0e-5, not 1e-5); "
                "tag it {str: ...} if a string is meant",
            )
        value: Param = raw
        return value

    def _v_model_new(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        base = None
        if "like" in args:
            base = self.scope.models.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no model named {args['like']!r}")
        spec = self._model_spec(args, at, base)
        self._bind_handle(args["as"], "model", (*at, "as"), it)
        self.scope.models[args["as"]] = spec
        self._emit(ops.ModelNew(handle=args["as"], spec=spec), where)
        self._observe_id(ops.ModelInstanceId(model=args["as"]), where, "ID-1")

    def _v_model_reload(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        model = self._handle(args["model"], "model", (*at, "model"))
        self._bind_handle(args["as"], "model", (*at, "as"), it)
        self.scope.models[args["as"]] = self.scope.models[model]
        self._emit(ops.ModelReload(model=model, handle=args["as"]), where)
        self._observe_id(ops.ModelInstanceId(model=args["as"]), where, "ID-1")

    def _v_model_set_hook(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        model = self._handle(args["model"], "model", (*at, "model"))
        self._emit(ops.ModelSetHook(model=model, hook=args["hook"], present=args["present"]), where)

    def _v_model_instance_id(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        model = self._handle(args["model"], "model", (*at, "model"))
        index = self._emit(ops.ModelInstanceId(model=model), where)
        ref = ValueRef(args["as"], index)
        self._bind_value(args["as"], ref, (*at, "as"), it)
        self.checks.append(RelationCheck(where, "nonzero", (ref,), ("ID-1",)))

    def _geometry(self, args: Mapping[str, Any], at: PathKey, base: Geometry | None) -> Geometry:
        fields = ("n_layers", "n_kv_heads", "head_dim", "max_seq_len")
        values: dict[str, Any] = {"dtype": base.dtype if base else "f32"}
        for name in fields:
            if name in args:
                values[name] = args[name]
            elif base is not None:
                values[name] = getattr(base, name)
            else:
                raise self._fail(at, f"missing {name} (or 'like')")
        if "dtype" in args:
            values["dtype"] = args["dtype"]
        return Geometry(**values)

    def _v_cache_new(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        geometry = self._new_cache_geometry(args, at)
        self._new_cache(ops.CacheNew(handle=args["as"], geometry=geometry), args, at, where, it)

    def _v_cache_new_placed(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        geometry = self._new_cache_geometry(args, at)
        storage = tuple(args["layer_storage"])
        if len(storage) != geometry.n_layers:
            raise self._fail(
                (*at, "layer_storage"), f"give one label per layer ({geometry.n_layers})"
            )
        op = ops.CacheNewPlaced(
            handle=args["as"], geometry=geometry, residency=args["residency"], layer_storage=storage
        )
        self._new_cache(op, args, at, where, it)

    def _new_cache_geometry(self, args: _Args, at: PathKey) -> Geometry:
        base = None
        if "like" in args:
            base = self.scope.caches.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no cache named {args['like']!r}")
        return self._geometry(args, at, base)

    def _new_cache(
        self,
        op: ops.CacheNew | ops.CacheNewPlaced,
        args: _Args,
        at: PathKey,
        where: Where,
        it: _Iter,
    ) -> None:
        """Bind the cache the operation makes and observe its first allocation id (ALLOC-1)."""
        self._bind_handle(args["as"], "cache", (*at, "as"), it)
        self.scope.caches[args["as"]] = op.geometry
        self._emit(op, where)
        self._observe_id(ops.CacheAllocId(cache=args["as"]), where, "ALLOC-1")

    def _v_cache_append(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        if "expect_error" in args and "expect_refusal" in args:
            raise self._fail(at, "give 'expect_error' or 'expect_refusal', not both")
        expect: Expectation | None = None
        if "expect_error" in args:
            expect = self._error(args["expect_error"])
        elif args.get("expect_refusal"):
            expect = Refuses()
        self._emit(ops.CacheAppend(cache=cache, tokens=args["tokens"]), where, expect)

    def _v_cache_truncate(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        expect = Refuses() if args.get("expect_refusal") else None
        self._emit(ops.CacheTruncate(cache=cache, length=args["to"]), where, expect)

    def _v_cache_clear(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        """The clear, and later a read of the id it mints (ALLOC-1). Not at once: under
        ``clear_mints: lazy`` reading the id is itself an operation that makes the mint
        happen (ALLOC-18), and a read the scenario did not write would settle the pending
        mint before the steps that judge when it happens. The id is read before the
        cache is dropped or cleared again, or after the last step."""
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        if cache in self.unread_clears:
            del self.unread_clears[cache]  # the id this clear owes is the one read
        self._emit(ops.CacheClear(cache=cache), where)
        self.unread_clears[cache] = where

    def _read_cleared(self, cache: str) -> None:
        self._observe_id(ops.CacheAllocId(cache=cache), self.unread_clears.pop(cache), "ALLOC-1")

    def _v_cache_replace_layer(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        expect: Expectation | None = None
        if "expect_error" in args and "expect" in args:
            raise self._fail(at, "give 'expect' or 'expect_error', not both")
        if "expect_error" in args:
            expect = self._error(args["expect_error"])
            if expect.kind == "layer_shape_mismatch":
                expect = self._shape_mismatch(expect, self.scope.caches[cache], args, at)
        op = ops.CacheReplaceLayer(
            cache=cache,
            layer=args["layer"],
            n_kv_heads=args.get("n_kv_heads"),
            head_dim=args.get("head_dim"),
            max_seq_len=args.get("max_seq_len"),
        )
        self._emit(op, where, expect)

    def _shape_mismatch(
        self, stated: ErrorIs, geometry: Geometry, args: _Args, at: PathKey
    ) -> ShapeMismatchIs:
        """Every differing field, so the declared check order picks the reported one (ALLOC-17).

        The scenario states the error under the default order; that statement is
        checked here against the fields the step actually changes.
        """
        differing = tuple(
            (name, getattr(geometry, name), args[name])
            for name in SHAPE_FIELDS
            if name in args and args[name] != getattr(geometry, name)
        )
        if not differing or stated.layer is None:
            raise self._fail((*at, "expect_error"), "no shape field differs from the cache's")
        expect = ShapeMismatchIs(stated.layer, differing)
        if expect.in_order(SHAPE_FIELDS) != stated:
            raise self._fail(
                (*at, "expect_error"),
                f"under the default order the error is {expect.in_order(SHAPE_FIELDS)}",
            )
        return expect

    def _v_cache_alloc_id(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        index = self._emit(ops.CacheAllocId(cache=cache), where)
        ref = ValueRef(args["as"], index)
        self._bind_value(args["as"], ref, (*at, "as"), it)
        self.checks.append(RelationCheck(where, "nonzero", (ref,), ("ALLOC-1",)))

    def _v_cache_len(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        if "as" not in args and "expect" not in args:
            raise self._fail(at, "cache_len needs 'as' or 'expect'")
        expect = ValueIs(args["expect"]) if "expect" in args else None
        index = self._emit(ops.CacheLen(cache=cache), where, expect)
        if "as" in args:
            self._bind_value(args["as"], ValueRef(args["as"], index), (*at, "as"), it)

    def _v_drop(self, name: str, at: PathKey, where: Where, it: int | None) -> None:
        kind = self.scope.handles.pop(name, None)
        if kind is None:
            raise self._fail(at, f"no live handle named {name!r} to drop")
        if name in self.unread_clears:
            self._read_cleared(name)
        self._emit(ops.Drop(handle=name), where)

    # plan

    def _v_session_new(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        model = self._handle(args["model"], "model", (*at, "model"))
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        step_tokens = args.get("step_tokens", 1)
        self._bind_handle(args["as"], "session", (*at, "as"), it)
        self.scope.sessions[args["as"]] = step_tokens
        self._emit(
            ops.SessionNew(handle=args["as"], model=model, cache=cache, step_tokens=step_tokens),
            where,
        )

    def _v_session_valid(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        session, model, cache, step = self._session_question(args, at)
        op = ops.SessionValid(session=session, model=model, cache=cache, step=step)
        self._emit(op, where, Validity(args["expect"] == "valid"))

    def _v_session_validity(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        session, model, cache, step = self._session_question(args, at)
        op = ops.SessionValidity(session=session, model=model, cache=cache, step=step)
        self._emit(op, where, ValueIs(args["expect"]))

    def _session_question(self, args: _Args, at: PathKey) -> tuple[str, str, str, StepInputs]:
        session = self._handle(args["session"], "session", (*at, "session"))
        model = self._handle(args["model"], "model", (*at, "model"))
        cache = self._handle(args["cache"], "cache", (*at, "cache"))
        raw = args.get("step", {})
        rope = raw.get("rope", {})
        step = StepInputs(
            token_ids=tuple(raw.get("token_ids", [1] * self.scope.sessions[session])),
            write_offset=raw.get("write_offset", 0),
            rope_theta=float(rope.get("theta", 10000.0)),
            rope_scaling=None if rope.get("scaling") is None else float(rope["scaling"]),
            mask=tuple(raw.get("mask", [])),
        )
        return session, model, cache, step

    def _v_plan_key(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        base = None
        if "like" in args:
            base = self.scope.keys.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no plan_key named {args['like']!r}")
        model = self._model_spec(args, at, base.model if base else None)
        for name in ("instance", "alloc"):
            if name not in args and base is None:
                raise self._fail(at, f"missing {name} (or 'like')")
        identity = PlanIdentity(
            model=model,
            instance=args.get("instance", base.instance if base else 0),
            alloc=args.get("alloc", base.alloc if base else 0),
            geometry=self._geometry(args, at, base.geometry if base else None),
            step_tokens=args.get("step_tokens", base.step_tokens if base else 1),
        )
        probe = bool(args.get("expect_refusal"))
        self._admissible(probe, _unmixable_in_key(identity), at)
        index = self._emit(ops.PlanKey(identity=identity), where, Refuses() if probe else None)
        if probe:
            if "as" in args:
                raise self._fail((*at, "as"), "a probe that must be refused yields no key to name")
            return
        if "as" not in args:
            raise self._fail(at, "plan_key needs 'as'")
        self._bind_value(args["as"], ValueRef(args["as"], index), (*at, "as"), it)
        self.scope.keys[args["as"]] = identity

    def _admissible(self, probe: bool, unmixable: str | None, at: PathKey) -> None:
        """Values no primitive may mix appear only in must-not-succeed probes (HASH-12, HASH-13)."""
        if unmixable and not probe:
            raise self._fail(at, f"{unmixable}: only a step with expect_refusal may hold it")
        if probe and not unmixable:
            raise self._fail(at, "expect_refusal on a step that holds nothing to refuse")

    # hash

    def _v_hash(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        program = tuple(mix_op(raw) for raw in args["ops"])
        finishes = sum(1 for op in program if op.kind == "finish")
        if finishes == 0:
            raise self._fail((*at, "ops"), "a hash program must end with a finish op")
        if program[-1].kind != "finish":
            raise self._fail((*at, "ops"), "a hash program must end with a finish op")
        probe = bool(args.get("expect_refusal"))
        self._admissible(probe, _unmixable_in_program(program), at)
        expect: Expectation | None = Refuses() if probe else None
        if "expect" in args:
            if probe:
                raise self._fail((*at, "expect"), "a probe that must be refused has no values")
            if len(args["expect"]) != finishes:
                raise self._fail(
                    (*at, "expect"), f"{finishes} finish ops but {len(args['expect'])} values"
                )
            expect = ValueIs(tuple(int(v, 16) for v in args["expect"]))
        index = self._emit(ops.Hash(program=program), where, expect)
        if "as" in args:
            self._bind_value(args["as"], ValueRef(args["as"], index, last=True), (*at, "as"), it)

    # signature and verify

    def _v_payload(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        self._define(args["as"], (*at, "as"), it)
        self.scope.payloads[args["as"]] = self._payload(args, at)

    def _payload(self, args: Mapping[str, Any], at: PathKey) -> Payload:
        shape = ("n_kv_heads", "head_dim", "tokens")
        if "like" in args:
            base = self.scope.payloads.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no payload named {args['like']!r}")
            layers = list(base)
            if "n_layers" in args:
                n = args["n_layers"]
                layers = layers[:n] + [layers[-1]] * max(0, n - len(layers)) if layers else []
            overridden = [name for name in shape if name in args]
            if overridden:
                raise self._fail(
                    at, f"with 'like', change {overridden[0]} per layer under 'layers'"
                )
        else:
            needed = ("n_layers", *shape) if args.get("n_layers", 1) else ("n_layers",)
            missing = [name for name in needed if name not in args]
            if missing:
                raise self._fail(at, f"missing {missing[0]} (or 'like')")
            if args["n_layers"] == 0:
                layers = []
            else:
                layer = _layer(args["n_kv_heads"], args["head_dim"], args["tokens"])
                layers = [layer] * args["n_layers"]
        for index, override in enumerate(args.get("layers", [])):
            n = override["layer"]
            if n >= len(layers):
                raise self._fail((*at, "layers", index, "layer"), f"the payload has no layer {n}")
            current = layers[n]
            tokens = current.seq_len  # the layer's own claim, whatever its width
            if any(name in override for name in shape):
                current = _layer(
                    override.get("n_kv_heads", current.n_kv_heads),
                    override.get("head_dim", current.head_dim),
                    override.get("tokens", tokens),
                )
            current = replace(
                current,
                **{
                    k: override[k]
                    for k in ("seq_len", "k_len", "v_len", "v_head_dim")
                    if k in override
                },
            )
            layers[n] = current
        return tuple(layers)

    def _v_signature(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        fields = (
            "format_version",
            "model",
            "n_layers",
            "n_kv_heads",
            "head_dim",
            "dtype",
            "tokens",
        )
        defaults: dict[str, Any] = {"format_version": 1, "dtype": "f32"}
        layout: Layout | None = None
        if "like" in args:
            base = self.scope.signatures.get(args["like"])
            if base is None:
                raise self._fail((*at, "like"), f"no signature named {args['like']!r}")
            defaults = {name: getattr(base, name) for name in fields}
            layout = base.layout
        values = {**defaults, **{k: v for k, v in args.items() if k in fields}}
        missing = [name for name in fields if name not in values]
        if missing:
            raise self._fail(at, f"missing {missing[0]} (or 'like')")
        if "block_size" in args or "sliding_window" in args:
            if "block_size" not in args and layout is None:
                raise self._fail(at, "a layout needs block_size (PROF-5)")
            layout = Layout(
                args.get("block_size", layout.block_size if layout else 0),
                args.get("sliding_window", layout.sliding_window if layout else None),
            )
        self._define(args["as"], (*at, "as"), it)
        self.scope.signatures[args["as"]] = Signature(**values, layout=layout)

    def _signature(self, name: str, path: PathKey) -> Signature:
        sig = self.scope.signatures.get(name)
        if sig is None:
            raise self._fail(path, f"no signature named {name!r}")
        return sig

    def _payload_ref(self, name: str, path: PathKey) -> Payload:
        payload = self.scope.payloads.get(name)
        if payload is None:
            raise self._fail(path, f"no payload named {name!r}")
        return payload

    def _outcome(self, args: Mapping[str, Any], at: PathKey) -> Expectation:
        if ("expect" in args) == ("expect_error" in args):
            raise self._fail(at, "give exactly one of 'expect' (a signature) and 'expect_error'")
        if "expect" in args:
            return SignatureIs(self._signature(args["expect"], (*at, "expect")))
        return self._error(args["expect_error"])

    def _measuring(
        self,
        cls: type[ops.Measure] | type[ops.Stamp],
        args: Mapping[str, Any],
        at: PathKey,
        where: Where,
        it: int | None,
    ) -> None:
        payload = self._payload_ref(args["payload"], (*at, "payload"))
        raw = args.get("layout")
        layout = None if raw is None else Layout(raw["block_size"], raw["sliding_window"])
        index = self._emit(
            cls(model=args["model"], payload=payload, layout=layout),
            where,
            self._outcome(args, at),
        )
        if "as" in args:
            self._bind_value(args["as"], ValueRef(args["as"], index), (*at, "as"), it)

    def _v_measure(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        self._measuring(ops.Measure, args, at, where, it)

    def _v_stamp(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        self._measuring(ops.Stamp, args, at, where, it)

    def _v_verify(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        recorded = args["recorded"]
        op = ops.Verify(
            recorded=None if recorded is None else self._signature(recorded, (*at, "recorded")),
            payload=self._payload_ref(args["payload"], (*at, "payload")),
            expected=self._signature(args["expected"], (*at, "expected")),
        )
        self._emit(op, where, self._outcome(args, at))

    def _error(self, raw: Mapping[str, Any]) -> ErrorIs:
        values = {k: v for k, v in raw.items() if k not in ("kind", "field", "layer")}
        return ErrorIs(
            kind=raw["kind"],
            field=raw.get("field", _IMPLIED_FIELDS.get(raw["kind"])),
            layer=raw.get("layer"),
            values={k: tuple(v) if isinstance(v, list) else v for k, v in values.items()},
        )

    # relations

    def _relation(
        self, relation: str, names: Sequence[str], at: PathKey, where: Where, minimum: int = 2
    ) -> None:
        refs: list[ValueRef] = []
        for index, name in enumerate(names):
            found = self.scope.values.get(name)
            if found is None:
                raise self._fail((*at, index), f"no value named {name!r}")
            refs.extend(found)
        if len(refs) < minimum:
            raise self._fail(at, f"{relation} needs at least {minimum} values")
        self.checks.append(RelationCheck(where, relation, tuple(refs)))  # type: ignore[arg-type]

    def _v_same(self, names: Sequence[str], at: PathKey, where: Where, it: int | None) -> None:
        self._relation("same", names, at, where)

    def _v_differ(self, names: Sequence[str], at: PathKey, where: Where, it: int | None) -> None:
        self._relation("differ", names, at, where)

    def _v_nonzero(self, names: Sequence[str], at: PathKey, where: Where, it: _Iter) -> None:
        self._relation("nonzero", names, at, where, minimum=1)

    def _v_increasing(
        self, names: Sequence[str], at: PathKey, where: Where, it: int | None
    ) -> None:
        self._relation("increasing", names, at, where)


_NUMBERLIKE = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(inf|nan)", re.IGNORECASE)

#: Error kinds whose field is fixed by the kind (ERR-2), so a scenario need not say it.
_IMPLIED_FIELDS = {"unsupported_format": "format_version", "capacity_exceeded": "max_seq_len"}


_U64_MAX = (1 << 64) - 1


def _unmixable(value: object) -> str | None:
    """Why no primitive may mix ``value`` (HASH-12, HASH-13), or ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= _U64_MAX:
        return f"the integer {value} is outside 0 .. 2^64-1 (HASH-12)"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            shown = value.encode("utf-8", "backslashreplace").decode()
            return f"the string {shown!r} has no UTF-8 form (HASH-13)"
    return None


def _unmixable_in_program(program: Sequence[MixOp]) -> str | None:
    for mix in program:
        found = _unmixable(mix.value) if mix.kind in ("u64", "instance", "str") else None
        if mix.kind == "f64" and isinstance(mix.value, int):
            found = _unmixable(mix.value)
        if found:
            return found
    return None


def _unmixable_in_key(identity: PlanIdentity) -> str | None:
    spec = identity.model
    candidates: list[object] = [spec.family, identity.instance, identity.alloc]
    for name, value in spec.params:
        candidates += [name, value]
    candidates += [name for name, _ in spec.hooks]
    candidates += [identity.geometry.dtype]
    for candidate in candidates:
        found = _unmixable(candidate)
        if found:
            return found
    return None


def _layer(n_kv_heads: int, head_dim: int, tokens: int) -> LayerDesc:
    length = n_kv_heads * head_dim * tokens
    return LayerDesc(n_kv_heads, head_dim, tokens, length, length)


def mix_op(raw: Mapping[str, Any]) -> MixOp:
    """A mix op from its data form (scenario YAML or vector JSON)."""
    kind = raw["op"]
    if kind == "bytes":
        return MixOp("bytes", bytes.fromhex(raw["hex"]), raw.get("repeat", 1))
    if kind in ("u64", "instance"):
        value = raw["value"]
        if isinstance(value, str):
            value = int(value, 16) if value.startswith("0x") else int(value)
        return MixOp(kind, value)
    if kind == "f64":
        if "bits" in raw:
            return MixOp("f64", int(raw["bits"], 16))
        bits = int.from_bytes(struct.pack("<d", float(raw["value"])), "little")
        return MixOp("f64", bits)
    if kind == "finish":
        return MixOp("finish")
    return MixOp(kind, raw["value"])
