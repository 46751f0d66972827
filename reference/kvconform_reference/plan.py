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
from dataclasses import dataclass, field

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
        return cls(
            family=model.config.family,
            params=model.config.params,
            hooks=model.hooks,
            instance=model.instance_id.value,
            alloc=cache.alloc_id.value,
            geometry=cache.geometry,
            step_tokens=step_tokens,
        )

    def key(self) -> int:
        """The validity key: FNV-1a 64 over the canonical encoding (PLAN-15, PLAN-3)."""
        h = KeyHasher().mix_str("kvconform.plan").mix_str(self.family)
        h.mix_u64(len(self.params))
        for name in sorted(self.params):
            _mix_param(h, name, self.params[name])
        h.mix_u64(len(self.hooks))
        for name in sorted(self.hooks):
            h.mix_str(name).mix_present(self.hooks[name])
        h.mix_instance(self.instance)
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


class DecodePlan:
    """A plan built and optimized for one model, one KV allocation and one step width.

    It holds only its key: it does not keep the model or the cache alive, so a
    plan can outlive both (PLAN-14).
    """

    def __init__(self, model: Model, cache: KvCache, step_tokens: int = 1) -> None:
        if step_tokens < 1:
            raise ValueError("a step has at least one token")
        self.step_tokens = step_tokens
        self.key = PlanIdentity.of(model, cache, step_tokens).key()  # PLAN-1

    def is_valid_for(self, model: Model, cache: KvCache, step: StepInputs) -> bool:
        """Whether this plan may run ``step`` for ``model`` over ``cache`` (PLAN-4).

        Only the number of tokens in the step is consulted, never their values,
        the RoPE tables, the mask or the write offset (PLAN-6); the cache's
        current length is not consulted either (PLAN-7). No side effects (PLAN-13).
        """
        return PlanIdentity.of(model, cache, len(step.token_ids)).key() == self.key
