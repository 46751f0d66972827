"""ALLOC mutants: a KV cache whose operations mint, keep or refuse in the wrong place.

Each is a subclass of the reference ``KvCache`` overriding one operation
(``truncate-remints`` lives in ``corpus.py``, where it started).
"""

from __future__ import annotations

import numpy as np
from kvconform_reference import kv_cache
from kvconform_reference.errors import CapacityExceeded, LayerOutOfRange, LayerShapeMismatch
from kvconform_reference.identity import KvAllocId

from . import mutant
from ._kit import CacheAdapter

# --- operations that must not mint: ALLOC-5 .. ALLOC-7, ALLOC-12 --------------


class _AppendMints(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        super().append(k, v)
        self._alloc_id = KvAllocId.mint()  # MUTATION: written storage is a new allocation


@mutant(
    "append-mints",
    breaks=("ALLOC-7", "PLAN-7", "PLAN-10"),
    half="over",
    plausible="'the buffers' contents changed, so the allocation changed' -- a version "
    "counter bumped on write, mistaken for the allocation id; every decoded token then "
    "rebuilds the plan",
)
class AppendMints(CacheAdapter):
    cache_cls = _AppendMints


class _ReadMints(kv_cache.KvCache):
    @property
    def alloc_id(self) -> KvAllocId:
        self._alloc_id = KvAllocId.mint()  # MUTATION: the accessor draws the next id
        return self._alloc_id


@mutant(
    "alloc-id-read-mints",
    breaks=("ALLOC-12", "PLAN-13"),
    half="over",
    plausible="the seed's KvAllocId::next() sits right beside get(); an accessor that "
    "calls the minting one makes every validity check invalidate the plan for the next",
)
class AllocIdReadMints(CacheAdapter):
    cache_cls = _ReadMints


class _TruncatePastGrows(kv_cache.KvCache):
    def truncate_to(self, length: int) -> None:
        if length < 0:
            raise ValueError("length must not be negative")
        self._length = min(length, self.geometry.max_seq_len)  # MUTATION: set, not min


@mutant(
    "truncate-past-length-grows",
    breaks=("ALLOC-15",),
    half="contract",
    plausible="'truncate_to(n) sets the length to n' is the literal reading of the name; "
    "past the end it presents never-written positions as if they held KV",
)
class TruncatePastLengthGrows(CacheAdapter):
    cache_cls = _TruncatePastGrows


class _TruncateToZeroRemints(kv_cache.KvCache):
    def truncate_to(self, length: int) -> None:
        super().truncate_to(length)
        if length == 0:
            self._alloc_id = KvAllocId.mint()  # MUTATION: a full rewind is a "reset"


@mutant(
    "truncate-to-zero-remints",
    breaks=("ALLOC-5", "PLAN-7"),
    half="over",
    plausible="rewinding to 0 looks like starting a new conversation, so it is treated "
    "as a reset; the storage is untouched, and the plan on it is still right",
)
class TruncateToZeroRemints(CacheAdapter):
    cache_cls = _TruncateToZeroRemints


# --- operations that must mint: ALLOC-18, ALLOC-4 ------------------------------


class _ClearOfEmptyIsNoop(kv_cache.KvCache):
    def clear(self) -> None:
        if len(self) == 0:
            return  # MUTATION: "nothing to clear"
        super().clear()


@mutant(
    "clear-of-empty-cache-is-a-noop",
    breaks=("ALLOC-18", "ALLOC-13"),
    half="under",
    plausible="an early return when there is nothing to clear looks like a free "
    "optimization; but clear() is defined by releasing the storage, not by the length",
)
class ClearOfEmptyCacheIsANoop(CacheAdapter):
    cache_cls = _ClearOfEmptyIsNoop


class _ClearKeepsId(kv_cache.KvCache):
    def clear(self) -> None:
        self._layers = [kv_cache.KvLayer.allocate(self.geometry) for _ in self._layers]
        self._length = 0  # MUTATION: no new id -- "same cache, emptied"


@mutant(
    "clear-keeps-alloc-id",
    breaks=("ALLOC-18", "PLAN-10"),
    half="under",
    plausible="clear() reads as emptying the same cache, like a list's clear(); but it "
    "releases the buffers a held plan captured (ApxInf PR 89)",
)
class ClearKeepsAllocId(CacheAdapter):
    cache_cls = _ClearKeepsId


class _ClearKeepsLength(kv_cache.KvCache):
    def clear(self) -> None:
        self._layers = [kv_cache.KvLayer.allocate(self.geometry) for _ in self._layers]
        self._alloc_id = KvAllocId.mint()  # MUTATION: the length is left as it was


@mutant(
    "clear-keeps-length",
    breaks=("ALLOC-18",),
    half="contract",
    plausible="the seed documents clear() as 'drops every layer'; a port that swaps the "
    "storage and mints but forgets cached_len leaves a length over fresh zeros",
)
class ClearKeepsLength(CacheAdapter):
    cache_cls = _ClearKeepsLength


class _ReplaceKeepsId(kv_cache.KvCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        if not 0 <= index < self.geometry.n_layers:
            raise LayerOutOfRange(layer_index=index, n_layers=self.geometry.n_layers)
        current = self._layers[index]
        for (name, expected), (_, found) in zip(
            current.shape_fields(), layer.shape_fields(), strict=True
        ):
            if expected != found:
                raise LayerShapeMismatch(
                    layer_index=index, field=name, expected=expected, found=found
                )
        self._layers[index] = layer  # MUTATION: no new id -- "one layer is not the cache"


@mutant(
    "replace-layer-keeps-alloc-id",
    breaks=("ALLOC-4", "PLAN-10"),
    half="under",
    plausible="replacing one layer of many looks too small to be a new allocation; the "
    "held plan keeps reading the buffer it captured (vLLM PR 53197)",
)
class ReplaceLayerKeepsAllocId(CacheAdapter):
    cache_cls = _ReplaceKeepsId


class _ReplaceResetsLength(kv_cache.KvCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        super().set_layer(index, layer)
        self._length = 0  # MUTATION: a fresh layer holds nothing


@mutant(
    "replace-layer-resets-length",
    breaks=("ALLOC-11",),
    half="contract",
    plausible="new storage holds no positions yet, so the length 'should' go to 0; but "
    "the typical replacement restores a layer at the same positions",
)
class ReplaceLayerResetsLength(CacheAdapter):
    cache_cls = _ReplaceResetsLength


# --- refusals: ALLOC-16 .. ALLOC-17, ALLOC-13 ----------------------------------


class _ShapeOrder(kv_cache.KvCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        if not 0 <= index < self.geometry.n_layers:
            raise LayerOutOfRange(layer_index=index, n_layers=self.geometry.n_layers)
        current = self._layers[index]
        # MUTATION: the fields in storage-shape order (max_seq_len, n_kv_heads, head_dim)
        names = ("max_seq_len", "n_kv_heads", "head_dim")
        for name, expected, found in zip(names, current.k.shape, layer.k.shape, strict=True):
            if expected != found:
                raise LayerShapeMismatch(
                    layer_index=index, field=name, expected=expected, found=found
                )
        if layer.k.dtype != current.k.dtype or layer.v.shape != layer.k.shape:
            raise ValueError("replacement storage must have the cache's element type")
        self._layers[index] = layer
        self._alloc_id = KvAllocId.mint()


@mutant(
    "replace-layer-shape-check-in-storage-order",
    breaks=("ALLOC-17",),
    half="contract",
    plausible="zip(current.k.shape, new.k.shape) compares in the buffer's own dimension "
    "order, capacity first, which is not the order ALLOC-17 fixes",
)
class ReplaceLayerShapeCheckInStorageOrder(CacheAdapter):
    cache_cls = _ShapeOrder


class _IndexOffByOne(kv_cache.KvCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        if not 0 <= index <= self.geometry.n_layers:  # MUTATION: <= n_layers
            raise LayerOutOfRange(layer_index=index, n_layers=self.geometry.n_layers)
        if index < len(self._layers):
            current = self._layers[index]
            for (name, expected), (_, found) in zip(
                current.shape_fields(), layer.shape_fields(), strict=True
            ):
                if expected != found:
                    raise LayerShapeMismatch(
                        layer_index=index, field=name, expected=expected, found=found
                    )
            self._layers[index] = layer
        else:
            self._layers.append(layer)  # index n_layers: one past the end
        self._alloc_id = KvAllocId.mint()


@mutant(
    "replace-layer-index-off-by-one",
    breaks=("ALLOC-9", "ALLOC-13"),
    half="contract",
    plausible="a bounds check written with <= against the count lets index n_layers "
    "through, and the 'replacement' appends a layer the geometry does not have",
)
class ReplaceLayerIndexOffByOne(CacheAdapter):
    cache_cls = _IndexOffByOne


class _RefusalMints(kv_cache.KvCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        self._alloc_id = KvAllocId.mint()  # MUTATION: mint first, then validate
        super().set_layer(index, layer)


@mutant(
    "refused-replacement-mints",
    breaks=("ALLOC-9", "ALLOC-17", "ALLOC-13"),
    half="over",
    plausible="minting at the top of the method 'because a replacement is coming' is the "
    "easy order; a refused replacement then invalidates every held plan for nothing",
)
class RefusedReplacementMints(CacheAdapter):
    cache_cls = _RefusalMints


def _write(cache: kv_cache.KvCache, k: np.ndarray, v: np.ndarray, start: int, end: int) -> None:
    for index, layer in enumerate(cache._layers):
        layer.k[start:end] = k[index]
        layer.v[start:end] = v[index]


class _CapacityOffByOne(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        g = self.geometry
        end = self._length + k.shape[1]
        if end >= g.max_seq_len:  # MUTATION: >= refuses filling the cache exactly
            raise CapacityExceeded(capacity=g.max_seq_len, requested=end)
        super().append(k, v)


@mutant(
    "capacity-off-by-one",
    breaks=("ALLOC-7", "ALLOC-16"),
    half="over",
    plausible="'length must stay below max_seq_len' confuses the last index with the "
    "count; the final position of every cache is then refused",
)
class CapacityOffByOne(CacheAdapter):
    cache_cls = _CapacityOffByOne


class _PartialWrite(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        g = self.geometry
        end = self._length + k.shape[1]
        if end > g.max_seq_len:
            fits = g.max_seq_len - self._length
            _write(self, k[:, :fits], v[:, :fits], self._length, g.max_seq_len)
            self._length = g.max_seq_len  # MUTATION: write what fits, then refuse
            raise CapacityExceeded(capacity=g.max_seq_len, requested=end)
        super().append(k, v)


@mutant(
    "capacity-partial-write",
    breaks=("ALLOC-16",),
    half="contract",
    plausible="'write as much as fits and report the rest' is how write(2) behaves; it "
    "leaves a length no caller asked for",
)
class CapacityPartialWrite(CacheAdapter):
    cache_cls = _PartialWrite


class _Grows(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        g = self.geometry
        end = self._length + k.shape[1]
        if end > g.max_seq_len:  # MUTATION: grow by reallocating instead of refusing
            bigger = kv_cache.CacheGeometry(g.n_layers, g.n_kv_heads, g.head_dim, end, g.dtype)
            old, self._layers = (
                self._layers,
                [kv_cache.KvLayer.allocate(bigger) for _ in range(g.n_layers)],
            )
            for layer, previous in zip(self._layers, old, strict=True):
                layer.k[: self._length] = previous.k[: self._length]
                layer.v[: self._length] = previous.v[: self._length]
            self.geometry = bigger
            self._alloc_id = KvAllocId.mint()
        super().append(k, v)


@mutant(
    "capacity-grows",
    breaks=("ALLOC-16",),
    half="contract",
    plausible="dynamic caches (transformers' DynamicCache) grow on demand; a fixed-"
    "capacity cache that does the same silently detaches every held plan",
)
class CapacityGrows(CacheAdapter):
    cache_cls = _Grows


class _RequestedIsCount(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        g = self.geometry
        n = k.shape[1]
        if self._length + n > g.max_seq_len:
            raise CapacityExceeded(capacity=g.max_seq_len, requested=n)  # MUTATION: n
        super().append(k, v)


@mutant(
    "capacity-requested-is-count",
    breaks=("ALLOC-16", "ERR-2"),
    half="contract",
    plausible="'requested' reads as 'how many positions were asked for'; ALLOC-16 defines "
    "it as the length the append would have produced",
)
class CapacityRequestedIsCount(CacheAdapter):
    cache_cls = _RequestedIsCount


class _AppendWritesNothing(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        g = self.geometry
        end = self._length + k.shape[1]
        if end > g.max_seq_len:
            raise CapacityExceeded(capacity=g.max_seq_len, requested=end)
        self._length = end  # MUTATION: the length moves, nothing is written


@mutant(
    "append-writes-nothing",
    breaks=("ALLOC-7",),
    half="contract",
    plausible="in an engine whose decode graph writes K and V itself, 'append' can look "
    "like bookkeeping only; ALLOC-7 makes it write the positions into the storage",
    gap="no operation of the adapter interface reads a cache's contents back, so what an "
    "append writes (and whether it writes at all) cannot be observed by any scenario",
)
class AppendWritesNothing(CacheAdapter):
    cache_cls = _AppendWritesNothing
