"""Unit tests of the reference identities, ``reference/identity.py`` and ``model.py``.

Model instance ids (spec/identity.md, ID group): counterparts of the seed 000
tests on ``ModelInstanceId``, one test per testable ID requirement, and a
multi-threaded minting property for both id kinds.
"""

from __future__ import annotations

import gc
import threading
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvconform_reference.hasher import KeyHasher
from kvconform_reference.identity import KvAllocId, ModelInstanceId
from kvconform_reference.model import Model, ModelConfig

from tests.heap import made_here

pytestmark = pytest.mark.covers(
    "ID-1", "ID-2", "ID-3", "ID-4", "ID-5", "ID-6", "ID-10", "ID-8", "ALLOC-1"
)

U64_MAX = (1 << 64) - 1

CONFIG = ModelConfig(
    family="llama",
    params={"n_layers": 2, "rms_norm_eps": 1e-5, "mask": "causal"},
    hooks={"logit_hook": False},
)


def _key(instance: ModelInstanceId) -> int:
    return KeyHasher().mix_str("llama").mix_instance(instance.value).finish()


# ---------------------------------------------------------------------------
# Counterparts of the seed's tests (seed 000, fuel-tensor)
# ---------------------------------------------------------------------------


def test_distinct_model_instances_key_differently() -> None:
    """Seed 000 ``distinct_model_instances_key_differently`` (ID-3, HASH-8).

    Two models of the same architecture must key differently -- and the SAME
    instance must key identically, the half that guards plan reuse.
    """
    a = ModelInstanceId.mint()
    b = ModelInstanceId.mint()
    assert a != b, "ids must never repeat"
    assert _key(a) != _key(b)
    assert _key(a) == _key(a)
    # The same holds for ids carried by constructed models of identical config.
    m1, m2 = Model(CONFIG), Model(CONFIG)
    assert m1.instance_id != m2.instance_id
    assert _key(m1.instance_id) != _key(m2.instance_id)
    assert _key(m1.instance_id) == _key(m1.instance_id)


def test_ids_are_not_recycled_across_drops() -> None:
    """Seed 000 ``ids_are_not_recycled_across_drops`` (ID-3).

    A model constructed after another is dropped cannot inherit its id.
    """

    def dropped() -> int:
        return ModelInstanceId.mint().value

    first = dropped()
    second = ModelInstanceId.mint().value
    assert second > first, f"id {second} did not advance past the dropped {first}"

    with made_here():
        model = Model(CONFIG)
        dropped_id = model.instance_id
        del model
        gc.collect()
        later = Model(CONFIG)
    assert later.instance_id > dropped_id


# ---------------------------------------------------------------------------
# One test per requirement
# ---------------------------------------------------------------------------


def test_ids_are_nonzero_u64() -> None:
    """ID-1 (and ALLOC-1 for allocation ids): an unsigned 64-bit integer other than zero."""
    for minted in (ModelInstanceId.mint(), Model(CONFIG).instance_id, KvAllocId.mint()):
        assert isinstance(minted.value, int)
        assert 1 <= minted.value <= U64_MAX


def test_ids_strictly_increase_in_minting_order() -> None:
    """ID-2 (and ALLOC-1): strictly increasing in the order minted, for both counters."""
    models = [ModelInstanceId.mint() for _ in range(50)]
    assert all(a < b for a, b in pairwise(models))
    assert all(a.value < b.value for a, b in pairwise(models))
    allocs = [KvAllocId.mint() for _ in range(50)]
    assert all(a < b for a, b in pairwise(allocs))


def test_ids_never_repeat() -> None:
    """ID-3 (and ALLOC-1): no id is issued twice, models constructed and dropped included."""
    seen: set[int] = set()
    for _ in range(200):
        model = Model(CONFIG)
        assert model.instance_id.value not in seen
        seen.add(model.instance_id.value)
        del model
    alloc_seen = {KvAllocId.mint().value for _ in range(200)}
    assert len(alloc_seen) == 200


