"""Bounded programs of the class ``prefix_cache``: a prefix cache made with a capacity
(PREFIX-24), for an implementation that declares the capability ``prefix_capacity``.

PREFIX-24 fixes what a bounded cache holds after its stores, the blocks stored most
recently, and leaves to the engine which block of one store goes first, whether a store
computes again, in a block of its own, a block the cache holds, and whether it takes a
block for a partial last block. A bounded program is drawn so that a lookup's count
depends on none of that but the order within one store (:func:`bounded`), and the
generated check accepts the counts of every such order
(:func:`~kvconform.differential.declared.other_orders`); a counterexample shortened by
deleting operations is kept only while it still is such a program
(:func:`within_promises`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

import kvconform.differential.strategies.prefix_scope as v
from kvconform.differential.compare import Program
from kvconform.differential.strategies.prefix_requests import Cache, Request
from kvconform.differential.strategies.prefix_scope import PrefixScope
from kvconform.differential.strategies.source import Source, flag, items, pick
from kvconform.protocol import operations as ops


class Builder(Protocol):
    """What a bounded program needs of :class:`.prefix.PrefixBuilder`: its choices, the
    operations written so far, and how it draws, writes and looks up requests."""

    src: Source
    scope: PrefixScope
    block: int
    ops: list[ops.Op]
    requests: list[Request]
    stored: list[Request]

    def fresh(self, letter: str) -> str: ...
    def new_cache(self, first: bool) -> Cache: ...
    def derive(self, base: Request, cache: Cache, focus: int | None = None) -> Request: ...
    def fresh_request(self, cache: Cache) -> Request: ...
    def request(self, cache: Cache) -> Request: ...
    def emit(self, request: Request) -> None: ...
    def lookup(self, request: Request, cache: Cache) -> None: ...


def bounded(builder: Builder, cut: bool = False) -> None:
    """A prefix cache made with a capacity (PREFIX-24): requests stored one after
    another (each drawn afresh or from an earlier one: a prefix shared, a request
    stored again), then every request drawn looked up, and a few more drawn from them.
    With ``cut``, every request stored is drawn afresh and one that starts as an
    earlier store does is looked up only, so that no two stores share a block and the
    bound may cut one; the first blocks of a few stored requests are looked up too
    (:func:`first_blocks`).

    The capacity is drawn last (:func:`capacities`): from the sums of the blocks of the
    most recent stores (the last one's, the last two's, ...) and from the blocks of
    every store, so that what the cache holds at the end is whole stores; or, where no
    two stores start alike, anywhere from the largest store up, so that the bound cuts
    a store and which of its blocks are left is the engine's order within one store. A
    sum is drawn only while the stores it adds up start differently (:func:`start`), so
    share no block: an engine may compute again, in a block of its own, a block it
    holds, and where two of those stores shared one it would hold a block older than
    them in the slot. A store that shares blocks with an older store outside them is
    what makes the engine move the shared blocks up (a block stored again counts as
    stored by the later store). No store takes more blocks than the
    capacity, none is looked up before the last store, no tier is drawn, and but
    under ``exact_tail`` (whose partial last block is a block of the bound) a stored
    request fills whole blocks: points PREFIX-24 and spec/prefix.md leave to the
    engine.
    """
    src = builder.src
    cache = builder.new_cache(first=True)
    made = len(builder.ops) - 1
    starts: list[tuple[object, ...]] = []
    sizes: list[int] = []

    def store_one() -> None:
        if builder.requests and not cut and flag(src):
            request = builder.derive(pick(src, builder.requests[::-1]), cache)
        else:
            request = builder.fresh_request(cache)
        if not builder.scope.tail:
            request = whole_blocks(request, builder.block)
        builder.emit(request)
        size = -(-len(request.tokens) // builder.block)
        begins = start(request.salt, request.user_key, request.tokens, builder.scope, builder.block)
        if sum(sizes) + size > v.HELD_BLOCKS or (cut and begins in starts):
            return  # looked up only: every store is held under a capacity of 64
        starts.append(begins)
        sizes.append(size)
        builder.ops.append(ops.PrefixStore(cache.handle, request.handle))
        builder.stored.append(request)

    items(src, store_one, max_size=v.BOUNDED_STORES, min_size=3, mean_extra=4)
    for request in list(builder.requests):
        builder.lookup(request, cache)
    if cut and builder.stored:  # a stored request's first blocks: the order a cut shows
        items(src, lambda: first_blocks(builder, pick(src, builder.stored), cache), max_size=3)
    items(src, lambda: builder.lookup(builder.request(cache), cache), max_size=4, mean_extra=2)
    made_op = builder.ops[made]
    assert isinstance(made_op, ops.PrefixNew)
    builder.ops[made] = replace(made_op, capacity=pick(src, capacities(sizes, starts)))


def first_blocks(builder: Builder, request: Request, cache: Cache) -> None:
    """A request of the first whole blocks of ``request`` (one or more), looked up: where
    the bound cut ``request``'s store, it and ``request`` are reused for as many of those
    blocks as the engine's order left in a run, which only the two together show."""
    full = len(request.tokens) // builder.block
    if full < 1:
        return
    end = builder.block * builder.src.integer(1, full)
    spans = tuple(s for s in request.spans if s.start + s.length <= end)
    part = replace(request, handle=builder.fresh("r"), tokens=request.tokens[:end], spans=spans)
    builder.emit(part)
    builder.lookup(part, cache)


