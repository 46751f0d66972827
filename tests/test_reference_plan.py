"""Unit tests of the reference held decode plan, ``reference/plan.py`` (spec/plan.md).

Baked, not bound: everything a plan bakes is in its key, nothing it rebinds per
step is. Each rule is checked in both directions -- a differing component
invalidates (under-keying would be a wrong answer) and a matching one does not
(over-keying would be a silent slowdown). Includes the counterpart of the seed
000 test that moved out of the seed crate
(``same_geometry_different_weights_do_not_share_a_plan``).
"""

from __future__ import annotations

import gc
import math
import struct
import weakref
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvconform_reference import hasher
from kvconform_reference.hasher import KeyHasher
from kvconform_reference.identity import KvAllocId, ModelInstanceId
from kvconform_reference.kv_cache import CacheGeometry, KvCache, KvLayer
from kvconform_reference.model import Model, ModelConfig, Param
from kvconform_reference.plan import DecodePlan, PlanIdentity, RopeSpec, StepInputs

from tests.heap import made_here

pytestmark = pytest.mark.covers(
    "PLAN-1",
    "PLAN-15",
    "PLAN-3",
    "PLAN-4",
    "PLAN-16",
    "PLAN-6",
    "PLAN-7",
    "PLAN-8",
    "PLAN-9",
    "PLAN-10",
    "PLAN-18",
    "PLAN-12",
    "PLAN-13",
    "PLAN-14",
    "HASH-6",
    "ID-6",
)

GEOMETRY = CacheGeometry(n_layers=2, n_kv_heads=2, head_dim=4, max_seq_len=16)
PARAMS: dict[str, Param] = {
    "n_layers": 2,
    "hidden": 64,
    "rms_norm_eps": 1e-6,
    "mask": "sliding_window",
    "window": 4,
}
CONFIG = ModelConfig(family="qwen3", params=PARAMS, hooks={"logit_hook": False, "lora": True})

OFFSET_BASIS = 0xCBF29CE484222325
PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1


def _step(n: int = 1, **kwargs: object) -> StepInputs:
    return StepInputs(token_ids=tuple(range(n)), **kwargs)  # type: ignore[arg-type]


def _append(cache: KvCache, n: int) -> None:
    g = cache.geometry
    data = np.ones((g.n_layers, n, g.n_kv_heads, g.head_dim), dtype=np.float32)
    cache.append(data, data)


def _fresh() -> tuple[Model, KvCache, DecodePlan]:
    model, cache = Model(CONFIG), KvCache(GEOMETRY)
    return model, cache, DecodePlan(model, cache, step_tokens=1)


# ---------------------------------------------------------------------------
# Counterpart of the seed test that moved out of fuel-tensor
# ---------------------------------------------------------------------------


def test_same_geometry_different_weights_do_not_share_a_plan() -> None:
    """Seed 000 ``same_geometry_different_weights_do_not_share_a_plan`` (moved upstream; PLAN-9).

    Two models of identical family, structure and hooks differ only in their weights,
    i.e. their instance ids: a plan built for one is invalid for the other, and stays
    valid for the one it was built for.
    """
    a, b = Model(CONFIG), Model(CONFIG)
    cache = KvCache(GEOMETRY)
    plan = DecodePlan(a, cache)
    assert not plan.is_valid_for(b, cache, _step())
    assert plan.is_valid_for(a, cache, _step())


# ---------------------------------------------------------------------------
# The validity key
# ---------------------------------------------------------------------------


def test_plan_records_its_key_at_build_time() -> None:
    """PLAN-1: the plan records the key of (model, cache, tokens per step) when built."""
    model, cache = Model(CONFIG), KvCache(GEOMETRY)
    plan = DecodePlan(model, cache, step_tokens=4)
    assert plan.step_tokens == 4
    assert plan.key == PlanIdentity.of(model, cache, 4).key()
    # Recorded, not recomputed: later changes to the model do not move it.
    recorded = plan.key
    model.set_hook("lora", False)
    assert plan.key == recorded
    with pytest.raises(ValueError):
        DecodePlan(model, cache, step_tokens=0)


def _fold(data: bytes) -> int:
    state = OFFSET_BASIS
    for byte in data:
        state = ((state ^ byte) * PRIME) & MASK64
    return state


def _u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def _str(s: str) -> bytes:
    b = s.encode()
    return b + _u64(len(b))


