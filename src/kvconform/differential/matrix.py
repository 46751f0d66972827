"""Which mutants each approach kills: the hand-written suite, the generated checks, both.

A mutant (``tests/mutants/``) is the reference with one deliberate misreading.
The suite (scenarios and vectors) kills it when any case fails; the generated
checks kill it when any property finds a disagreement, running *alone*, with no
hand-written case. Correct variants (``tests/variants/``) must survive both:
a variant the generated checks "kill" is a false alarm.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential.engine import PROPERTIES, reference_driver, run_property
from kvconform.harness.runner import run_cases
from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.protocol.adapter import Adapter
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import Outcome


class _HashMemoDriver(InProcessDriver):
    """Reuses the reference's outcomes for hash-only programs when the adapter's ``hash``
    is the reference adapter's own (then they are the same function; the known-answer
    vectors fold megabytes, and folding them again for every mutant proves nothing)."""

    memo: ClassVar[dict[tuple[ops.Op, ...], list[Outcome]]] = {}

    def run(self, program: Sequence[ops.Op]) -> list[Outcome]:
        same_hash = getattr(type(self.adapter), "hash", None) is ReferenceAdapter.hash
        if not (same_hash and program and all(isinstance(op, ops.Hash) for op in program)):
            return super().run(program)
        key = tuple(program)
        if key not in self.memo:
            self.memo[key] = super().run(program)
        return list(self.memo[key])


@dataclass(frozen=True)
class Subject:
    """A mutant or a variant: a name and a factory, plus what is known about it."""

    name: str
    factory: Callable[[], Adapter]
    half: str = ""
    breaks: tuple[str, ...] = ()


@dataclass(frozen=True)
class Row:
    subject: Subject
    #: Ids of the suite's cases that fail (the suite kills the subject if any).
    suite_failed: tuple[str, ...]
    #: Property id -> verdict, over all seeds ("failed" if any seed found a disagreement).
    generated: dict[str, str] = field(default_factory=dict)
    #: A factory or harness problem, if the subject could not be judged.
    problem: str = ""
    seconds: float = 0.0

    @property
    def suite_kills(self) -> bool:
        return bool(self.suite_failed)

    @property
    def generated_kills(self) -> bool:
        return any(v == "failed" for v in self.generated.values())

    @property
    def killers(self) -> list[str]:
        return [p.removeprefix("generated.") for p, v in self.generated.items() if v == "failed"]


def load_subjects(module: str, function: str) -> list[Subject]:
    """``module.function()`` as subjects (``tests.mutants:all_mutants``)."""
    found = getattr(importlib.import_module(module), function)()
    return [
        Subject(m.name, m.factory, getattr(m, "half", ""), tuple(getattr(m, "breaks", ())))
        for m in found
    ]


def judge(
    subject: Subject,
    *,
    examples: int,
    seeds: Sequence[int],
    suite_cases: Iterable[Case] | None,
    shrink: bool = False,
    strict_messages: bool = True,
) -> Row:
    """Run the suite (if given) and the generated checks against one subject."""
    start = time.perf_counter()
    try:
        adapter = subject.factory()
    except Exception as exc:
        return Row(subject, (), {}, f"the factory raised {type(exc).__name__}: {exc}")
    driver: InProcessDriver = _HashMemoDriver(adapter, subject.factory)
    failed: tuple[str, ...] = ()
    if suite_cases is not None:
        # A mutant is judged strictly (a message-only fault, ERR-13, kills it too); a
        # correct variant as a user's run is, where such a finding is advice (CONF-12).
        failed = tuple(
            r.case.id
            for r in run_cases(suite_cases, driver, strict_messages=strict_messages)
            if r.verdict == "failed"
        )
    # A fresh instance: the generated checks run alone, not after the suite moved its state on.
    driver = InProcessDriver(subject.factory())
    reference = reference_driver()
    verdicts: dict[str, str] = {}
    problems = []
    for prop in PROPERTIES:
        verdict = "passed"
        for seed in seeds:
            result = run_property(
                prop, driver, examples=examples, seed=seed, reference=reference, shrink=shrink
            )
            if result.verdict == "error":
                problems.append(f"{prop.id} seed {seed}: {result.reason}")
            if result.verdict in ("failed", "not_applicable"):
                verdict = result.verdict
                break
        verdicts[prop.id] = verdict
    return Row(subject, failed, verdicts, "; ".join(problems), time.perf_counter() - start)


@dataclass(frozen=True)
class Matrix:
    mutants: tuple[Row, ...]
    variants: tuple[Row, ...]
    examples: int
    seeds: tuple[int, ...]
    #: Suite cases left out because the reference itself does not pass them.
    excluded: tuple[str, ...] = ()
    with_suite: bool = True

    def counts(self) -> dict[str, int]:
        rows = [r for r in self.mutants if not r.problem or r.generated]
        return {
            "mutants": len(self.mutants),
            "suite": sum(r.suite_kills for r in rows),
            "generated": sum(r.generated_kills for r in rows),
            "together": sum(r.suite_kills or r.generated_kills for r in rows),
            "only_suite": sum(r.suite_kills and not r.generated_kills for r in rows),
            "only_generated": sum(r.generated_kills and not r.suite_kills for r in rows),
            "false_alarms": sum(r.generated_kills or r.suite_kills for r in self.variants),
        }

    def render(self) -> str:
        lines = [
            f"generated checks alone: {self.examples} examples per property, "
            f"seed(s) {', '.join(map(str, self.seeds))}; suite: every scenario and vector",
        ]
        if self.excluded:
            lines.append(
                f"(left out of the suite: {len(self.excluded)} case(s) the reference "
                f"itself fails: {', '.join(self.excluded)})"
            )
        lines += [
            "",
            f"{'mutant':<40} {'half':<9} {'suite':<8} {'generated':<10} killed by",
        ]
        for row in self.mutants:
            suite = ("killed" if row.suite_kills else "survives") if self.with_suite else "-"
            gen = "killed" if row.generated_kills else "survives"
            by = ", ".join(row.killers)
            if row.problem:
                by = (by + "; " if by else "") + f"PROBLEM: {row.problem}"
            lines.append(f"{row.subject.name:<40} {row.subject.half:<9} {suite:<8} {gen:<10} {by}")
        c = self.counts()
        n = c["mutants"]
        if self.with_suite:
            lines += [
                "",
                f"killed out of {n} mutants: scenarios+vectors alone {c['suite']}, "
                f"generated alone {c['generated']}, together {c['together']}",
                f"only the suite kills {c['only_suite']}; only the generated checks kill "
                f"{c['only_generated']}",
            ]
        else:
            lines += [
                "",
                f"killed out of {n} mutants: generated alone {c['generated']} "
                "(the suite was not run)",
            ]
        if self.variants:
            alarms = [r.subject.name for r in self.variants if r.generated_kills or r.suite_kills]
            lines.append(
                f"correct variants: {len(self.variants)}, false alarms: "
                f"{', '.join(alarms) if alarms else 'none'}"
            )
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        def row(r: Row) -> dict[str, Any]:
            return {
                "name": r.subject.name,
                "half": r.subject.half,
                "breaks": list(r.subject.breaks),
                "suite_failed": list(r.suite_failed),
                "generated": r.generated,
                "problem": r.problem,
                "seconds": round(r.seconds, 3),
            }

        return {
            "examples": self.examples,
            "seeds": list(self.seeds),
            "counts": self.counts(),
            "excluded": list(self.excluded),
            "mutants": [row(r) for r in self.mutants],
            "variants": [row(r) for r in self.variants],
        }


def kill_matrix(
    mutants: Sequence[Subject],
    variants: Sequence[Subject] = (),
    *,
    examples: int = 200,
    seeds: Sequence[int] = (0,),
    with_suite: bool = True,
    progress: Callable[[Row], None] | None = None,
) -> Matrix:
    cases: list[Case] | None = None
    baseline: tuple[str, ...] = ()
    if with_suite:
        from kvconform.harness.suite import all_cases

        # A case the reference itself fails (a suite being edited) kills nothing. A case
        # written for another option value is not applicable to the reference and stays:
        # it judges the mutants that declare that value (CONF-6).
        reference_results = run_cases(all_cases(), _HashMemoDriver(ReferenceAdapter()))
        baseline = tuple(r.case.id for r in reference_results if r.verdict == "failed")
        cases = [c for c in all_cases() if c.id not in baseline]
    rows: dict[str, list[Row]] = {"mutants": [], "variants": []}
    for kind, subjects in (("mutants", mutants), ("variants", variants)):
        for subject in subjects:
            row = judge(
                subject,
                examples=examples,
                seeds=seeds,
                suite_cases=cases,
                strict_messages=kind == "mutants",
            )
            rows[kind].append(row)
            if progress:
                progress(row)
    return Matrix(
        tuple(rows["mutants"]),
        tuple(rows["variants"]),
        examples,
        tuple(seeds),
        baseline,
        with_suite,
    )
