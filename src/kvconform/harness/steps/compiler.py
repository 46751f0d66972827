"""The scenario compiler's core: the scope of names a scenario defines, the plumbing every
verb uses, a step for an operation read from the operation table, and the verbs of the
format itself (``repeat`` and the relations)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvconform.harness.case import Case
from kvconform.harness.checks import (
    Answers,
    Check,
    ErrorIs,
    Expectation,
    OutcomeCheck,
    Refuses,
    RelationCheck,
    Succeeds,
    ValueIs,
    ValueOneOf,
    ValueRef,
    Where,
)
from kvconform.harness.yamlsource import Document, PathKey, SourceError
from kvconform.protocol import operations as ops
from kvconform.values import Geometry, ModelSpec, Payload, PlanIdentity, Signature

_Args = Mapping[str, Any]
#: The iteration of the enclosing ``repeat``, or ``None`` outside one.
_Iter = int | None

#: The keys that give a step's expectation; a step gives at most one.
_EXPECTATIONS = ("expect", "expect_one_of", "expect_error", "expect_refusal", "expect_answer")


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


def verbs_of(compiler: type) -> tuple[str, ...]:
    """Every verb a step may use with ``compiler``: the operations of the table and the
    verbs it has a method for (``_v_`` and the verb)."""
    own = {name[3:] for name in dir(compiler) if name.startswith("_v_")}
    return tuple(sorted(own | set(ops.BY_NAME)))


class _CompilerBase:
    """What every family of verbs builds on (:mod:`kvconform.harness.steps`)."""

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

    def _read_cleared(self, cache: str) -> None:
        """Read the id a clear minted (see :meth:`_v_cache_clear`)."""
        self._observe_id(ops.CacheAllocId(cache=cache), self.unread_clears.pop(cache), "ALLOC-1")

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
                raise self._fail(
                    at, f"unknown verb {verb!r} (the verbs are {', '.join(verbs_of(type(self)))})"
                )

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
        allowed |= {"as", *_EXPECTATIONS}
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
        given = [k for k in _EXPECTATIONS if k in args]
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
        elif "expect_one_of" in args:
            expect = self._one_of(spec, args["expect_one_of"], (*at, "expect_one_of"))
        index = self._emit(spec.cls(**kwargs), where, expect)
        if "as" in args and spec.binds is None:
            if spec.result == "null":
                raise self._fail((*at, "as"), f"{spec.name} has no value to bind")
            self._bind_value(args["as"], ValueRef(args["as"], index), (*at, "as"), it)

    def _one_of(self, spec: ops.OpSpec, raw: Any, at: PathKey) -> ValueOneOf:
        """The counts a step accepts where the specification leaves the count to the
        engine among them: two or more, distinct, each a non-negative integer."""
        if spec.result != "count":
            raise self._fail(at, f"expect_one_of takes counts; {spec.name} answers a {spec.result}")
        counts = raw if isinstance(raw, list) else []
        if (
            len(counts) < 2
            or len(set(counts)) != len(counts)
            or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
        ):
            raise self._fail(at, "expect_one_of must list two or more distinct counts")
        return ValueOneOf(tuple(counts))

    def _v_repeat(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        if it is not None:
            raise self._fail(at, "repeat cannot be nested")
        times = args["times"]
        for i in range(times):
            label = f"{where.step.split(' (')[0]}, iteration {i + 1}/{times}, step"
            self._steps(args["steps"], (*at, "steps"), label, iteration=i)

    def _admissible(self, probe: bool, unmixable: str | None, at: PathKey) -> None:
        """Values no primitive may mix appear only in must-not-succeed probes (HASH-12, HASH-13)."""
        if unmixable and not probe:
            raise self._fail(at, f"{unmixable}: only a step with expect_refusal may hold it")
        if probe and not unmixable:
            raise self._fail(at, "expect_refusal on a step that holds nothing to refuse")

    def _error(self, raw: Mapping[str, Any]) -> ErrorIs:
        values = {k: v for k, v in raw.items() if k not in ("kind", "field", "layer")}
        return ErrorIs(
            kind=raw["kind"],
            field=raw.get("field", _IMPLIED_FIELDS.get(raw["kind"])),
            layer=raw.get("layer"),
            values={k: tuple(v) if isinstance(v, list) else v for k, v in values.items()},
        )

    # relations

    def _refs(
        self, relation: str, names: Sequence[str], at: PathKey, minimum: int = 2
    ) -> tuple[ValueRef, ...]:
        """The values ``names`` stand for, collected names expanded (INTERPRETING.md 4.9)."""
        refs: list[ValueRef] = []
        for index, name in enumerate(names):
            found = self.scope.values.get(name)
            if found is None:
                raise self._fail((*at, index), f"no value named {name!r}")
            refs.extend(found)
        if len(refs) < minimum:
            raise self._fail(at, f"{relation} needs at least {minimum} values")
        return tuple(refs)

    def _relation(
        self, relation: str, names: Sequence[str], at: PathKey, where: Where, minimum: int = 2
    ) -> None:
        refs = self._refs(relation, names, at, minimum)
        self.checks.append(RelationCheck(where, relation, refs))  # type: ignore[arg-type]

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

    def _v_together(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        """Counts the specification leaves to the engine, but not each alone: together they
        are one of the listed rows (INTERPRETING.md 4.9)."""
        refs = self._refs("together", args["values"], (*at, "values"))
        for ref in refs:
            if ops.BY_CLASS[type(self.program[ref.op_index])].result != "count":
                raise self._fail(
                    (*at, "values"), f"together compares counts; {ref.name} is not one"
                )
        width = len(refs)
        rows = [tuple(row) for row in args["one_of"] if isinstance(row, list)]
        if (
            len(rows) != len(args["one_of"])
            or len(rows) < 2
            or len(set(rows)) != len(rows)
            or any(len(row) != width for row in rows)
            or not all(
                isinstance(c, int) and not isinstance(c, bool) and c >= 0 for r in rows for c in r
            )
        ):
            raise self._fail(
                (*at, "one_of"),
                f"together must list two or more distinct rows of {width} counts each, "
                "one count per value named",
            )
        self.checks.append(RelationCheck(where, "together", refs, rows=tuple(rows)))


#: Error kinds whose field is fixed by the kind (ERR-2), so a scenario need not say it.
_IMPLIED_FIELDS = {"unsupported_format": "format_version", "capacity_exceeded": "max_seq_len"}
