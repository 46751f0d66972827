"""The relation ``together`` (suite 7.3.0, conformance/INTERPRETING.md §4.9): counts the
specification leaves to the engine, but not each alone, are one of the listed rows.

Both halves: each row passes and any other combination fails, though each of its counts
is one a row gives; a file that cannot mean a row of counts is refused at its line; a
re-expressed case converts every count of every row as it converts an ``expect``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvconform.harness import explain, runner, suite
from kvconform.harness.checks import RelationCheck
from kvconform.harness.reexpress_prefix import into_block_size
from kvconform.harness.scenario import Case, load_scenario_file
from kvconform.harness.yamlsource import SourceError
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import Ok

from .mutants import all_mutants

SHIPPED = "prefix.capacity.lookups-into-a-cut-store-agree-on-one-order"

HEADER = """kvconform: scenarios/2
area: prefix
description: One case, to see what the compiler makes of a relation.
scenarios:
  - id: prefix.together.{name}
    title: A relation of counts
    class: prefix_cache
    basis: [prefix-capacity]
    requires: [PREFIX-24]
    why: Shows what the compiler makes of the relation below.
    steps:
      - prefix_new: {{as: engine, block_size: 4, model: m, kv_dtype: bf16, layout: nhd,
                      shard: s, capacity: 4}}
      - request_new: {{as: first, tokens: "1 2 3 4 5 6 7 8"}}
      - prefix_store: {{prefix: engine, request: first}}
      - prefix_lookup: {{prefix: engine, request: first, as: a, expect_one_of: [0, 4, 8]}}
      - cache_new: {{as: cache, n_layers: 1, n_kv_heads: 1, head_dim: 4, max_seq_len: 8}}
      - cache_alloc_id: {{cache: cache, as: alloc}}
