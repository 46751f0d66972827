"""What spec/prefix.md says no case asks, held against every case and generated program.

Where the class leaves a point to the engine (PREFIX-24's asides, "Points left open"),
the specification promises that no case depends on it. Each promise about the shape of
a program is checked here over the suite's prefix cases and over generated programs,
so that a new scenario that came to depend on an engine's own choice fails the
project's tests, not a correct engine. (The promises about what an engine does inside a
store are held by correct variants that choose otherwise: ``tests/variants/prefix.py``.)
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import replace

import pytest

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential import strategies
from kvconform.harness import suite
from kvconform.protocol import operations as ops
from kvconform.protocol.steps import Restart


def _blocks(tokens: str, block_size: int) -> int:
    """How many blocks a request of ``tokens`` takes, a partial last one counted."""
    return -(-len(tokens.split()) // block_size)


def unasked(program: tuple[ops.Op, ...]) -> list[str]:
    """The points left to the engine that ``program`` would ask about, each named."""
    met: list[str] = []
    made: dict[str, ops.PrefixNew] = {}
    tokens: dict[str, str] = {}
    stored: set[str] = set()  # prefix caches a request was stored in
    looked_up: set[str] = set()  # prefix caches made with a capacity a request was looked up in
    sizes_at: dict[str, set[int]] = {}  # tier: the block sizes of the caches attached to it
    opened: set[str] = set()  # the storage names a tier_new of this process opened
    bound: set[str] = set()  # the handles the class prefix_cache bound
    loaded_in: dict[str, str] = {}  # adapter: the prefix cache it was loaded into
    adapter_of: dict[str, str] = {}  # request: its adapter
    items: dict[str, list[tuple[int, int]]] = {}  # request: its items' placements
    for op in program:
        if isinstance(op, Restart):  # no handle is live after it (PROTO-37)
            made, tokens, stored, looked_up, sizes_at = {}, {}, set(), set(), {}
            opened, bound, loaded_in, adapter_of, items = set(), set(), {}, {}, {}
            continue
        if isinstance(op, ops.LoraLoad):
            loaded_in[op.handle] = op.prefix
        elif isinstance(op, ops.RequestLora):
            if op.request in adapter_of:
                met.append(f"{op.request} given a second adapter")
            adapter_of[op.request] = op.lora
        elif isinstance(op, ops.RequestMedia | ops.RequestEmbeds):
            end = op.start + op.length
            if end > len(tokens[op.request].split()):
                met.append(f"{op.request} has an item past its last position")
            if any(op.start < e and s < end for s, e in items.setdefault(op.request, [])):
                met.append(f"{op.request} has items that overlap")
            items[op.request].append((op.start, end))
        elif isinstance(op, ops.PrefixStore | ops.PrefixLookup):
            adapter = adapter_of.get(op.request)
            if adapter is not None and loaded_in[adapter] != op.prefix:
                met.append(f"{op.request} used in {op.prefix}, its adapter loaded elsewhere")
        if op.needs == "prefix_cache" and hasattr(op, "handle"):
            bound.add(op.handle)
        if isinstance(op, ops.Drop) and op.handle in bound:
            met.append(f"{op.handle} dropped: a prefix_cache handle ends with its program")
        elif isinstance(op, ops.TierNew) and op.storage is not None:
            if op.storage in opened:
                met.append(f"{op.storage} opened twice in one process")
            opened.add(op.storage)
        elif isinstance(op, ops.PrefixNew):
            made[op.handle] = op
        elif isinstance(op, ops.RequestNew):
            tokens[op.handle] = op.tokens
        elif isinstance(op, ops.PrefixAttach):
            cache = made[op.prefix]
            if op.prefix in stored:
                met.append(f"{op.prefix} attached after a store: blocks stored before a tier")
            if cache.capacity is not None:
                met.append(f"{op.prefix} has a capacity and a tier: a bounded cache over a tier")
            sizes = sizes_at.setdefault(op.tier, set())
            sizes.add(cache.block_size)
            if len(sizes) > 1:
                met.append(f"{op.tier} is shared by block sizes {sorted(sizes)}")
        elif isinstance(op, ops.PrefixStore):
            cache = made[op.prefix]
            stored.add(op.prefix)
            if cache.capacity is None:
                continue
            if op.prefix in looked_up:
                met.append(f"{op.prefix}: a lookup between the stores of a bounded cache")
            if _blocks(tokens[op.request], cache.block_size) > cache.capacity:
                met.append(f"{op.prefix}: a store of more blocks than the capacity")
        elif isinstance(op, ops.PrefixLookup) and made[op.prefix].capacity is not None:
            looked_up.add(op.prefix)
    return met


def test_the_check_names_each_point_it_is_about() -> None:
    """The checker is not vacuous: a program that asks each point is named for it."""
    engine = ("llama", "bf16", "nhd", "tp0")
    program: tuple[ops.Op, ...] = (
        ops.TierNew("t"),
        ops.PrefixNew("p", 4, *engine),
        ops.PrefixNew("small", 2, *engine, capacity=1),
        ops.RequestNew("r", "1 2 3 4 5"),
        ops.PrefixStore("p", "r"),
        ops.PrefixAttach("p", "t"),
        ops.PrefixAttach("small", "t"),
        ops.PrefixLookup("small", "r"),
        ops.PrefixStore("small", "r"),
    )
    twice = (ops.TierNew("u", storage="d"), ops.TierNew("v", storage="d"))
    given = (
        ops.LoraLoad("l", "small", "a", "w"),
        ops.RequestNew("q", "1 2 3"),
        ops.RequestLora("q", "l"),
        ops.RequestLora("q", "l"),
        ops.RequestEmbeds("q", 2, 2, "e"),
        ops.RequestEmbeds("q", 1, 2, "e"),
        ops.PrefixLookup("p", "q"),
    )
    assert unasked((*program[:4], *given)) == [
        "q given a second adapter",
        "q has an item past its last position",
        "q has items that overlap",
        "q used in p, its adapter loaded elsewhere",
    ]
    met = unasked((*program, *twice, ops.Drop("r")))
    assert len(met) == 7 and all(
        any(point in line for line in met)
        for point in (
            "blocks stored before a tier",
            "a bounded cache over a tier",
            "shared by block sizes [2, 4]",
            "a lookup between the stores",
            "more blocks than the capacity",
            "d opened twice in one process",
            "r dropped",
        )
    ), met
    # Handles end at a restart: the same names after it are new objects.
    fresh = (*program[:5], Restart(), ops.TierNew("t"), ops.PrefixNew("p", 4, *engine))
    assert unasked((*fresh, ops.PrefixAttach("p", "t"))) == []


@pytest.mark.covers("PREFIX-24")
def test_no_case_asks_a_point_left_to_the_engine() -> None:
    cases = [c for c in suite.all_cases() if c.cls == "prefix_cache"]
    asked = {c.id: met for c in cases if (met := unasked(c.program))}
    assert not asked, asked
    # The cases these promises are about exist: tiers, stores and bounded caches.
    assert sum(any(isinstance(op, ops.PrefixAttach) for op in c.program) for c in cases) > 10
    bounded = [
        c for c in cases if any(getattr(op, "capacity", None) is not None for op in c.program)
    ]
    assert len(bounded) >= 5


def _programs(count: int, **options: str) -> Iterator[tuple[ops.Op, ...]]:
    info = ReferenceAdapter().describe()
    scope = strategies.PrefixScope.of(replace(info, options={**info.options, **options}))
    for index in range(count):
        yield strategies.prefix_program(
            strategies.RandomSource(random.Random(f"open points {index}")), scope
        )


@pytest.mark.parametrize("options", [{"prefix_tier": "shared"}, {}], ids=["shared", "reference"])
def test_no_generated_program_asks_a_point_left_to_the_engine(options: dict[str, str]) -> None:
    attached = 0
    for program in _programs(200, **options):
        assert unasked(program) == [], program
        attached += any(isinstance(op, ops.PrefixAttach) for op in program)
    if options:
        assert attached > 50
