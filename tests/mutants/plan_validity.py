"""PLAN mutants of the class plan_validity and of the window's place in the key.

The three-valued validity and the guarded rebind (PLAN-19 .. PLAN-24): each
mutant is :class:`~._kit.ValidityAdapter` holding a :class:`~._kit.GuardedPlan`
with one method overridden. The sliding window in the key (PLAN-25, option
``plan_key_window``): each mutant is the reference key with one parameter
mixed or left out, declaring the answer it claims to implement (CONF-6). The
changed line is marked ``MUTATION``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
from kvconform_reference import kv_cache, model, plan
from kvconform_reference.identity import KvAllocId

from kvconform.adapters.reference import ReferenceAdapter, plan_identity
from kvconform.values import AdapterInfo, Geometry, PlanIdentity

from . import mutant
from ._kit import GuardedPlan, PlanAdapter, ValidityAdapter, declaring, moved_storage

# --- PLAN-19, PLAN-20: three outcomes -------------------------------------------------


class _TwoValued(GuardedPlan):
    def validity_for(
        self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs
    ) -> plan.Validity:
        # MUTATION: the boolean check, spelled with two of the three words
        return "valid" if self.is_valid_for(m, cache, step) else "stale"


@mutant(
    "validity-every-other-allocation-is-stale",
    breaks=("PLAN-19",),
    half="over",
    plausible="the three-valued check is bolted onto the boolean one, and 'not valid' is "
    "mapped to the conservative word; no plan is ever offered a rebind, so every storage "
    "change rebuilds",
)
class ValidityEveryOtherAllocationIsStale(ValidityAdapter):
    plan_cls = _TwoValued


class _AllocationFirst(GuardedPlan):
    def validity_for(
        self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs
    ) -> plan.Validity:
        if cache.alloc_id.value != self._identity.alloc:  # MUTATION: the id alone decides
            return "allocation_changed"
        return super().validity_for(m, cache, step)


@mutant(
    "validity-allocation-changed-whenever-the-id-differs",
    breaks=("PLAN-19", "PLAN-24"),
    half="under",
    plausible="'another allocation id means allocation_changed' reads like the definition; "
    "a cache of another capacity or depth, which also has another id, is then offered a "
    "cheap rebind instead of a rebuild",
)
class ValidityAllocationChangedWheneverTheIdDiffers(ValidityAdapter):
    plan_cls = _AllocationFirst


class _StructureWithout(GuardedPlan):
    """The three-valued check with "structure" a shorter list than the key's."""

    #: The components of the key left out of the structure compared first.
    leaves_out: tuple[str, ...] = ()

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        ident = self._identity  # a snapshot: the model's hook table changes in place
        self._built = replace(ident, params=dict(ident.params), hooks=dict(ident.hooks))

    def validity_for(
        self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs
    ) -> plan.Validity:
        current = plan.PlanIdentity.of(m, cache, len(step.token_ids))
        built = self._built
        mine, theirs = current, built
        if "hooks" in self.leaves_out:  # MUTATION: components left out of the structure
            mine, theirs = replace(mine, hooks={}), replace(theirs, hooks={})
        kept = tuple(f for f in ("n_kv_heads", "head_dim", "dtype") if f in self.leaves_out)
        if kept:
            mine = replace(
                mine,
                geometry=replace(mine.geometry, **{f: getattr(built.geometry, f) for f in kept}),
            )
        if mine.key(with_alloc=False) != theirs.key(with_alloc=False):
            return "stale"
        return "valid" if current.key() == self.key else "allocation_changed"


class _StructureWithoutHeads(_StructureWithout):
    leaves_out = ("n_kv_heads", "head_dim")


@mutant(
    "validity-structure-without-the-head-geometry",
    breaks=("PLAN-19", "PLAN-15"),
    half="under",
    plausible="the structure compared first is the seed's session key (n_layers, "
    "max_seq_len, dtype, step width) while the declared key holds the heads too; a cache "
    "of other heads is then offered a rebind",
)
class ValidityStructureWithoutTheHeadGeometry(ValidityAdapter):
    plan_cls = _StructureWithoutHeads


