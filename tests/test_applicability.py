"""Classes and profiles decide what an implementation is judged on (CONF-1 .. CONF-3, PROF-3)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from kvconform.conformance import suite
from kvconform.conformance.adapters.reference import ReferenceAdapter
from kvconform.conformance.driver import InProcessDriver
from kvconform.conformance.runner import run_cases
from kvconform.conformance.values import CLASS_REQUIRES, CLASSES, AdapterInfo

from tests.fixtures.hash_only_adapter import HashOnly

pytestmark = pytest.mark.covers("CONF-1", "CONF-2", "CONF-3", "PROF-3")


class Declaring(ReferenceAdapter):
    """The reference, declaring less than it implements."""

    def __init__(self, **changes: object) -> None:
        self.changes = changes

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), **self.changes)  # type: ignore[arg-type]


def test_the_classes_and_their_dependencies_are_the_specified_ones() -> None:
    assert CLASSES == ("hash", "identity", "plan", "signature", "verify")
    assert dict(CLASS_REQUIRES) == {"plan": ("identity",), "verify": ("signature",)}


def test_a_hash_only_implementation_is_judged_on_hash_cases_alone() -> None:
    results = run_cases(suite.all_cases(), InProcessDriver(HashOnly()))
    for r in results:
        if r.case.cls == "hash":
            assert r.verdict == "passed", r.report()
        else:
            assert r.verdict == "not_applicable", r.case.id
            assert "does not declare the class" in r.reason
    assert any(r.case.cls == "hash" for r in results)


def test_plan_without_identity_is_not_applicable_not_passed() -> None:
    """plan requires identity (CONF-1): its scenarios make models and caches."""
    adapter = Declaring(classes=frozenset({"plan", "signature", "verify", "hash"}))
    results = run_cases(suite.all_cases(), InProcessDriver(adapter))
    plan = [r for r in results if r.case.cls == "plan" and r.case.kind == "scenario"]
    with_models = [r for r in plan if any(op.needs == "identity" for op in r.case.program)]
    assert with_models and all(r.verdict == "not_applicable" for r in with_models)
    assert all("identity" in r.reason for r in with_models)


def test_profile_scenarios_are_not_applicable_to_another_profile() -> None:
    """A reader of format 2 only is not judged by scenarios that assume profile v1 (PROF-3)."""
    adapter = Declaring(format_writes=2, format_reads=frozenset({2}))
    results = run_cases(suite.all_cases(), InProcessDriver(adapter))
    profiled = [r for r in results if r.case.profile == 1]
    assert profiled, "no scenario declares the profile it assumes"
    assert all(r.verdict == "not_applicable" and "profile v1" in r.reason for r in profiled)
    unprofiled = [r for r in results if r.case.profile is None]
    assert all(r.verdict == "passed" for r in unprofiled)


def test_every_readable_set_scenario_declares_its_profile() -> None:
    """A case expecting unsupported_format depends on the readable set: it names it (PROF-3)."""
    from kvconform.conformance.checks import ErrorIs, OutcomeCheck

    for case in suite.all_cases():
        for check in case.checks:
            if (
                isinstance(check, OutcomeCheck)
                and isinstance(check.expect, ErrorIs)
                and check.expect.kind == "unsupported_format"
            ):
                assert case.profile == 1, f"{case.id} expects unsupported_format without profile: 1"
