"""Running the generated properties: Hypothesis writes programs, both sides run them.

:func:`run_property` runs one property for ``examples`` programs from ``seed``
against a driver, next to the reference (in process). The first disagreement
is shrunk by Hypothesis to a minimal program, which :func:`case_result` turns
into an ordinary failed case (kind ``generated``) and
:mod:`kvconform.harness.export` can write out as a scenario file.

The same ``seed`` and ``examples`` give the same programs, so any failure
reproduces with ``kvconform run --generated N --seed S``.
"""

from __future__ import annotations

import contextlib
import secrets
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Flaky

import kvconform
from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential import PROPERTY_IDS, strategies
from kvconform.differential.compare import (
    Mismatch,
    Program,
    ReferenceBroken,
    compare,
    render_program,
    renumber,
    well_formed,
)
from kvconform.harness.checks import Failure, Where
from kvconform.harness.declarations import unrepresentable
from kvconform.harness.runner import CaseResult
from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.values import AdapterInfo, Fault, Outcome, Refused

#: Examples per property in the project's own quick tests.
DEFAULT_EXAMPLES = 60
#: After the first disagreement, about how long shrinking may take (Hypothesis's
#: shrinker, then a greedy pass of at most half as long).
SHRINK_SECONDS = 30.0

Verdict = Literal["passed", "failed", "not_applicable", "error"]


@dataclass(frozen=True)
class Property:
    """One generated check: which programs, for which implementations, and why."""

    id: str
    title: str
    cls: str
    requires: tuple[str, ...]
    why: str
    #: Why the property does not apply to an implementation, or ``None``.
    not_applicable: Callable[[AdapterInfo], str | None]
    #: The programs for an implementation (only operations of the classes it declares).
    programs: Callable[[AdapterInfo], st.SearchStrategy[Program]]

    @property
    def case(self) -> Case:
        """The case this property is in reports, selections and expectation files."""
        return Case(
            id=self.id,
            title=self.title,
            cls=self.cls,
            requires=self.requires,
            why=self.why,
            file=__file__,
            line=None,
            program=(),
            checks=(),
            area="generated",
            kind="generated",
        )


def _without(info: AdapterInfo, cls: str) -> str | None:
    return None if cls in info.classes else f"{info.name} does not declare the class {cls}"


def _verify_not_applicable(info: AdapterInfo) -> str | None:
    missing = _without(info, "signature")
    if missing:
        return missing
    if info.format_writes != 1 or set(info.format_reads) != {1}:
        return (
            f"compared with the reference's format profile v1; {info.name} writes "
            f"v{info.format_writes} and reads {sorted(info.format_reads)}"
        )
    return None


PROPERTIES: tuple[Property, ...] = (
    Property(
        id=PROPERTY_IDS[0],
        title="Random programs over models, caches and held plans agree with the reference",
        cls="plan",
        requires=("ID-3", "ID-6", "ID-9", "ALLOC-13", "PLAN-4", "PLAN-6", "PLAN-7", "PLAN-14"),
        why="Random construct, reload, drop, hook, append, truncate, clear and replace-layer "
        "sequences with validity checks under random per-step inputs: catches any key or id "
        "rule the hand-written scenarios do not exercise in that order.",
        not_applicable=lambda info: _without(info, "identity"),
        programs=lambda info: strategies.key_programs(
            plan="plan" in info.classes, scope=strategies.Scope.of(info)
        ),
    ),
    Property(
        id=PROPERTY_IDS[1],
        title="Random mix programs give the reference's 64-bit values",
        cls="hash",
        requires=("HASH-11",),
        why="Mix programs of every kind (NaN payloads, signed zeros, subnormals, astral "
        "strings, u64 extremes, finish mid-sequence, long repeated bytes): catches an "
        "encoding slip the known-answer vectors happen not to pin.",
        not_applicable=lambda info: _without(info, "hash"),
        programs=lambda info: strategies.hash_programs(scope=strategies.Scope.of(info)),
    ),
    Property(
        id=PROPERTY_IDS[2],
        title="Random blocks with random faults get the reference's verdict",
        cls="verify",
        requires=("SIG-7", "SIG-8", "SIG-9", "VERIFY-9", "VERIFY-4", "VERIFY-5"),
        why="Coherent blocks with layers added or dropped, shapes changed, buffers cut or "
        "extended, false seq_len claims, lying or missing stamps and changed expectations: "
        "catches a check run out of order or a field compared wrongly.",
        not_applicable=_verify_not_applicable,
        programs=lambda info: strategies.block_programs(
            verify="verify" in info.classes,
            signature="signature" in info.classes,
            scope=strategies.Scope.of(info),
        ),
    ),
)

