"""A KV cache in one numpy block, and one id counter shared by models and caches.

Differs from the reference only where the specification leaves room:

- storage: one array of shape ``(n_layers, 2, max_seq_len, n_kv_heads, head_dim)``
  instead of per-layer K and V arrays. Replacing a layer builds a new block
  (new storage, so a new id: ALLOC-4); appending and rewinding write and move
  inside the block;
- ids: models and caches draw from *one* counter that starts at 5 * 10**9
  and steps by 3 (ID-8, ALLOC-1: strictly increasing in minting order within
  each kind, never reissued);
- errors: built directly as faults, worded its own way (ERR-5).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace

import numpy as np
from kvconform_reference import kv_cache, model, plan
from kvconform_reference.identity import KvAllocId, ModelInstanceId

from kvconform.adapters.reference import ReferenceAdapter, model_config
from kvconform.values import AdapterInfo, Fault, Geometry, ModelSpec

from . import variant

_NUMPY = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


class SharedCounter:
    """One never-recycling counter for every kind of id, safe across threads (ID-5)."""

    def __init__(self, start: int, step: int) -> None:
        self._ids = itertools.count(start, step)
        self._lock = threading.Lock()

    def mint(self) -> int:
        with self._lock:
            return next(self._ids)


IDS = SharedCounter(start=5 * 10**9, step=3)


class CountedModel(model.Model):
    """The reference model, its instance id drawn from :data:`IDS`."""

    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        self.instance_id = ModelInstanceId(IDS.mint())

    def reload(self) -> model.Model:
        return CountedModel(self.config)


class BlockCache:
    """Every layer's K and V in one block; a length; an allocation id."""

    #: Where the storage lives and what each layer's storage is (PLAN-21); this
    #: variant claims no rebind, but a plan bakes both when it is built.
    residency: str | None = "host"

    @property
    def layer_storage(self) -> tuple[str, ...]:
        return ("host-f32",) * self.geometry.n_layers

    def __init__(self, geometry: kv_cache.CacheGeometry) -> None:
        self.geometry = geometry
        self._block = self._allocate(geometry.max_seq_len)
        self._length = 0
        self._alloc = IDS.mint()

    def _allocate(self, capacity: int) -> np.ndarray:
        g = self.geometry
        shape = (g.n_layers, 2, capacity, g.n_kv_heads, g.head_dim)
        return np.zeros(shape, dtype=_NUMPY[g.dtype])

    @property
    def alloc_id(self) -> KvAllocId:
        return KvAllocId(self._alloc)

    def __len__(self) -> int:
        return self._length

    def append(self, tokens: int) -> Fault | None:
        end = self._length + tokens
        capacity = self.geometry.max_seq_len
        if end > capacity:
            return Fault(
                kind="capacity_exceeded",
                field="max_seq_len",
                values={"capacity": capacity, "requested": end},
                message=f"cannot grow to {end} positions: max_seq_len is {capacity}",
            )
        self._block[:, :, self._length : end] = self._length + 1
        self._length = end
        return None

    def truncate(self, length: int) -> None:
        if length < 0:
            raise ValueError("a length is never negative")
        if length < self._length:
            self._length = length

    def clear(self) -> None:
        self._block = self._allocate(self.geometry.max_seq_len)
        self._length = 0
        self._alloc = IDS.mint()

    def replace_layer(self, layer: int, shape: dict[str, int]) -> Fault | None:
        g = self.geometry
        if not 0 <= layer < g.n_layers:
            return Fault(
                kind="layer_out_of_range",
                layer=layer,
                values={"n_layers": g.n_layers},
                message=f"no layer {layer} here (n_layers = {g.n_layers})",
            )
        for name in ("n_kv_heads", "head_dim", "max_seq_len"):
            mine, theirs = getattr(g, name), shape[name]
            if mine != theirs:
                return Fault(
                    kind="layer_shape_mismatch",
                    field=name,
                    layer=layer,
                    values={"expected": mine, "found": theirs},
                    message=f"layer {layer}: the replacement's {name} {theirs} is not {mine}",
                )
        fresh = self._block.copy()  # new storage for the whole block, a new id
        fresh[layer] = 0
        self._block = fresh
        self._alloc = IDS.mint()
        return None


@variant(
    "block-storage-shared-counter",
    "the cache is one numpy block; models and caches share one id counter starting at "
    "5e9 and stepping by 3; faults built directly with other wording",
)
class BlockStorage(ReferenceAdapter):
    #: Its plans are its own, with a boolean validity only (CONF-10).
    classes = ReferenceAdapter.classes - {"plan_validity"}

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="variant-block-storage")

    def model_new(self, spec: ModelSpec) -> model.Model:
        return CountedModel(model_config(spec))

    def model_reload(self, m: model.Model) -> model.Model:
        return m.reload()

    def cache_new(self, geometry: Geometry) -> BlockCache:
        return BlockCache(
            kv_cache.CacheGeometry(
                geometry.n_layers,
                geometry.n_kv_heads,
                geometry.head_dim,
                geometry.max_seq_len,
                geometry.dtype,
            )
        )

    def cache_append(self, cache: BlockCache, tokens: int) -> Fault | None:  # type: ignore[override]
        return cache.append(tokens)

    def cache_truncate(self, cache: BlockCache, length: int) -> None:  # type: ignore[override]
        cache.truncate(length)

    def cache_clear(self, cache: BlockCache) -> None:  # type: ignore[override]
        cache.clear()

    def cache_replace_layer(  # type: ignore[override]
        self,
        cache: BlockCache,
        layer: int,
        n_kv_heads: int | None,
        head_dim: int | None,
        max_seq_len: int | None,
    ) -> Fault | None:
        g = cache.geometry
        shape = {
            "n_kv_heads": g.n_kv_heads if n_kv_heads is None else n_kv_heads,
            "head_dim": g.head_dim if head_dim is None else head_dim,
            "max_seq_len": g.max_seq_len if max_seq_len is None else max_seq_len,
        }
        return cache.replace_layer(layer, shape)

    def cache_alloc_id(self, cache: BlockCache) -> int:  # type: ignore[override]
        return cache.alloc_id.value

    def cache_len(self, cache: BlockCache) -> int:  # type: ignore[override]
        return len(cache)

    def session_new(  # type: ignore[override]
        self, m: model.Model, cache: BlockCache, step_tokens: int
    ) -> plan.DecodePlan:
        return plan.DecodePlan(m, cache, step_tokens)  # type: ignore[arg-type]
