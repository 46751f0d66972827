"""Another composition of the plan key (PLAN-3 leaves order and framing free).

Differs from the reference only in the order and framing of the key's
components, which PLAN-3 leaves to the implementation. The reference writes
marker, family, params, hooks, ids, geometry, step width, with counts before
lists; this one writes them back to front, with counts *after* each list and
each parameter's value before its type and name::

    u64(step_tokens)
    str(dtype) u64(max_seq_len) u64(head_dim) u64(n_kv_heads) u64(n_layers)
    u64(alloc) instance(instance)
    { present(on) str(name) }            hooks, names in descending order
    u64(#hooks)
    { value str(type) str(name) }        params, names in descending order
    u64(#params)
    str(family) str("kvconform.plan/back-to-front")

It is injective (PLAN-16): read from the end, every component is found at a
known place with a known type -- strings carry their count after their bytes,
so the whole key parses backwards: each list's count is met before the list,
and each parameter's type before its value.
"""

from __future__ import annotations

from dataclasses import replace

from kvconform_reference import kv_cache, model, plan
from kvconform_reference.hasher import KeyHasher

from kvconform.adapters.reference import ReferenceAdapter, plan_identity
from kvconform.values import AdapterInfo, PlanIdentity, StepInputs

from . import variant


def key(ident: plan.PlanIdentity) -> int:
    h = KeyHasher().mix_u64(ident.step_tokens)
    g = ident.geometry
    h.mix_str(g.dtype).mix_u64(g.max_seq_len).mix_u64(g.head_dim)
    h.mix_u64(g.n_kv_heads).mix_u64(g.n_layers)
    h.mix_u64(ident.alloc).mix_instance(ident.instance)
    for name in sorted(ident.hooks, reverse=True):
        h.mix_present(ident.hooks[name]).mix_str(name)
    h.mix_u64(len(ident.hooks))
    for name in sorted(ident.params, reverse=True):
        value = ident.params[name]
        if isinstance(value, str):
            h.mix_str(value).mix_str("str")
        elif isinstance(value, float):
            h.mix_f64(value).mix_str("f64")
        else:
            h.mix_u64(value).mix_str("u64")
        h.mix_str(name)
    h.mix_u64(len(ident.params))
    return h.mix_str(ident.family).mix_str("kvconform.plan/back-to-front").finish()


class BackToFrontPlan:
    """A held plan keyed by :func:`key`; it keeps no reference to model or cache."""

    def __init__(self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int) -> None:
        self.key = key(plan.PlanIdentity.of(m, cache, step_tokens))

    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, tokens: int) -> bool:
        return key(plan.PlanIdentity.of(m, cache, tokens)) == self.key


@variant(
    "back-to-front-composition",
    "the plan key composed in another order and framing (counts after lists, values "
    "before names, marker last), as PLAN-3 allows",
)
class BackToFrontComposition(ReferenceAdapter):
    #: Its plans are its own, with a boolean validity only (CONF-10).
    classes = ReferenceAdapter.classes - {"plan_validity"}

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="variant-back-to-front")

    def plan_key(self, identity: PlanIdentity) -> int:
        return key(plan_identity(identity))

    def session_new(  # type: ignore[override]
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> BackToFrontPlan:
        return BackToFrontPlan(m, cache, step_tokens)

    def session_valid(  # type: ignore[override]
        self, session: BackToFrontPlan, m: model.Model, cache: kv_cache.KvCache, step: StepInputs
    ) -> bool:
        return session.is_valid_for(m, cache, len(step.token_ids))