def test_ids_owe_nothing_to_address_name_or_config() -> None:
    """ID-4: identical config gives different ids, and a reused address gives a new id."""
    a, b = Model(CONFIG), Model(ModelConfig(family="llama", params=dict(CONFIG.params)))
    assert a.instance_id != b.instance_id
    assert a.instance_id.value != id(a)

    # Drop and reconstruct until CPython hands back the same address (it usually
    # does at once); whether or not it does, the id must still advance.
    probe = Model(CONFIG)
    address, old = id(probe), probe.instance_id
    del probe
    for _ in range(50):
        again = Model(CONFIG)
        assert again.instance_id > old
        if id(again) == address:
            break
        del again


def _mint_concurrently(
    mint: type[ModelInstanceId] | type[KvAllocId], n_threads: int, per_thread: int
) -> list[list[int]]:
    barrier = threading.Barrier(n_threads)
    results: list[list[int]] = [[] for _ in range(n_threads)]

    def work(slot: int) -> None:
        barrier.wait()
        out = results[slot]
        for _ in range(per_thread):
            out.append(mint.mint().value)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.parametrize("kind", [ModelInstanceId, KvAllocId], ids=["instance", "alloc"])
def test_minting_from_threads_is_distinct_and_increasing(
    kind: type[ModelInstanceId] | type[KvAllocId],
) -> None:
    """ID-5 (and ALLOC-1): 8 threads x 500 mints, started together by a barrier."""
    results = _mint_concurrently(kind, n_threads=8, per_thread=500)
    flat = [v for per in results for v in per]
    assert len(flat) == 8 * 500
    assert len(set(flat)) == len(flat), "two threads received one id"
    for per in results:
        assert all(a < b for a, b in pairwise(per)), "a thread saw its ids go backwards"
    assert min(flat) >= 1


@settings(max_examples=10, deadline=None, database=None)
@given(
    n_threads=st.integers(2, 8),
    per_thread=st.integers(1, 200),
    kind=st.sampled_from([ModelInstanceId, KvAllocId]),
)
def test_property_concurrent_minting(
    n_threads: int, per_thread: int, kind: type[ModelInstanceId] | type[KvAllocId]
) -> None:
    """ID-5 as a property: any thread count and mint count, ids distinct and per-thread rising."""
    results = _mint_concurrently(kind, n_threads, per_thread)
    flat = [v for per in results for v in per]
    assert len(set(flat)) == n_threads * per_thread
    for per in results:
        assert per == sorted(per) and len(set(per)) == len(per)


def test_reloading_a_model_gives_a_new_id() -> None:
    """ID-6: a model constructed again from the same source receives a new, greater id."""
    model = Model(CONFIG)
    reloaded = model.reload()
    assert reloaded.config == model.config
    assert reloaded.instance_id != model.instance_id
    assert reloaded.instance_id > model.instance_id


def test_hook_toggles_keep_the_instance_id() -> None:
    """ID-10: attaching or detaching a hook, or reading the model, leaves the id unchanged."""
    model = Model(CONFIG)
    original = model.instance_id
    model.set_hook("logit_hook", True)
    assert model.instance_id == original
    model.set_hook("logit_hook", False)
    assert model.instance_id == original
    _ = (model.hooks, model.config)
    assert model.instance_id == original
    assert model.hooks["logit_hook"] is False


def test_ids_start_at_least_one_and_step_positively() -> None:
    """ID-8: the reference starts at >= 1 and advances by a positive step; ids compare by order."""
    a, b, c = ModelInstanceId.mint(), ModelInstanceId.mint(), ModelInstanceId.mint()
    assert a.value >= 1
    assert b.value - a.value > 0 and c.value - b.value > 0
    # Equality and order are by value, the only normative properties.
    assert ModelInstanceId(a.value) == a
    assert sorted([c, a, b]) == [a, b, c]
