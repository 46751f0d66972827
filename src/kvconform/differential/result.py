"""What a run of one generated property found, and the same as an ordinary case result.

:class:`PropertyResult` is what :func:`kvconform.differential.engine.run_property`
returns; :func:`case_result` turns it into a failed, passed or not-applicable case of
kind ``generated``, the form reports and gating read (CONF-12 judges the
counterexample's answers; its listing says how to reproduce it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from kvconform.differential.compare import Counterexample
from kvconform.differential.properties import Property
from kvconform.harness import stakes
from kvconform.harness.checks import Failure, Where
from kvconform.harness.runner import CaseResult

Verdict = Literal["passed", "failed", "not_applicable", "error"]


@dataclass(frozen=True)
class PropertyResult:
    """One property run against one implementation: its verdict and what backs it."""

    prop: Property
    verdict: Verdict
    seed: int
    examples: int
    #: Programs actually run on both sides (generation and shrinking).
    runs: int = 0
    seconds: float = 0.0
    counterexample: Counterexample | None = None
    #: Why not applicable, or what went wrong in the harness (verdict ``error``).
    reason: str = ""
    #: The scenario file written for the counterexample, and what replaying it showed.
    exported: Path | None = None
    export_note: str = ""
    #: Why the counterexample could not be written (an output of the run left unwritten).
    export_error: str = ""


def case_result(result: PropertyResult) -> CaseResult:
    """The property's result as a case result (kind ``generated``) for reports and gating."""
    case = result.prop.case
    if result.verdict == "not_applicable":
        return CaseResult(case, "not_applicable", reason=result.reason, seconds=result.seconds)
    if result.verdict == "passed":
        return CaseResult(case, "passed", seconds=result.seconds)
    reproduce = (
        f"reproduce: kvconform run --generated {result.examples} --seed {result.seed} "
        f"--id {case.id} [--export-counterexamples DIR]"
    )
    where_file = f"--generated {result.examples} --seed {result.seed}"
    if result.verdict == "error" or result.counterexample is None:
        failure = Failure(
            where=Where(where_file, None, "the generator"),
            expected="a program the reference runs and a completed check",
            actual=result.reason,
            detail=reproduce,
        )
        return CaseResult(case, "failed", (failure,), seconds=result.seconds)
    cx = result.counterexample
    op = cx.program[cx.mismatch.index]
    whose = (
        "the answer of the engine the rules allow that agrees longest with the implementation "
        f"(one of {len(cx.allowed)} answer lists they give)"
        if cx.allowed
        else "the reference's answer"
    )
    lines = [
        f"counterexample after {result.runs} program(s), shrunk; each line gives {whose}:",
        cx.listing(),
        reproduce,
    ]
    if result.exported is not None:
        lines.append(f"exported: {result.exported} ({result.export_note})")
    if result.export_error:
        lines.append(f"not exported: {result.export_error}")
    failure = Failure(
        where=Where(
            where_file,
            None,
            f"operation {cx.mismatch.index + 1} ({op.name}) of a shrunk "
            f"{len(cx.program)}-operation program",
        ),
        expected=cx.mismatch.expected,
        actual=cx.mismatch.actual,
        requires=cx.mismatch.requires,
        detail="\n".join(lines),
        broken=cx.mismatch.broken,  # the adapter broke: its cause is the adapter's
        stake=_stake(cx),
    )
    return CaseResult(case, "failed", (failure,), seconds=result.seconds)


def _stake(cx: Counterexample) -> str:
    """Which way the first disagreement erred, against every answer the rules allow there
    (CONF-18; the reference's alone where no other engine was asked), or, for an id, by
    how it relates to an earlier one."""
    index = cx.mismatch.index
    if cx.mismatch.broken or index >= len(cx.actual):
        return ""
    if cx.mismatch.relations is not None:  # an id judged by how it relates to an earlier one
        return stakes.of_related_ids(*cx.mismatch.relations)
    lists = cx.allowed or (cx.expected,)
    allowed = [answers[index] for answers in lists if index < len(answers)]
    return stakes.of_disagreement(cx.program[index], allowed, cx.actual[index])
