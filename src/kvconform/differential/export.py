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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import yaml

from kvconform.differential import prefix
from kvconform.differential.compare import Mismatch
from kvconform.differential.export_steps import ExportError as ExportError  # re-exported
from kvconform.differential.export_steps import _Steps
from kvconform.differential.export_steps import param as param  # re-exported
from kvconform.differential.export_steps import payload_args as payload_args  # re-exported
from kvconform.differential.yaml_dump import _Dumper, _Flow, _FlowList
from kvconform.files import write_atomic
from kvconform.protocol import operations as ops
from kvconform.rendering import clip, one_line
from kvconform.values import (
    OPTIONS,
    Ok,
    Outcome,
)

SCENARIO_FORMAT = "scenarios/2"

#: Error kinds whose field the kind implies; their ``expect_error`` carries no ``field``.
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
    @property
    def allowed(self) -> tuple[tuple[Outcome, ...], ...]: ...


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
    if cx.allowed:
        _counts_of_every_order(builder.steps, step_of, cx)
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
    if cx.allowed:
        what = f"{adapter} answered {mismatch.actual}, and the rules allow {mismatch.expected}"
        judged = (
            "Each count is one that an engine the rules allow gives (PREFIX-24 leaves the "
            "order within one store to the engine), and counts that every such engine "
            "gives equal are compared with same; every other expectation is the "
            "reference's answer."
        )
    else:
        judged = "Every expectation here is the reference's answer."
    why = (
        f"Found by the generated differential check {origin} against {adapter}, and shrunk: "
        f"at step {step} ({verb}) {what}. {judged}"
    )
    decisions = prefix.decisions(cls, requires)
    scenario = {
        "id": scenario_id,
        "title": f"Generated counterexample: {adapter} disagrees with "
        + ("every engine the rules allow" if cx.allowed else "the reference")
        + f" at step {step} ({verb})",
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


def _counts_of_every_order(
    steps: list[dict[str, Any]], step_of: Mapping[int, int], cx: CounterexampleLike
) -> None:
    """A counterexample judged against several engines the rules allow: each lookup
    expects every count one of them gives (``expect_one_of`` where they differ), and the
    lookups whose counts differ between them are named and judged ``together``: their
    counts must be those one of these engines gives (INTERPRETING.md 4.9), as the
    generated check judges them."""
    lookups = [i for i, op in enumerate(cx.program) if isinstance(op, ops.PrefixLookup)]
    counts = {i: tuple(_count(answers[i]) for answers in cx.allowed) for i in lookups}
    open_: list[int] = []
    for i in lookups:
        values = sorted({c for c in counts[i] if isinstance(c, int)})
        args = steps[step_of[i] - 1]["prefix_lookup"]
        if len(values) > 1 and None not in counts[i]:
            del args["expect"]
            args["expect_one_of"] = _FlowList(values)
            open_.append(i)
    if len(open_) > 1:
        for i in open_:
            steps[step_of[i] - 1]["prefix_lookup"]["as"] = f"reused_{i + 1}"
        rows = sorted(
            {tuple(counts[i][engine] for i in open_) for engine in range(len(cx.allowed))}
        )
        together = {
            "values": _FlowList([f"reused_{i + 1}" for i in open_]),
            "one_of": _FlowList([_FlowList(row) for row in rows]),
        }
        steps.append({"together": _Flow(together)})


def _count(outcome: Outcome) -> object:
    return outcome.value if isinstance(outcome, Ok) else None


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
