"""The key-side rules of the class ``plan``: held plans made and checked, plan-key
probes, and the variations of an identity a probe compares.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace
from typing import Any, cast

from hypothesis import strategies as st

from kvconform.differential.strategies.alloc import AllocRules
from kvconform.differential.strategies.identity import IdentityRules
from kvconform.differential.strategies.scope import fills_schema
from kvconform.differential.strategies.source import Source, flag, pick, strategy
from kvconform.differential.strategies.state import _Session
from kvconform.differential.strategies.values import (
    _ABOVE_32_BITS,
    _FAMILIES,
    _HOOK_NAMES,
    _PARAM_NAMES,
    DTYPES,
    U64_MAX,
    param_value,
    step_inputs,
    wide,
)
from kvconform.harness.key_schema import outside_schema
from kvconform.protocol import operations as ops
from kvconform.values import (
    Param,
    PlanIdentity,
)

_ID_EDGES = (1, 2, 3, 1 << 32, 1 << 63, U64_MAX)


def plan_id(src: Source) -> int:
    """An explicit id value for a plan-key probe (any u64 of at least 1)."""
    return pick(src, _ID_EDGES) if src.integer(0, 1) == 0 else wide(src, 1, U64_MAX)


ids: st.SearchStrategy[int] = strategy(plan_id)

#: Parameter values that encode to the same bytes without their type name:
#: u64(0), f64(+0.0) and str("") are eight zero bytes; u64(bits(x)) and f64(x) agree;
#: and the same number as u64, f64 and str.
_RETYPED: tuple[tuple[Param, Param], ...] = (
    (0, 0.0),
    (0, ""),
    (0.0, ""),
    (0x3FF0_0000_0000_0000, 1.0),
    (0x4040_0000_0000_0000, 32.0),
    (32, 32.0),
    (32, "32"),
)

_VARIATIONS = (
    "same",
    "family",
    "param",
    "float-sign",
    "retype",
    "hook",
    "rename-hook",
    "reorder",
    "instance",
    "alloc",
    "geometry",
    "dtype",
    "step",
    "high-bits",
)


def _other(value: int, not_this: int) -> int:
    """``value``, moved off ``not_this`` (a choice that must differ, without a filter)."""
    return value if value != not_this else (value + 1 if value < U64_MAX else value - 1)


def vary_identity(src: Source, base: PlanIdentity) -> list[PlanIdentity]:
    """``base`` with one component changed, or written differently but equal (then the key
    must not change): the probe of PLAN-16 (under-keying) and of over-keying on form.

    Usually one identity; a retyped parameter gives the two members of a pair whose
    encodings coincide without the type name.
    """
    what = pick(src, _VARIATIONS)
    model, g = base.model, base.geometry
    params, hooks = dict(model.params), dict(model.hooks)

    def with_model(**changes: Any) -> list[PlanIdentity]:
        return [replace(base, model=replace(model, **changes))]

    if what == "family":
        return with_model(family=pick(src, _FAMILIES))
    if what == "param":
        name = pick(src, _PARAM_NAMES)
        if name in params and flag(src):
            del params[name]
        else:
            params[name] = param_value(src)
        return with_model(params=tuple(params.items()))
    if what == "float-sign":  # only the sign bit differs (PLAN-16)
        floats = [n for n, v in params.items() if isinstance(v, float) and not math.isnan(v)]
        if floats:
            name = pick(src, floats)
            params[name] = -params[name]  # type: ignore[operator]
        else:
            params[pick(src, _PARAM_NAMES)] = pick(src, (0.0, -0.0))
        return with_model(params=tuple(params.items()))
    if what == "retype":  # the same bytes but another type: untyped, these keys collide
        a, b = pick(src, _RETYPED)
        name = pick(src, _PARAM_NAMES)
        return [with_model(params=tuple({**params, name: v}.items()))[0] for v in (a, b)]
    if what == "hook":
        name = pick(src, _HOOK_NAMES)
        present = hooks[name] if name in hooks else flag(src)
        hooks[name] = not present
        return with_model(hooks=tuple(hooks.items()))
    if what == "rename-hook":  # the same presence under another name
        old = pick(src, sorted(hooks)) if hooks else None
        free = [h for h in _HOOK_NAMES if h not in hooks]
        if not free:  # every name taken: rename onto a name no list holds
            free = [f"{old}_renamed"]
        kept = hooks.pop(old) if old is not None else flag(src)
        hooks[pick(src, free)] = kept
        return with_model(hooks=tuple(hooks.items()))
    if what == "reorder":  # the same parameters and hooks listed in another order
        return with_model(params=tuple(reversed(model.params)), hooks=tuple(reversed(model.hooks)))
    if what == "instance":
        return [replace(base, instance=_other(plan_id(src), base.instance))]
    if what == "alloc":
        return [replace(base, alloc=_other(plan_id(src), base.alloc))]
    if what == "geometry":
        name = pick(src, ("n_layers", "n_kv_heads", "head_dim", "max_seq_len"))
        changed: dict[str, Any] = {name: _other(src.integer(1, 9), getattr(g, name))}
        return [replace(base, geometry=replace(g, **changed))]
    if what == "dtype":
        dtype = pick(src, [d for d in DTYPES if d != g.dtype])
        return [replace(base, geometry=replace(g, dtype=dtype))]
    if what == "step":
        return [replace(base, step_tokens=src.integer(1, 4))]
    if what == "high-bits":  # equal in the low 32 bits: a count held in 32 bits (PLAN-16)
        target = pick(src, ("param", "geometry", "step"))
        ints = [n for n, v in params.items() if type(v) is int and v <= U64_MAX - _ABOVE_32_BITS]
        if target == "param" and ints:
            name = pick(src, ints)
            params[name] = cast(int, params[name]) + _ABOVE_32_BITS
            return with_model(params=tuple(params.items()))
        if target == "geometry":
            name = pick(src, ("n_layers", "n_kv_heads", "head_dim"))
            return [replace(base, geometry=replace(g, **{name: getattr(g, name) + _ABOVE_32_BITS}))]
        return [replace(base, step_tokens=base.step_tokens + _ABOVE_32_BITS)]
    return [base]


class PlanRules(IdentityRules, AllocRules):
    """Held plans: made over a model and a cache, checked, dropped; plan-key probes."""

    def new_session(self) -> None:
        if not (self.models and self.caches):
            return
        self.session_on(self.pick(self.models), self.pick(self.caches))

    def session_on(self, model: str, cache: str) -> str:
        name = self.fresh("s")
        step_tokens = self.src.integer(1, 3)
        g = self.caches[cache].geometry
        self.sessions[name] = _Session(model, cache, step_tokens, (g.n_kv_heads, g.head_dim))
        self.ops.append(
            ops.SessionNew(handle=name, model=model, cache=cache, step_tokens=step_tokens)
        )
        return name

    def check_with(self, session: str, model: str, cache: str) -> None:
        """Ask whether a held plan is valid; for an implementation of ``plan_validity``,
        half the time ask for its outcome instead (PLAN-19)."""
        step = step_inputs(self.src, self.sessions[session].step_tokens)
        if (
            "plan_validity" in self.classes
            and flag(self.src)
            and not self.validity_is_policy(session, cache)
        ):
            self.ops.append(
                ops.SessionValidity(session=session, model=model, cache=cache, step=step)
            )
            return
        self.ops.append(ops.SessionValid(session=session, model=model, cache=cache, step=step))

    def check(self) -> None:
        if not (self.sessions and self.models and self.caches):
            return
        name = self.pick(self.sessions)
        session = self.sessions[name]
        own = self.src.integer(0, 3) < 3  # mostly the plan's own model and cache
        model = session.model if own and session.model in self.models else None
        cache = session.cache if own and session.cache in self.caches else None
        self.check_with(name, model or self.pick(self.models), cache or self.pick(self.caches))

    def drop_session(self) -> None:
        if self.sessions:
            self.drop(self.pick(self.sessions))

    def plan_key(self) -> None:
        """A probe: a base identity (new, or one probed before) and 1-3 variations of it."""
        src = self.src
        if self.keys and flag(src):
            base = pick(src, self.keys)
        else:
            base = PlanIdentity(
                model=self.model_spec(),
                instance=plan_id(src),
                alloc=plan_id(src),
                geometry=self.geometry(),
                step_tokens=src.integer(1, 3),
            )
            self.probe(base)
        for _ in range(src.integer(1, 3)):
            for identity in src.group(lambda: vary_identity(src, base)):
                self.probe(identity)

    def probe(self, identity: PlanIdentity) -> None:
        scope = self.scope
        if not scope.vary_cache_heads:  # PLAN-15 `implied`: heads never tell two probes apart
            identity = dataclasses.replace(
                identity, geometry=dataclasses.replace(identity.geometry, n_kv_heads=1, head_dim=1)
            )
        if scope.key_schema is not None and (
            outside_schema(identity.model, scope.key_schema, "")
            or not fills_schema(identity.model, scope.key_schema)
        ):
            return
        self.keys.append(identity)
        self.ops.append(ops.PlanKey(identity=identity))

    def validity_is_policy(self, session: str, cache: str) -> bool:
        """Whether the outcome of ``session`` over ``cache`` depends on a declared option:
        under ``plan_key_cache_heads: implied`` a cache of other heads is
        ``allocation_changed`` (the heads are no component, PLAN-15, PLAN-19), under the
        reference's ``keyed`` it is ``stale``. The boolean validity agrees under both."""
        if self.scope.vary_cache_heads:
            return False
        g = self.caches[cache].geometry
        return (g.n_kv_heads, g.head_dim) != self.sessions[session].heads