def _param(name: str, value: Param) -> bytes:
    if isinstance(value, str):
        return _str(name) + _str("str") + _str(value)
    if isinstance(value, float):
        return _str(name) + _str("f64") + struct.pack("<d", value)
    return _str(name) + _str("u64") + _u64(value)


def test_key_is_fnv1a_over_every_baked_component() -> None:
    """PLAN-15: FNV-1a 64 with the HASH primitives over family, params, hooks, instance,
    alloc, geometry and tokens per step (checked against the reference's documented
    composition, rebuilt here byte by byte)."""
    model, cache = Model(CONFIG), KvCache(GEOMETRY)
    encoded = _str("kvconform.plan") + _str("qwen3") + _u64(len(PARAMS))
    for name in sorted(PARAMS):
        encoded += _param(name, PARAMS[name])
    encoded += _u64(2) + _str("logit_hook") + _str("none") + _str("lora") + _str("some")
    encoded += _str("instance") + _u64(model.instance_id.value)
    encoded += _str("alloc") + _u64(cache.alloc_id.value)
    encoded += _u64(2) + _u64(2) + _u64(4) + _u64(16) + _str("f32")
    encoded += _u64(3)
    assert DecodePlan(model, cache, step_tokens=3).key == _fold(encoded)


def test_key_is_deterministic_and_ignores_listing_order() -> None:
    """PLAN-3: the same components always give the same key, however the config lists them."""
    model, cache = Model(CONFIG), KvCache(GEOMETRY)
    keys = {PlanIdentity.of(model, cache, 1).key() for _ in range(5)}
    assert len(keys) == 1
    reordered = PlanIdentity(
        family="qwen3",
        params=dict(reversed(list(PARAMS.items()))),
        hooks={"lora": True, "logit_hook": False},
        instance=model.instance_id.value,
        alloc=cache.alloc_id.value,
        geometry=GEOMETRY,
        step_tokens=1,
    )
    assert reordered.key() in keys


def test_validity_is_key_equality() -> None:
    """PLAN-4: valid iff the key recomputed from (model, cache, step's token count) matches."""
    model, cache, plan = _fresh()
    other_model, other_cache = Model(CONFIG), KvCache(GEOMETRY)
    for m in (model, other_model):
        for c in (cache, other_cache):
            for n in (1, 2):
                expected = PlanIdentity.of(m, c, n).key() == plan.key
                assert plan.is_valid_for(m, c, _step(n)) is expected
    assert plan.is_valid_for(model, cache, _step(1)) is True


def _identity(**changes: object) -> PlanIdentity:
    base: dict[str, object] = {
        "family": "qwen3",
        "params": dict(PARAMS),
        "hooks": {"logit_hook": False, "lora": True},
        "instance": 11,
        "alloc": 22,
        "geometry": GEOMETRY,
        "step_tokens": 1,
    }
    base.update(changes)
    return PlanIdentity(**base)  # type: ignore[arg-type]


def _with_param(name: str, value: Param) -> dict[str, Param]:
    params = dict(PARAMS)
    params[name] = value
    return params


NAN_A = hasher.f64_from_bits(0x7FF8000000000000)
NAN_B = hasher.f64_from_bits(0x7FF8000000000001)


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"family": "llama"}, id="family"),
        pytest.param({"params": _with_param("hidden", 65)}, id="int-param"),
        pytest.param({"params": _with_param("rms_norm_eps", 1e-5)}, id="float-param"),
        pytest.param({"params": _with_param("mask", "causal")}, id="str-param"),
        pytest.param({"params": _with_param("extra", 0)}, id="added-param"),
        pytest.param({"params": {k: v for k, v in PARAMS.items() if k != "window"}}, id="dropped"),
        pytest.param({"params": _with_param("window", 4.0)}, id="int-vs-float"),
        pytest.param({"params": _with_param("window", "4")}, id="int-vs-str"),
        pytest.param({"hooks": {"logit_hook": True, "lora": True}}, id="hook-presence"),
        pytest.param({"hooks": {"lora": True}}, id="hook-dropped"),
        pytest.param({"hooks": {"logit_hook": False, "lorb": True}}, id="hook-name"),
        pytest.param({"instance": 12}, id="instance"),
        pytest.param({"alloc": 23}, id="alloc"),
        pytest.param({"geometry": CacheGeometry(3, 2, 4, 16)}, id="n_layers"),
        pytest.param({"geometry": CacheGeometry(2, 1, 4, 16)}, id="n_kv_heads"),
        pytest.param({"geometry": CacheGeometry(2, 2, 8, 16)}, id="head_dim"),
        pytest.param({"geometry": CacheGeometry(2, 2, 4, 32)}, id="max_seq_len"),
        pytest.param({"geometry": CacheGeometry(2, 2, 4, 16, "f16")}, id="dtype"),
        pytest.param({"step_tokens": 4}, id="step_tokens"),
    ],
)
def test_changing_any_one_component_changes_the_key(changes: dict[str, object]) -> None:
    """PLAN-16: the composition is injective over each component."""
    assert _identity(**changes).key() != _identity().key()


