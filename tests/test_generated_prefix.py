"""The generated check of the class prefix_cache (generated.prefix).

Its programs draw requests from earlier ones so that prefixes collide, stay where the
implementation's declared prefix options give the reference's answers (or the
reference's under the declaration: partial reuse, content identity), and tell a
disagreement on a lookup by its half: under-reuse (PREFIX-2) or over-reuse.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace

import pytest

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential import strategies
from kvconform.differential.compare import Mismatch, compare
from kvconform.differential.declared import DeclaredReference
from kvconform.differential.engine import PROPERTIES_BY_ID, case_result, run_property
from kvconform.differential.prefix import refine
from kvconform.harness.checks import Failure, Where
from kvconform.harness.runner import render_failure
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import AdapterInfo, Broken, Ok
from tests.mutants import all_mutants
from tests.variants import all_variants

PROP = PROPERTIES_BY_ID["generated.prefix"]
MUTANTS = {m.name: m for m in all_mutants()}
VARIANTS = {v.name: v for v in all_variants()}


def _info(**options: str) -> AdapterInfo:
    info = ReferenceAdapter().describe()
    return replace(info, options={**info.options, **options})


def _programs(info: AdapterInfo, count: int = 300) -> Iterator[tuple[ops.Op, ...]]:
    scope = strategies.PrefixScope.of(info)
    for index in range(count):
        src = strategies.RandomSource(random.Random(f"prefix scope {index}"))
        yield strategies.prefix_program(src, scope)


# --- programs ------------------------------------------------------------------------


def test_requests_are_drawn_from_one_another_so_lookups_hit() -> None:
    """The reference reuses something in most programs, and misses in most too: both
    halves are asked."""
    reference = InProcessDriver(ReferenceAdapter())
    hits = misses = 0
    for program in _programs(ReferenceAdapter().describe(), 100):
        for op, outcome in zip(program, reference.run(program), strict=True):
            if isinstance(op, ops.PrefixLookup):
                assert isinstance(outcome, Ok) and isinstance(outcome.value, int)
                hits += outcome.value > 0
                misses += outcome.value == 0
    assert hits > 300 and misses > 300, (hits, misses)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"prefix_block_size": "4"},
        {"prefix_empty_salt": "refuse"},
        {"prefix_media_identity": "caller"},
        {"prefix_adapter_identity": "content"},
        {"prefix_partial": "tokens", "prefix_tier": "shared"},
        {"prefix_tier": "none", "prefix_root": "per_process"},
    ],
    ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "reference",
)
def test_programs_stay_where_the_declaration_gives_the_answer(options: dict[str, str]) -> None:
    info = _info(**options)
    fixed = info.option("prefix_block_size")
    tiers = loads_with_equal_weights = 0
    for program in _programs(info):
        weights: dict[str, list[str]] = {}
        blocks: dict[str, int] = {}
        stored: dict[str, int] = {}
        sizes: dict[str, int] = {}
        for op in program:
            if isinstance(op, ops.PrefixNew):
                sizes[op.handle] = op.block_size
                if fixed != "any":
                    assert str(op.block_size) == fixed  # PREFIX-6
            elif isinstance(op, ops.TierNew):
                tiers += 1
                # a tier only under shared, and not with partial reuse (PREFIX-22 is silent)
                assert info.option("prefix_tier") == "shared"
                assert info.option("prefix_partial") == "none"
            elif isinstance(op, ops.RequestNew):
                if info.option("prefix_empty_salt") == "refuse":
                    assert op.salt != ""  # PREFIX-14: refusing is a probe of the scenarios
                assert op.user_key != ""
                blocks[op.handle] = len(op.tokens.split(" "))
            elif isinstance(op, ops.RequestMedia) and info.option("prefix_media_identity") == (
                "caller"
            ):
                assert op.caller_id == f"id-{op.content}"  # the caller names the content
            elif isinstance(op, ops.LoraLoad):
                same = weights.setdefault(op.prefix, [])
                if op.weights in same:
                    loads_with_equal_weights += 1
                    assert info.option("prefix_adapter_identity") == "content"  # PREFIX-8
                same.append(op.weights)
            elif isinstance(op, ops.PrefixStore):
                size = sizes[op.prefix]
                stored[op.prefix] = stored.get(op.prefix, 0) - (-blocks[op.request] // size)
        strength = sum(isinstance(op, ops.PrefixStore) for op in program) > 100
        if not strength:  # PREFIX-6: never more than the 64 blocks a cache must hold
            assert all(count <= 64 for count in stored.values()), stored
    if info.option("prefix_tier") == "shared" and info.option("prefix_partial") == "none":
        assert tiers > 100
    if info.option("prefix_adapter_identity") == "content":
        assert loads_with_equal_weights > 20


@pytest.mark.parametrize(
    "inputs", [frozenset(), frozenset({"salt", "user_key"}), frozenset({"media"})]
)
def test_programs_give_requests_only_the_declared_inputs(inputs: frozenset[str]) -> None:
    """PREFIX-23: a program for an engine that declares ``prefix_inputs`` gives no request
    an input the declaration leaves out, and still gives it those it keeps."""
    from kvconform.harness.declarations import prefix_inputs_given

    info = replace(ReferenceAdapter().describe(), prefix_inputs=inputs)
    given: set[str] = set()
    for program in _programs(info, count=200):
        for op in program:
            given.update(prefix_inputs_given(op))
    assert given == inputs


def test_a_strength_program_holds_distinct_one_block_requests() -> None:
    """Up to 512 one-block requests, none equal to another, each looked up before it is
    stored; the last one looked up again (prefix/strength.yaml, PREFIX-19)."""
    found = 0
    for program in _programs(ReferenceAdapter().describe(), 200):
        stores = [op for op in program if isinstance(op, ops.PrefixStore)]
        if len(stores) <= 100:
            continue
        found += 1
        requests = {}
        media = {op.request: op.content for op in program if isinstance(op, ops.RequestMedia)}
        for op in program:
            if isinstance(op, ops.RequestNew):
                requests[op.handle] = (op.tokens, media.get(op.handle))
        assert len(set(requests.values())) == len(requests)
        assert isinstance(program[-1], ops.PrefixLookup)
        assert program[-1].request == stores[-1].request
    assert found >= 5


# --- the reference under a declaration ----------------------------------------------


def _lookups(adapter: ReferenceAdapter, program: list[ops.Op]) -> list[object]:
    outcomes = InProcessDriver(adapter).run(program)
    return [
        o.value
        for op, o in zip(program, outcomes, strict=True)
        if isinstance(op, ops.PrefixLookup) and isinstance(o, Ok)
    ]


def test_the_reference_under_partial_reuse_counts_positions() -> None:
    """Under prefix_partial: tokens, the reference with blocks of one position: the
    answers of prefix/partial.yaml's scenarios under tokens."""
    program: list[ops.Op] = [
        ops.PrefixNew("p1", 4, "m", "bf16", "nhd", "tp0"),
        ops.RequestNew("r1", "1 2 3 4 5 6 7 8"),
        ops.PrefixStore("p1", "r1"),
        ops.RequestNew("r2", "1 2 3 4 5 6 70 80"),
        ops.PrefixLookup("p1", "r2"),
        ops.RequestNew("r3", "1 2 3 4 5 6"),
        ops.PrefixStore("p1", "r3"),
        ops.PrefixLookup("p1", "r3"),
    ]
    assert _lookups(DeclaredReference({"prefix_partial": "tokens"}), program) == [6, 6]
    assert _lookups(DeclaredReference(), program) == [4, 4]


