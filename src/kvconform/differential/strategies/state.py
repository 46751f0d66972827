"""The key-side program under construction: what is live in it (models, caches, held
plans, other objects) and the steps every rule shares. Each operation class adds its
rules in a module of its own (:mod:`.identity`, :mod:`.alloc`, :mod:`.plan`,
:mod:`.plan_validity`, :mod:`.table`); :mod:`.keys` puts them together.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from kvconform.differential.strategies.scope import Scope, schema_spec
from kvconform.differential.strategies.source import Source, pick
from kvconform.differential.strategies.values import geometry, model_spec
from kvconform.protocol import operations as ops
from kvconform.values import (
    Geometry,
    ModelSpec,
    PlanIdentity,
)


@dataclass
class _Model:
    spec: ModelSpec
    #: A hook was toggled in place. Such a model is never reloaded: whether a reload
    #: starts from the configuration or from the current hook state is a point no
    #: requirement settles, so the generated checks do not compare it.
    toggled: bool = False
    #: Each hook's state now, where a toggle changed it from the spec's.
    hooks: dict[str, bool] = field(default_factory=dict)

    def hook_state(self, hook: str) -> bool:
        return self.hooks.get(hook, dict(self.spec.hooks)[hook])

    def toggle(self, hook: str) -> bool:
        """Toggle ``hook`` and say its new state: a ``set_hook`` drawn always changes the
        state, since a call to the state it already has may keep or re-mint the instance
        id (ID-10), which no comparison with the reference could judge."""
        self.toggled = True
        self.hooks[hook] = not self.hook_state(hook)
        return self.hooks[hook]


@dataclass
class _Cache:
    geometry: Geometry
    #: The length the specification gives the cache (used only to aim appends and truncations).
    length: int = 0


@dataclass
class _Session:
    model: str
    cache: str
    step_tokens: int
    #: The ``n_kv_heads`` and ``head_dim`` of the cache the plan was built over.
    heads: tuple[int, int] = (0, 0)


def _handle_order(name: str) -> tuple[int, str]:
    return (int(name[1:]), name) if name[1:].isdigit() else (0, name)


@dataclass
class KeyState:
    """One program under construction and what is live in it."""

    src: Source
    plan: bool
    scope: Scope = field(default_factory=Scope)
    #: The classes the implementation declares: besides the rules above, the table's
    #: other operations of these classes are drawn (:meth:`table_rules`).
    classes: frozenset[str] = frozenset()
    ops: list[ops.Op] = field(default_factory=list)
    models: dict[str, _Model] = field(default_factory=dict)
    caches: dict[str, _Cache] = field(default_factory=dict)
    sessions: dict[str, _Session] = field(default_factory=dict)
    keys: list[PlanIdentity] = field(default_factory=list)
    #: Live objects of kinds the builder keeps no state for, by kind (:meth:`plain`).
    others: dict[str, dict[str, object]] = field(default_factory=dict)
    serial: int = 0

    def fresh(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def pick(self, names: Mapping[str, object]) -> str:
        return pick(self.src, sorted(names, key=_handle_order))

    def live(self, kind: str) -> Mapping[str, object] | None:
        """The live objects of a kind of object (a handle field's name), if the builder knows it."""
        pools: dict[str, Mapping[str, object]] = {
            "model": self.models,
            "cache": self.caches,
            "session": self.sessions,
        }
        return pools.get(kind, self.others.get(kind))

    def all_live(self) -> dict[str, object]:
        every: dict[str, object] = {**self.models, **self.caches, **self.sessions}
        for pool in self.others.values():
            every.update(pool)
        return every

    def forget(self, handle: str) -> None:
        for pool in (self.models, self.caches, self.sessions, *self.others.values()):
            pool.pop(handle, None)  # type: ignore[attr-defined]

    def step(self, rules: Sequence[Callable[[], None]]) -> bool:
        """Add one operation (``True``), or end the program (``False``).

        The flag is chosen even for the first step (which always happens), so that
        every step has the same layout and deleting one leaves the next intact.
        """
        if self.src.integer(0, 39) == 0 and self.ops:
            return False
        pick(self.src, rules)()
        return True

    def maybe_read(self, handle: str) -> None:
        """Sometimes read a handle's id right after an operation that may (or must not) mint."""
        if self.src.integer(0, 2) != 0:
            self.read(handle)

    def read(self, handle: str) -> None:
        """Read a handle's id; done after every operation that must mint (as the scenario
        compiler does), since a counter starting at 0 shows only on the first mint."""
        if handle in self.models:
            self.ops.append(ops.ModelInstanceId(model=handle))
        elif handle in self.caches:
            self.ops.append(ops.CacheAllocId(cache=handle))

    def epilogue(self) -> None:
        """Read every live model's and cache's id, and every cache's length (no choices)."""
        for name in sorted(self.models, key=_handle_order):
            self.ops.append(ops.ModelInstanceId(model=name))
        for name in sorted(self.caches, key=_handle_order):
            self.ops.append(ops.CacheAllocId(cache=name))
            self.ops.append(ops.CacheLen(cache=name))

    def drop(self, handle: str) -> None:
        self.maybe_read(handle)
        self.forget(handle)
        self.ops.append(ops.Drop(handle=handle))

    def model_spec(self) -> ModelSpec:
        schema = self.scope.key_schema
        return model_spec(self.src) if schema is None else schema_spec(self.src, schema)

    def geometry(self) -> Geometry:
        return geometry(self.src)