def test_signed_zero_and_nan_payloads_key_by_bits() -> None:
    """PLAN-16 / HASH-6: -0.0 and +0.0 key differently, NaN payloads differ, same bits match."""
    pos, neg = _identity(params={"eps": 0.0}), _identity(params={"eps": -0.0})
    assert pos.key() != neg.key()
    assert _identity(params={"eps": NAN_A}).key() != _identity(params={"eps": NAN_B}).key()
    # The same NaN bit pattern keys the same although NaN != NaN.
    same = hasher.f64_from_bits(0x7FF8000000000001)
    assert same != NAN_B and math.isnan(same)
    assert _identity(params={"eps": NAN_B}).key() == _identity(params={"eps": same}).key()
    # Through whole models and plans as well.
    cache = KvCache(GEOMETRY)
    model = Model(ModelConfig(family="qwen3", params={"eps": -0.0}))
    plan = DecodePlan(model, cache)
    twin = PlanIdentity.of(model, cache, 1)
    assert plan.key == twin.key()
    assert plan.key != PlanIdentity(**{**twin.__dict__, "params": {"eps": 0.0}}).key()


def test_lists_are_count_prefixed() -> None:
    """PLAN-16: variable-length lists (params, hooks) cannot borrow each other's bytes."""
    # A string parameter whose value is "some" vs a hook of the same name that is present:
    # each entry ends in str("some"), and only the counts and type names separate them.
    as_param = _identity(params={"h": "some"}, hooks={})
    as_hook = _identity(params={}, hooks={"h": True})
    assert as_param.key() != as_hook.key()
    assert _identity(params={}, hooks={}).key() != _identity(params={"a": 0}, hooks={}).key()
    assert _identity(params={"a": 1, "b": 2}).key() != _identity(params={"a": 1}, hooks={}).key()


# ---------------------------------------------------------------------------
# What stays out of the key
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "step",
    [
        pytest.param(StepInputs(token_ids=(99,)), id="token-ids"),
        pytest.param(StepInputs(token_ids=(0,), write_offset=7), id="write-offset"),
        pytest.param(StepInputs(rope=RopeSpec(theta=500000.0)), id="rope-base"),
        pytest.param(StepInputs(rope=RopeSpec(theta=500000.0, scaling=8.0)), id="llama31-scale"),
        pytest.param(StepInputs(mask=(1, 1, 0, 0)), id="mask-values"),
        pytest.param(
            StepInputs(token_ids=(5,), write_offset=3, rope=RopeSpec(1.0, 2.0), mask=(0,)),
            id="all-at-once",
        ),
    ],
)
def test_per_step_inputs_do_not_affect_validity(step: StepInputs) -> None:
    """PLAN-6: token ids, RoPE (base, scaling), mask values and write offset are not keyed ..."""
    model, cache, plan = _fresh()
    assert plan.is_valid_for(model, cache, step)


def test_step_token_count_does_affect_validity() -> None:
    """PLAN-6: ... but the number of tokens in a step is structural."""
    model, cache = Model(CONFIG), KvCache(GEOMETRY)
    decode, verify4 = DecodePlan(model, cache, 1), DecodePlan(model, cache, 4)
    assert decode.is_valid_for(model, cache, _step(1))
    assert not decode.is_valid_for(model, cache, _step(4))
    assert verify4.is_valid_for(model, cache, _step(4))
    assert not verify4.is_valid_for(model, cache, _step(1))
    assert not verify4.is_valid_for(model, cache, StepInputs(token_ids=()))


