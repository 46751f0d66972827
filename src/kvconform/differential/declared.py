"""The reference under an implementation's declaration.

The reference (``kvconform_reference``) answers every option by its default. The
generated programs stay where an implementation's declaration gives the same answers,
with these exceptions of the class ``prefix_cache``, where the reference gives another
declaration's answers by being asked differently, without a line of reuse logic here:

- ``prefix_partial: tokens`` (PREFIX-5): a position is reused exactly when it was
  computed for the same tokens and discriminants after the same prefix, which is the
  reference's whole-block rule with blocks of one position: :class:`DeclaredReference`
  makes every prefix cache with block size 1.
- ``prefix_adapter_identity: content`` (PREFIX-8): loads of equal weights are one
  identity, which is the reference's instance rule with a second load of equal weights
  in a process answered by the first instance.
- ``prefix_partial: exact_tail`` (PREFIX-5): the reference's caches made keeping a
  request's partial last block whole (``PrefixCache.partial_tail``), the rule written
  out in the reference.
- ``prefix_tier_layout: converted`` (PREFIX-25): the layout is no part of a block's key
  at the tier, which is the reference's keyed rule with every prefix cache made in one
  layout.

:class:`DeclaringAs` is the same reference describing itself as another implementation,
to replay an exported counterexample under that implementation's declaration.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kvconform_reference import prefix

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.values import OPTIONS, AdapterInfo


def _option(options: Mapping[str, str], name: str) -> str:
    return options.get(name, OPTIONS[name].default)


@dataclass
class _DeclaredCache(prefix.PrefixCache):
    """A reference prefix cache that remembers its process's adapter loads by weights."""

    loads: dict[str, prefix.Adapter] = field(default_factory=dict)


@dataclass
class _KeepingRun(_DeclaredCache):
    """The reference's bounded cache in another order within one store, which PREFIX-24
    leaves to the engine: of the oldest store's blocks, the one at ``run`` (counted from
    its first, 0) goes first, then its last; so the first ``run`` blocks of the store the
    bound cuts are the ones a lookup still reaches (the reference's order, first block
    first, leaves none of them)."""

    run: int = 0
    #: For each key stored, the store that stored it last and its place in that request.
    placed: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    stores: int = 0

    def store(self, request: prefix.Request) -> None:
        self.stores += 1
        super().store(request)

    def _hold(self, keys: Iterable[bytes]) -> None:
        for index, key in enumerate(keys):
            self.blocks.pop(key, None)
            self.blocks[key] = None
            self.placed[key] = (self.stores, index)
            if self.capacity is not None and len(self.blocks) > self.capacity:
                oldest = min(self.placed[held][0] for held in self.blocks)
                theirs = sorted(
                    (self.placed[held][1], held)
                    for held in self.blocks
                    if self.placed[held][0] == oldest
                )
                chosen = next((held for at, held in theirs if at == self.run), theirs[-1][1])
                del self.blocks[chosen]


class DeclaredReference(ReferenceAdapter):
    """The reference answering as an implementation declaring ``options`` would have to
    (for ``prefix_partial``, ``prefix_adapter_identity`` and ``prefix_tier_layout``; see
    the module). With ``run``, its bounded prefix caches evict in another order within
    one store (:class:`_KeepingRun`)."""

    def __init__(
        self,
        options: Mapping[str, str] | None = None,
        writes: int = 1,
        reads: tuple[int, ...] | None = None,
        revision: str = "split_width",
        run: int | None = None,
    ) -> None:
        super().__init__(writes=writes, reads=reads, revision=revision)
        self.run = run
        declared = options or {}
        self.unit_blocks = _option(declared, "prefix_partial") == "tokens"
        self.partial_tail = _option(declared, "prefix_partial") == "exact_tail"
        self.content_adapters = _option(declared, "prefix_adapter_identity") == "content"
        self.converted_layouts = _option(declared, "prefix_tier_layout") == "converted"

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
        size = 1 if self.unit_blocks else block_size
        if capacity is not None and self.unit_blocks:
            capacity *= block_size  # the same positions, held as blocks of one (PREFIX-24)
        if self.converted_layouts:
            layout = "converted"  # one layout for every cache: the tier's own (PREFIX-25)
        config = prefix.EngineConfig(model_name, kv_dtype, layout, shard)
        if capacity is not None and self.run is not None:
            return _KeepingRun(
                size, config, capacity=capacity, partial_tail=self.partial_tail, run=self.run
            )
        return _DeclaredCache(size, config, capacity=capacity, partial_tail=self.partial_tail)

    def lora_load(
        self, cache: prefix.PrefixCache, adapter_name: str, weights: str
    ) -> prefix.Adapter:
        if not self.content_adapters or not isinstance(cache, _DeclaredCache):
            return super().lora_load(cache, adapter_name, weights)
        known = cache.loads.get(weights)
        if known is None:
            known = cache.loads[weights] = super().lora_load(cache, adapter_name, weights)
        return known