def whole_blocks(request: Request, block: int) -> Request:
    """``request`` cut to its whole blocks, or filled to one block with the token 0, its
    items kept where they still fit."""
    size = len(request.tokens)
    tokens = request.tokens[: size - size % block] or request.tokens + (0,) * (block - size)
    spans = tuple(s for s in request.spans if s.start + s.length <= len(tokens))
    return replace(request, tokens=tokens, spans=spans)


def start(
    salt: str | None, user_key: str | None, tokens: tuple[int, ...], scope: PrefixScope, block: int
) -> tuple[object, ...]:
    """What a request's first block is computed from, as far as telling two apart goes
    without an engine's rule: its salt and user key (where the implementation's requests
    carry them) and its first block's tokens. Two requests that start differently share
    no block (PREFIX-4, PREFIX-13, PREFIX-15); two that start alike may (an adapter or an
    item may still tell them apart)."""
    return (
        salt if "salt" in scope.inputs else None,
        user_key if "user_key" in scope.inputs else None,
        tokens[:block],
    )


def capacities(sizes: list[int], starts: list[tuple[object, ...]]) -> list[int]:
    """The capacities a bounded program may have, after stores of ``sizes`` blocks that
    start as ``starts`` say (:meth:`PrefixBuilder.bounded`): the blocks of the last store,
    of the last two, ... while those stores start differently; of every store, and one
    more; and where every store starts differently, any other number too, which cuts a
    store (its stores share no block, so what a lookup reuses depends only on how many
    of the cut store's first blocks are left: one of
    :func:`~kvconform.differential.declared.other_orders` gives it). Each at least the
    largest store and at most 64 (PREFIX-6), smallest first."""
    sums = []
    for count in range(1, len(sizes) + 1):
        if len(set(starts[-count:])) < count:
            break  # two of these stores may share a block
        sums.append(sum(sizes[-count:]))
    sums += [sum(sizes), sum(sizes) + 1]  # every store held, exactly and not
    if len(set(starts)) == len(starts):
        sums += range(max(sizes), sum(sizes))  # a bound that cuts a store
    return sorted({n for n in sums if max(sizes) <= n <= v.HELD_BLOCKS})


def within_promises(program: Program, scope: PrefixScope) -> bool:
    """Whether every bounded prefix cache of ``program`` has a capacity
    :meth:`PrefixBuilder.bounded` could have drawn for its stores: a program shortened by
    deleting operations (:func:`~kvconform.differential.shrink.minimize`) must not come
    to depend on what PREFIX-24 leaves to the engine, such as two stores that share a
    block inside the blocks the cache must hold."""
    made: dict[str, ops.PrefixNew] = {}
    requests: dict[str, ops.RequestNew] = {}
    stores: dict[str, list[ops.RequestNew]] = {}
    for op in program:
        if isinstance(op, ops.PrefixNew) and op.capacity is not None:
            made[op.handle] = op
        elif isinstance(op, ops.RequestNew):
            requests[op.handle] = op
        elif isinstance(op, ops.PrefixStore) and op.prefix in made:
            stores.setdefault(op.prefix, []).append(requests[op.request])
    for handle, cache in made.items():
        stored = stores.get(handle, [])
        if not stored:
            continue
        block = cache.block_size
        tokens = [tuple(int(t) for t in r.tokens.split(" ")) for r in stored]
        sizes = [-(-len(t) // block) for t in tokens]
        starts = [
            start(r.salt, r.user_key, t, scope, block) for r, t in zip(stored, tokens, strict=True)
        ]
        if cache.capacity not in capacities(sizes, starts):
            return False
    return True
