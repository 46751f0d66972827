"""ID mutants, and the ALLOC mutants about how allocation ids are *made*.

How cache operations mint (or not) is in ``alloc.py``; here is where the ids
come from: a counter that never recycles, versus an address, a hash of the
configuration, a free list or a random draw.
"""

from __future__ import annotations

import itertools
import random
import weakref
from collections.abc import Iterator
from typing import ClassVar

from kvconform_reference import kv_cache, model
from kvconform_reference.hasher import fnv1a64
from kvconform_reference.identity import KvAllocId, ModelInstanceId

from kvconform import values
from kvconform.adapters.reference import model_config

from . import mutant
from ._kit import CacheAdapter, ModelAdapter

# --- model instance ids -------------------------------------------------------


class _RecyclingModel(model.Model):
    #: Ids of dropped models, handed out again before new ones are minted.
    free: ClassVar[list[int]] = []

    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        if self.free:
            self.instance_id = ModelInstanceId(self.free.pop())  # MUTATION: a free list
        weakref.finalize(self, self.free.append, self.instance_id.value)

    def reload(self) -> model.Model:
        return type(self)(self.config)


@mutant(
    "model-ids-recycled",
    breaks=("ID-2", "ID-3", "PLAN-14"),
    half="under",
    plausible="a free list of ids keeps them small and dense, like file descriptors or "
    "slot indices; a model built after a drop then inherits the dropped model's plans",
)
class ModelIdsRecycled(ModelAdapter):
    model_cls = _RecyclingModel


class _ConfigKeyedModel(model.Model):
    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        text = repr((config.family, sorted(config.params.items()), sorted(config.hooks.items())))
        # MUTATION: the id is a digest of the configuration
        self.instance_id = ModelInstanceId(fnv1a64(text.encode()) or 1)

    def reload(self) -> model.Model:
        return type(self)(self.config)


@mutant(
    "model-id-from-config",
    breaks=("ID-3", "ID-4", "ID-6", "PLAN-9"),
    half="under",
    plausible="content-addressed identity ('same config, same model') is how caches are "
    "usually keyed; two models of one configuration but different weights then share plans",
)
class ModelIdFromConfig(ModelAdapter):
    model_cls = _ConfigKeyedModel


class _ReloadKeepsId(model.Model):
    def reload(self) -> model.Model:
        again = type(self)(self.config)
        again.instance_id = self.instance_id  # MUTATION: same source, same identity
        return again


@mutant(
    "reload-keeps-instance-id",
    breaks=("ID-6", "PLAN-9"),
    half="under",
    plausible="a model reloaded from the same file 'is the same model'; the engine cannot "
    "cheaply prove the bytes are the same, and an in-place reload may have new weights",
)
class ReloadKeepsInstanceId(ModelAdapter):
    model_cls = _ReloadKeepsId

    def model_reload(self, m: model.Model) -> model.Model:
        return m.reload()


class _HookRemints(model.Model):
    def set_hook(self, name: str, present: bool) -> None:
        super().set_hook(name, present)
        self.instance_id = ModelInstanceId.mint()  # MUTATION: a changed model is a new one

    def reload(self) -> model.Model:
        return type(self)(self.config)


@mutant(
    "set-hook-remints-instance-id",
    breaks=("ID-10", "PLAN-18"),
    half="over",
    plausible="'the model changed, so it is a new instance' is the cautious reading; the "
    "plan built before the toggle then never becomes valid again when the hook is restored",
)
class SetHookRemintsInstanceId(ModelAdapter):
    model_cls = _HookRemints


class _RandomIdModel(model.Model):
    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        # MUTATION: a random 64-bit id: unique with high probability, but unordered
        self.instance_id = ModelInstanceId(random.getrandbits(64) | 1)

    def reload(self) -> model.Model:
        return type(self)(self.config)


@mutant(
    "instance-ids-random",
    breaks=("ID-2",),
    half="contract",
    plausible="random 64-bit ids need no shared counter and no lock, and a collision is "
    "astronomically unlikely; but they do not increase in minting order",
)
class InstanceIdsRandom(ModelAdapter):
    model_cls = _RandomIdModel


class _PerFamilyModel(model.Model):
    #: One counter per model family.
    counters: ClassVar[dict[str, Iterator[int]]] = {}

    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        counter = self.counters.setdefault(config.family, itertools.count(1))
        self.instance_id = ModelInstanceId(next(counter))  # MUTATION: per-family ids

    def reload(self) -> model.Model:
        return type(self)(self.config)


