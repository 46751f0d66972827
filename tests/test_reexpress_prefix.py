"""Prefix cases re-expressed for an engine of one block size (CONF-17, INTERPRETING.md §6.4.4).

The rewriting is checked three ways: on small cases, by the correct variants at the
block sizes their engines run with (every case judged passes, and most are judged),
and by the prefix mutants declared at one block size, which the re-expressed cases
must still kill: a re-expression changes how a case reads, never what it requires.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.harness import suite
from kvconform.harness.checks import OutcomeCheck, Succeeds, ValueIs, ValueOneOf, Where
from kvconform.harness.reexpress_prefix import into_block_size
from kvconform.harness.runner import in_declared_shape, run_case, run_cases
from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import AdapterInfo, Fault, Ok, Refused

from .mutants import Mutant, all_mutants
from .variants.prefix import (
    LmcacheLikeTier256,
    NanoVllmLikeChain256,
    SglangLikeRadixTreePage1,
    TrtLlmLikeMix64,
    VllmLikeChain16,
)


def _prefix_cases() -> list[Case]:
    return [c for c in suite.all_cases() if c.cls == "prefix_cache"]


def _case(*program: ops.Op, expect: int = 8, options: tuple[tuple[str, str], ...] = ()) -> Case:
    """A case of ``program`` whose last step is a lookup expected to reuse ``expect``."""
    last = len(program) - 1
    checks = tuple(
        OutcomeCheck(
            Where("t.yaml", i + 1, f"step {i + 1}"), i, ValueIs(expect) if i == last else Succeeds()
        )
        for i in range(len(program))
    )
    return Case(
        "t.case",
        "t",
        "prefix_cache",
        ("PREFIX-6",),
        "t",
        "t.yaml",
        1,
        program,
        checks,
        options=options,
    )


def _new(size: int) -> ops.PrefixNew:
    return ops.PrefixNew("engine", size, "m", "bf16", "nhd", "tp0-of-1")


def test_a_larger_block_writes_every_token_and_count_that_many_times() -> None:
    case = _case(
        _new(4),
        ops.RequestNew("a", "1 2 3 4 5 6"),
        ops.RequestMedia("a", 4, 2, "cat", 3, 3),
        ops.PrefixLookup("engine", "a"),
        expect=4,
    )
    out = into_block_size(case, 16)
    assert isinstance(out, Case)
    assert out.program[0] == _new(16)
    assert out.program[1] == ops.RequestNew(
        "a", " ".join(str(t) for t in range(1, 7) for _ in "1234")
    )
    assert out.program[2] == ops.RequestMedia("a", 16, 8, "cat", 3, 3)
    assert out.checks[3].expect == ValueIs(16)  # type: ignore[attr-defined]
    assert out.reexpressed and "CONF-17" in out.reexpressed[-1]


def test_a_smaller_block_writes_each_full_block_as_one_id_and_drops_partial_ones() -> None:
    case = _case(
        _new(4),
        ops.RequestNew("a", "1 2 3 4 5 6 7 8 1 2 3 4 9"),
        ops.RequestEmbeds("a", 4, 4, "soft"),
        ops.PrefixLookup("engine", "a"),
        expect=8,
    )
    out = into_block_size(case, 2)
    assert isinstance(out, Case)
    assert out.program[1] == ops.RequestNew("a", "10 10 11 11 10 10")  # equal blocks, equal ids
    assert out.program[2] == ops.RequestEmbeds("a", 2, 2, "soft")
    assert out.checks[3].expect == ValueIs(4)  # type: ignore[attr-defined]


def test_every_count_an_expect_one_of_accepts_is_converted() -> None:
    """INTERPRETING §4.10: each listed count is converted as an ``expect`` would be, and
    a listed count that is not a whole number of blocks sets the case aside."""
    case = next(
        c
        for c in suite.all_cases()
        if c.id == "prefix.capacity.a-block-is-not-reused-past-an-evicted-one"
    )
    (index,) = [
        c.op_index
        for c in case.checks
        if isinstance(c, OutcomeCheck) and isinstance(c.expect, ValueOneOf)
    ]
    for size, counts in ((16, (16, 32)), (1, (1, 2))):
        out = into_block_size(case, size)
        assert isinstance(out, Case)
        (check,) = [c for c in out.checks if isinstance(c, OutcomeCheck) and c.op_index == index]
        assert check.expect == ValueOneOf(counts)
    looked_up = _case(_new(4), ops.RequestNew("a", "1 2 3 4"), ops.PrefixLookup("engine", "a"))
    lookup = looked_up.checks[-1]
    assert isinstance(lookup, OutcomeCheck)
    ragged = replace(
        looked_up, checks=(*looked_up.checks[:-1], replace(lookup, expect=ValueOneOf((4, 6))))
    )
    assert "6 positions reused" in str(into_block_size(ragged, 2))


def test_expect_one_of_passes_each_listed_count_and_nothing_else() -> None:
    expect = ValueOneOf((4, 8))
    assert expect.judge(Ok(4)) is None and expect.judge(Ok(8)) is None
    for wrong in (Ok(12), Ok(4.0), Ok(True), Refused(Fault("capacity_exceeded"))):
        judged = expect.judge(wrong)
        assert judged is not None and judged[0] == "one of 4, 8", wrong


@pytest.mark.parametrize(
    ("case", "size", "reason"),
    [
        (_case(_new(4), ops.PrefixNew("other", 2, "m", "bf16", "nhd", "t"), ops.TierNew("t")),
         16, "the difference is its point"),
        (_case(_new(4), ops.RequestNew("a", "1 2 3 4"), ops.PrefixLookup("engine", "a")),
         6, "neither divides the other"),
        (_case(_new(4), ops.RequestNew("a", "1 2"), ops.PrefixLookup("engine", "a"), expect=0),
         1, "no full block"),
        (_case(_new(4), ops.RequestNew("a", "1 2 3 4"), ops.RequestMedia("a", 1, 2, "c", 1, 1),
               ops.PrefixLookup("engine", "a")), 1, "cannot place it"),
        (_case(_new(4), ops.RequestNew("a", "1 2 3 4"), ops.PrefixLookup("engine", "a"),
               options=(("prefix_partial", "tokens"),)), 2, "reuse inside a block"),
    ],
)  # fmt: skip
def test_a_case_whose_point_needs_its_block_size_is_set_aside(
    case: Case, size: int, reason: str
) -> None:
    out = into_block_size(case, size)
    assert isinstance(out, str) and reason in out, out


class _Fixed16(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        info = super().describe()
        return replace(info, options={**info.options, "prefix_block_size": "16"})


def test_the_runner_judges_a_re_expressed_case_and_says_how() -> None:
    info = InProcessDriver(_Fixed16()).info
    case = next(c for c in _prefix_cases() if c.id == "prefix.reuse.block-size-two")
    judged, reason = in_declared_shape(case, info)
    assert reason is None and judged.reexpressed
    assert all(op.block_size == 16 for op in judged.program if isinstance(op, ops.PrefixNew))


#: Judged at least this many of the prefix cases (none applied as written before CONF-17).
JUDGED = {
    VllmLikeChain16: 55,
    SglangLikeRadixTreePage1: 60,
    TrtLlmLikeMix64: 45,
    NanoVllmLikeChain256: 55,
    LmcacheLikeTier256: 65,
}


@pytest.mark.covers("CONF-17")
@pytest.mark.parametrize("cls", list(JUDGED), ids=lambda c: c.__name__)
def test_a_variant_of_one_block_size_is_judged_on_most_prefix_cases_and_passes(cls: type) -> None:
    results = run_cases(_prefix_cases(), InProcessDriver(cls()))
    judged = [r for r in results if r.verdict in ("passed", "failed")]
    assert [r.report() for r in judged if r.verdict == "failed"] == []
    assert len(judged) >= JUDGED[cls], len(judged)
    declared = int(InProcessDriver(cls()).info.options["prefix_block_size"])
    makes_caches = [r for r in judged if any(isinstance(o, ops.PrefixNew) for o in r.case.program)]
    # Every case that makes a prefix cache was re-expressed, except one written for the
    # declared size itself (prefix.block-size.declared-N-..., which applies as written).
    written_for_it = [
        r
        for r in makes_caches
        if not r.case.reexpressed
        and all(o.block_size == declared for o in r.case.program if isinstance(o, ops.PrefixNew))
    ]
    assert all(r.case.reexpressed for r in makes_caches if r not in written_for_it)
    assert [r.case.id for r in written_for_it] in (
        [],
        [f"prefix.block-size.declared-{declared}-reuses-whole-blocks-of-{declared}"],
    )


#: Correct at a block of one position: a block is its first token, no block is partial,
#: and which blocks an item covers is its placement.
RIGHT_AT_ONE = {
    "prefix-block-keyed-by-its-first-tokens",
    "prefix-partial-block-padded",
    "prefix-exact-tail-dropped",
    "prefix-exact-tail-reused-in-part",
    "prefix-exact-tail-kept-out-of-the-tier",
    "prefix-exact-tail-not-persisted",
    "prefix-exact-tail-keyed-padded",
    "prefix-exact-tail-without-parent",
    "prefix-capacity-tail-outside-the-bound",
    "prefix-tier-drops-media-placement",
}


def _prefix_mutants() -> list[Mutant]:
    return [m for m in all_mutants() if m.name.startswith("prefix-") and not m.gap]


@pytest.mark.covers("CONF-17")
@pytest.mark.parametrize("size", [16, 1])
def test_the_re_expressed_cases_still_kill_the_prefix_mutants(size: int) -> None:
    survivors = []
    for m in _prefix_mutants():
        if m.name == "prefix-ignores-the-block-size" or (size == 1 and m.name in RIGHT_AT_ONE):
            continue  # right at this size (it hard-wires the block of 4 the cases ask for)

        def fixed(base: type = m.factory) -> ReferenceAdapter:  # type: ignore[assignment]
            class Fixed(base):  # type: ignore[valid-type,misc]
                def describe(self) -> AdapterInfo:
                    info = super().describe()
                    return replace(info, options={**info.options, "prefix_block_size": str(size)})

            return Fixed()  # type: ignore[no-any-return]

        driver = InProcessDriver(fixed())  # up to the first failing case: killed
        if not any(run_case(c, driver).verdict == "failed" for c in _prefix_cases()):
            survivors.append(m.name)
    assert survivors == []
