"""Running the generated properties: programs are written, both sides run them.

:func:`run_property` runs one property for ``examples`` programs from ``seed``
against a driver, next to the reference (in process). The first disagreement
is shrunk to a minimal program, which :func:`case_result` turns into an
ordinary failed case (kind ``generated``) and :mod:`kvconform.differential.export`
can write out as a scenario file.

How the programs are written: each property has a *writer*
(:mod:`.strategies`), a plain function of a source of integer choices. Program
``i`` of a run is written from a pseudo-random source seeded with the seed, the
property and ``i`` (:func:`program_source`; program 0 is the simplest, every
choice 0), with no Hypothesis in the loop: writing a program costs a fraction
of running it. On a disagreement the recorded choices are shrunk
(:func:`.shrink.shrink_choices`: groups and runs of choices deleted, choices lowered,
each candidate replayed and kept if it still disagrees), then operations are
deleted one at a time (:func:`.shrink.minimize`). A :class:`Property` without a writer
runs through Hypothesis (its ``programs`` strategy, shrunk by Hypothesis).

The same ``seed`` and ``examples`` give the same programs, so any failure
reproduces with ``kvconform run --generated N --seed S``.
"""

from __future__ import annotations

import contextlib
import random
import secrets
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.errors import Flaky

import kvconform
from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential import declared, strategies
from kvconform.differential.compare import Counterexample as Counterexample  # re-exported
from kvconform.differential.compare import (
    Mismatch,
    Program,
    ReferenceBroken,
    compare,
)
from kvconform.differential.properties import PROPERTIES as PROPERTIES  # re-exported
from kvconform.differential.properties import PROPERTIES_BY_ID as PROPERTIES_BY_ID
from kvconform.differential.properties import Property as Property
from kvconform.differential.properties import generated_cases as generated_cases
from kvconform.differential.result import PropertyResult as PropertyResult  # re-exported
from kvconform.differential.result import Verdict as Verdict
from kvconform.differential.result import case_result as case_result
from kvconform.differential.shrink import hypothesis_shrinking_deadline, minimize
from kvconform.differential.shrink import shrink_choices as shrink_choices  # re-exported
from kvconform.harness.declarations import unrepresentable
from kvconform.harness.yamlsource import SourceError
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.values import AdapterInfo, Fault, Ok, Outcome, Refused

#: Examples per property in the project's own quick tests.
DEFAULT_EXAMPLES = 60
#: After the first disagreement, about how long shrinking may take (the choice
#: shrinker, or Hypothesis's, then a greedy pass of at most half as long).
SHRINK_SECONDS = 30.0

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


