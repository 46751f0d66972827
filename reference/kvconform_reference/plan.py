"""A held decode plan and its validity predicate (spec/plan.md).

The rule is *baked, not bound*. A plan bakes its op structure and its weight
constants, so everything those depend on is in its key (PLAN-15); it rebinds
per-step data from the current call, so none of that is (PLAN-6).

Key composition (PLAN-3 leaves the order to the implementation; this is the
reference's)::

    key = str("kvconform.plan")
          str(family)
          u64(#params)  { str(name) str(type) value }   sorted by name
          u64(#hooks)   { str(name) present(on) }       sorted by name
          instance(model instance id)
          str("alloc") u64(allocation id)
          u64(n_layers) u64(n_kv_heads) u64(head_dim) u64(max_seq_len) str(dtype)
          u64(step_tokens)

Every component is length-delimited or fixed-width and every variable-length
list is preceded by its count, so the encoding is injective (PLAN-16).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Literal

from kvconform_reference.errors import (
    MissingSlot,
    ResidencyDiffers,
    ResidencyUnknown,
    StorageDiffers,
)
from kvconform_reference.hasher import KeyHasher
from kvconform_reference.kv_cache import CacheGeometry, KvCache
from kvconform_reference.model import Model, Param


@dataclass(frozen=True)
class PlanIdentity:
    """Everything a plan's validity key is computed from (PLAN-15)."""

    family: str
    params: Mapping[str, Param]
    hooks: Mapping[str, bool]
    instance: int
    alloc: int
    geometry: CacheGeometry
    step_tokens: int

    @classmethod
    def of(cls, model: Model, cache: KvCache, step_tokens: int) -> PlanIdentity:
        """The identity of ``model`` and ``cache`` as they are now: a copy, never a view.

        ``model.hooks`` is a live view of hooks that ``set_hook`` toggles; a plan that
        kept the view would bake a toggled hook into its key the next time it computes
        the key, which a rebind does (PLAN-26), reviving a stale plan (PLAN-24).
        """
        return cls(
            family=model.config.family,
            params=model.config.params,
            hooks=MappingProxyType(dict(model.hooks)),
            instance=model.instance_id.value,
            alloc=cache.alloc_id.value,
            geometry=cache.geometry,
            step_tokens=step_tokens,
        )

    def key(self, *, with_alloc: bool = True) -> int:
        """The validity key: FNV-1a 64 over the canonical encoding (PLAN-15, PLAN-3).

        ``with_alloc=False`` leaves the allocation id out: the *structure* a plan
        is judged ``stale`` or not on (PLAN-19).
        """
        h = KeyHasher().mix_str("kvconform.plan").mix_str(self.family)
        h.mix_u64(len(self.params))
        for name in sorted(self.params):
            _mix_param(h, name, self.params[name])
        h.mix_u64(len(self.hooks))
        for name in sorted(self.hooks):
            h.mix_str(name).mix_present(self.hooks[name])
        h.mix_instance(self.instance)
        if with_alloc:
            h.mix_str("alloc").mix_u64(self.alloc)
        g = self.geometry
        h.mix_u64(g.n_layers).mix_u64(g.n_kv_heads).mix_u64(g.head_dim)
        h.mix_u64(g.max_seq_len).mix_str(g.dtype)
        h.mix_u64(self.step_tokens)
        return h.finish()


def _mix_param(h: KeyHasher, name: str, value: Param) -> None:
    h.mix_str(name)
    if isinstance(value, str):
        h.mix_str("str").mix_str(value)
    elif isinstance(value, float):
        h.mix_str("f64").mix_f64(value)  # by bit pattern: -0.0 != +0.0 (HASH-6)
    else:
        h.mix_str("u64").mix_u64(value)


@dataclass(frozen=True)
class RopeSpec:
    """What the per-step RoPE tables are computed from: base and scaling factor."""

    theta: float = 10000.0
    scaling: float | None = None


@dataclass(frozen=True)
class StepInputs:
    """Per-step data a plan rebinds every call; none of it is keyed (PLAN-6)."""

    token_ids: tuple[int, ...] = (0,)
    write_offset: int = 0
    rope: RopeSpec = field(default_factory=RopeSpec)
    mask: tuple[int, ...] = ()


#: A plan's outcome for a model, a cache and a step (PLAN-19).
Validity = Literal["valid", "allocation_changed", "stale"]


class DecodePlan:
    """A plan built and optimized for one model, one KV allocation and one step width.

    It holds its identity (plain numbers and strings), the residency and the
    per-layer storage it baked, never the model or the cache themselves, so a
    plan can outlive both (PLAN-14).
    """

    def __init__(self, model: Model, cache: KvCache, step_tokens: int = 1) -> None:
        if step_tokens < 1:
            raise ValueError("a step has at least one token")
        self.step_tokens = step_tokens
        self._identity = PlanIdentity.of(model, cache, step_tokens)
        self.key = self._identity.key()  # PLAN-1
        self._structure = self._identity.key(with_alloc=False)
        #: What the plan baked about the storage (PLAN-21): where it lives, and per
        #: layer the storage of the K slot and of the V slot.
        self._residency = cache.residency
        self._slots = tuple((label, label) for label in cache.layer_storage)

    def is_valid_for(self, model: Model, cache: KvCache, step: StepInputs) -> bool:
        """Whether this plan may run ``step`` for ``model`` over ``cache`` (PLAN-4, PLAN-20).

        Only the number of tokens in the step is consulted, never their values,
        the RoPE tables, the mask or the write offset (PLAN-6); the cache's
        current length is not consulted either (PLAN-7). No side effects (PLAN-13).
        """
        return PlanIdentity.of(model, cache, len(step.token_ids)).key() == self.key

    def validity_for(self, model: Model, cache: KvCache, step: StepInputs) -> Validity:
        """One of three outcomes (PLAN-19): only the allocation moved, or more."""
        current = PlanIdentity.of(model, cache, len(step.token_ids))
        if current.key(with_alloc=False) != self._structure:
            return "stale"
        return "valid" if current.key() == self.key else "allocation_changed"

    def rebind(self, cache: KvCache) -> None:
        """Adopt ``cache``'s allocation without rebuilding, or refuse and change nothing.

        The checks run in the order of PLAN-21; only when all pass is anything
        changed (PLAN-22), and then the plan is valid for ``cache`` and no longer
        for its previous allocation (PLAN-26). Structure is not touched, so a plan
        stale for ``cache`` stays stale (PLAN-24).
        """
        if cache.residency is None or self._residency is None:
            raise ResidencyUnknown()
        if cache.residency != self._residency:
            raise ResidencyDiffers(baked=self._residency, incoming=cache.residency)
        incoming = cache.layer_storage
        for layer, baked_slots in enumerate(self._slots):
            for which, baked in zip(("k", "v"), baked_slots, strict=True):
                if layer >= len(incoming):
                    raise MissingSlot(layer_index=layer, which=which)
                if incoming[layer] != baked:
                    raise StorageDiffers(
                        layer_index=layer, which=which, baked=baked, incoming=incoming[layer]
                    )
        # Every slot passed: commit all at once (PLAN-22, PLAN-26).
        self._identity = replace(self._identity, alloc=cache.alloc_id.value)
        self.key = self._identity.key()
        self._slots = tuple((label, label) for label in incoming[: len(self._slots)])
