"""The teeth matrix is complete and every cell it cites has teeth (issue 25, item 5).

``conformance/teeth.yaml`` holds one row per value of every option and capability and
one column per operation; ``tests/teeth_matrix.py`` reads it. These tests fail when an
option value, a capability value or an operation is missing from the matrix, when a
cell is empty, and when a cited case does not exist, does not judge the cell's
operation, or does not depend on the row's value.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from kvconform.harness import suite
from kvconform.protocol.operations import TABLE
from kvconform.values import OPTIONS, AdapterInfo
from tests import teeth_matrix as tm

pytestmark = pytest.mark.covers("CONF-6", "CONF-7", "CONF-15")

PREFIX_GROUP = "prefix_cache options"


def _deferred_options() -> set[str]:
    deferred = set(tm.document()["deferred"])
    out = {name for name in deferred if name in OPTIONS}
    if PREFIX_GROUP in deferred:
        out |= {n for n, o in OPTIONS.items() if o.requirement.startswith("PREFIX-")}
    return out


def test_the_matrix_is_valid_and_loaded_safely() -> None:
    assert tm.rows(), "conformance/teeth.yaml has no rows"


def test_every_option_value_is_a_row() -> None:
    deferred = _deferred_options()
    want = {(n, v) for n, o in OPTIONS.items() if n not in deferred for v in o.values}
    have = [(r.name, r.value) for r in tm.rows() if r.kind == "option"]
    assert len(have) == len(set(have)), "a row is given twice"
    assert not set(have) - want, f"rows of no option value: {sorted(set(have) - want)}"
    assert not want - set(have), f"option values the matrix lacks: {sorted(want - set(have))}"
    stale = {n for n in tm.document()["deferred"] if n != PREFIX_GROUP and n not in OPTIONS}
    stale -= set(tm.CAPABILITY_FIELDS.values())
    assert not stale, f"deferred entries that name nothing: {sorted(stale)}"


def test_every_capability_is_covered() -> None:
    fields = {f.name for f in dataclasses.fields(AdapterInfo)} - tm.NOT_CAPABILITIES
    unknown = fields - set(tm.CAPABILITY_FIELDS)
    assert not unknown, f"AdapterInfo fields the matrix does not know: {sorted(unknown)}"
    names = set(tm.CAPABILITY_FIELDS.values())
    listed = set(tm.document()["capabilities"]) | (set(tm.document()["deferred"]) & names)
    assert names == listed, f"capabilities neither rows nor deferred: {sorted(names - listed)}"
    have = [(r.name, r.value) for r in tm.rows() if r.kind == "capability"]
    want = {(n, v) for n in tm.document()["capabilities"] for v in tm.values_of(n)}
    assert len(have) == len(set(have)), "a row is given twice"
    assert set(have) == want, f"capability rows differ from their values: {set(have) ^ want}"
    assert set(tm.FORMATS) == set(tm.values_of("format"))


def test_every_operation_is_a_column_of_every_row() -> None:
    operations = [spec.name for spec in TABLE]
    for row in tm.rows():
        assert list(row.cells) == operations, (
            f"{row.name}: {row.value}: columns {sorted(set(operations) ^ set(row.cells))} "
            "missing or unknown, or out of the table's order"
        )


def test_no_cell_is_empty() -> None:
    for row in tm.rows():
        for op, cell in row.cells.items():
            assert cell, f"{row.name}: {row.value} at {op}: empty cell"
            if isinstance(cell, dict):
                (reason,) = cell.values()
                assert reason.strip(), f"{row.name}: {row.value} at {op}: no reason"


def _cells() -> list[tuple[str, str, str, list[str]]]:
    return [
        (row.name, row.value, op, cell)
        for row in tm.rows()
        for op, cell in row.cells.items()
        if isinstance(cell, list)
    ]


@pytest.mark.parametrize(("name", "value", "op", "ids"), _cells())
def test_every_cited_case_judges_its_cell(name: str, value: str, op: str, ids: list[str]) -> None:
    cases = {case.id: case for case in suite.all_cases()}
    for case_id in ids:
        case = cases.get(case_id)
        assert case is not None, f"{name}: {value} at {op}: no case {case_id}"
        assert op in tm.checked_operations(case), (
            f"{name}: {value} at {op}: {case_id} judges no answer of {op}"
        )
        reason = tm.depends_on(case, name, value)
        assert reason is None, f"{name}: {value} at {op}: {reason}"


def test_the_check_has_teeth() -> None:
    """A case that assumes nothing of a row does not depend on it, and one that assumes
    another value is not applicable under this one."""
    cases = {case.id: case for case in suite.all_cases()}
    plain = cases["alloc.rewind.keeps-alloc-id"]
    assert tm.depends_on(plain, "clear_mints", "eager") is not None
    assert "plan_key" not in tm.checked_operations(plain)
    refusing = cases["plan.truncate-refuse.held-plan-unchanged"]
    assert tm.depends_on(refusing, "truncate_past_length", "refuse") is None
    assert tm.depends_on(refusing, "truncate_past_length", "noop") is not None


#: The block sizes with a case of their own in prefix/block-sizes.yaml.
_BLOCK_SIZE_CASES = "prefix.block-size.declared-"


def _with_block_size(cls: type, size: int) -> Any:
    class Declared(cls):  # type: ignore[misc, valid-type]
        def describe(self) -> AdapterInfo:
            info: AdapterInfo = super().describe()
            return dataclasses.replace(
                info, options={**info.options, "prefix_block_size": str(size)}
            )

    return Declared()


def test_engines_of_every_declared_block_size_pass_their_own_case() -> None:
    """No false alarm at a block-size row: the reference and the prefix variants whose
    block size is the one they are made with, each declaring one size, pass that size's
    case and find every other size's case not applicable."""
    from kvconform.adapters.reference import ReferenceAdapter
    from kvconform.harness.runner import run_cases
    from kvconform.protocol.driver import InProcessDriver
    from tests.variants.prefix import LmcacheLikeTier, SglangLikeRadixTree, VllmLikeChain

    cases = [c for c in suite.all_cases() if c.id.startswith(_BLOCK_SIZE_CASES)]
    sizes = sorted(int(dict(c.options)["prefix_block_size"]) for c in cases)
    assert sizes == [1, 8, 16, 32, 64, 128, 256]
    for cls in (ReferenceAdapter, VllmLikeChain, SglangLikeRadixTree, LmcacheLikeTier):
        for size in sizes:
            results = run_cases(cases, InProcessDriver(_with_block_size(cls, size)))
            verdicts = {r.case.id: r.verdict for r in results}
            own = f"{_BLOCK_SIZE_CASES}{size}-reuses-whole-blocks-of-{size}"
            assert verdicts.pop(own) == "passed", f"{cls.__name__} at {size}: {results}"
            assert set(verdicts.values()) == {"not_applicable"}, (cls.__name__, size, verdicts)