class _StructureWithoutDtype(_StructureWithout):
    leaves_out = ("dtype",)


@mutant(
    "validity-structure-without-the-dtype",
    breaks=("PLAN-19", "PLAN-15"),
    half="under",
    plausible="the structure is compared as the cache's shape (layers, heads, width, "
    "capacity), and the element type is taken for a property of the storage, which a "
    "rebind replaces; a plan compiled for f32 is then rebound to f16 storage",
)
class ValidityStructureWithoutTheDtype(ValidityAdapter):
    plan_cls = _StructureWithoutDtype


class _StructureWithoutHooks(_StructureWithout):
    leaves_out = ("hooks",)


@mutant(
    "validity-structure-without-the-hooks",
    breaks=("PLAN-19", "PLAN-18"),
    half="under",
    plausible="the structure is the instance and the geometry, since 'the model is the "
    "instance id'; a hook attached in place keeps the instance, and the plan built without "
    "it is offered a rebind",
)
class ValidityStructureWithoutTheHooks(ValidityAdapter):
    plan_cls = _StructureWithoutHooks


class _ValidUnlessStale(GuardedPlan):
    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        return self.validity_for(m, cache, step) != "stale"  # MUTATION


@mutant(
    "validity-boolean-true-for-allocation-changed",
    breaks=("PLAN-20", "PLAN-10"),
    half="under",
    plausible="'allocation_changed is repairable, so the plan is still good' -- the boolean "
    "check is derived as 'not stale', and a plan runs over another cache's buffers without "
    "the rebind (GAP-014 upstream)",
)
class ValidityBooleanTrueForAllocationChanged(ValidityAdapter):
    plan_cls = _ValidUnlessStale


# --- PLAN-21, PLAN-22: the guarded rebind ---------------------------------------------


class _SlotBySlot(GuardedPlan):
    def check_slot(
        self,
        cache: kv_cache.KvCache,
        layer: int,
        which: str,
        baked: str,
        incoming: tuple[str, ...],
    ) -> None:
        super().check_slot(cache, layer, which, baked, incoming)
        self.commit(cache)  # MUTATION: each slot adopted as soon as it passes


@mutant(
    "rebind-commits-slot-by-slot",
    breaks=("PLAN-22",),
    half="under",
    plausible="moving each slot as soon as it is checked is the obvious single loop; a "
    "refusal at the last layer then leaves the plan claiming the new allocation with its "
    "first slots moved",
)
class RebindCommitsSlotBySlot(ValidityAdapter):
    plan_cls = _SlotBySlot


class _NoResidencyCheck(GuardedPlan):
    def check_residency(self, incoming: str | None) -> None:
        pass  # MUTATION: storage labels alone decide


@mutant(
    "rebind-without-residency-check",
    breaks=("PLAN-21", "ERR-11"),
    half="under",
    plausible="the storage labels already name element type, encoding and size, so the "
    "residency looks redundant; storage of the right kind on another GPU is then adopted",
)
class RebindWithoutResidencyCheck(ValidityAdapter):
    plan_cls = _NoResidencyCheck


class _UnknownResidencyMatches(GuardedPlan):
    def check_residency(self, incoming: str | None) -> None:
        if incoming is None or self._residency is None:
            return  # MUTATION: unknown is given the benefit of the doubt
        super().check_residency(incoming)


@mutant(
    "rebind-unknown-residency-matches",
    breaks=("PLAN-21", "ERR-11"),
    half="under",
    plausible="residency is compared only when both sides report one, as optional "
    "metadata usually is; a cache of unknown placement is then adopted as if it were on "
    "the plan's device",
)
class RebindUnknownResidencyMatches(ValidityAdapter):
    plan_cls = _UnknownResidencyMatches


class _NoStorageCheck(GuardedPlan):
    def check_storage(self, layer: int, which: str, baked: str, incoming: str) -> None:
        pass  # MUTATION: a slot that exists is a slot that fits


@mutant(
    "rebind-without-storage-check",
    breaks=("PLAN-21", "ERR-11"),
    half="under",
    plausible="same geometry and same device look like enough; a quantized or differently "
    "encoded KV store is then read with the plan's f32 kernels",
)
class RebindWithoutStorageCheck(ValidityAdapter):
    plan_cls = _NoStorageCheck