PROPERTIES_BY_ID: dict[str, Property] = {p.id: p for p in PROPERTIES}


def generated_cases() -> list[Case]:
    """The generated properties as cases, for selection and expectation files."""
    return [p.case for p in PROPERTIES]


#: The seed of a run that names none: fixed per suite version, so the same suite
#: generates the same programs on every machine and a CI job never goes red at
#: random. A fresh seed is opt-in (``--seed random``).
DEFAULT_SEED = zlib.crc32(f"kvconform suite {kvconform.SUITE_VERSION}".encode())


def new_seed() -> int:
    """A fresh random seed, for ``--seed random`` (printed, so the run reproduces)."""
    return secrets.randbelow(1 << 32)


def reference_driver() -> Driver:
    return InProcessDriver(ReferenceAdapter())


def execute(driver: Driver, program: Program) -> list[Outcome]:
    """Run ``program``; a program of hashes goes as one ``hash_batch`` where the driver has it."""
    if program and all(isinstance(op, ops.Hash) for op in program):
        batch = getattr(driver, "hash_batch", None)
        if callable(batch):
            return list(batch([op.program for op in program]))  # type: ignore[attr-defined]
    return list(driver.run(program))


@dataclass(frozen=True)
class Counterexample:
    """A shrunk program on which the implementation disagrees with the reference."""

    property_id: str
    program: Program
    #: The reference's outcomes.
    expected: tuple[Outcome, ...]
    #: The implementation's outcomes.
    actual: tuple[Outcome, ...]
    mismatch: Mismatch

    def listing(self) -> str:
        return render_program(self.program, self.expected, self.actual, self.mismatch)


@dataclass(frozen=True)
class PropertyResult:
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


class Disagreement(AssertionError):
    """Raised inside the Hypothesis test so that it shrinks the program."""

    def __init__(self, mismatch: Mismatch) -> None:
        super().__init__(f"{mismatch.expected} != {mismatch.actual}")
        self.mismatch = mismatch


def _settings(examples: int, shrink: bool) -> settings:
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    return settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        print_blob=False,
        report_multiple_bugs=False,
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        phases=phases,
    )


