"""The key-side rules of the class ``plan_validity``: placed caches and the three-valued
validity of a held plan (PLAN-19, PLAN-21).
"""

from __future__ import annotations

from kvconform.differential.strategies.plan import PlanRules
from kvconform.differential.strategies.source import pick
from kvconform.differential.strategies.state import _Cache
from kvconform.differential.strategies.values import step_inputs
from kvconform.protocol import operations as ops

_RESIDENCIES = (None, "gpu0", "gpu1", "host")

_STORAGE_LABELS = ("kv-f32", "kv-f16", "kv-f32-paged")


class ValidityRules(PlanRules):
    """Placed caches, and the outcome of a held plan's validity."""

    def placed_cache(self) -> None:
        """``cache_new_placed``: a cache with a residency (or none) and a storage label per
        layer, drawn from small sets so that equal placements occur (PLAN-19, PLAN-21)."""
        g = self.geometry()
        residency = pick(self.src, _RESIDENCIES)
        storage = tuple(pick(self.src, _STORAGE_LABELS) for _ in range(g.n_layers))
        name = self.fresh("c")
        self.caches[name] = _Cache(g)
        self.ops.append(
            ops.CacheNewPlaced(handle=name, geometry=g, residency=residency, layer_storage=storage)
        )
        self.read(name)

    def validity(self) -> None:
        """``session_validity``: a held plan judged for a model, a cache and a step, mostly
        its own (PLAN-19: ``valid``, ``allocation_changed`` or ``stale``)."""
        if not (self.sessions and self.models and self.caches):
            return
        name = self.pick(self.sessions)
        session = self.sessions[name]
        own = self.src.integer(0, 3) < 3
        model = session.model if own and session.model in self.models else None
        cache = session.cache if own and session.cache in self.caches else None
        step = step_inputs(self.src, session.step_tokens)
        model = model or self.pick(self.models)
        cache = cache or self.pick(self.caches)
        if self.validity_is_policy(name, cache):
            self.ops.append(ops.SessionValid(session=name, model=model, cache=cache, step=step))
            return
        self.ops.append(ops.SessionValidity(session=name, model=model, cache=cache, step=step))
