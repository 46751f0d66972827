"""Plan validity answered the other safe ways the specification leaves open.

- A rebind checks the structure first: a cache of another depth or capacity than the
  one the plan baked is refused before any slot is looked at, with a ``failure``
  answer (an exception in process), since no error kind names a structural refusal
  (PLAN-24, CONF-9).
- Clearing a cache or replacing a layer forgets the cache's residency, as upstream
  does, so a later rebind to it is ``residency_unknown`` (protocol.md, Values).
"""

from __future__ import annotations

from dataclasses import replace

from kvconform_reference import kv_cache, plan

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo, Fault

from . import variant


@variant(
    "rebind-structure-first",
    "a rebind refuses another structure with a failure before any slot check (PLAN-24, "
    "CONF-9), and clear or a layer replacement forgets the residency (upstream)",
)
class RebindStructureFirst(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="rebind-structure-first")

    def session_new(self, m, cache, step_tokens):  # type: ignore[no-untyped-def]
        made = super().session_new(m, cache, step_tokens)
        made._baked_geometry = cache.geometry  # type: ignore[attr-defined]
        return made

    def session_rebind(self, session: plan.DecodePlan, cache: kv_cache.KvCache) -> Fault | None:
        baked = session._baked_geometry  # type: ignore[attr-defined]
        g = cache.geometry
        if (g.n_layers, g.max_seq_len) != (baked.n_layers, baked.max_seq_len):
            raise RuntimeError("the cache has another structure: rebuild the plan")
        return super().session_rebind(session, cache)

    def cache_clear(self, cache: kv_cache.KvCache) -> None:
        super().cache_clear(cache)
        cache.residency = None

    def cache_replace_layer(self, cache, layer, n_kv_heads, head_dim, max_seq_len):  # type: ignore[no-untyped-def]
        fault = super().cache_replace_layer(cache, layer, n_kv_heads, head_dim, max_seq_len)
        if fault is None:
            cache.residency = None
        return fault
