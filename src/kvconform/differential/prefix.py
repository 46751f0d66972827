"""The generated check of the class ``prefix_cache``: the reference under a declaration,
and what a disagreement on a lookup bears on.

The reference (``kvconform_reference.prefix``) answers every prefix option by its
default, but for two of them it gives another declaration's answers by being asked
differently, without a line of reuse logic of its own here:

- ``prefix_partial: tokens`` (PREFIX-5): a position is reused exactly when it was
  computed for the same tokens and discriminants after the same prefix, which is the
  reference's whole-block rule with blocks of one position. :class:`DeclaredReference`
  makes every prefix cache with block size 1.
- ``prefix_adapter_identity: content`` (PREFIX-8): loads of equal weights are one
  identity, which is the reference's instance rule with the second load of equal
  weights in a process answered by the first instance.

The other options leave the answer alone wherever the programs go
(:mod:`.strategies.prefix` keeps them there). Judging stays the differential one: each
lookup's count is compared exactly (CONF-12); :func:`refine` only says which half a
disagreement on a lookup is, and which rules it bears on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from kvconform_reference import prefix

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential.compare import Mismatch, Program
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.values import OPTIONS, AdapterInfo, Ok, Outcome


def _option(options: Mapping[str, str], name: str) -> str:
    return options.get(name, OPTIONS[name].default)


@dataclass
class _DeclaredCache(prefix.PrefixCache):
    """A reference prefix cache that remembers its process's adapter loads by weights."""

    loads: dict[str, prefix.Adapter] = field(default_factory=dict)


class DeclaredReference(ReferenceAdapter):
    """The reference answering as an implementation declaring ``options`` would have to
    (for ``prefix_partial`` and ``prefix_adapter_identity``; see the module)."""

    def __init__(
        self,
        options: Mapping[str, str] | None = None,
        writes: int = 1,
        reads: tuple[int, ...] | None = None,
        revision: str = "split_width",
    ) -> None:
        super().__init__(writes=writes, reads=reads, revision=revision)
        declared = options or {}
        self.unit_blocks = _option(declared, "prefix_partial") == "tokens"
        self.content_adapters = _option(declared, "prefix_adapter_identity") == "content"

    def prefix_new(
        self, block_size: int, model_name: str, kv_dtype: str, layout: str, shard: str
    ) -> prefix.PrefixCache:
        size = 1 if self.unit_blocks else block_size
        return _DeclaredCache(size, prefix.EngineConfig(model_name, kv_dtype, layout, shard))

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
        info.option("prefix_partial") == "tokens"
        or info.option("prefix_adapter_identity") == "content"
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


def not_applicable(info: AdapterInfo) -> str | None:
    if "prefix_cache" not in info.classes:
        return f"{info.name} does not declare the class prefix_cache"
    return None


#: What a discriminant in a program brings into what a disagreement bears on.
_DISCRIMINANT_RULES: tuple[tuple[type[ops.Op], tuple[str, ...]], ...] = (
    (ops.RequestLora, ("PREFIX-7", "PREFIX-8")),
    (ops.RequestMedia, ("PREFIX-9", "PREFIX-10", "PREFIX-11")),
    (ops.RequestEmbeds, ("PREFIX-17",)),
    (ops.TierNew, ("PREFIX-21", "PREFIX-22")),
)


def _sorted(ids: set[str]) -> tuple[str, ...]:
    return tuple(sorted(ids, key=lambda i: (i.split("-")[0], int(i.split("-")[1]))))


def refine(
    program: Program, expected: Sequence[Outcome], actual: Sequence[Outcome], mismatch: Mismatch
) -> Mismatch:
    """A disagreement on a lookup, told by its half and the rules it bears on.

    Fewer positions than the reference is under-reuse: the same prefix and
    discriminants were stored and are not reused (PREFIX-2, with PREFIX-18 for the
    store and lookup paths, PREFIX-5 under partial reuse, PREFIX-22 across a tier).
    More is over-reuse: positions computed for another prefix or other discriminants
    (PREFIX-1, PREFIX-3, PREFIX-4, and the rule of every discriminant the program
    varies). Other disagreements keep the operation table's citations.
    """
    op = program[mismatch.index]
    ref, got = expected[mismatch.index], actual[mismatch.index]
    if not (
        isinstance(op, ops.PrefixLookup)
        and isinstance(ref, Ok)
        and isinstance(got, Ok)
        and isinstance(ref.value, int)
        and isinstance(got.value, int)
        and not isinstance(got.value, bool)
    ):
        return mismatch
    before = program[: mismatch.index]
    present = {type(o) for o in before}
    news = [o for o in before if isinstance(o, ops.RequestNew)]
    salted = any(o.salt is not None for o in news)
    keyed = any(o.user_key is not None for o in news)
    adapted = ops.RequestLora in present
    cites: set[str] = set()
    if got.value < ref.value:
        cites |= {"PREFIX-2", "PREFIX-18"}
        # the reuse half of each discriminant the program carries
        for present_here, rule in (
            (adapted, "PREFIX-7"),
            (adapted, "PREFIX-8"),
            (ops.RequestMedia in present, "PREFIX-11"),
            (ops.RequestEmbeds in present, "PREFIX-17"),
            (salted, "PREFIX-13"),
            (keyed, "PREFIX-15"),
            (ops.TierNew in present, "PREFIX-22"),
            (ref.value % _block_size(program, op) != 0, "PREFIX-5"),
        ):
            if present_here:
                cites.add(rule)
        half = "fewer: a miss where the same prefix and discriminants were stored (under-reuse)"
    else:
        cites |= {"PREFIX-1", "PREFIX-3", "PREFIX-4"}
        for kind, rules in _DISCRIMINANT_RULES:
            if kind in present:
                cites.update(rules)
        if salted:
            cites.add("PREFIX-13")
        if any(o.salt == "" for o in news):
            cites.add("PREFIX-14")
        if keyed:
            cites.add("PREFIX-15")
        if salted or keyed or adapted or ops.RequestMedia in present or ops.RequestEmbeds in present:
            cites.add("PREFIX-12")
        if sum((salted, keyed, adapted)) >= 2:
            cites.add("PREFIX-16")
        if any(len(o.tokens.split(" ")) % _block_size(program, op) for o in news):
            cites.add("PREFIX-5")
        if sum(1 for o in program if isinstance(o, ops.PrefixStore)) > 64:
            cites.add("PREFIX-19")
        half = "more: positions computed for another prefix or other discriminants (over-reuse)"
    return replace(
        mismatch,
        expected=f"{ref.value} leading positions reused",
        actual=f"{got.value} ({half})",
        requires=_sorted(cites),
    )


def _block_size(program: Program, lookup: ops.PrefixLookup) -> int:
    for o in program:
        if isinstance(o, ops.PrefixNew) and o.handle == lookup.prefix:
            return max(1, o.block_size)
    return 1
