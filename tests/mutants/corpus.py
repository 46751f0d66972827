"""The first two mutants (``tests/test_teeth.py`` imports them by these class names).

The rest of the corpus lives in one module per requirement area (``hash.py``,
``identity.py``, ``alloc.py``, ``plan.py``, ``signature.py``, ``verify.py``,
``errors.py``); see ``__init__.py`` for the fields.
"""

from __future__ import annotations

from kvconform_reference import identity, kv_cache, model

from . import mutant
from ._kit import CacheAdapter, ModelAdapter

# --- identity -----------------------------------------------------------------


class _AddressModel(model.Model):
    """A model whose identity is its address, as the pointer scheme had it."""

    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        self.instance_id = identity.ModelInstanceId(id(self))  # MUTATION

    def reload(self) -> model.Model:
        return _AddressModel(self.config)


@mutant(
    "model-id-from-address",
    breaks=("ID-3", "ID-4", "PLAN-14"),
    half="under",
    plausible="object identity looks like instance identity; the seed's own first design "
    "folded weight addresses and was unsound once a plan outlived its model",
)
class ModelIdFromAddress(ModelAdapter):
    model_cls = _AddressModel


class _RemintOnTruncate(kv_cache.KvCache):
    def truncate_to(self, length: int) -> None:
        super().truncate_to(length)
        self._alloc_id = identity.KvAllocId.mint()  # MUTATION


@mutant(
    "truncate-remints",
    breaks=("ALLOC-5", "PLAN-7"),
    half="over",
    plausible="'anything that changes the cache is a new allocation' is the cautious reading; "
    "it forfeits plan reuse on every rejected speculative draft",
)
class TruncateRemints(CacheAdapter):
    cache_cls = _RemintOnTruncate