# --- PLAN-26, PLAN-24: what a rebind adopts --------------------------------------------


class _KeepsTheOldAllocation(GuardedPlan):
    _previous: frozenset[int] = frozenset()

    def commit(self, cache: kv_cache.KvCache) -> None:
        self._previous = self._previous | {self.key}  # MUTATION: the old key stays accepted
        super().commit(cache)

    def _was_its_own(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        return plan.PlanIdentity.of(m, cache, len(step.token_ids)).key() in self._previous

    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        return self._was_its_own(m, cache, step) or super().is_valid_for(m, cache, step)

    def validity_for(
        self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs
    ) -> plan.Validity:
        return (
            "valid" if self._was_its_own(m, cache, step) else super().validity_for(m, cache, step)
        )


@mutant(
    "rebind-keeps-the-old-allocation-valid",
    breaks=("PLAN-26",),
    half="under",
    plausible="a rebind that 'adds' the new allocation to those the plan accepts, so a "
    "caller still holding the old cache is not broken; two caches then drive one plan",
)
class RebindKeepsTheOldAllocationValid(ValidityAdapter):
    plan_cls = _KeepsTheOldAllocation


class _AdoptsTheStructure(GuardedPlan):
    def commit(self, cache: kv_cache.KvCache) -> None:
        # MUTATION: the incoming cache's whole identity, geometry included
        self._identity = replace(self._identity, geometry=cache.geometry)
        self._structure = self._identity.key(with_alloc=False)
        super().commit(cache)


@mutant(
    "rebind-adopts-the-incoming-structure",
    breaks=("PLAN-24",),
    half="under",
    plausible="'rebind = re-read the key from the new cache' is the shortest code; a plan "
    "built for 2 layers then becomes valid for a 3-layer cache without a rebuild",
)
class RebindAdoptsTheIncomingStructure(ValidityAdapter):
    plan_cls = _AdoptsTheStructure


class _HoldsALiveViewOfTheHooks(GuardedPlan):
    def __init__(self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int = 1) -> None:
        super().__init__(m, cache, step_tokens)
        # MUTATION: the model's own (live) view of its hooks instead of a copy
        self._identity = replace(self._identity, hooks=m.hooks)


@mutant(
    "rebind-rebakes-the-live-hooks",
    breaks=("PLAN-24",),
    half="under",
    plausible="a plan that keeps a reference to the model's hook table (no copy) and "
    "recomputes its key when it adopts an allocation; a hook toggled since the build is "
    "then baked in, and the plan runs without the hook it was built with (the reference "
    "had this bug until a Perl trial found it)",
)
class RebindRebakesTheLiveHooks(ValidityAdapter):
    plan_cls = _HoldsALiveViewOfTheHooks


def _headless(ident: plan.PlanIdentity, *, with_alloc: bool = True) -> int:
    """The reference key with the cache's heads fixed at 1 (plan_key_cache_heads: implied)."""
    g = replace(ident.geometry, n_kv_heads=1, head_dim=1)
    return replace(ident, geometry=g).key(with_alloc=with_alloc)


class _RebindsAcrossHeads(GuardedPlan):
    """Key and structure without the heads, as ``implied`` allows; the rebind checks the
    labels only and adopts whatever heads the incoming cache has."""

    def __init__(self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int = 1) -> None:
        super().__init__(m, cache, step_tokens)
        self.key = _headless(self._identity)
        self._structure = _headless(self._identity, with_alloc=False)

    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        return _headless(plan.PlanIdentity.of(m, cache, len(step.token_ids))) == self.key

    def validity_for(
        self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs
    ) -> plan.Validity:
        now = plan.PlanIdentity.of(m, cache, len(step.token_ids))
        if _headless(now, with_alloc=False) != self._structure:
            return "stale"
        return "valid" if _headless(now) == self.key else "allocation_changed"

    def commit(self, cache: kv_cache.KvCache) -> None:
        super().commit(cache)
        # MUTATION: no head check before adopting: equal labels are taken for equal layout
        self.key = _headless(self._identity)


@mutant(
    "implied-heads-rebind-adopts-other-heads",
    breaks=("PLAN-27",),
    half="under",
    plausible="plan_key_cache_heads: implied read as 'the heads never matter', with a "
    "rebind that compares storage labels only: a plan built on 2 heads of width 8 adopts a "
    "cache of 4 heads of width 4 (the same byte extent) and runs its kernels over storage "
    "laid out for other heads; kvconform's own variant did this until 3.0.0",
)
class ImpliedHeadsRebindAdoptsOtherHeads(ValidityAdapter):
    plan_cls = _RebindsAcrossHeads

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), plan_key_cache_heads="implied")

    def plan_key(self, identity: PlanIdentity) -> int:
        return _headless(plan_identity(identity))