def declares_otherwise(info: AdapterInfo) -> bool:
    """Whether the implementation's prefix answers differ from the reference's defaults."""
    return (
        info.option("prefix_partial") in ("tokens", "exact_tail")
        or info.option("prefix_adapter_identity") == "content"
        or info.option("prefix_tier_layout") == "converted"
    )


def reference_for(info: AdapterInfo) -> Driver | None:
    """The reference under the implementation's prefix declaration, when it is not the
    default one (and the implementation's format declaration, so that nothing else
    changes)."""
    if not declares_otherwise(info):
        return None
    return InProcessDriver(
        DeclaredReference(
            info.options,
            writes=info.format_writes or 1,
            reads=tuple(sorted(info.format_reads)) or None,
            revision=info.option("profile_v2_revision"),
        )
    )


def other_orders(info: AdapterInfo, program: Sequence[ops.Op]) -> list[Driver]:
    """For a program that bounds a prefix cache, the reference under the implementation's
    declaration in every other order within one store that a lookup can tell apart
    (:class:`_KeepingRun`, ``run`` from 1 to the most blocks a request of the program
    has): engines PREFIX-24 allows, whose counts a correct engine may give instead of the
    reference's. Where the stores share no block and fill whole blocks (under
    ``exact_tail``, a partial last block is one of them), what a lookup reuses depends
    only on how many of the first blocks of the store the bound cuts are left, so one of
    these gives every count an allowed engine gives
    (``tests/test_prefix_capacity_freedoms.py`` holds them to every way of choosing).
    Without a bounded prefix cache, none."""
    made = [op for op in program if isinstance(op, ops.PrefixNew) and op.capacity is not None]
    if not made:
        return []
    block = max(1, min(op.block_size for op in made))
    requests = [op for op in program if isinstance(op, ops.RequestNew)]
    longest = max((-(-len(op.tokens.split(" ")) // block) for op in requests), default=0)
    return [
        InProcessDriver(
            DeclaredReference(
                info.options,
                writes=info.format_writes or 1,
                reads=tuple(sorted(info.format_reads)) or None,
                revision=info.option("profile_v2_revision"),
                run=run,
            )
        )
        for run in range(1, min(longest, 64) + 1)
    ]


class DeclaringAs(DeclaredReference):
    """The reference, declaring another implementation's options and capabilities.

    Used only to replay an exported counterexample: its program was drawn where that
    declaration and the reference's defaults give the same answers (or the reference's
    answers under the declaration, above), so the reference's behaviour is right under
    it, and the scenario (which assumes those options) must apply and pass."""

    def __init__(self, info: AdapterInfo) -> None:
        super().__init__(
            info.options,
            writes=info.format_writes or 1,
            reads=tuple(sorted(info.format_reads)) or None,
            revision=info.option("profile_v2_revision"),
        )
        self._as = info

    def describe(self) -> AdapterInfo:
        mine, theirs = super().describe(), self._as
        return replace(
            mine,
            options=dict(theirs.options),
            key_schema=theirs.key_schema,
            raw_fold=theirs.raw_fold,
            dtypes=theirs.dtypes,
            uint_bits=theirs.uint_bits,
            prefix_inputs=theirs.prefix_inputs,
            prefix_capacity=theirs.prefix_capacity,
        )
