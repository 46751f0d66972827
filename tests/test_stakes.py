"""The stake of a failure (CONF-18, conformance/INTERPRETING.md §7.6): which way it erred.

Each rule of §7.6's table is checked in both directions and beside a failure of the same
step that has no stake; then against the mutant corpus, where the misreading each mutant
was written for is known: a plan key that leaves out a component is reported unsafe,
one that keys a per-step input lost reuse, whatever the basis of the cases that catch it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kvconform.harness import stakes, suite
from kvconform.harness.checks import (
    ErrorIs,
    Refuses,
    SignatureIs,
    Succeeds,
    Validity,
    ValueIs,
    ValueOneOf,
)
from kvconform.harness.runner import run_cases
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import Fault, Ok, Outcome, Refused
from tests.mutants import all_mutants

pytestmark = pytest.mark.covers("CONF-18")

NONE: Any = None  # an operand no rule of §7.6 reads
VALID = ops.SessionValid("s", "m", "c", NONE)
VALIDITY = ops.SessionValidity("s", "m", "c", NONE)
VERIFY = ops.Verify(NONE, NONE, NONE)
LOOKUP = ops.PrefixLookup("p", "r")
REFUSED = Refused(Fault("incompatible", "model", None, {}, "another model"))


@pytest.mark.parametrize(
    ("op", "expect", "outcome", "stake"),
    [
        # a plan's validity: valid where it must not be, and the opposite
        (VALID, Validity(False), Ok(True), "unsafe"),
        (VALID, Validity(True), Ok(False), "lost_reuse"),
        (VALID, Validity(True), REFUSED, ""),  # no answer about the plan
        (VALIDITY, ValueIs("stale"), Ok("valid"), "unsafe"),
        (VALIDITY, ValueIs("allocation_changed"), Ok("valid"), "unsafe"),
        (VALIDITY, ValueIs("valid"), Ok("stale"), "lost_reuse"),
        (VALIDITY, ValueIs("stale"), Ok("allocation_changed"), ""),  # neither reuses
        # a block's verdict: accepted where it must be refused, and the opposite
        (VERIFY, ErrorIs("incompatible", "model", None, {}), Ok(NONE), "unsafe"),
        (VERIFY, Refuses(), Ok(NONE), "unsafe"),
        (VERIFY, SignatureIs(NONE), REFUSED, "lost_reuse"),
        (VERIFY, Succeeds(), REFUSED, "lost_reuse"),
        (VERIFY, ErrorIs("incompatible", "dtype", None, {}), REFUSED, ""),  # another field
        # the positions a lookup reuses: more than every accepted count, fewer, between
        (LOOKUP, ValueIs(4), Ok(8), "unsafe"),
        (LOOKUP, ValueIs(4), Ok(0), "lost_reuse"),
        (LOOKUP, ValueOneOf((0, 4, 8)), Ok(12), "unsafe"),
        (LOOKUP, ValueOneOf((4, 8)), Ok(0), "lost_reuse"),
        (LOOKUP, ValueOneOf((0, 8)), Ok(4), ""),  # an order no rule allows, no direction
        (LOOKUP, ValueIs(4), Ok(4.0), ""),  # not a count
        # a step that is no answer about reuse has no stake, however it failed
        (ops.CacheLen("c"), ValueIs(4), Ok(8), ""),
        (ops.CacheAllocId("c"), Succeeds(), REFUSED, ""),
    ],
)
def test_a_failed_expectation_has_the_stake_of_its_direction(
    op: ops.Op, expect: Any, outcome: Outcome, stake: str
) -> None:
    assert stakes.of_outcome(op, expect, outcome) == stake


@pytest.mark.parametrize(
    ("relation", "steps", "stake"),
    [
        ("differ", [ops.CacheAllocId("a"), ops.CacheAllocId("b")], "unsafe"),
        ("differ", [ops.PlanKey(NONE), ops.PlanKey(NONE)], "unsafe"),
        ("same", [ops.ModelInstanceId("m"), ops.ModelInstanceId("m")], "lost_reuse"),
        ("same", [ops.Hash(()), ops.Hash(())], "lost_reuse"),
        ("increasing", [ops.CacheAllocId("a"), ops.CacheAllocId("b")], ""),
        ("nonzero", [ops.CacheAllocId("a")], ""),
        # counts judged together (7.1.0): one of them is wrong, the relation says not which
        ("same", [LOOKUP, LOOKUP], ""),
        ("same", [LOOKUP, ops.CacheAllocId("a")], ""),
    ],
)
def test_a_failed_relation_has_a_stake_only_over_identities(
    relation: str, steps: list[ops.Op], stake: str
) -> None:
    assert stakes.of_relation(relation, steps) == stake


@pytest.mark.parametrize(
    ("op", "allowed", "actual", "stake"),
    [
        (VALID, [Ok(False)], Ok(True), "unsafe"),
        (VALID, [Ok(True)], Ok(False), "lost_reuse"),
        (VALIDITY, [Ok("stale")], Ok("valid"), "unsafe"),
        (VALIDITY, [Ok("valid")], Ok("allocation_changed"), "lost_reuse"),
        (VERIFY, [REFUSED], Ok(NONE), "unsafe"),
        (VERIFY, [Ok(NONE)], REFUSED, "lost_reuse"),
        # every answer the rules allow stands for the expectation
        (LOOKUP, [Ok(0), Ok(4)], Ok(8), "unsafe"),
        (LOOKUP, [Ok(4), Ok(8)], Ok(0), "lost_reuse"),
        (LOOKUP, [Ok(0), Ok(8)], Ok(4), ""),
        (VALID, [Ok(True), Ok(False)], Ok(True), ""),
        (VALID, [], Ok(True), ""),
    ],
)
def test_a_generated_disagreement_is_read_against_every_allowed_answer(
    op: ops.Op, allowed: list[Outcome], actual: Outcome, stake: str
) -> None:
    assert stakes.of_disagreement(op, allowed, actual) == stake


def test_a_case_counts_under_its_gravest_check() -> None:
    assert stakes.of_case(["", "lost_reuse", "unsafe"]) == "unsafe"
    assert stakes.of_case(["lost_reuse", ""]) == "lost_reuse"
    assert stakes.of_case(["", ""]) == "other"
    assert stakes.of_case([]) == "other"


def _stakes_of(name: str) -> set[str | None]:
    """The stakes of the failed cases, among those citing what the mutant breaks."""
    (mutant,) = [m for m in all_mutants() if m.name == name]
    aimed = [c for c in suite.all_cases() if set(mutant.breaks) & set(c.requires)]
    results = run_cases(aimed, InProcessDriver(mutant.factory()))
    return {r.stake for r in results if r.verdict == "failed"}


PLAN_KEY_MUTANTS = [
    m for m in all_mutants() if m.name.startswith("plan-key-") and m.half in ("under", "over")
]


@pytest.mark.parametrize("name", [m.name for m in PLAN_KEY_MUTANTS])
def test_a_plan_key_keyed_too_little_is_unsafe_and_too_much_loses_reuse(name: str) -> None:
    """Both halves of the plan key (PLAN-15, PLAN-16): every mutant that leaves a
    component out fails a case as unsafe, every one that keys a per-step input or keys
    a mapping by its order fails cases as lost reuse and none as unsafe."""
    (mutant,) = [m for m in PLAN_KEY_MUTANTS if m.name == name]
    found = _stakes_of(name)
    if mutant.half == "under":
        assert "unsafe" in found, found
    else:
        assert found == {"lost_reuse"}, found


def test_the_corpus_has_plan_key_mutants_of_both_halves() -> None:
    halves = [m.half for m in PLAN_KEY_MUTANTS]
    assert halves.count("under") >= 30 and halves.count("over") >= 5, halves


@pytest.mark.parametrize(
    ("name", "stake"),
    [
        ("prefix-salt-ignored", "unsafe"),  # CVE-2025-46570: a decision's case, unsafe
        ("prefix-salt-with-a-nonce", "lost_reuse"),  # no request ever shares a block
    ],
)
def test_a_salt_left_out_is_unsafe_though_its_basis_is_a_decision(name: str, stake: str) -> None:
    (mutant,) = [m for m in all_mutants() if m.name == name]
    aimed = [c for c in suite.all_cases() if set(mutant.breaks) & set(c.requires)]
    failed = [
        r for r in run_cases(aimed, InProcessDriver(mutant.factory())) if r.verdict == "failed"
    ]
    assert failed and all(r.case.basis for r in failed)  # the class rests on decisions
    assert {r.stake for r in failed} == {stake}
    assert f"stake:    {stake.replace('_', ' ')}:" in failed[0].report()


@pytest.mark.parametrize(
    ("name", "prop_id", "stake"),
    [
        ("prefix-salt-ignored", "generated.prefix", "unsafe"),
        ("plan-key-includes-rope", "generated.key-state-machine", "lost_reuse"),
        # ids and keys judged by how they relate to earlier ones
        ("plan-key-ignores-alloc", "generated.key-state-machine", "unsafe"),
        ("clear-keeps-alloc-id", "generated.key-state-machine", "unsafe"),
        ("truncate-remints", "generated.key-state-machine", "lost_reuse"),
        ("set-hook-remints-instance-id", "generated.key-state-machine", "lost_reuse"),
    ],
)
def test_a_generated_counterexample_has_the_stake_of_its_disagreement(
    name: str, prop_id: str, stake: str
) -> None:
    from kvconform.differential.engine import run_property
    from kvconform.differential.properties import PROPERTIES
    from kvconform.differential.result import case_result

    (mutant,) = [m for m in all_mutants() if m.name == name]
    (prop,) = [p for p in PROPERTIES if p.case.id == prop_id]
    result = run_property(prop, InProcessDriver(mutant.factory()), examples=100, seed=0)
    assert result.verdict == "failed", result.reason
    assert case_result(result).stake == stake


def test_a_case_ranked_by_a_later_check_names_that_check_too() -> None:
    """A case shows its first failure (§7.3); where a later check gives it its stake,
    its text names that check as well, so the stake is never shown beside an answer
    that does not bear it out."""
    from kvconform.harness.checks import Failure, Where
    from kvconform.harness.runner import render_failure

    case = suite.all_cases()[0]
    first = Failure(Where("f.yaml", 3, "step 2 (cache_len)"), "4", "success: 5")
    later = Failure(Where("f.yaml", 9, "step 5 (session_valid)"), "plan invalid", "plan valid")
    text = render_failure(case, (first, replace(later, stake="unsafe")))
    assert "failed at step 2 (cache_len)" in text
    assert "stake:    unsafe" in text
    assert "at step 5 (session_valid) (f.yaml:9): expected plan invalid; actual plan valid" in text
    assert "            at " not in render_failure(case, (replace(first, stake="unsafe"), later))


@pytest.mark.parametrize(
    ("want", "have", "stake"),
    [
        ("greater than", "equal to", "unsafe"),  # an id given again
        ("different from", "equal to", "unsafe"),  # two keys merged
        ("equal to", "greater than", "lost_reuse"),  # a mint for nothing
        ("equal to", "different from", "lost_reuse"),
        ("greater than", "less than", ""),  # order only
        (None, "equal to", ""),
    ],
)
def test_an_id_related_wrongly_in_a_generated_program_is_read_as_same_and_differ(
    want: str | None, have: str | None, stake: str
) -> None:
    assert stakes.of_related_ids(want, have) == stake
