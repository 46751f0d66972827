"""Drivers run a program of operations against one implementation.

A program is the compiled form of one scenario (or one vector). A driver
returns one :data:`~.values.Outcome` per operation, in order; it never raises
for anything the implementation does.
"""

from __future__ import annotations

import gc
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kvconform.protocol import operations as ops
from kvconform.protocol.adapter import Adapter
from kvconform.values import AdapterInfo, Broken, Fault, Ok, Outcome, Refused


class Driver(Protocol):
    info: AdapterInfo

    def run(self, program: Sequence[ops.Op]) -> list[Outcome]: ...

    def close(self) -> None: ...


class UnknownHandle(LookupError):
    pass


class _Handles:
    """The harness side of handle names: name -> the adapter's object."""

    def __init__(self) -> None:
        self._objects: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        try:
            return self._objects[name]
        except KeyError:
            raise UnknownHandle(f"no live handle named {name!r}") from None

    def bind(self, name: str, obj: Any) -> None:
        self._objects[name] = obj

    def release(self, name: str) -> Any:
        return self._objects.pop(name)

    def names(self) -> list[str]:
        return list(self._objects)


def _bind(handles: _Handles, name: str, obj: Any) -> None:
    handles.bind(name, obj)


def _drop(adapter: Any, handles: _Handles, name: str) -> None:
    obj = handles[name]
    adapter.drop(obj)
    handles.release(name)
    del obj
    gc.collect(0)  # the youngest generation: enough for cycles a drop just freed, and cheap


_Handler = Callable[[Any, _Handles, Any], Any]

#: One entry per operation: how it is dispatched to a Python adapter.
DISPATCH: dict[type[ops.Op], _Handler] = {
    ops.Hash: lambda a, h, op: tuple(a.hash(op.program)),
    ops.ModelNew: lambda a, h, op: _bind(h, op.handle, a.model_new(op.spec)),
    ops.ModelReload: lambda a, h, op: _bind(h, op.handle, a.model_reload(h[op.model])),
    ops.ModelSetHook: lambda a, h, op: a.model_set_hook(h[op.model], op.hook, op.present),
    ops.ModelInstanceId: lambda a, h, op: a.model_instance_id(h[op.model]),
    ops.CacheNew: lambda a, h, op: _bind(h, op.handle, a.cache_new(op.geometry)),
    ops.CacheAppend: lambda a, h, op: a.cache_append(h[op.cache], op.tokens),
    ops.CacheTruncate: lambda a, h, op: a.cache_truncate(h[op.cache], op.length),
    ops.CacheClear: lambda a, h, op: a.cache_clear(h[op.cache]),
    ops.CacheReplaceLayer: lambda a, h, op: a.cache_replace_layer(
        h[op.cache], op.layer, op.n_kv_heads, op.head_dim, op.max_seq_len
    ),
    ops.CacheAllocId: lambda a, h, op: a.cache_alloc_id(h[op.cache]),
    ops.CacheLen: lambda a, h, op: a.cache_len(h[op.cache]),
    ops.PlanKey: lambda a, h, op: a.plan_key(op.identity),
    ops.SessionNew: lambda a, h, op: _bind(
        h, op.handle, a.session_new(h[op.model], h[op.cache], op.step_tokens)
    ),
    ops.SessionValid: lambda a, h, op: a.session_valid(
        h[op.session], h[op.model], h[op.cache], op.step
    ),
    ops.Drop: lambda a, h, op: _drop(a, h, op.handle),
    ops.Measure: lambda a, h, op: a.measure(op.model, op.payload),
    ops.Stamp: lambda a, h, op: a.stamp(op.model, op.payload),
    ops.Verify: lambda a, h, op: a.verify(op.recorded, op.payload, op.expected),
}


# Outcomes without a payload are shared constants: the harness allocates nothing
# between a ``drop`` and the next construction, so an allocator free to hand a
# dropped object's address to the next object of its size can do so.
_CONSTANT_OUTCOMES: dict[object, Outcome] = {None: Ok(None), True: Ok(True), False: Ok(False)}


def _is_constant(value: object) -> bool:
    return value is None or value is True or value is False


class InProcessDriver:
    """Runs programs by calling a Python adapter's methods directly."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        info = adapter.describe()
        if not isinstance(info, AdapterInfo):
            raise TypeError(f"describe() returned {type(info).__name__}, not an AdapterInfo")
        problems = info.problems()
        if problems:  # the same checks as a hello answer over the protocol (CONF-6, CONF-7)
            raise ValueError(f"describe(): {problems[0]}")
        self.info = info

    def run(self, program: Sequence[ops.Op]) -> list[Outcome]:
        handles = _Handles()
        try:
            return [self._one(handles, op) for op in program]
        finally:
            for name in reversed(handles.names()):
                try:
                    _drop(self.adapter, handles, name)
                except Exception:
                    handles.release(name)

    def _one(self, handles: _Handles, op: ops.Op) -> Outcome:
        try:
            value = DISPATCH[type(op)](self.adapter, handles, op)
        except UnknownHandle as exc:
            return Broken(str(exc))
        except Exception as exc:
            return Broken(
                f"{op.name} raised {type(exc).__name__}: {exc}",
                "".join(traceback.format_exception(exc)),
            )
        if isinstance(value, Fault):
            return Refused(value)
        return _CONSTANT_OUTCOMES.get(value) if _is_constant(value) else Ok(value)

    def close(self) -> None:
        pass
