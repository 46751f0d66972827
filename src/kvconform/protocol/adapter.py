"""The interface a Python adapter implements (spec/protocol.md mirrors it one to one).

An adapter wraps one implementation. It declares what it claims in
:meth:`Adapter.describe` and is only ever asked for operations of the classes
it declares (CONF-2). Handles it returns are opaque to the harness; the
harness drops its own reference to a handle right after the ``drop``
operation, so an implementation that keys on object addresses can be caught
when the allocator hands an address out again.

A *semantic* refusal is returned as a :class:`~.values.Fault`, never raised.
Anything an adapter raises is an adapter failure, not an answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from kvconform.values import (
    AdapterInfo,
    Fault,
    Geometry,
    Layout,
    MixOp,
    ModelSpec,
    Payload,
    PlanIdentity,
    Signature,
    StepInputs,
)

Handle = object


@runtime_checkable
class Adapter(Protocol):
    def describe(self) -> AdapterInfo:
        """Name, version, language, classes and profile (CONF-2)."""
        ...


@runtime_checkable
class HashAdapter(Adapter, Protocol):
    """Class ``hash``."""

    def hash(self, program: Sequence[MixOp]) -> Sequence[int]:
        """Run a mix program from a fresh hasher; return the value of each finish."""
        ...


@runtime_checkable
class KeyAdapter(Adapter, Protocol):
    """Classes ``identity`` and ``plan``: models, caches and held plans."""

    def model_new(self, spec: ModelSpec) -> Handle: ...
    def model_reload(self, model: Handle) -> Handle: ...
    def model_set_hook(self, model: Handle, hook: str, present: bool) -> None: ...
    def model_instance_id(self, model: Handle) -> int: ...
    def cache_new(self, geometry: Geometry) -> Handle: ...
    def cache_append(self, cache: Handle, tokens: int) -> Fault | None: ...
    def cache_truncate(self, cache: Handle, length: int) -> None: ...
    def cache_clear(self, cache: Handle) -> None: ...
    def cache_replace_layer(
        self,
        cache: Handle,
        layer: int,
        n_kv_heads: int | None,
        head_dim: int | None,
        max_seq_len: int | None,
    ) -> Fault | None: ...
    def cache_alloc_id(self, cache: Handle) -> int: ...
    def cache_len(self, cache: Handle) -> int: ...
    def plan_key(self, identity: PlanIdentity) -> int: ...
    def session_new(self, model: Handle, cache: Handle, step_tokens: int) -> Handle: ...
    def session_valid(
        self, session: Handle, model: Handle, cache: Handle, step: StepInputs
    ) -> bool: ...
    def drop(self, handle: Handle) -> None:
        """Release every reference the adapter keeps to ``handle``."""
        ...


@runtime_checkable
class VerifyAdapter(Adapter, Protocol):
    """Classes ``signature`` and ``verify``: stored-block signatures."""

    def measure(
        self, model: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        """``layout`` is given only to a writer of version 2 (PROF-6, PROTO-31)."""
        ...

    def stamp(
        self, model: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        """``layout`` is given only to a writer of version 2 (PROF-6, PROTO-31)."""
        ...

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault: ...


@runtime_checkable
class PlanValidityAdapter(KeyAdapter, Protocol):
    """Class ``plan_validity``: three-valued validity and the guarded rebind (PLAN-19 to 24)."""

    def cache_new_placed(
        self, geometry: Geometry, residency: str | None, layer_storage: Sequence[str]
    ) -> Handle:
        """A cache with this residency (``None``: unknown) and one storage label per layer."""
        ...

    def session_validity(
        self, session: Handle, model: Handle, cache: Handle, step: StepInputs
    ) -> str:
        """``"valid"``, ``"allocation_changed"`` or ``"stale"``."""
        ...

    def session_rebind(self, session: Handle, cache: Handle) -> Fault | None: ...


@runtime_checkable
class PrefixCacheAdapter(Adapter, Protocol):
    """Class ``prefix_cache``: which leading positions a request would reuse (PREFIX-1)."""

    def prefix_new(
        self,
        block_size: int,
        model: str,
        kv_dtype: str,
        layout: str,
        shard: str,
        *,
        capacity: int | None = None,
    ) -> Handle:
        """A prefix cache: one engine process computing for this model, dtype, layout, shard.
        ``capacity``, given only to an implementation declaring ``prefix_capacity``, is the
        most blocks it holds (PREFIX-24)."""
        ...

    def tier_new(self, *, storage: str | None = None) -> Handle:
        """A shared tier: storage outside every process. ``storage``, when given, is a
        directory the harness made for it: keep what is written to the tier there, and
        open what is there when it is not empty (a restart, PROTO-36)."""
        ...

    def prefix_attach(self, prefix: Handle, tier: Handle) -> None:
        """``prefix`` writes what it stores to ``tier`` and reads from it on a lookup."""
        ...

    def lora_load(self, prefix: Handle, adapter_name: str, weights: str) -> Handle:
        """An adapter instance loaded into ``prefix``'s process; ``weights`` labels its weights."""
        ...

    def request_new(self, tokens: str, salt: str | None, user_key: str | None) -> Handle | Fault:
        """A request; ``tokens`` are decimal ids separated by single spaces."""
        ...

    def request_lora(self, request: Handle, lora: Handle) -> None: ...
    def request_media(
        self,
        request: Handle,
        start: int,
        length: int,
        content: str,
        width: int,
        height: int,
        caller_id: str | None,
    ) -> None: ...
    def request_embeds(self, request: Handle, start: int, length: int, content: str) -> None: ...
    def prefix_store(self, prefix: Handle, request: Handle) -> None: ...
    def prefix_lookup(self, prefix: Handle, request: Handle) -> int:
        """The number of leading positions of ``request`` that ``prefix`` would reuse."""
        ...