class _GrowsKeyingTheOldCapacity(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        end = len(self) + k.shape[1]
        reserved = self._layers[0].k.shape[0]
        if end > reserved:  # growth: new, larger storage and a new id (ALLOC-16) ...
            bigger = replace(self.geometry, max_seq_len=max(end, 2 * reserved))
            self._layers = moved_storage(self, bigger)
            self._alloc_id = KvAllocId.mint()
            # MUTATION: ... but the geometry the key reads keeps the capacity it was made with
        for index, layer in enumerate(self._layers):
            layer.k[len(self) : end] = k[index]
            layer.v[len(self) : end] = v[index]
        self._length = end


@mutant(
    "grown-cache-keyed-with-its-first-capacity",
    breaks=("PLAN-19", "PLAN-15"),
    half="under",
    plausible="the allocator grows the storage and mints, but the key reads the capacity "
    "the cache was declared with; a plan built before the growth is then only "
    "allocation_changed, and a rebind adopts a plan compiled for the smaller capacity",
)
class GrownCacheKeyedWithItsFirstCapacity(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), append_past_capacity="grow")

    def cache_new(self, geometry: Geometry) -> kv_cache.KvCache:
        cache = super().cache_new(geometry)
        cache.__class__ = _GrowsKeyingTheOldCapacity
        return cache

    def cache_new_placed(
        self, geometry: Geometry, residency: str | None, layer_storage: Sequence[str]
    ) -> kv_cache.KvCache:
        cache = super().cache_new_placed(geometry, residency, layer_storage)
        cache.__class__ = _GrowsKeyingTheOldCapacity
        return cache


# --- PLAN-25: the window width in the key ----------------------------------------------


def _declaring_structure(info: AdapterInfo) -> AdapterInfo:
    return replace(info, options={**info.options, "plan_key_window": "structure"})


@mutant(
    "plan-key-window-declared-structure-still-keyed",
    breaks=("PLAN-25", "PLAN-6"),
    half="over",
    plausible="the engine moved to a per-step mask and its declaration was updated, but "
    "the key still mixes every structural parameter; each window change rebuilds the plan",
)
class PlanKeyWindowDeclaredStructureStillKeyed(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return _declaring_structure(super().describe())  # MUTATION: the key is unchanged


def _without(ident: plan.PlanIdentity, *names: str) -> plan.PlanIdentity:
    return replace(ident, params={k: v for k, v in ident.params.items() if k not in names})


@mutant(
    "plan-key-window-structure-drops-the-mask-structure",
    breaks=("PLAN-25",),
    half="under",
    plausible="'the mask is bound every step' taken to cover the whole mask description; "
    "a plan with windowed layers is then reused for a model whose layers are all dense",
)
class PlanKeyWindowStructureDropsTheMaskStructure(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        # MUTATION: the mask's structure goes with the width
        return self.composition.key(_without(ident, "sliding_window", "mask_structure"))

    def describe(self) -> AdapterInfo:
        return _declaring_structure(super().describe())


@mutant(
    "plan-key-window-keyed-drops-the-width",
    breaks=("PLAN-25", "PLAN-16"),
    half="under",
    plausible="the window 'only affects the mask', so it is left out of the key while the "
    "default declaration (keyed) stays; an engine that bakes the width then reuses a plan "
    "built for another window",
)
class PlanKeyWindowKeyedDropsTheWidth(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        return self.composition.key(_without(ident, "sliding_window"))  # MUTATION