class _Judge:
    """Runs programs on both sides, once each (a memo by program), and counts the runs."""

    def __init__(
        self,
        prop: Property,
        reference: Driver,
        driver: Driver,
        on_run: Callable[[int], None] | None = None,
    ) -> None:
        self.prop, self.reference, self.driver = prop, reference, driver
        self.memo: dict[Program, Counterexample | ReferenceBroken | None] = {}
        self.runs = 0
        self.on_run = on_run

    def knows(self, program: Program) -> bool:
        try:
            return program in self.memo
        except TypeError:
            return False

    def __call__(self, program: Program) -> Counterexample | ReferenceBroken | None:
        if self.knows(program):  # (an unhashable value is run again)
            return self.memo[program]
        self.runs += 1
        if self.on_run is not None:
            self.on_run(self.runs)
        known = _judge(self.prop, self.reference, self.driver, program)
        with contextlib.suppress(TypeError):  # unhashable: not memoized
            self.memo[program] = known
        return known


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
    on_run: Callable[[int], None] | None = None,
) -> PropertyResult:
    """Run ``examples`` random programs of ``prop`` on ``driver`` and on the reference.

    ``on_run`` is told the number of programs run so far, after each (progress).

    A property with a ``writer`` writes its programs itself (:func:`program_source`,
    :func:`shrink_choices`); one without runs through Hypothesis. ``label`` names
    the implementation in an exported scenario (default: its ``describe()`` name and
    version).
    """
    if examples < 1:
        raise ValueError(f"examples must be at least 1, got {examples}")
    reason = prop.not_applicable(driver.info)
    if reason:
        return PropertyResult(prop, "not_applicable", seed, examples, reason=reason)
    if shrink_seconds is None:
        shrink_seconds = SHRINK_SECONDS
    matching = prop.reference_for(driver.info) if prop.reference_for is not None else None
    reference = matching or reference or reference_driver()
    judge = _Judge(prop, reference, driver, on_run)
    start = time.perf_counter()
    note = ""
    final: Counterexample | ReferenceBroken | None
    try:
        if prop.writer is not None:
            found = _run_written(prop, prop.writer(driver.info), judge, examples, seed)
            if not isinstance(found, _Found):
                final = found
            elif shrink:
                deadline = time.perf_counter() + shrink_seconds
                final = shrink_choices(found.write, judge, found.choices, found.cx, deadline)
            else:
                final = found.cx
        else:
            final, note = _run_hypothesis(prop, judge, examples, seed, shrink, shrink_seconds)
    except Exception as exc:  # a harness or generator fault, not a verdict
        return PropertyResult(
            prop,
            "error",
            seed,
            examples,
            judge.runs,
            time.perf_counter() - start,
            reason=f"the generated check stopped: {type(exc).__name__}: {_first_line(exc)}"
            f"{_where(exc)}",
        )
    seconds = time.perf_counter() - start
    if final is None:
        return PropertyResult(prop, "passed", seed, examples, judge.runs, seconds)
    if isinstance(final, ReferenceBroken):
        return PropertyResult(
            prop,
            "error",
            seed,
            examples,
            judge.runs,
            seconds,
            reason=f"the generator wrote a program outside the preconditions: {final}",
        )
    runs = judge.runs
    if shrink:
        deadline = time.perf_counter() + max(1.0, shrink_seconds / 2)
        keeps = prop.keeps(driver.info) if prop.keeps is not None else None
        final, extra = minimize(
            lambda p: _judge(prop, reference, driver, p), final, deadline, keeps
        )
        runs += extra
        seconds = time.perf_counter() - start
    result = PropertyResult(
        prop, "failed", seed, examples, runs, seconds, counterexample=final, reason=note.strip()
    )
    if export_dir is not None:
        result = export_counterexample(result, driver, export_dir, label)
    return result


def program_source(seed: int, property_id: str, index: int) -> strategies.RecordedSource:
    """The choices of program ``index`` of a property from ``seed``.

    The first program is the simplest (every choice 0: a short, plain program, which
    catches what shows only on an implementation's first mint). Each later one has
    its own stream (seeded with text, which :class:`random.Random` hashes with
    SHA-512: the same on every platform and Python version), so a seed writes the
    same programs run to run, and a run of N programs begins with the programs of
    any shorter run.
    """
    if index == 0:
        return strategies.ReplaySource(())
    return strategies.RandomSource(random.Random(f"kvconform {seed} {property_id} {index}"))


@dataclass(frozen=True)
class _Found:
    """A failing program written from ``choices``, before shrinking."""

    write: strategies.Writer[Program]
    choices: tuple[int, ...]
    cx: Counterexample


def _run_written(
    prop: Property,
    write: strategies.Writer[Program],
    judge: _Judge,
    examples: int,
    seed: int,
) -> _Found | ReferenceBroken | None:
    """Write and judge ``examples`` programs; stop at the first disagreement."""
    for index in range(examples):
        source = program_source(seed, prop.id, index)
        program = write(source)
        if not program:
            continue
        judged = judge(program)
        if isinstance(judged, Counterexample):
            return _Found(write, tuple(source.choices), judged)
        if judged is not None:  # the reference refused it: the writer's fault
            return judged
    return None


