"""Drivers run a program of operations against one implementation.

A program is the compiled form of one scenario (or one vector). A driver
returns one :data:`~.values.Outcome` per operation, in order; it never raises
for anything the implementation does.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import traceback
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kvconform.protocol import operations as ops
from kvconform.protocol.adapter import Adapter
from kvconform.protocol.codec import (
    SHOWN_LIMIT,
    clip,
    fault_problem,
    info_text,
    result_type_problem,
)
from kvconform.protocol.steps import run_in_parts
from kvconform.values import AdapterInfo, Broken, Fault, Ok, Outcome, Refused


class Driver(Protocol):
    info: AdapterInfo

    def run(self, program: Sequence[ops.Op]) -> list[Outcome]: ...

    def close(self) -> None: ...


class UnknownHandle(LookupError):
    pass


class Handles:
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


def call(adapter: Any, handles: Handles, op: ops.Op) -> Any:
    """Run ``op`` on a Python adapter, as its row of the operation table says.

    The adapter method named like the operation gets the operation's fields in
    order, each handle resolved to its object; what the method returns is bound
    to the new handle's name, if the operation creates one (the result is then
    null), and a released handle is forgotten after the call.
    """
    spec = ops.BY_CLASS[type(op)]
    args = [
        handles[getattr(op, f.name)] if f.kind in ("handle", "released") else getattr(op, f.name)
        for f in spec.arguments
    ]
    keywords = {f.name: getattr(op, f.name) for f in spec.added if getattr(op, f.name) is not None}
    value = getattr(adapter, spec.method)(*args, **keywords)
    del args, keywords
    if spec.binds is not None:
        if isinstance(value, Fault):  # a refusal to make it: nothing is bound
            return value
        handles.bind(getattr(op, spec.binds), value)
        return None
    if spec.releases:
        for name in spec.releases:
            handles.release(getattr(op, name))
        gc.collect(0)  # the youngest generation: enough for cycles a drop just freed, and cheap
    if spec.result == "u64_list" and not isinstance(value, Fault):
        return tuple(value)
    return value


def release(adapter: Any, handles: Handles, name: str) -> None:
    """Drop one live handle, as a ``drop`` operation would."""
    call(adapter, handles, ops.Drop(name))


# Outcomes without a payload are shared constants: the harness allocates nothing
# between a ``drop`` and the next construction, so an allocator free to hand a
# dropped object's address to the next object of its size can do so.
_CONSTANT_OUTCOMES: dict[object, Outcome] = {None: Ok(None), True: Ok(True), False: Ok(False)}


def _is_constant(value: object) -> bool:
    return value is None or value is True or value is False


def _described(adapter: Adapter) -> AdapterInfo:
    """``adapter.describe()``, checked as a hello answer is, in the form reports show."""
    info = adapter.describe()
    if type(info) is not AdapterInfo:  # exactly: a subclass's own problems() never runs
        raise TypeError(f"describe() returned {type(info).__name__}, not an AdapterInfo")
    problems = AdapterInfo.problems(info)
    if problems:  # the same checks as a hello answer over the protocol (CONF-6, CONF-7)
        raise ValueError(f"describe(): {problems[0]}")
    return dataclasses.replace(  # its own words, kept as a hello answer's are
        info,
        name=info_text(info.name),
        version=info_text(info.version),
        language=info_text(info.language),
    )


def _again(adapter: Adapter, info: AdapterInfo) -> Adapter:
    """A new adapter like ``adapter``: of its class, or a copy if the class alone differs."""
    try:
        made: Adapter = type(adapter)()
        if _described(made) == info:
            return made
    except Exception:  # a class that needs arguments: its instance is copied instead
        pass
    return copy.copy(adapter)


class InProcessDriver:
    """Runs programs by calling a Python adapter's methods directly.

    ``factory`` makes the adapter again for a scenario's ``restart`` (PROTO-37): the
    new adapter object stands for the new process. Not given: the adapter's class called
    with no arguments, or, when that describes itself otherwise (an adapter a factory
    configured), a shallow copy of the first adapter. Whatever the implementation keeps
    in its modules survives an in-process restart; a value meant to be per process lives
    on the adapter object.
    """

    def __init__(self, adapter: Adapter, factory: Callable[[], Adapter] | None = None) -> None:
        self.adapter = adapter
        self.info = _described(adapter)
        self.factory: Callable[[], Adapter] = factory or (lambda: _again(adapter, self.info))
        #: Adapters made again for a ``restart`` step (the first one is not counted).
        self.restarts = 0

    def run(self, program: Sequence[ops.Op]) -> list[Outcome]:
        return run_in_parts(program, self._run, self._restart)

    def _restart(self) -> Outcome:
        """A new adapter from the factory, in place of the one whose handles were all
        released (PROTO-37); it must describe itself as the first did (PROTO-13)."""
        try:
            adapter = self.factory()
            info = _described(adapter)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            return Broken(clip(f"the adapter could not be made again: {exc}", SHOWN_LIMIT))
        if info != self.info:
            return Broken(
                clip(
                    f"the adapter made again describes itself differently: {info} "
                    f"instead of {self.info}",
                    SHOWN_LIMIT,
                )
            )
        self.adapter = adapter
        self.restarts += 1
        return _CONSTANT_OUTCOMES[None]

    def _run(self, program: Sequence[ops.Op]) -> list[Outcome]:
        handles = Handles()
        try:
            return [self._one(handles, op) for op in program]
        finally:
            for name in reversed(handles.names()):
                try:
                    release(self.adapter, handles, name)
                except KeyboardInterrupt:
                    raise
                except BaseException:
                    handles.release(name)

    def _one(self, handles: Handles, op: ops.Op) -> Outcome:
        try:
            value = call(self.adapter, handles, op)
        except UnknownHandle as exc:
            return Broken(str(exc))
        except KeyboardInterrupt:
            raise  # Ctrl-C, SIGTERM: the run stops
        except BaseException as exc:  # sys.exit() or GeneratorExit in an adapter ends no run
            return Broken(
                clip(f"{op.name} raised {type(exc).__name__}: {exc}", SHOWN_LIMIT),
                clip("".join(traceback.format_exception(exc)), 20 * SHOWN_LIMIT),
            )
        if isinstance(value, Fault):
            problem = fault_problem(value)
            if problem is not None:  # what the wire could not carry (PROTO-21)
                return Broken(f"malformed refusal from {op.name}: {problem}")
            return Refused(value)
        kind = type(op).result
        if kind == "null":
            return _CONSTANT_OUTCOMES[None]  # what the wire makes of any value (PROTO-18)
        problem = result_type_problem(op, value)
        if problem is not None:  # the same types as over the wire, so numpy ints fail here too
            return Broken(problem, claims_success=True)
        return _CONSTANT_OUTCOMES[value] if _is_constant(value) else Ok(value)

    def close(self) -> None:
        pass
