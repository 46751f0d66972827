"""Never-recycled identities: model instances and KV allocations (spec/identity.md).

An id is drawn from a process-wide counter. It is never zero (ID-1), strictly
increases in minting order (ID-2), is never handed out twice (ID-3) and owes
nothing to an object's address (ID-4). Minting takes a lock, so ids minted
from several threads are distinct and increase within each thread (ID-5).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass


class _Counter:
    """A monotonic counter that starts at 1 and never goes back (ID-1, ID-3)."""

    def __init__(self) -> None:
        self._next = 1
        self._lock = threading.Lock()

    def mint(self) -> int:
        with self._lock:  # ID-5: minting is atomic
            value = self._next
            self._next += 1
        if value >= 1 << 64:
            raise OverflowError("identity counter exhausted")
        return value


_MODEL_INSTANCES = _Counter()
_KV_ALLOCATIONS = _Counter()


@dataclass(frozen=True, order=True)
class ModelInstanceId:
    """The identity of one constructed model (ID-1 .. ID-10)."""

    value: int

    @classmethod
    def mint(cls) -> ModelInstanceId:
        return cls(_MODEL_INSTANCES.mint())


@dataclass(frozen=True, order=True)
class KvAllocId:
    """The identity of one KV allocation: the buffers a plan reads (ALLOC-1)."""

    value: int

    @classmethod
    def mint(cls) -> KvAllocId:
        return cls(_KV_ALLOCATIONS.mint())
