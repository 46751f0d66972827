"""What a failed check costs: its stake (CONF-18; conformance/INTERPRETING.md §7.6).

A failure's basis (CONF-8) says who settled the rule it breaks; its stake says which
way the implementation erred. It is read off the check alone, and only where the
step's meaning fixes a direction:

- the answers about reuse: a plan's validity (``session_valid``, ``session_validity``),
  a block's verdict (``verify``) and the positions a prefix lookup reuses;
- the identities: ids, plan keys and hash results, compared by ``same`` and ``differ``.

Reusing or accepting what must not be is ``unsafe``; giving up reuse that was owed is
``lost_reuse``. Anything else (a refusal of another kind, a wrong hash value) has no
stake: the step alone does not say what it costs, and the suite does not guess.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

from kvconform.harness.checks import (
    ErrorIs,
    Expectation,
    Refuses,
    ShapeMismatchIs,
    SignatureIs,
    Succeeds,
    Validity,
    ValueIs,
    ValueOneOf,
)
from kvconform.protocol import operations as ops
from kvconform.values import Ok, Outcome, Refused

#: A failed check's stake; ``""``: none (CONF-18).
Stake = Literal["unsafe", "lost_reuse", ""]
#: A failed case's stake, the gravest of its checks' (``other``: none of them had one).
CaseStake = Literal["unsafe", "lost_reuse", "other"]
CASE_STAKES: tuple[CaseStake, ...] = ("unsafe", "lost_reuse", "other")

#: Steps whose values are identities: two that must differ and are equal merge what
#: must be kept apart; two that must be equal and differ split what could be shared.
IDENTITY_STEPS = (ops.ModelInstanceId, ops.CacheAllocId, ops.PlanKey, ops.Hash)

_VALID = "valid"


def of_outcome(op: ops.Op, expect: Expectation, outcome: Outcome) -> Stake:
    """The stake of a failed expectation on one step's outcome (CONF-18)."""
    if isinstance(op, ops.SessionValid) and isinstance(expect, Validity):
        if isinstance(outcome, Ok) and isinstance(outcome.value, bool):
            return "lost_reuse" if expect.valid else "unsafe"
        return ""
    if isinstance(op, ops.SessionValidity) and isinstance(expect, ValueIs):
        if not isinstance(outcome, Ok):
            return ""
        if expect.value == _VALID:
            return "lost_reuse"
        return "unsafe" if _same(outcome.value, _VALID) else ""
    if isinstance(op, ops.Verify):
        if isinstance(expect, ErrorIs | ShapeMismatchIs | Refuses) and isinstance(outcome, Ok):
            return "unsafe"
        if isinstance(expect, SignatureIs | Succeeds) and isinstance(outcome, Refused):
            return "lost_reuse"
        return ""
    if isinstance(op, ops.PrefixLookup) and isinstance(expect, ValueIs | ValueOneOf):
        accepted = expect.values if isinstance(expect, ValueOneOf) else (expect.value,)
        return _count_stake(accepted, outcome)
    return ""


def of_relation(relation: str, steps: Sequence[ops.Op]) -> Stake:
    """The stake of a failed relation over named values taken at ``steps`` (CONF-18)."""
    if not steps or not all(isinstance(op, IDENTITY_STEPS) for op in steps):
        return ""
    if relation == "differ":
        return "unsafe"
    if relation == "same":
        return "lost_reuse"
    return ""


def of_disagreement(op: ops.Op, allowed: Iterable[Outcome], actual: Outcome) -> Stake:
    """The stake of a generated program's first disagreement, at ``op``: the answers the
    rules allow there (the reference's, and those of every other engine the rules allow)
    stand for the expectation (CONF-18)."""
    answers = tuple(allowed)
    if not answers:
        return ""
    if isinstance(op, ops.Verify):
        if isinstance(actual, Ok) and all(isinstance(a, Refused) for a in answers):
            return "unsafe"
        if isinstance(actual, Refused) and all(isinstance(a, Ok) for a in answers):
            return "lost_reuse"
        return ""
    if not isinstance(actual, Ok) or not all(isinstance(a, Ok) for a in answers):
        return ""
    values = tuple(a.value for a in answers if isinstance(a, Ok))
    if isinstance(op, ops.SessionValid | ops.SessionValidity):
        reusable: object = True if isinstance(op, ops.SessionValid) else _VALID
        if _same(actual.value, reusable) and not any(_same(v, reusable) for v in values):
            return "unsafe"
        if not _same(actual.value, reusable) and all(_same(v, reusable) for v in values):
            return "lost_reuse"
        return ""
    if isinstance(op, ops.PrefixLookup):
        return _count_stake(values, actual)
    return ""


def of_related_ids(want: str | None, have: str | None) -> Stake:
    """The stake of a generated program's id related wrongly to an earlier id: ``want``
    is how the reference relates the two (``"equal to"``, ``"greater than"``, ...),
    ``have`` how the implementation does (CONF-18). An id equal to one the rules make
    different is one object's id given to another; different where they make it equal,
    a mint that detaches what could stay; another order, neither."""
    if want is None or have is None:
        return ""
    if have == "equal to" and want != "equal to":
        return "unsafe"
    if want == "equal to" and have != "equal to":
        return "lost_reuse"
    return ""


def _same(value: object, reusable: object) -> bool:
    """``value`` is the answer that reuses (``True`` or ``"valid"``), of its very type."""
    return type(value) is type(reusable) and value == reusable


def _count_stake(accepted: Sequence[object], outcome: Outcome) -> Stake:
    """More positions reused than every accepted count: unsafe; fewer: lost reuse."""
    counts = [v for v in accepted if type(v) is int]
    if not counts or len(counts) != len(accepted) or not isinstance(outcome, Ok):
        return ""
    got = outcome.value
    if type(got) is not int:
        return ""
    if got > max(counts):
        return "unsafe"
    if got < min(counts):
        return "lost_reuse"
    return ""


def of_case(stakes: Iterable[str]) -> CaseStake:
    """A failed case's stake: the gravest of its failed checks' (CONF-18)."""
    found = set(stakes)
    if "unsafe" in found:
        return "unsafe"
    if "lost_reuse" in found:
        return "lost_reuse"
    return "other"