def _run_hypothesis(
    prop: Property,
    judge: _Judge,
    examples: int,
    seed: int,
    shrink: bool,
    shrink_seconds: float,
) -> tuple[Counterexample | ReferenceBroken | None, str]:
    """Let Hypothesis write and shrink the programs (a property without a ``writer``).

    Returns the last failure (the smallest) and a note.
    """
    strategy = prop.programs(judge.driver.info)
    last: list[Counterexample | ReferenceBroken] = []
    first_failure: float | None = None

    def check(program: Program) -> None:
        nonlocal first_failure
        if (
            first_failure is not None
            and time.perf_counter() - first_failure > shrink_seconds
            and not judge.knows(program)
        ):
            return  # the shrinking budget is spent: keep the smallest failure so far
        known = judge(program)
        if known is None:
            return
        if first_failure is None:
            first_failure = time.perf_counter()
        last.append(known)
        if isinstance(known, ReferenceBroken):
            raise known
        raise Disagreement(known.mismatch)

    test = hypothesis_seed(seed)(_settings(examples, shrink)(given(strategy)(check)))
    note = ""
    try:
        with hypothesis_shrinking_deadline(shrink_seconds):
            test()
    except (Disagreement, ReferenceBroken):
        pass
    except Flaky as exc:
        if not last:  # a nondeterministic strategy: the generator's fault
            raise
        # the implementation answered the same program differently at different times
        note = f" (Hypothesis reported the failure as flaky: {_first_line(exc)})"
    return (last[-1] if last else None), note


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
    allowed: list[tuple[Outcome, ...]] = []
    try:
        mismatch = compare(program, expected, actual)
        if mismatch is not None and prop.alternatives is not None:
            # another engine the rules allow may give exactly these answers
            others = prop.alternatives(driver.info, program)
            allowed = [tuple(expected)] if others else []
            for other in others:
                outcomes = _as_declared(program, execute(other, program), driver.info)
                found = compare(program, outcomes, actual)
                if found is None:
                    return None
                allowed.append(tuple(outcomes))
                if found.index > mismatch.index:
                    expected, mismatch = outcomes, found
    except ReferenceBroken as exc:
        return exc
    if mismatch is None:
        return None
    at = mismatch.index
    mismatch = prop.refine(program, expected, actual, mismatch) if prop.refine else mismatch
    if any(answers[at] == actual[at] for answers in allowed):
        # right alone, wrong together: which answer is the wrong one, no rule says
        got = actual[at]
        mismatch = replace(
            mismatch,
            expected=f"{mismatch.expected}, as the engine the rules allow that gives every "
            "answer before this one does",
            actual=f"{got.value if isinstance(got, Ok) else got}: an answer an engine the "
            "rules allow gives, but none together with the answers before it (one of those "
            "may be the wrong one)",
        )
    elif allowed:
        mismatch = replace(
            mismatch,
            expected=f"{mismatch.expected} (from the engine the rules allow that agrees "
            "longest with the implementation; none agrees with every answer)",
        )
    distinct: list[tuple[Outcome, ...]] = []
    for answers in allowed:
        if answers not in distinct:
            distinct.append(answers)
    return Counterexample(
        prop.id, program, tuple(expected), tuple(actual), mismatch, tuple(distinct)
    )


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
    label: str | None = None,
) -> PropertyResult:
    """Write the counterexample as a scenario file and replay it on both sides."""
    from kvconform.differential import export
    from kvconform.harness.runner import run_case
    from kvconform.harness.scenario import load_scenario_file

    assert result.counterexample is not None
    try:
        path = export.write_counterexample(
            result.counterexample,
            directory,
            seed=result.seed,
            examples=result.examples,
            adapter=label or f"{driver.info.name} {driver.info.version}",
            options=driver.info.options,
            block_format=(driver.info.format_writes or 1, tuple(driver.info.format_reads)),
        )
    except OSError as exc:
        why = f"cannot write the counterexample to {directory}: {exc}"
        return replace(result, export_error=why)
    notes = []
    try:
        cases = load_scenario_file(path)
    except SourceError as exc:  # written, but it does not read back: say so, keep the verdict
        return replace(result, exported=path, export_note=f"WARNING: it does not load: {exc}")
    for case in cases:
        # the reference under the implementation's declaration (the scenario assumes it)
        on_reference = run_case(case, InProcessDriver(declared.DeclaringAs(driver.info)))
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
