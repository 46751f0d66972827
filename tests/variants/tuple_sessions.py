"""Held plans that record the identity tuple itself and compare tuples.

Differs from the reference only where the specification leaves room: a held
plan stores the tuple of every component PLAN-15 lists instead of its FNV-1a
hash, and validity is tuple equality (PLAN-4's "the key recomputed equals the
key recorded", with the tuple as the key's pre-image). Floats are stored as
their bit patterns: tuple equality on floats would make a NaN parameter never
equal itself and +0.0 equal -0.0, which PLAN-16 and HASH-6 forbid.

The ``plan_key`` probe hashes the same tuple with the HASH primitives by a
generic walk (a count before every tuple), a composition of its own (PLAN-3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kvconform_reference import kv_cache, model
from kvconform_reference.hasher import KeyHasher, f64_bits

from kvconform.adapters.reference import ReferenceAdapter, cache_geometry
from kvconform.values import AdapterInfo, PlanIdentity, StepInputs

from . import variant

Component = str | int | bool | tuple["Component", ...]


def _param(value: model.Param) -> tuple[str, int | str]:
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, float):
        return ("f64", f64_bits(value))  # bits, never float equality
    return ("u64", value)


def identity_tuple(
    family: str,
    params: Mapping[str, model.Param],
    hooks: Mapping[str, bool],
    instance: int,
    alloc: int,
    geometry: kv_cache.CacheGeometry,
    step_tokens: int,
) -> tuple[Component, ...]:
    return (
        family,
        tuple((name, *_param(params[name])) for name in sorted(params)),
        tuple((name, bool(hooks[name])) for name in sorted(hooks)),
        instance,
        alloc,
        (geometry.n_layers, geometry.n_kv_heads, geometry.head_dim, geometry.max_seq_len),
        geometry.dtype,
        step_tokens,
    )


def _walk(h: KeyHasher, value: Component) -> None:
    if isinstance(value, bool):
        h.mix_present(value)  # HASH-7: presence is some/none
    elif isinstance(value, int):
        h.mix_u64(value)
    elif isinstance(value, str):
        h.mix_str(value)
    else:
        h.mix_u64(len(value))
        for item in value:
            _walk(h, item)


def tuple_key(identity: tuple[Component, ...]) -> int:
    h = KeyHasher().mix_str("tuple-sessions")
    instance = identity[3]
    assert isinstance(instance, int)
    for index, part in enumerate(identity):
        if index == 3:
            h.mix_instance(instance)  # HASH-8: the instance id behind its marker
        else:
            _walk(h, part)
    return h.finish()


def _of(m: model.Model, cache: kv_cache.KvCache, step_tokens: int) -> tuple[Component, ...]:
    return identity_tuple(
        m.config.family,
        m.config.params,
        m.hooks,
        m.instance_id.value,
        cache.alloc_id.value,
        cache.geometry,
        step_tokens,
    )


class TupleSession:
    """A held plan: the identity tuple it was built for, and nothing that keeps objects alive."""

    def __init__(self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int) -> None:
        if step_tokens < 1:
            raise ValueError("a step has at least one token")
        self.identity = _of(m, cache, step_tokens)

    def valid_for(self, m: model.Model, cache: kv_cache.KvCache, tokens: int) -> bool:
        return _of(m, cache, tokens) == self.identity


@variant(
    "tuple-sessions",
    "held plans record the identity tuple (floats as bits) and compare tuples; the probe "
    "key hashes that tuple with a generic, count-prefixed walk",
)
class TupleSessions(ReferenceAdapter):
    #: Its plans are its own, with a boolean validity only (CONF-10).
    classes = ReferenceAdapter.classes - {"plan_validity"}

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="variant-tuple-sessions")

    def plan_key(self, identity: PlanIdentity) -> int:
        spec = identity.model
        return tuple_key(
            identity_tuple(
                spec.family,
                spec.param_map(),
                spec.hook_map(),
                identity.instance,
                identity.alloc,
                cache_geometry(identity.geometry),
                identity.step_tokens,
            )
        )

    def session_new(  # type: ignore[override]
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> TupleSession:
        return TupleSession(m, cache, step_tokens)

    def session_valid(  # type: ignore[override]
        self, session: TupleSession, m: model.Model, cache: kv_cache.KvCache, step: StepInputs
    ) -> bool:
        return session.valid_for(m, cache, len(step.token_ids))  # only the count (PLAN-6)
