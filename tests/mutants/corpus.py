"""Mutants, one misreading each. See ``__init__.py`` for the fields."""

from __future__ import annotations

from kvconform.conformance.adapters.reference import ReferenceAdapter
from kvconform.reference import identity, kv_cache, model, plan

from . import mutant

# --- identity -----------------------------------------------------------------


class _AddressModel(model.Model):
    """A model whose identity is its address, as the pointer scheme had it."""

    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        self.instance_id = identity.ModelInstanceId(id(self))

    def reload(self) -> model.Model:
        return _AddressModel(self.config)


@mutant(
    "model-id-from-address",
    breaks=("ID-3", "ID-4", "PLAN-14"),
    half="under",
    plausible="object identity looks like instance identity; the seed's own first design "
    "folded weight addresses and was unsound once a plan outlived its model",
)
class ModelIdFromAddress(ReferenceAdapter):
    def model_new(self, spec):  # type: ignore[no-untyped-def]
        from kvconform.conformance.adapters.reference import model_config

        return _AddressModel(model_config(spec))


class _RemintOnTruncate(kv_cache.KvCache):
    def truncate_to(self, length: int) -> None:
        super().truncate_to(length)
        self._alloc_id = identity.KvAllocId.mint()


@mutant(
    "truncate-remints",
    breaks=("ALLOC-5", "PLAN-7"),
    half="over",
    plausible="'anything that changes the cache is a new allocation' is the cautious reading; "
    "it forfeits plan reuse on every rejected speculative draft",
)
class TruncateRemints(ReferenceAdapter):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        from kvconform.conformance.adapters.reference import cache_geometry

        return _RemintOnTruncate(cache_geometry(geometry))


__all__ = ["ModelIdFromAddress", "TruncateRemints", "plan"]