def test_cache_length_does_not_affect_validity() -> None:
    """PLAN-7: appending and rewinding the cache keep the plan valid."""
    model, cache, plan = _fresh()
    _append(cache, 5)
    assert plan.is_valid_for(model, cache, _step(write_offset=5))
    cache.truncate_to(2)
    assert plan.is_valid_for(model, cache, _step(write_offset=2))
    _append(cache, 14)
    assert len(cache) == 16
    assert plan.is_valid_for(model, cache, _step())
    cache.truncate_to(0)
    assert plan.is_valid_for(model, cache, _step())


def test_hasher_offers_no_address_primitive() -> None:
    """PLAN-8: weights enter only through the instance id; there is no address primitive."""
    mixers = {name for name in dir(KeyHasher) if name.startswith("mix_")}
    assert mixers == {
        "mix_bytes",
        "mix_u64",
        "mix_str",
        "mix_f64",
        "mix_f64_bits",
        "mix_present",
        "mix_instance",
    }
    # The plan identity carries the instance id and nothing address-like.
    model, cache = Model(CONFIG), KvCache(GEOMETRY)
    ident = PlanIdentity.of(model, cache, 1)
    assert ident.instance == model.instance_id.value
    assert id(model) not in ident.__dict__.values() and id(cache) not in ident.__dict__.values()


# ---------------------------------------------------------------------------
# What a plan is valid for
# ---------------------------------------------------------------------------


def test_plan_is_invalid_for_every_other_model() -> None:
    """PLAN-9: including a model of identical family, params and hooks, or a reload (ID-6)."""
    model, cache, plan = _fresh()
    assert not plan.is_valid_for(Model(CONFIG), cache, _step())
    assert not plan.is_valid_for(model.reload(), cache, _step())
    assert not plan.is_valid_for(Model(ModelConfig("llama", PARAMS, CONFIG.hooks)), cache, _step())
    assert plan.is_valid_for(model, cache, _step())


def test_plan_is_invalid_for_every_other_allocation() -> None:
    """PLAN-10: another same-geometry cache, the cache after clear() or after a layer was
    replaced are all invalid; its own allocation always stays valid."""
    model, cache, plan = _fresh()
    assert not plan.is_valid_for(model, KvCache(GEOMETRY), _step())
    _append(cache, 3)
    assert plan.is_valid_for(model, cache, _step())

    cache.clear()
    assert not plan.is_valid_for(model, cache, _step())

    cache2 = KvCache(GEOMETRY)
    plan2 = DecodePlan(model, cache2)
    cache2.set_layer(1, KvLayer.allocate(GEOMETRY))
    assert not plan2.is_valid_for(model, cache2, _step())
    # A refused replacement keeps the allocation and therefore the plan.
    plan3 = DecodePlan(model, cache2)
    with pytest.raises(Exception):  # noqa: B017
        cache2.set_layer(5, KvLayer.allocate(GEOMETRY))
    assert plan3.is_valid_for(model, cache2, _step())


def test_hook_toggle_invalidates_and_restoring_revalidates() -> None:
    """PLAN-18: toggling a hook in place flips validity; restoring the state restores it."""
    model, cache, plan = _fresh()
    instance = model.instance_id
    model.set_hook("logit_hook", True)
    assert model.instance_id == instance
    assert not plan.is_valid_for(model, cache, _step())
    with_hook = DecodePlan(model, cache)
    model.set_hook("logit_hook", False)
    assert plan.is_valid_for(model, cache, _step())
    assert not with_hook.is_valid_for(model, cache, _step())
    model.set_hook("lora", False)
    assert not plan.is_valid_for(model, cache, _step())
    model.set_hook("lora", True)
    assert plan.is_valid_for(model, cache, _step())
    assert with_hook.is_valid_for(model, cache, _step()) is False


def test_toggling_a_hook_the_config_does_not_declare_is_refused() -> None:
    """PLAN-18: the hooks a model can carry are those its configuration declares, so
    restoring a hook state restores exactly the original key; an undeclared hook is not
    a state of the model, and toggling it is refused with nothing changed."""
    model = Model(ModelConfig(family="qwen3", params=PARAMS))
    cache = KvCache(GEOMETRY)
    plan = DecodePlan(model, cache)
    with pytest.raises(KeyError):
        model.set_hook("adapter", True)
    assert plan.is_valid_for(model, cache, _step())


# ---------------------------------------------------------------------------
# Limits and side effects
# ---------------------------------------------------------------------------