def test_the_reference_under_content_identity_shares_equal_weights() -> None:
    program: list[ops.Op] = [
        ops.PrefixNew("p1", 4, "m", "bf16", "nhd", "tp0"),
        ops.LoraLoad("l1", "p1", "sql", "w1"),
        ops.LoraLoad("l2", "p1", "sql-copy", "w1"),
        ops.LoraLoad("l3", "p1", "sql", "w2"),
        ops.RequestNew("r1", "1 2 3 4"),
        ops.RequestLora("r1", "l1"),
        ops.PrefixStore("p1", "r1"),
        ops.RequestNew("r2", "1 2 3 4"),
        ops.RequestLora("r2", "l2"),
        ops.PrefixLookup("p1", "r2"),
        ops.RequestNew("r3", "1 2 3 4"),
        ops.RequestLora("r3", "l3"),
        ops.PrefixLookup("p1", "r3"),
    ]
    content = DeclaredReference({"prefix_adapter_identity": "content"})
    assert _lookups(content, program) == [4, 0]
    assert _lookups(DeclaredReference(), program) == [0, 0]


# --- judging --------------------------------------------------------------------------


def test_a_disagreement_on_a_lookup_is_told_by_its_half() -> None:
    program = (
        ops.PrefixNew("p1", 4, "m", "bf16", "nhd", "tp0"),
        ops.RequestNew("r1", "1 2 3 4 5 6 7 8", salt="a"),
        ops.PrefixStore("p1", "r1"),
        ops.PrefixLookup("p1", "r1"),
    )
    expected = [Ok(None), Ok(None), Ok(None), Ok(8)]
    plain = Mismatch(3, "8", "4", ("PREFIX-1", "PREFIX-2", "PREFIX-3"))
    under = refine(program, expected, [*expected[:3], Ok(4)], plain)
    assert "PREFIX-2" in under.requires and "PREFIX-13" in under.requires
    assert "PREFIX-3" not in under.requires and "under-reuse" in under.actual
    over = refine(program, expected, [*expected[:3], Ok(12)], replace(plain, actual="12"))
    assert {"PREFIX-1", "PREFIX-3", "PREFIX-4", "PREFIX-13"} <= set(over.requires)
    assert "PREFIX-2" not in over.requires and "over-reuse" in over.actual
    other = Mismatch(1, "success", "an error", ("PREFIX-14",))
    assert refine(program, expected, expected, other) == other
    # a report of the failure cites the rules the disagreement bears on, not all 22 of the
    # check's: each is printed with its text
    failure = Failure(Where("generated", None, "operation 4"), under.expected, under.actual,
                      under.requires)  # fmt: skip
    shown = render_failure(PROPERTIES_BY_ID["generated.prefix"].case, (failure,))
    cited = next(line for line in shown.splitlines() if line.startswith("  requires:"))
    assert cited == "  requires: " + ", ".join(under.requires), cited
    assert "PREFIX-21" not in shown and "decision prefix-observable-reuse" in shown


