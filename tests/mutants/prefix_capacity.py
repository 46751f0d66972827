"""Mutants of a bounded prefix cache (PREFIX-24, capability ``prefix_capacity``).

Each is the reference's prefix cache with one misreading of what a cache made with a
capacity holds; without a capacity each behaves as the reference does.
"""

from __future__ import annotations

from kvconform_reference.prefix import PrefixCache, Request

from . import mutant
from .prefix import PrefixAdapter, PrefixExactTailAdapter


class _StaleEntry(PrefixCache):
    """Blocks in numbered slots, the least recently stored slot recycled first, and a
    table from a block's key to its slot, as nano-vllm's block manager keeps them."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.table: dict[bytes, int] = {}
        #: slot -> (the key of the block it holds, its tokens), least recently stored first
        self.held: dict[int, tuple[bytes, tuple[int, ...]]] = {}

    def _tokens(self, request: Request, index: int) -> tuple[int, ...]:
        return request.tokens[index * self.block_size : (index + 1) * self.block_size]

    def store(self, request: Request) -> None:
        if self.capacity is None:
            return super().store(request)
        for index, key in enumerate(self._local_keys(request)):
            slot = self.table.get(key)
            if slot is not None and slot in self.held and self.held[slot][0] == key:
                self.held[slot] = self.held.pop(slot)  # stored again: the most recent
                continue
            if len(self.held) >= self.capacity:
                slot = next(iter(self.held))  # MUTATION: its old key's entry is left in the table
                del self.held[slot]
            else:
                slot = len(self.held)
            self.held[slot] = (key, self._tokens(request, index))
            self.table[key] = slot
        return None

    def lookup(self, request: Request) -> int:
        if self.capacity is None:
            return super().lookup(request)
        reused = 0
        for index, key in enumerate(self._local_keys(request)):
            slot = self.table.get(key)
            # a hit compares the tokens the slot holds, not the block's parent
            if slot is None or slot not in self.held:
                break
            if self.held[slot][1] != self._tokens(request, index):
                break
            reused += 1
        return reused * self.block_size


@mutant(
    "prefix-capacity-stale-entry",
    breaks=("PREFIX-24", "PREFIX-4"),
    half="under",
    plausible="nano-vllm's block manager: a recycled block's old hash entry stays in the "
    "table, and a hit compares only the tokens the block now holds, so a block computed "
    "after another prefix with equal tokens is served",
)
class PrefixCapacityStaleEntry(PrefixAdapter):
    cache_cls = _StaleEntry


class _Unbounded(PrefixCache):
    def __post_init__(self) -> None:
        super().__post_init__()
        self.capacity = None  # MUTATION: the bound is accepted and never applied


@mutant(
    "prefix-capacity-unbounded",
    breaks=("PREFIX-24",),
    half="under",
    plausible="an adapter that passes the capacity to a pool the engine then grows on "
    "demand: it answers from blocks it was told it cannot hold",
)
class PrefixCapacityUnbounded(PrefixAdapter):
    cache_cls = _Unbounded


class _RecencyOfFirstStore(PrefixCache):
    def _hold(self, keys: list[bytes]) -> None:
        for key in keys:
            if key in self.blocks:
                continue  # MUTATION: a block stored again keeps the place of its first store
            self.blocks[key] = None
            if self.capacity is not None and len(self.blocks) > self.capacity:
                del self.blocks[next(iter(self.blocks))]


@mutant(
    "prefix-capacity-recency-of-first-store",
    breaks=("PREFIX-24",),
    half="over",
    plausible="a first-in, first-out queue of blocks: a shared first block, reused by "
    "every later request, is the first evicted and takes every request's prefix with it",
)
class PrefixCapacityRecencyOfFirstStore(PrefixAdapter):
    cache_cls = _RecencyOfFirstStore


class _EvictsNewest(PrefixCache):
    def _hold(self, keys: list[bytes]) -> None:
        for key in keys:
            self.blocks.pop(key, None)
            if self.capacity is not None and len(self.blocks) >= self.capacity:
                del self.blocks[next(reversed(self.blocks))]  # MUTATION: a stack of free blocks
            self.blocks[key] = None


@mutant(
    "prefix-capacity-evicts-newest",
    breaks=("PREFIX-24",),
    half="over",
    plausible="free blocks kept on a stack, pushed and popped at one end, so the block "
    "freed last, the most recently stored, is the first given to a new block",
)
class PrefixCapacityEvictsNewest(PrefixAdapter):
    cache_cls = _EvictsNewest


class _QueueKeepsReusedBlock(PrefixCache):
    def _hold(self, keys: list[bytes]) -> None:
        new = [key for key in keys if key not in self.blocks]
        for key in reversed(new):  # a request's last block freed first, as a queue of free blocks
            self.blocks[key] = None
            # MUTATION: a block the request reused stays where its first store put it
            if self.capacity is not None and len(self.blocks) > self.capacity:
                del self.blocks[next(iter(self.blocks))]


@mutant(
    "prefix-capacity-queue-keeps-reused-block-in-place",
    breaks=("PREFIX-24",),
    half="over",
    plausible="a queue of free blocks that frees a request's last block first, as vLLM's "
    "and nano-vllm's do, but leaves a block a later request reused at its old place, so "
    "a shared prefix goes while newer blocks stay",
)
class PrefixCapacityQueueKeepsReusedBlockInPlace(PrefixAdapter):
    cache_cls = _QueueKeepsReusedBlock


class _TailOutsideTheBound(PrefixCache):
    def __post_init__(self) -> None:
        super().__post_init__()
        self.tails: set[bytes] = set()

    def store(self, request: Request) -> None:
        keys = list(self._local_keys(request))
        if self.partial_tail and len(request.tokens) % self.block_size:
            *whole, tail = keys
            self._hold(whole)
            self.tails.add(tail)  # MUTATION: a kept tail in a table the bound never reads
        else:
            self._hold(keys)
        if self.tier is not None:
            self.tier.add(self._tier_keys(request))

    def lookup(self, request: Request) -> int:
        held = self.blocks
        self.blocks = {**held, **dict.fromkeys(self.tails)}
        try:
            return super().lookup(request)
        finally:
            self.blocks = held


@mutant(
    "prefix-capacity-tail-outside-the-bound",
    breaks=("PREFIX-24", "PREFIX-5"),
    half="under",
    plausible="partial last chunks kept under exact_tail live in a side table of their "
    "own, and the bound counts and evicts the pool of full blocks only: a tail outlives "
    "every block stored after it",
)
class PrefixCapacityTailOutsideTheBound(PrefixExactTailAdapter):
    cache_cls = _TailOutsideTheBound


class _DeepestHitWins(PrefixCache):
    def lookup(self, request: Request) -> int:
        if self.capacity is None:
            return super().lookup(request)
        keys = list(self._local_keys(request))
        lengths = request.block_lengths(self.block_size, self.partial_tail)
        for index in range(len(keys) - 1, -1, -1):
            if keys[index] in self.blocks:  # MUTATION: the blocks before it taken as held
                return sum(lengths[: index + 1])
        return 0


@mutant(
    "prefix-capacity-deepest-hit-wins",
    breaks=("PREFIX-24", "PREFIX-2"),
    half="under",
    plausible="a lookup that probes from the request's last block back and takes the "
    "deepest block it holds as proof that every block before it is held, as a chain "
    "whose blocks are evicted leaves first would allow; evicted in another order, a "
    "later block outlives an earlier one, and positions are reused that the cache no "
    "longer holds (a C++ engine written from the documents found that no case judged it)",
)
class PrefixCapacityDeepestHitWins(PrefixAdapter):
    cache_cls = _DeepestHitWins


class _CountsPastAMiss(PrefixCache):
    def lookup(self, request: Request) -> int:
        if self.capacity is None:
            return super().lookup(request)
        keys = self._local_keys(request)
        lengths = request.block_lengths(self.block_size, self.partial_tail)
        # MUTATION: every block of the chain it holds is counted, past a miss
        return sum(length for key, length in zip(keys, lengths, strict=False) if key in self.blocks)


@mutant(
    "prefix-capacity-counts-past-a-miss",
    breaks=("PREFIX-24", "PREFIX-2"),
    half="under",
    plausible="a lookup that counts every block of the request it still holds instead of "
    "stopping at the first it does not, as a cache that never evicts could (its blocks "
    "of a chain are always a run from the first); evicted in another order than last "
    "block first, a later block outlives an earlier one and is counted behind the gap "
    "(a Perl engine written from the documents found that no case judged it)",
)
class PrefixCapacityCountsPastAMiss(PrefixAdapter):
    cache_cls = _CountsPastAMiss