"""


def _load(tmp_path: Path, name: str, together: str) -> list[Case]:
    path = tmp_path / f"{name}.yaml"
    path.write_text(HEADER.format(name=name) + f"      - together: {together}\n", "utf-8")
    return load_scenario_file(path)


def _shipped() -> Case:
    (case,) = [c for c in suite.all_cases() if c.id == SHIPPED]
    return case


def _together(case: Case) -> RelationCheck:
    (check,) = [c for c in case.checks if isinstance(c, RelationCheck) and c.relation == "together"]
    return check


def test_each_row_passes_and_no_other_combination_does() -> None:
    case = _shipped()
    check = _together(case)
    indices = [ref.op_index for ref in check.refs]
    allowed = {(0, 0, 0), (4, 4, 4), (4, 8, 8), (4, 8, 12)}
    assert set(check.rows) == allowed
    outcomes = [Ok(None)] * len(case.program)
    for one in (0, 4):
        for two in (0, 4, 8):
            for four in (0, 4, 8, 12):
                for index, value in zip(indices, (one, two, four), strict=True):
                    outcomes[index] = Ok(value)
                failure = check.evaluate(outcomes)
                assert (failure is None) == ((one, two, four) in allowed), (one, two, four)
    outcomes[indices[0]] = Ok(True)  # a boolean is not the count 1 nor 0 (ERR-4)
    assert check.evaluate(outcomes) is not None


def test_the_shipped_case_fails_a_count_past_a_gap_at_the_relation_alone() -> None:
    """The mutant's counts (0, 4, 12) are each one some order gives: only the relation
    fails it, and the failure shows every row and the counts it answered."""
    case = _shipped()
    reference = runner.run_case(case, InProcessDriver(_adapter("", reference=True)))
    assert reference.verdict == "passed", reference.report()
    result = runner.run_case(case, InProcessDriver(_adapter("prefix-capacity-counts-past-a-miss")))
    (failure,) = result.failures
    assert "(together)" in failure.where.step
    assert failure.expected.endswith("together one of (0, 0, 0), (4, 4, 4), (4, 8, 8), (4, 8, 12)")
    assert failure.actual == "one_deep=0, two_deep=4, four_deep=12"
    assert failure.stake == ""  # a relation over lookup counts: no stake (§7.6)


def _adapter(name: str, reference: bool = False) -> object:
    from kvconform.adapters.reference import ReferenceAdapter

    if reference:
        return ReferenceAdapter()
    (mutant,) = [m for m in all_mutants() if m.name == name]
    return mutant.factory()


def test_explain_shows_the_rows() -> None:
    text = explain.explain_case(_shipped())
    assert "then: together over [one_deep, two_deep, four_deep], one of (0, 0, 0)" in text


@pytest.mark.parametrize(
    ("name", "together", "said"),
    [
        ("one-row", "{values: [a, a], one_of: [[0, 0]]}", "one_of"),
        ("short-row", "{values: [a, a], one_of: [[0, 0], [4]]}", "2 counts each"),
        ("same-rows", "{values: [a, a], one_of: [[0, 0], [0, 0]]}", "one_of"),
        ("not-a-count", "{values: [a, alloc], one_of: [[0, 0], [4, 4]]}", "alloc is not one"),
        ("unbound", "{values: [a, b], one_of: [[0, 0], [4, 4]]}", "no value named 'b'"),
        ("one-value", "{values: [a], one_of: [[0], [4]]}", "at least 2 values"),
        ("negative", "{values: [a, a], one_of: [[0, 0], [-4, 4]]}", "one_of"),
        ("no-rows", "{values: [a, a]}", "one_of"),
    ],
)
def test_a_relation_that_cannot_mean_rows_of_counts_is_refused_at_its_line(
    tmp_path: Path, name: str, together: str, said: str
) -> None:
    with pytest.raises(SourceError) as caught:
        _load(tmp_path, name, together)
    message = str(caught.value)
    assert f"{name}.yaml:" in message and said in message, message


@pytest.mark.parametrize(("size", "factor"), [(16, 4), (8, 2)])
def test_a_larger_block_multiplies_every_count_of_every_row(size: int, factor: int) -> None:
    case = _shipped()
    grown = into_block_size(case, size)
    assert isinstance(grown, Case)
    assert _together(grown).rows == tuple(
        tuple(v * factor for v in row) for row in _together(case).rows
    )


@pytest.mark.parametrize("size", [1, 2])
def test_a_smaller_block_converts_every_count_block_for_block(size: int) -> None:
    case = _shipped()
    shrunk = into_block_size(case, size)
    assert isinstance(shrunk, Case)
    assert _together(shrunk).rows == tuple(
        tuple(v // 4 * size for v in row) for row in _together(case).rows
    )
    result = runner.run_case(shrunk, InProcessDriver(_adapter("", reference=True)))
    assert result.verdict == "passed", result.report()


def test_a_row_count_off_the_blocks_sets_a_shrunk_case_aside(tmp_path: Path) -> None:
    (case,) = _load(tmp_path, "off", "{values: [a, a], one_of: [[0, 0], [6, 6]]}")
    assert into_block_size(case, 2) == (
        "it expects 6 positions reused, not a whole number of its blocks of 4"
    )


def test_every_shipped_row_holds_counts_its_steps_accept() -> None:
    """A row with a count its own step does not accept could never pass: the suite's files
    list none (INTERPRETING.md §4.9 says so, and runners need not check it)."""
    from kvconform.harness.checks import OutcomeCheck, ValueIs, ValueOneOf

    seen = 0
    for case in suite.all_cases():
        accepted: dict[int, tuple[object, ...]] = {}
        for check in case.checks:
            if isinstance(check, OutcomeCheck) and isinstance(check.expect, ValueIs):
                accepted[check.op_index] = (check.expect.value,)
            elif isinstance(check, OutcomeCheck) and isinstance(check.expect, ValueOneOf):
                accepted[check.op_index] = tuple(check.expect.values)
        for check in case.checks:
            if isinstance(check, RelationCheck) and check.relation == "together":
                for row in check.rows:
                    for ref, count in zip(check.refs, row, strict=True):
                        assert count in accepted.get(ref.op_index, (count,)), (case.id, row)
                seen += 1
    assert seen >= 1


def test_a_larger_block_multiplies_a_count_that_is_not_a_whole_number_of_blocks(
    tmp_path: Path,
) -> None:
    """Growth multiplies every count by the factor, whole blocks or not (a partial block
    under ``exact_tail``, a position count under ``tokens``): 6 positions of blocks of 4
    are 12 of blocks of 8, not the whole blocks of 6 scaled (8)."""
    (case,) = _load(tmp_path, "grow", "{values: [a, a], one_of: [[0, 0], [6, 6]]}")
    grown = into_block_size(case, 8)
    assert isinstance(grown, Case)
    assert _together(grown).rows == ((0, 0), (12, 12))
