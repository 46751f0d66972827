"""The conformance suite as mutmut's only test: the reference must pass every case.

Not collected by the normal ``pytest`` run (``tests/mutation/conftest.py``):
it is the test a generic mutation run (``tests/mutation/run.sh``) runs against
each mutated copy of ``reference/``. It stops at the first failing case, and
runs the four 1 MiB fold vectors last, so a killed mutant costs little.
"""

from __future__ import annotations

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.harness import suite
from kvconform.harness.runner import run_case
from kvconform.harness.scenario import Case
from kvconform.protocol.driver import InProcessDriver


def _slow_last(case: Case) -> tuple[bool, str]:
    slow = any(
        op.kind == "bytes" and op.repeat * len(op.value or b"") >= 1 << 16  # type: ignore[arg-type]
        for step in case.program
        for op in getattr(step, "program", ())
    )
    return slow, case.id


def test_reference_passes_the_whole_suite() -> None:
    driver = InProcessDriver(ReferenceAdapter())
    for case in sorted(suite.all_cases(), key=_slow_last):
        result = run_case(case, driver)
        assert result.verdict == "passed", result.report()
