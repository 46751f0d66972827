"""Every engine PREFIX-24 allows passes every bounded case and every bounded program.

PREFIX-24 fixes what a bounded prefix cache holds after its stores, the blocks stored
most recently, and leaves to the engine which block of one store goes first, whether a
store computes again, in a block of its own, a block the cache holds instead of reusing
it, and whether it takes a block for a request's partial last block (but under
``exact_tail``, where that block is one of the bound). The specification promises that
no case depends on those choices (but where a lookup accepts every count they give,
``expect_one_of``), and the generated programs that bound a cache are drawn so that none
does (:meth:`kvconform.differential.strategies.PrefixBuilder.bounded`).

:class:`_FreeCache` is the reference's prefix cache with every one of those choices
taken from a chooser, and :func:`_every_run` runs a program once for each way of
choosing: each is an engine the rule allows. Every bounded case must pass under every
one of them, and on every sampled generated program each of them must give the
reference's answers. A case that came to depend on a choice fails here, not in a
correct engine (the vLLM-like pool computes again only the last block of a request on a
block boundary, and no variant computes every held block again).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import pytest
from kvconform_reference import prefix

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential import strategies
from kvconform.differential.declared import DeclaredReference, other_orders
from kvconform.differential.engine import PROPERTIES_BY_ID, run_property
from kvconform.harness import runner, suite
from kvconform.harness.checks import RelationCheck
from kvconform.harness.scenario import load_scenario_file
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import AdapterInfo, Ok
from tests.mutants import all_mutants

MUTANTS = {m.name: m for m in all_mutants()}

pytestmark = pytest.mark.covers("PREFIX-24")

T = TypeVar("T")

#: The most ways of choosing tried for one program: enough for every bounded case.
MOST_RUNS = 20_000


class _Chooser:
    """Choices replayed from ``prefix``, then the first of each; each is recorded with
    how many there were, so that :func:`_every_run` can go on to the next way."""

    def __init__(self, prefix: list[int]) -> None:
        self.prefix = prefix
        self.made: list[tuple[int, int]] = []

    def __call__(self, count: int) -> int:
        at = len(self.made)
        value = self.prefix[at] if at < len(self.prefix) else 0
        self.made.append((value, count))
        return value


def _every_run(run: Callable[[Callable[[int], int]], T]) -> Iterator[T]:
    """``run`` once for each way of making the choices it asks for (depth first)."""
    prefix: list[int] = []
    for _ in range(MOST_RUNS):
        chooser = _Chooser(prefix)
        yield run(chooser)
        made = chooser.made
        while made and made[-1][0] + 1 >= made[-1][1]:
            made.pop()
        if not made:
            return
        prefix = [value for value, _ in made[:-1]] + [made[-1][0] + 1]
    raise AssertionError(f"more than {MOST_RUNS} ways of choosing")


@dataclass
class _FreeCache(prefix.PrefixCache):
    """The reference's bounded prefix cache, taking each choice PREFIX-24 leaves open from
    ``choose``. ``held`` has one entry per block the cache holds, a copy computed again
    an entry of its own: its key (a unique object for a partial last block, which holds
    nothing a lookup reuses) and the number of the store that stored it last."""

    choose: Callable[[int], int] = lambda count: 0
    held: list[tuple[object, int]] = field(default_factory=list)
    stores: int = 0

    def store(self, request: prefix.Request) -> None:
        assert self.capacity is not None and self.tier is None
        self.stores += 1
        mine: list[object] = []
        for key in self._local_keys(request):
            copies = [entry for entry in self.held if entry[0] == key]
            if copies and self.choose(2) == 0:  # reused (else computed again, a copy)
                self.held.remove(copies[self.choose(len(copies))] if len(copies) > 1 else copies[0])
            mine.append(key)
        if not self.partial_tail and len(request.tokens) % self.block_size and self.choose(2):
            mine.append(object())  # a block taken for the partial last block
        self.held.extend((key, self.stores) for key in mine)
        while len(self.held) > min(self.capacity, 64):
            oldest = min(number for _, number in self.held)
            first = [entry for entry in self.held if entry[1] == oldest]
            if len(self.held) - len(first) >= min(self.capacity, 64):
                for entry in first:  # that whole store goes: no order to choose
                    self.held.remove(entry)
            else:  # which of that store's blocks goes first: the engine's own
                self.held.remove(first[self.choose(len(first))])

    def lookup(self, request: prefix.Request) -> int:
        keys = {key for key, _ in self.held}
        lengths = request.block_lengths(self.block_size, self.partial_tail)
        reused = 0
        for key, length in zip(self._local_keys(request), lengths, strict=False):
            if key not in keys:
                break
            reused += length
        return reused


class _FreeReference(DeclaredReference):
    """The reference declaring ``options``, its bounded caches :class:`_FreeCache`."""

    def __init__(self, options: Mapping[str, str], choose: Callable[[int], int]) -> None:
        super().__init__(options)
        self._options = dict(options)
        self._choose = choose

    def describe(self) -> AdapterInfo:
        info = super().describe()
        return replace(info, options={**info.options, **self._options})

    def prefix_new(
        self,
        block_size: int,
        model_name: str,
        kv_dtype: str,
        layout: str,
        shard: str,
        *,
        capacity: int | None = None,
    ) -> prefix.PrefixCache:
        made = super().prefix_new(
            block_size, model_name, kv_dtype, layout, shard, capacity=capacity
        )
        if capacity is None:
            return made
        assert not self.unit_blocks, "a bounded cache under prefix_partial: tokens"
        return _FreeCache(
            made.block_size,
            made.config,
            capacity=made.capacity,
            partial_tail=made.partial_tail,
            choose=self._choose,
        )


def _bounded(program: tuple[ops.Op, ...]) -> bool:
    return any(isinstance(op, ops.PrefixNew) and op.capacity is not None for op in program)


def test_the_chooser_tries_every_way() -> None:
    """Not vacuous: after two stores of two blocks into a cache of three, a request that
    stores the first again and a partial block holds the first's blocks, and one block
    of the second or none (a block taken for the partial one, or the second's second
    block kept): so the second is reused for one block or not at all."""
    engine = ("llama", "bf16", "nhd", "tp0")
    program = (
        ops.PrefixNew("p", 2, *engine, capacity=3),
        ops.RequestNew("a", "1 2 3 4"),
        ops.PrefixStore("p", "a"),
        ops.RequestNew("b", "5 6 7 8"),
        ops.PrefixStore("p", "b"),
        ops.RequestNew("c", "1 2 3 4 5"),
        ops.PrefixStore("p", "c"),
        ops.PrefixLookup("p", "a"),
        ops.PrefixLookup("p", "b"),
    )

    def run(choose: Callable[[int], int]) -> tuple[object, ...]:
        return tuple(InProcessDriver(_FreeReference({}, choose)).run(program))

    answers = list(_every_run(run))
    assert len(answers) > 8
    assert {(o[-2], o[-1]) for o in answers} == {(Ok(4), Ok(0)), (Ok(4), Ok(2))}


def test_every_bounded_case_passes_every_engine_the_rule_allows() -> None:
    cases = [c for c in suite.all_cases() if c.cls == "prefix_cache" and _bounded(c.program)]
    assert len(cases) >= 5
    failing: dict[str, str] = {}
    for case in cases:

        def run(choose: Callable[[int], int], case: suite.Case = case) -> runner.CaseResult:
            driver = InProcessDriver(_FreeReference(dict(case.options), choose))
            return runner.run_case(case, driver)

        for result in _every_run(run):
            assert result.verdict != "not_applicable", (case.id, result.reason)
            if result.verdict != "passed":
                failing[case.id] = result.report()
                break
    assert not failing, "\n\n".join(failing.values())


#: The engines tried on each generated bounded program, each making its choices at random.
ENGINES_PER_PROGRAM = 24


@pytest.mark.parametrize(
    "options, least_otherwise",
    # at blocks of 16 positions no drawn request has two blocks: no bound cuts a store
    [({}, 20), ({"prefix_partial": "exact_tail"}, 20), ({"prefix_block_size": "16"}, 0)],
    ids=["reference", "exact-tail", "block-16"],
)
def test_every_generated_bounded_program_has_an_answer_for_every_engine(
    options: dict[str, str], least_otherwise: int
) -> None:
    """Each bounded program's answers under every engine tried are the reference's, or
    those of one of the other orders the generated check accepts
    (:func:`~kvconform.differential.declared.other_orders`): the two engines that
    choose the first and the last of everything, and engines choosing at random (a
    program of eight stores can be run in millions of ways). A program whose answers
    depended on a choice the check does not accept would fail a correct engine. Not
    vacuous: on some programs, a bound that cuts a store, engines answer otherwise than
    the reference and are accepted through another order."""
    info = ReferenceAdapter().describe()
    declared = replace(info, options={**info.options, **options})
    scope = strategies.PrefixScope.of(declared)
    rng = random.Random(f"capacity freedoms {sorted(options.items())}")
    engines: list[Callable[[int], int]] = [
        lambda count: 0,
        lambda count: count - 1,
        *(lambda count: rng.randrange(count) for _ in range(ENGINES_PER_PROGRAM)),
    ]
    checked = evicting = otherwise = 0
    for index in range(240):
        source = strategies.RandomSource(random.Random(f"capacity freedoms {index}"))
        program = strategies.prefix_program(source, scope)
        if not _bounded(program):
            continue
        assert strategies.within_promises(program, scope)
        reference = InProcessDriver(DeclaredReference(options)).run(program)
        accepted = [reference] + [d.run(program) for d in other_orders(declared, program)]
        for engine in engines:
            answers = InProcessDriver(_FreeReference(options, engine)).run(program)
            assert answers in accepted, program
            otherwise += answers != reference
        checked += 1
        evicting += Ok(0) in reference
    assert checked > 40 and evicting > 10, (checked, evicting)
    assert otherwise >= least_otherwise, otherwise


def test_an_engine_of_another_order_passes_the_generated_check_the_reference_alone_fails() -> None:
    """Both halves of the generated check's other orders: an engine that evicts a store's
    last block first (as vLLM's and nano-vllm's queues of free blocks do) passes
    ``generated.prefix``, and would fail it if the reference's order were the only one
    accepted; the mutant that counts past a gap fails it either way."""
    prop = PROPERTIES_BY_ID["generated.prefix"]
    last_first = InProcessDriver(_FreeReference({}, lambda count: count - 1))
    assert run_property(prop, last_first, examples=300, seed=5).verdict == "passed"
    alone = replace(prop, alternatives=None)
    assert run_property(alone, last_first, examples=300, seed=5, shrink=False).verdict == "failed"
    mutant = InProcessDriver(MUTANTS["prefix-capacity-counts-past-a-miss"].factory())
    result = run_property(prop, mutant, examples=300, seed=5)
    assert result.verdict == "failed" and result.counterexample is not None
    assert result.counterexample.allowed, "judged against the reference alone"


def test_an_exported_counterexample_of_a_cut_store_passes_every_engine_the_rule_allows(
    tmp_path: Path,
) -> None:
    """The scenario exported from a counterexample judged against every order accepts
    each count some order gives, and the counts that differ between orders ``together``
    as one order gives them: every engine PREFIX-24 allows passes it (each way of
    choosing), and the mutant fails it at that relation, each of its counts being one
    some order gives (up to 7.2.0 the export compared only the counts every order makes
    equal, and such a scenario could pass the mutant on replay)."""
    factory = MUTANTS["prefix-capacity-counts-past-a-miss"].factory
    result = run_property(
        PROPERTIES_BY_ID["generated.prefix"],
        InProcessDriver(factory()),
        examples=300,
        seed=5,
        export_dir=tmp_path,
    )
    assert result.exported is not None, result.export_error
    assert "passes on the reference, fails on this implementation" in result.export_note
    (case,) = load_scenario_file(result.exported)
    (together,) = [
        c for c in case.checks if isinstance(c, RelationCheck) and c.relation == "together"
    ]
    assert len(together.rows) > 1 and len(together.refs) > 1, together

    def run(choose: Callable[[int], int]) -> str:
        return runner.run_case(case, InProcessDriver(_FreeReference({}, choose))).verdict

    verdicts = list(_every_run(run))
    assert len(verdicts) > 1 and set(verdicts) == {"passed"}, verdicts
    failed = runner.run_case(case, InProcessDriver(factory()))
    assert [f.where.step for f in failed.failures] == [together.where.step], failed.report()
