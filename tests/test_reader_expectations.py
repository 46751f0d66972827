"""The expectation of a ``verify`` is a configuration a reader could be running with.

spec/protocol.md (after the values table) promises that a version-2 expectation always
has a layout PROF-7 accepts, so that an adapter may hold the expectation in a type that
is valid by construction (as upstream ferrox's ``BlockLayout`` is; an unchanged build of
it behind the stdio protocol decodes the expectation first, docs/upstream-trials.md).
A bad layout the suite asks about arrives in ``recorded``. These tests keep the promise
for the scenarios as written and for the generated checks.
"""

from __future__ import annotations

import random

import pytest

from kvconform.differential import strategies
from kvconform.differential.strategies.profile_v2 import holdable, verify_op_v2
from kvconform.harness.suite import all_cases
from kvconform.protocol import operations as ops
from kvconform.values import Layout


def test_holdable_is_prof_7() -> None:
    assert holdable(Layout(4, None))
    assert holdable(Layout(4, 8))
    assert holdable(Layout(4, 4))
    assert not holdable(Layout(0, None))
    assert not holdable(Layout(4, 0))
    assert not holdable(Layout(4, 6))
    assert not holdable(Layout(8, 4))


def test_no_scenario_expects_a_layout_no_reader_runs_under() -> None:
    bad = [
        f"{case.id}: step {index + 1} expects layout {op.expected.layout}"
        for case in all_cases()  # the suite's cases, through its cache
        for index, op in enumerate(case.program)
        if isinstance(op, ops.Verify)
        and op.expected.layout is not None
        and not holdable(op.expected.layout)
    ]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("seed", range(4))
def test_generated_v2_verifications_expect_a_valid_layout(seed: int) -> None:
    source = strategies.RandomSource(random.Random(f"reader expectations {seed}"))
    drawn = [verify_op_v2(source) for _ in range(500)]
    assert all(op.expected.layout is None or holdable(op.expected.layout) for op in drawn)
    # and the bad layouts still come, in the stamps
    assert any(
        op.recorded is not None
        and op.recorded.layout is not None
        and not holdable(op.recorded.layout)
        for op in drawn
    )
