"""Mutants for the options of CONF-15: a regrowing replacement (ALLOC-19), a releasing
clear (ALLOC-20) and a refused empty append (ALLOC-21).

Each is the correct variant of ``tests/variants/options.py`` for that value with one
misreading, and declares the value as a real implementation would, so it is judged by
the scenarios that assume it (CONF-6). ``storage-options.yaml`` (alloc) and the
``options.yaml`` of the plan area exist to catch them.
"""

from __future__ import annotations

import numpy as np
from kvconform_reference import kv_cache, plan
from kvconform_reference.identity import KvAllocId

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo, Fault
from tests.variants.options import (
    ClearReleases,
    EmptyAppendRefused,
    ReplaceRegrows,
    _RegrowingCache,
    _ReleasingCache,
)

from . import mutant
from ._kit import declaring

# --- ALLOC-19: replace_layer_shape: regrow ---------------------------------------------


class _RegrowKeepingId(_RegrowingCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        g = self.geometry
        if layer.k.shape == (g.max_seq_len, g.n_kv_heads, g.head_dim):
            super().set_layer(index, layer)
            return
        kept = self._alloc_id
        super().set_layer(index, layer)
        self._alloc_id = kept  # MUTATION: a reshaped layer is "the same layer, resized"


@mutant(
    "regrow-keeps-alloc-id",
    breaks=("ALLOC-19", "ALLOC-4", "ALLOC-13"),
    half="under",
    plausible="a replacement of another shape is read as resizing the layer in place, like "
    "a Vec that grows, so the allocation keeps its name; a plan baked for the old shape "
    "stays valid over the new one",
)
class RegrowKeepsAllocId(ReplaceRegrows):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _RegrowKeepingId
        return cache


class _RegrowResettingLength(_RegrowingCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        super().set_layer(index, layer)
        g = self.geometry
        if layer.k.shape != (g.max_seq_len, g.n_kv_heads, g.head_dim):
            self._length = 0  # MUTATION: a new shape is a new cache, emptied


@mutant(
    "regrow-resets-length",
    breaks=("ALLOC-19", "ALLOC-11"),
    half="contract",
    plausible="a layer of another shape cannot hold the old positions, so the regrow "
    "restarts the cache at length 0, discarding what every other layer holds",
)
class RegrowResetsLength(ReplaceRegrows):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _RegrowResettingLength
        return cache


class _RegrowRemintingOnRewind(_RegrowingCache):
    _reshaped = False

    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        super().set_layer(index, layer)
        g = self.geometry
        self._reshaped = layer.k.shape != (g.max_seq_len, g.n_kv_heads, g.head_dim)

    def truncate_to(self, length: int) -> None:
        super().truncate_to(length)
        if self._reshaped:
            self._alloc_id = KvAllocId.mint()  # MUTATION: a reshaped cache re-lays on rewind


@mutant(
    "regrow-remints-on-rewind",
    breaks=("ALLOC-19", "ALLOC-5"),
    half="over",
    plausible="a cache whose layers disagree is treated as 'in flux': every rewind re-lays "
    "its storage to be safe and mints, so speculative decoding loses every held plan "
    "after each rejected draft",
)
class RegrowRemintsOnRewind(ReplaceRegrows):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _RegrowRemintingOnRewind
        return cache


class _RegrowAddingLayers(_RegrowingCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        if index == self.geometry.n_layers:  # MUTATION: one past the end appends a layer
            self._layers.append(layer)
            self._labels = (*self._labels, self._labels[-1])
            from dataclasses import replace

            self.geometry = replace(self.geometry, n_layers=index + 1)
            self._alloc_id = KvAllocId.mint()
            return
        super().set_layer(index, layer)


@mutant(
    "regrow-appends-a-layer",
    breaks=("ALLOC-19", "ALLOC-9"),
    half="under",
    plausible="'any replacement is taken' extends to the index: a set_layer one past the "
    "end pushes a layer, as a growable list would, and the layer count a plan keyed on "
    "changes",
)
class RegrowAppendsALayer(ReplaceRegrows):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _RegrowAddingLayers
        return cache


@mutant(
    "regrow-keeps-storage-labels",
    breaks=("ALLOC-19", "PLAN-21", "PLAN-24"),
    half="under",
    plausible="the regrown layer keeps the storage description of the slot it went into "
    "(same device, same element type), so a rebind finds it interchangeable and revives "
    "a plan whose launch parameters are for the old shape",
)
class RegrowKeepsStorageLabels(ReplaceRegrows):
    def cache_new_placed(self, geometry, residency, layer_storage):  # type: ignore[no-untyped-def]
        # MUTATION: the reference's cache, whose labels never change, regrowing all the same
        cache = ReferenceAdapter.cache_new_placed(self, geometry, residency, layer_storage)
        cache.__class__ = _RegrowingPlainLabels
        return cache


class _RegrowingPlainLabels(kv_cache.KvCache):
    set_layer = _RegrowingCache.set_layer


# --- ALLOC-20: clear_storage: release ---------------------------------------------------


class _ReleaseWritingAnyway(_ReleasingCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        for index in self.released():  # MUTATION: an append allocates what it needs
            self._layers[index] = kv_cache.KvLayer.allocate(self.geometry)
        kv_cache.KvCache.append(self, k, v)


@mutant(
    "release-append-writes-anyway",
    breaks=("ALLOC-20", "ALLOC-13"),
    half="under",
    plausible="the append finds empty slots and allocates them on the way, as a lazy "
    "buffer would, without a mint: the cache holds storage no id names",
)
class ReleaseAppendWritesAnyway(ClearReleases):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _ReleaseWritingAnyway
        return cache


class _ReleaseCheckingLayerZero(_ReleasingCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        if self._layers[0] is None:  # MUTATION: only layer 0 is asked whether it has storage
            raise RuntimeError("the cache has no storage since clear()")
        for index in self.released():  # and the writer fills in whatever else is missing
            self._layers[index] = kv_cache.KvLayer.allocate(self.geometry)
        kv_cache.KvCache.append(self, k, v)


@mutant(
    "release-checks-only-the-first-layer",
    breaks=("ALLOC-20",),
    half="under",
    plausible="'is the cache allocated?' is asked of layer 0, as a shortcut, so an append "
    "goes through once the first layer is given back while the others have no storage",
)
class ReleaseChecksOnlyTheFirstLayer(ClearReleases):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _ReleaseCheckingLayerZero
        return cache


class _ReleaseKeepingId(_ReleasingCache):
    def clear(self) -> None:
        kept = self._alloc_id
        super().clear()
        self._alloc_id = kept  # MUTATION: the storage is gone, so there is nothing to rename


@mutant(
    "release-keeps-alloc-id",
    breaks=("ALLOC-20", "ALLOC-18"),
    half="under",
    plausible="a clear that frees the buffers and allocates nothing has no new storage "
    "to name, so it leaves the id alone; the id is minted when storage is given back",
)
class ReleaseKeepsAllocId(ClearReleases):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _ReleaseKeepingId
        return cache


class _ReleaseFillingWithoutMint(_ReleasingCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        if 0 <= index < self.geometry.n_layers and self._layers[index] is None:
            kept = self._alloc_id
            super().set_layer(index, layer)
            self._alloc_id = kept  # MUTATION: filling an empty slot replaces nothing
            return
        super().set_layer(index, layer)


@mutant(
    "release-refill-does-not-mint",
    breaks=("ALLOC-20", "ALLOC-4"),
    half="under",
    plausible="giving storage to an empty slot is not a replacement (nothing was there), "
    "so it keeps the id the clear minted; a plan built on the released cache is then "
    "valid over the storage given back",
)
class ReleaseRefillDoesNotMint(ClearReleases):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _ReleaseFillingWithoutMint
        return cache


class _ReleaseRestoringOldId(_ReleasingCache):
    _before_clear: KvAllocId | None = None

    def clear(self) -> None:
        self._before_clear = self._alloc_id
        super().clear()

    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        super().set_layer(index, layer)
        if not self.released() and self._before_clear is not None:
            self._alloc_id = self._before_clear  # MUTATION: the slots are back, so is their id


@mutant(
    "release-refill-restores-the-old-id",
    breaks=("ALLOC-20", "ALLOC-1", "PLAN-10"),
    half="under",
    plausible="a pool that names its slots hands a re-provisioned cache the id it had "
    "before the clear, since the same slots are back; the plan built on the released "
    "buffers is then valid again",
)
class ReleaseRefillRestoresTheOldId(ClearReleases):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _ReleaseRestoringOldId
        return cache


class _ReleaseAnyShape(_ReleasingCache):
    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        if 0 <= index < self.geometry.n_layers and self._layers[index] is None:
            self._layers[index] = layer  # MUTATION: nothing in place to compare with
            self._alloc_id = KvAllocId.mint()
            return
        super().set_layer(index, layer)


@mutant(
    "release-refill-takes-any-shape",
    breaks=("ALLOC-20", "ALLOC-17"),
    half="under",
    plausible="the shape check compares with the layer in place, and a released slot has "
    "none, so any shape is taken into it: one cache, two geometries",
)
class ReleaseRefillTakesAnyShape(ClearReleases):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _ReleaseAnyShape
        return cache


@mutant(
    "release-rebind-sees-old-slots",
    breaks=("ALLOC-20", "PLAN-21"),
    half="under",
    plausible="the storage description of each slot survives the clear, so the rebind's "
    "per-slot check finds everything interchangeable and binds a plan to a cache with "
    "no storage",
)
class ReleaseRebindSeesOldSlots(ClearReleases):
    def session_rebind(self, session: plan.DecodePlan, cache: kv_cache.KvCache) -> Fault | None:
        return ReferenceAdapter.session_rebind(self, session, cache)  # MUTATION: no slot check


# --- ALLOC-21: append_empty: refuse -----------------------------------------------------


@mutant(
    "empty-append-refuse-declared-but-accepted",
    breaks=("ALLOC-21", "CONF-6"),
    half="contract",
    plausible="the declaration is copied from an engine's documentation while its append "
    "path, written earlier, quietly accepts an empty chunk",
)
class EmptyAppendRefuseDeclaredButAccepted(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), append_empty="refuse")  # MUTATION: not so


@mutant(
    "empty-append-refusal-mints",
    breaks=("ALLOC-21", "ALLOC-13"),
    half="over",
    plausible="the writer marks the storage as changed before it checks the count, so an "
    "empty append that it then refuses has already minted; every held plan is rebuilt "
    "for nothing",
)
class EmptyAppendRefusalMints(EmptyAppendRefused):
    def cache_append(self, cache: kv_cache.KvCache, tokens: int):  # type: ignore[no-untyped-def]
        if tokens == 0:
            cache._alloc_id = KvAllocId.mint()  # MUTATION: a dirty mark set before the check
        return super().cache_append(cache, tokens)