def test_reloading_invalidates_in_place_mutation_does_not() -> None:
    """PLAN-12 (the checkable half) / ID-6: a reloaded model gets a new id and its old plans
    are invalid; mutating KV contents in place changes no key, which is why reuse across an
    in-place update is the caller's responsibility."""
    model, cache, plan = _fresh()
    assert not plan.is_valid_for(model.reload(), cache, _step())
    cache.layer(0).k[...] = 3.0  # an in-place write the predicate cannot see
    assert plan.is_valid_for(model, cache, _step())


def test_validity_check_has_no_side_effects() -> None:
    """PLAN-13: mints nothing, changes no plan, model or cache, and repeats its answer."""
    model, cache, plan = _fresh()
    _append(cache, 2)
    stale = DecodePlan(Model(CONFIG), cache)
    state_before = (
        plan.key,
        stale.key,
        model.instance_id,
        dict(model.hooks),
        cache.alloc_id,
        len(cache),
        [cache.layer(i) for i in range(GEOMETRY.n_layers)],
    )
    probe_model, probe_alloc = ModelInstanceId.mint(), KvAllocId.mint()
    answers = [
        (plan.is_valid_for(model, cache, _step()), stale.is_valid_for(model, cache, _step()))
        for _ in range(20)
    ]
    # No id was minted in between (the reference steps by 1).
    assert ModelInstanceId.mint().value == probe_model.value + 1
    assert KvAllocId.mint().value == probe_alloc.value + 1
    assert set(answers) == {(True, False)}
    state_after = (
        plan.key,
        stale.key,
        model.instance_id,
        dict(model.hooks),
        cache.alloc_id,
        len(cache),
        [cache.layer(i) for i in range(GEOMETRY.n_layers)],
    )
    assert state_after[:6] == state_before[:6]
    assert all(a is b for a, b in zip(state_after[6], state_before[6], strict=True))


def test_plan_does_not_keep_model_or_cache_alive() -> None:
    """PLAN-14: after del, both are collected (weakref dies); the plan is then invalid for
    models and caches constructed afterwards with the same configuration and geometry."""
    with made_here():
        model, cache = Model(CONFIG), KvCache(GEOMETRY)
        plan = DecodePlan(model, cache)
        model_ref, cache_ref = weakref.ref(model), weakref.ref(cache)
        assert plan.is_valid_for(model, cache, _step())
        del model, cache
        gc.collect()
    assert model_ref() is None, "the plan (or something) kept the model alive"
    assert cache_ref() is None, "the plan (or something) kept the cache alive"
    new_model, new_cache = Model(CONFIG), KvCache(GEOMETRY)
    assert not plan.is_valid_for(new_model, new_cache, _step())
    assert not plan.is_valid_for(new_model.reload(), KvCache(GEOMETRY), _step())


# ---------------------------------------------------------------------------
# Property: validity depends on the step only through its token count
# ---------------------------------------------------------------------------

FLOATS = st.floats(allow_nan=True, allow_infinity=True)


def _steps(n_tokens: st.SearchStrategy[int]) -> st.SearchStrategy[StepInputs]:
    return n_tokens.flatmap(
        lambda n: st.builds(
            StepInputs,
            token_ids=st.lists(st.integers(0, 2**32), min_size=n, max_size=n).map(tuple),
            write_offset=st.integers(0, 2**20),
            rope=st.builds(RopeSpec, theta=FLOATS, scaling=st.none() | FLOATS),
            mask=st.lists(st.integers(-1, 1), max_size=8).map(tuple),
        )
    )


_MODEL, _CACHE = Model(CONFIG), KvCache(GEOMETRY)
_PLANS: Mapping[int, DecodePlan] = {n: DecodePlan(_MODEL, _CACHE, n) for n in range(1, 6)}


def _valid(built_for: int, step: StepInputs) -> bool:
    return _PLANS[built_for].is_valid_for(_MODEL, _CACHE, step)


@settings(max_examples=200, deadline=None, database=None)
@given(data=st.data(), built_for=st.integers(1, 5))
def test_property_validity_depends_only_on_token_count(data: st.DataObject, built_for: int) -> None:
    """PLAN-6 as a property: any StepInputs with the plan's token count is valid; any other
    token count is invalid, whatever the other per-step data."""
    same = data.draw(_steps(st.just(built_for)), label="same")
    assert _valid(built_for, same)
    other_n = data.draw(st.integers(0, 8).filter(lambda n: n != built_for), label="other_n")
    other = data.draw(_steps(st.just(other_n)), label="other")
    assert not _valid(built_for, other)