def run_property(
    prop: Property,
    driver: Driver,
    *,
    examples: int = DEFAULT_EXAMPLES,
    seed: int = 0,
    reference: Driver | None = None,
    shrink: bool = True,
    shrink_seconds: float | None = None,
    export_dir: Path | None = None,
    label: str | None = None,
) -> PropertyResult:
    """Run ``examples`` random programs of ``prop`` on ``driver`` and on the reference.

    ``label`` names the implementation in an exported scenario (default: its
    ``describe()`` name and version).
    """
    if examples < 1:
        raise ValueError(f"examples must be at least 1, got {examples}")
    reason = prop.not_applicable(driver.info)
    if reason:
        return PropertyResult(prop, "not_applicable", seed, examples, reason=reason)
    if shrink_seconds is None:
        shrink_seconds = SHRINK_SECONDS
    reference = reference or reference_driver()
    strategy = prop.programs(driver.info)
    memo: dict[Program, Counterexample | ReferenceBroken | None] = {}
    last: list[Counterexample | ReferenceBroken] = []
    runs = 0
    first_failure: float | None = None

    def check(program: Program) -> None:
        nonlocal runs, first_failure
        try:
            known = memo.get(program, False)
        except TypeError:  # an unhashable value: run it again
            known = False
        if known is False:
            if first_failure is not None and time.perf_counter() - first_failure > shrink_seconds:
                return  # the shrinking budget is spent: keep the smallest failure so far
            runs += 1
            known = _judge(prop, reference, driver, program)
            with contextlib.suppress(TypeError):  # unhashable: not memoized
                memo[program] = known
        if known is None:
            return
        if first_failure is None:
            first_failure = time.perf_counter()
        last.append(known)
        if isinstance(known, ReferenceBroken):
            raise known
        raise Disagreement(known.mismatch)

    test = hypothesis_seed(seed)(_settings(examples, shrink)(given(strategy)(check)))
    start = time.perf_counter()
    note = ""
    try:
        with _shrinking_deadline(shrink_seconds):
            test()
    except (Disagreement, ReferenceBroken):
        pass
    except Flaky as exc:
        if not last:  # a nondeterministic strategy: the generator's fault
            return PropertyResult(
                prop,
                "error",
                seed,
                examples,
                runs,
                time.perf_counter() - start,
                reason=f"the generated check stopped: {type(exc).__name__}: {_first_line(exc)}",
            )
        # the implementation answered the same program differently at different times
        note = f" (Hypothesis reported the failure as flaky: {_first_line(exc)})"
    except Exception as exc:  # a harness or generator fault, not a verdict
        return PropertyResult(
            prop,
            "error",
            seed,
            examples,
            runs,
            time.perf_counter() - start,
            reason=f"the generated check stopped: {type(exc).__name__}: {_first_line(exc)}"
            f"{_where(exc)}",
        )
    seconds = time.perf_counter() - start
    if not last:
        return PropertyResult(prop, "passed", seed, examples, runs, seconds)
    final = last[-1]
    if isinstance(final, ReferenceBroken):
        return PropertyResult(
            prop,
            "error",
            seed,
            examples,
            runs,
            seconds,
            reason=f"the generator wrote a program outside the preconditions: {final}",
        )
    if shrink:
        deadline = time.perf_counter() + max(1.0, shrink_seconds / 2)
        final, extra = _minimize(prop, reference, driver, final, deadline)
        runs += extra
        seconds = time.perf_counter() - start
    result = PropertyResult(
        prop, "failed", seed, examples, runs, seconds, counterexample=final, reason=note.strip()
    )
    if export_dir is not None:
        result = export_counterexample(result, driver, export_dir, reference, label)
    return result


def _candidates(program: Program) -> list[Program]:
    """``program`` with one operation removed, or one mix op of one hash program removed."""
    out: list[Program] = []
    for index in reversed(range(len(program))):
        if len(program) > 1:
            out.append(program[:index] + program[index + 1 :])
        op = program[index]
        if isinstance(op, ops.Hash):
            for at in reversed(range(len(op.program) - 1)):  # the closing finish stays
                smaller = ops.Hash(program=op.program[:at] + op.program[at + 1 :])
                out.append((*program[:index], smaller, *program[index + 1 :]))
    return out


def _minimize(
    prop: Property, reference: Driver, driver: Driver, cx: Counterexample, deadline: float
) -> tuple[Counterexample, int]:
    """Delete what Hypothesis left that the disagreement does not need (greedy, one at a time).

    Hypothesis shrinks values well but cannot always delete an early step whose
    removal changes how later choices are read; this pass can.
    """
    runs = 0
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for candidate in _candidates(cx.program):
            if time.perf_counter() >= deadline:
                break
            if not well_formed(candidate):
                continue
            runs += 1
            judged = _judge(prop, reference, driver, candidate)
            if isinstance(judged, Counterexample):
                cx = judged
                improved = True
                break
    return replace(cx, program=renumber(cx.program)), runs


@contextlib.contextmanager
def _shrinking_deadline(seconds: float) -> Iterator[None]:
    """Bound Hypothesis's shrinker (its own limit is five minutes).

    ``MAX_SHRINKING_SECONDS`` is an internal knob of Hypothesis: it is set only
    if present, and restored afterwards. Without it the check-level budget in
    :func:`run_property` still stops new programs from running, only less promptly.
    """
    from hypothesis.internal.conjecture import engine as conjecture

    before = getattr(conjecture, "MAX_SHRINKING_SECONDS", None)
    if not isinstance(before, int | float):
        yield
        return
    conjecture.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        yield
    finally:
        conjecture.MAX_SHRINKING_SECONDS = before