def test_a_refused_request_cites_what_it_carries() -> None:
    """An engine that refuses a request with the salt "a" is not refusing an empty salt:
    the disagreement cites PREFIX-13, not the table's PREFIX-14 (an exported counterexample
    of nano-vllm, which has no salt input, cited the empty-salt rule)."""
    refused = Broken("this engine has no salt input")
    for request, cites in (
        (ops.RequestNew("r1", "1 2", salt="a"), ("PREFIX-13",)),
        (ops.RequestNew("r1", "1 2", salt=""), ("PREFIX-14",)),
        (ops.RequestNew("r1", "1 2", user_key="u"), ("PREFIX-15",)),
        (ops.RequestNew("r1", "1 2"), ("PREFIX-1",)),
    ):
        program = (ops.PrefixNew("p1", 4, "m", "bf16", "nhd", "tp0"), request)
        found = compare(program, [Ok(None), Ok(None)], [Ok(None), refused])
        assert found is not None and found.requires == cites, (request, found)


# --- teeth ----------------------------------------------------------------------------


def test_a_narrow_block_key_collides_among_distinct_blocks() -> None:
    """A 16-bit block key (vLLM CVE-2025-25183's shape) is found by the strength programs:
    a lookup of a distinct block answers a reuse, cited as PREFIX-19."""
    result = run_property(
        PROP, InProcessDriver(MUTANTS["prefix-block-key-16-bit"].factory()), examples=200,
        seed=0, shrink=False,
    )  # fmt: skip
    assert result.verdict == "failed", result.reason
    assert result.counterexample is not None
    assert "PREFIX-19" in result.counterexample.mismatch.requires


@pytest.mark.parametrize("name", sorted(n for n in VARIANTS if n.startswith("prefix-")))
def test_engines_of_each_shape_raise_no_alarm(name: str) -> None:
    """The six correct prefix caches (tests/variants/prefix.py), each with its declared
    options, pass on another seed than tests/test_generated.py's (the figure over 20 seeds
    is the kill matrix's)."""
    driver = InProcessDriver(VARIANTS[name].factory())
    result = run_property(PROP, driver, examples=30, seed=1)
    assert result.verdict == "passed", case_result(result).report()
