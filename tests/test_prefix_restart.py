"""A real restart for the shared tier (PREFIX-22, PROTO-36, PROTO-37).

Two prefix caches of one adapter process stand for two processes, but they share what
the process holds. The mutants below keep a value per process (a chain root drawn when
the process starts, a registry's adapter numbers, a tier held in memory): every case
without a ``restart`` step passes them, which is why the restart steps exist; the
cases with one fail them, in process and over stdio. A right implementation passes both.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.harness import suite
from kvconform.harness.runner import run_cases
from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.protocol import steps
from kvconform.protocol.client import StdioDriver
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.values import Broken, Ok

from .mutants.prefix import (
    PrefixExactTailAdapter,
    PrefixTierKeptInTheProcess,
    PrefixTierKeysAdapterByProcessNumber,
    PrefixTierRootDrawnPerProcess,
)

ROOT = Path(__file__).resolve().parent.parent
PER_PROCESS = (
    PrefixTierRootDrawnPerProcess,
    PrefixTierKeysAdapterByProcessNumber,
    PrefixTierKeptInTheProcess,
)


def _prefix_cases() -> list[Case]:
    return [c for c in suite.all_cases() if c.cls == "prefix_cache"]


def _restarts(case: Case) -> bool:
    return any(isinstance(op, steps.Restart) for op in case.program)


def _failed(cases: list[Case], driver: Driver) -> list[str]:
    return [r.case.id for r in run_cases(cases, driver) if r.verdict == "failed"]


def _spec(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _stdio(spec: str) -> StdioDriver:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    return StdioDriver([sys.executable, "-m", "kvconform.serve", "--adapter", spec], 60.0, env=env)


def test_a_harness_step_is_no_operation_of_the_table() -> None:
    for step in steps.HARNESS_STEPS:
        assert step not in ops.BY_CLASS and step.name not in {*ops.BY_NAME, *ops.CONTROL}


def test_some_prefix_cases_restart() -> None:
    restarting = [c.id for c in _prefix_cases() if _restarts(c)]
    assert "prefix.tier.restarted-process-reuses" in restarting
    assert "prefix.tier.adapter-reused-after-a-restart" in restarting


@pytest.mark.parametrize("cls", PER_PROCESS, ids=lambda c: c.__name__)
def test_a_per_process_tier_passes_every_case_without_a_restart(cls: type) -> None:
    """What the suite judged before the restart step: the two caches of one process agree."""
    cases = [c for c in _prefix_cases() if not _restarts(c)]
    assert _failed(cases, InProcessDriver(cls())) == []


@pytest.mark.parametrize("cls", PER_PROCESS, ids=lambda c: c.__name__)
def test_a_per_process_tier_fails_a_real_restart_in_process(cls: type) -> None:
    cases = [c for c in _prefix_cases() if _restarts(c)]
    failed = _failed(cases, InProcessDriver(cls()))
    assert "prefix.tier.adapter-reused-after-a-restart" in failed


@pytest.mark.parametrize("cls", PER_PROCESS, ids=lambda c: c.__name__)
def test_a_per_process_tier_fails_a_real_restart_over_stdio(cls: type) -> None:
    cases = [c for c in _prefix_cases() if _restarts(c)]
    with _stdio(_spec(cls)) as driver:
        results = run_cases(cases, driver)
        restarts = driver.restarts
    asked = [r for r in results if r.verdict != "not_applicable"]
    assert len(asked) >= 2 and restarts == len(asked), "the adapter process was not started again"
    assert "prefix.tier.adapter-reused-after-a-restart" in [
        r.case.id for r in asked if r.verdict == "failed"
    ]


@pytest.mark.covers("PROTO-37", "PREFIX-22", "PREFIX-5")
@pytest.mark.parametrize(
    "cls", [ReferenceAdapter, PrefixExactTailAdapter], ids=["reference", "exact-tail"]
)
def test_the_reference_passes_the_restarts_over_stdio_in_new_processes(cls: type) -> None:
    """Every restart case its declaration is asked, each in a process started again;
    under ``exact_tail`` the tail's case too."""
    cases = [c for c in _prefix_cases() if _restarts(c)]
    with _stdio(_spec(cls)) as driver:
        first = driver.pid
        results = run_cases(cases, driver)
        assert driver.pid != first
        restarts = driver.restarts
    asked = [r for r in results if r.verdict != "not_applicable"]
    assert restarts == len(asked) >= 2
    assert all(r.verdict == "passed" for r in asked), [r.report() for r in asked]
    tail = "prefix.partial.exact-tail-survives-a-restart"
    assert (tail in [r.case.id for r in asked]) == (cls is PrefixExactTailAdapter)


@pytest.mark.covers("PROTO-36")
def test_a_tier_storage_directory_lives_for_one_program() -> None:
    seen: list[str] = []

    class Watching(ReferenceAdapter):
        def tier_new(self, *, storage: str | None = None) -> object:
            assert storage is not None and os.path.isdir(storage) and not os.listdir(storage)
            seen.append(storage)
            return super().tier_new(storage=storage)

    program = (
        ops.TierNew("tier", storage="disk"),
        ops.TierNew("other", storage="elsewhere"),
    )
    outcomes = InProcessDriver(Watching()).run(program)
    assert outcomes == [Ok(None), Ok(None)]
    assert len(set(seen)) == 2 and not any(os.path.exists(p) for p in seen)


@pytest.mark.covers("PROTO-37")
def test_an_in_process_restart_makes_the_adapter_again_from_its_factory() -> None:
    made: list[ReferenceAdapter] = []

    def factory() -> ReferenceAdapter:
        made.append(ReferenceAdapter())
        return made[-1]

    driver = InProcessDriver(factory(), factory)
    program = (ops.TierNew("tier"), steps.Restart(), ops.TierNew("tier"))
    assert driver.run(program) == [Ok(None), Ok(None), Ok(None)]
    assert len(made) == 2 and driver.adapter is made[1] and driver.restarts == 1


def test_a_restart_whose_adapter_describes_itself_otherwise_breaks_the_rest() -> None:
    driver = InProcessDriver(ReferenceAdapter(), lambda: ReferenceAdapter(writes=2))
    outcomes = driver.run((ops.TierNew("tier"), steps.Restart(), ops.TierNew("tier")))
    assert outcomes[0] == Ok(None)
    assert isinstance(outcomes[1], Broken) and "describes itself differently" in outcomes[1].reason
    assert outcomes[2] == outcomes[1]