def _where(exc: BaseException) -> str:
    """`` (at strategies.py:123 in vary_identity)``: the last frame of this package, if any."""
    import traceback

    here = str(Path(__file__).resolve().parent)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(here)]
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {Path(last.filename).name}:{last.lineno} in {last.name})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _judge(
    prop: Property, reference: Driver, driver: Driver, program: Program
) -> Counterexample | ReferenceBroken | None:
    expected = _as_declared(program, execute(reference, program), driver.info)
    actual = execute(driver, program)
    try:
        mismatch = compare(program, expected, actual)
    except ReferenceBroken as exc:
        return exc
    if mismatch is None:
        return None
    return Counterexample(prop.id, program, tuple(expected), tuple(actual), mismatch)


def _as_declared(program: Program, outcomes: list[Outcome], info: AdapterInfo) -> list[Outcome]:
    """The reference's answers as the implementation's declarations make them read.

    A reader that declares its dtypes refuses a stamp of another dtype as
    ``unrepresentable`` after the version check (VERIFY-9, SIG-14), where the
    reference, which holds every name, measures on.
    """
    if info.dtypes is None and info.uint_bits >= 64:
        return outcomes
    out = list(outcomes)
    for index, op in enumerate(program):
        if isinstance(op, ops.Verify) and op.recorded is not None:
            refusal = unrepresentable(op, info)
            if refusal is not None and op.recorded.format_version in info.format_reads:
                out[index] = Refused(Fault(refusal.kind, refusal.field, None, dict(refusal.values)))
    return out


def export_counterexample(
    result: PropertyResult,
    driver: Driver,
    directory: Path,
    reference: Driver | None = None,
    label: str | None = None,
) -> PropertyResult:
    """Write the counterexample as a scenario file and replay it on both sides."""
    from kvconform.harness import export
    from kvconform.harness.runner import run_case
    from kvconform.harness.scenario import load_scenario_file

    assert result.counterexample is not None
    path = export.write_counterexample(
        result.counterexample,
        directory,
        seed=result.seed,
        examples=result.examples,
        adapter=label or f"{driver.info.name} {driver.info.version}",
    )
    notes = []
    for case in load_scenario_file(path):
        on_reference = run_case(case, reference or reference_driver())
        on_adapter = run_case(case, driver)
        if on_reference.verdict != "passed":
            notes.append(f"WARNING: the reference does not pass it:\n{on_reference.report()}")
        if on_adapter.verdict != "failed":
            notes.append(
                f"NOTE: this implementation {on_adapter.verdict.replace('_', ' ')} "
                "it on replay (a nondeterministic disagreement?)"
            )
    note = "\n".join(notes) or "replayed: passes on the reference, fails on this implementation"
    return replace(result, exported=path, export_note=note)


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
    lines = [
        f"counterexample after {result.runs} program(s), shrunk by Hypothesis; each line gives "
        "the reference's answer:",
        cx.listing(),
        reproduce,
    ]
    if result.exported is not None:
        lines.append(f"exported: {result.exported} ({result.export_note})")
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
    )
    return CaseResult(case, "failed", (failure,), seconds=result.seconds)


def run_generated(
    driver: Driver,
    *,
    examples: int = DEFAULT_EXAMPLES,
    seed: int = 0,
    properties: Sequence[Property] = PROPERTIES,
    export_dir: Path | None = None,
    shrink: bool = True,
    label: str | None = None,
) -> list[PropertyResult]:
    """Every property against one driver, sharing one reference."""
    reference = reference_driver()
    return [
        run_property(
            p,
            driver,
            examples=examples,
            seed=seed,
            reference=reference,
            export_dir=export_dir,
            shrink=shrink,
            label=label,
        )
        for p in properties
    ]