@mutant(
    "instance-ids-per-family",
    breaks=("ID-2", "ID-3"),
    half="contract",
    plausible="a registry numbering models within each architecture ('llama #3') keeps ids "
    "unique together with the family, which the key also mixes -- but ID-2 and ID-3 are "
    "about the process, and a per-family counter repeats ids across families",
)
class InstanceIdsPerFamily(ModelAdapter):
    model_cls = _PerFamilyModel


@mutant(
    "instance-ids-start-at-zero",
    breaks=("ID-1",),
    half="contract",
    plausible="counters start at 0 by default (itertools.count(), a zeroed atomic); the "
    "seed starts at 1 precisely so that a zero-initialised field never passes for an id",
)
class InstanceIdsStartAtZero(ModelAdapter):
    def __init__(self) -> None:
        self._ids: Iterator[int] = itertools.count(0)  # MUTATION: the first id is 0

    def model_new(self, spec: values.ModelSpec) -> model.Model:
        m = model.Model(model_config(spec))
        m.instance_id = ModelInstanceId(next(self._ids))
        return m

    def model_reload(self, m: model.Model) -> model.Model:
        again = m.reload()
        again.instance_id = ModelInstanceId(next(self._ids))
        return again


class _UnlockedCounter:
    """The reference counter without its lock."""

    def __init__(self) -> None:
        self._next = 1

    def mint(self) -> int:
        value = self._next  # MUTATION: read and increment are not atomic
        self._next += 1
        return value


class _UnlockedModel(model.Model):
    counter: ClassVar[_UnlockedCounter] = _UnlockedCounter()

    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        self.instance_id = ModelInstanceId(self.counter.mint() + 10**9)

    def reload(self) -> model.Model:
        return type(self)(self.config)


@mutant(
    "ids-minted-without-a-lock",
    breaks=("ID-5",),
    half="under",
    plausible="'the GIL makes it atomic' -- but a read and an increment are two bytecodes, "
    "and two models built on two worker threads can get one id",
    gap="the adapter interface is sequential: no operation builds models from several "
    "threads, so ID-5 (and ALLOC-1's thread-safety) can only be tested by an "
    "implementation's own tests",
)
class IdsMintedWithoutALock(ModelAdapter):
    model_cls = _UnlockedModel


# --- KV allocation ids --------------------------------------------------------


class _AddressCache(kv_cache.KvCache):
    @property
    def alloc_id(self) -> KvAllocId:
        # MUTATION: the allocation is named by the addresses of its buffers, as the
        # seed's pointer scheme named weights by their Arc addresses
        addresses = b"".join(
            id(buffer).to_bytes(8, "little")
            for layer in self._layers
            for buffer in (layer.k, layer.v)
        )
        return KvAllocId(fnv1a64(addresses) or 1)


@mutant(
    "alloc-id-from-storage-address",
    breaks=("ALLOC-1", "PLAN-10", "PLAN-14"),
    half="under",
    plausible="the buffers' addresses change exactly when the buffers are replaced, so "
    "they look like a free, exact allocation id -- until a dropped cache's addresses are "
    "handed to the next one",
)
class AllocIdFromStorageAddress(CacheAdapter):
    cache_cls = _AddressCache


class _RecyclingCache(kv_cache.KvCache):
    #: Ids of dropped caches, handed out again before new ones are minted.
    free: ClassVar[list[int]] = []

    def __init__(self, geometry: kv_cache.CacheGeometry) -> None:
        self._current: list[int] = [0]  # the id in use, read when the cache dies
        super().__init__(geometry)
        if self.free:
            self._alloc_id = KvAllocId(self.free.pop())  # MUTATION: a free list
        weakref.finalize(self, _give_back, self.free, self._current)

    @property  # type: ignore[override]
    def _alloc_id(self) -> KvAllocId:
        return KvAllocId(self._current[0])

    @_alloc_id.setter
    def _alloc_id(self, value: KvAllocId) -> None:
        self._current[0] = value.value


def _give_back(free: list[int], current: list[int]) -> None:
    free.append(current[0])


@mutant(
    "alloc-ids-recycled",
    breaks=("ALLOC-1", "ALLOC-2", "PLAN-14"),
    half="under",
    plausible="slot pools recycle slot numbers, and an allocation id that is 'the slot' "
    "comes back with the slot; the next request's cache then inherits the held plan",
)
class AllocIdsRecycled(CacheAdapter):
    cache_cls = _RecyclingCache
