"""Unit tests of the reference KV cache, ``reference/kv_cache.py`` (spec/identity.md, ALLOC).

The allocation id names the buffers, not the conversation: operations that
replace storage mint, operations that leave it in place do not, and refused
operations change nothing. Counterpart of seed 000's
``alloc_id_tracks_the_allocation_not_the_conversation``, one test per ALLOC
requirement, and a property over random operation sequences.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvconform_reference.errors import (
    CacheError,
    CapacityExceeded,
    LayerOutOfRange,
    LayerShapeMismatch,
)
from kvconform_reference.identity import KvAllocId
from kvconform_reference.kv_cache import CacheGeometry, KvCache, KvLayer

pytestmark = pytest.mark.covers(
    "ALLOC-1",
    "ALLOC-2",
    "ALLOC-18",
    "ALLOC-4",
    "ALLOC-5",
    "ALLOC-15",
    "ALLOC-7",
    "ALLOC-16",
    "ALLOC-9",
    "ALLOC-17",
    "ALLOC-11",
    "ALLOC-12",
    "ALLOC-13",
    "ALLOC-14",
    "ERR-2",
)

GEOMETRY = CacheGeometry(n_layers=2, n_kv_heads=2, head_dim=4, max_seq_len=8)


def _data(g: CacheGeometry, n: int, start: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Append data for ``n`` positions, ``(n_layers, n, n_kv_heads, head_dim)``, all distinct."""
    shape = (g.n_layers, n, g.n_kv_heads, g.head_dim)
    count = int(np.prod(shape))
    k = (np.arange(count, dtype=np.float32) + start).reshape(shape)
    return k, -k


def _filled(n: int, g: CacheGeometry = GEOMETRY) -> KvCache:
    cache = KvCache(g)
    if n:
        cache.append(*_data(g, n))
    return cache


def _layer(
    g: CacheGeometry = GEOMETRY,
    *,
    heads: int | None = None,
    dim: int | None = None,
    capacity: int | None = None,
    dtype: type[np.generic] = np.float32,
    v_dtype: type[np.generic] | None = None,
) -> KvLayer:
    shape = (
        g.max_seq_len if capacity is None else capacity,
        g.n_kv_heads if heads is None else heads,
        g.head_dim if dim is None else dim,
    )
    return KvLayer(
        k=np.full(shape, 7.0, dtype=dtype), v=np.full(shape, 7.0, dtype=v_dtype or dtype)
    )


@dataclass
class Snapshot:
    length: int
    alloc_id: KvAllocId
    layers: list[KvLayer]
    contents: list[tuple[np.ndarray, np.ndarray]]

    @classmethod
    def of(cls, cache: KvCache) -> Snapshot:
        layers = [cache.layer(i) for i in range(cache.geometry.n_layers)]
        return cls(
            length=len(cache),
            alloc_id=cache.alloc_id,
            layers=layers,
            contents=[(layer.k.copy(), layer.v.copy()) for layer in layers],
        )

    def assert_unchanged(self, cache: KvCache) -> None:
        assert len(cache) == self.length
        assert cache.alloc_id == self.alloc_id
        for i, (layer, (k, v)) in enumerate(zip(self.layers, self.contents, strict=True)):
            assert cache.layer(i) is layer, f"layer {i}'s storage was replaced"
            np.testing.assert_array_equal(layer.k, k)
            np.testing.assert_array_equal(layer.v, v)


# ---------------------------------------------------------------------------
# Counterpart of the seed's test (seed 000, fuel-tensor)
# ---------------------------------------------------------------------------


def test_alloc_id_tracks_the_allocation_not_the_conversation() -> None:
    """Seed 000 ``alloc_id_tracks_the_allocation_not_the_conversation``.

    Re-allocating re-mints, rewinding does not; both halves are asserted.
    """
    cache = KvCache(GEOMETRY)
    first = cache.alloc_id

    # A second cache of IDENTICAL geometry is a DIFFERENT allocation.
    other = KvCache(GEOMETRY)
    assert other.alloc_id != first, "same-geometry caches must not share an id"

    # Rewind the conversation: storage untouched => id preserved.
    cache.append(*_data(GEOMETRY, 5))
    cache.truncate_to(2)
    assert len(cache) == 2
    assert cache.alloc_id == first, "truncate_to must not re-mint"

    # Release the storage: the id must move.
    cache.clear()
    after_clear = cache.alloc_id
    assert after_clear != first, "clear() drops every layer, a plan welded to them is stale"

    # Replace one layer's storage (taken from another cache): the id must move again.
    replacement = KvCache(GEOMETRY).layer(0)
    cache.set_layer(0, replacement)
    assert cache.alloc_id != after_clear, "set_layer swaps storage, a new allocation"
    assert cache.layer(0) is replacement


# ---------------------------------------------------------------------------
# One test per requirement
# ---------------------------------------------------------------------------


def test_alloc_ids_are_nonzero_increasing_and_unique() -> None:
    """ALLOC-1: nonzero u64, strictly increasing in minting order, never reissued."""
    caches = [KvCache(GEOMETRY) for _ in range(20)]
    ids = [c.alloc_id for c in caches]
    assert all(1 <= i.value < 1 << 64 for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    caches[0].clear()
    assert caches[0].alloc_id > ids[-1], "a re-mint draws from the same never-recycling counter"


def test_construction_mints_even_for_identical_geometry() -> None:
    """ALLOC-2: two caches of identical geometry get different ids; a new cache is empty."""
    a, b = KvCache(GEOMETRY), KvCache(CacheGeometry(2, 2, 4, 8))
    assert a.geometry == b.geometry
    assert a.alloc_id != b.alloc_id
    assert len(a) == 0 and len(b) == 0


def test_clear_releases_storage_resets_length_and_mints() -> None:
    """ALLOC-18: fresh storage of the same geometry, length 0, new id."""
    cache = _filled(5)
    before = Snapshot.of(cache)
    cache.clear()
    assert len(cache) == 0
    assert cache.alloc_id != before.alloc_id and cache.alloc_id > before.alloc_id
    assert cache.geometry == GEOMETRY
    for i, old in enumerate(before.layers):
        new = cache.layer(i)
        assert new is not old
        assert new.k is not old.k and new.v is not old.v
        assert not np.shares_memory(new.k, old.k)
        assert new.k.shape == old.k.shape and new.k.dtype == old.k.dtype
        assert not new.k.any() and not new.v.any()
    # The released buffers were not wiped in place: a plan reading them sees old data.
    np.testing.assert_array_equal(before.layers[0].k, before.contents[0][0])


@pytest.mark.parametrize("index", [0, 1])
def test_replacing_any_layer_mints(index: int) -> None:
    """ALLOC-4: replacing the storage of any layer mints a new id."""
    cache = _filled(3)
    before = cache.alloc_id
    cache.set_layer(index, _layer())
    assert cache.alloc_id != before and cache.alloc_id > before


def test_truncate_rewinds_in_place_without_minting() -> None:
    """ALLOC-5: length becomes n, storage untouched (data past n kept), no new id."""
    cache = _filled(6)
    before = Snapshot.of(cache)
    cache.truncate_to(2)
    assert len(cache) == 2
    before.length = 2
    before.assert_unchanged(cache)
    cache.truncate_to(0)
    assert len(cache) == 0 and cache.alloc_id == before.alloc_id


@pytest.mark.parametrize("target", [5, 6, 100])
def test_truncate_past_length_is_a_noop(target: int) -> None:
    """ALLOC-15: truncating to n >= length changes nothing, raises nothing, mints nothing."""
    cache = _filled(5)
    before = Snapshot.of(cache)
    cache.truncate_to(target)
    before.assert_unchanged(cache)


def test_append_within_capacity_writes_in_place_without_minting() -> None:
    """ALLOC-7: appended positions land in the existing buffers; the id is kept."""
    cache = _filled(2)
    before = Snapshot.of(cache)
    k, v = _data(GEOMETRY, 3, start=100.0)
    cache.append(k, v)
    assert len(cache) == 5
    assert cache.alloc_id == before.alloc_id
    for i, layer in enumerate(before.layers):
        assert cache.layer(i) is layer
        np.testing.assert_array_equal(layer.k[2:5], k[i])
        np.testing.assert_array_equal(layer.v[2:5], v[i])
        np.testing.assert_array_equal(layer.k[:2], before.contents[i][0][:2])
    # Filling exactly to capacity is within capacity.
    cache.append(*_data(GEOMETRY, 3))
    assert len(cache) == GEOMETRY.max_seq_len and cache.alloc_id == before.alloc_id


@pytest.mark.parametrize(("start", "n"), [(5, 4), (8, 1), (0, 9)])
def test_append_past_capacity_is_refused_and_changes_nothing(start: int, n: int) -> None:
    """ALLOC-16: ``capacity_exceeded`` with capacity and requested; length, data, id unchanged."""
    cache = _filled(start)
    before = Snapshot.of(cache)
    with pytest.raises(CapacityExceeded) as excinfo:
        cache.append(*_data(GEOMETRY, n, start=500.0))
    err = excinfo.value
    assert isinstance(err, CacheError)
    assert err.kind == "capacity_exceeded"
    assert err.capacity == GEOMETRY.max_seq_len
    assert err.requested == start + n
    assert err.values() == {"capacity": 8, "requested": start + n}
    assert err.field_name == "max_seq_len" and err.layer is None
    before.assert_unchanged(cache)


@pytest.mark.parametrize("index", [2, 3, -1, 100])
def test_replacing_a_missing_layer_is_refused(index: int) -> None:
    """ALLOC-9: ``layer_out_of_range`` carrying the index and n_layers; cache unchanged."""
    cache = _filled(3)
    before = Snapshot.of(cache)
    with pytest.raises(LayerOutOfRange) as excinfo:
        cache.set_layer(index, _layer())
    err = excinfo.value
    assert err.kind == "layer_out_of_range"
    assert err.layer == index and err.layer_index == index
    assert err.n_layers == GEOMETRY.n_layers
    assert err.values() == {"n_layers": 2} and err.field_name is None
    before.assert_unchanged(cache)


@pytest.mark.parametrize(
    ("overrides", "field", "expected", "found"),
    [
        ({"heads": 4}, "n_kv_heads", 2, 4),
        ({"dim": 8}, "head_dim", 4, 8),
        ({"capacity": 16}, "max_seq_len", 8, 16),
        # Several fields differ: the first in the order n_kv_heads, head_dim, max_seq_len.
        ({"heads": 1, "dim": 8, "capacity": 4}, "n_kv_heads", 2, 1),
        ({"dim": 2, "capacity": 4}, "head_dim", 4, 2),
    ],
)
def test_replacement_of_another_shape_is_refused_in_field_order(
    overrides: dict[str, int], field: str, expected: int, found: int
) -> None:
    """ALLOC-17: ``layer_shape_mismatch``, first differing field in order, no mint."""
    cache = _filled(3)
    before = Snapshot.of(cache)
    with pytest.raises(LayerShapeMismatch) as excinfo:
        cache.set_layer(1, _layer(**overrides))  # type: ignore[arg-type]
    err = excinfo.value
    assert err.kind == "layer_shape_mismatch"
    assert (err.layer, err.field_name, err.expected, err.found) == (1, field, expected, found)
    assert err.values() == {"expected": expected, "found": found}
    before.assert_unchanged(cache)


def test_replacing_a_layer_keeps_the_length() -> None:
    """ALLOC-11: the cache's length is unchanged by a valid replacement."""
    cache = _filled(5)
    cache.set_layer(0, _layer())
    assert len(cache) == 5
    cache.set_layer(1, _layer())
    assert len(cache) == 5


def test_reads_never_mint() -> None:
    """ALLOC-12: reading the id, the length, the geometry or a layer has no side effect."""
    cache = _filled(3)
    before = Snapshot.of(cache)
    probe = KvAllocId.mint()
    for _ in range(10):
        assert cache.alloc_id == before.alloc_id
        assert len(cache) == 3
        assert cache.geometry == GEOMETRY
        _ = cache.layer(0), cache.layer(1)
    # The reference's counter steps by 1 (ID-8): the reads in between consumed no ids.
    assert KvAllocId.mint().value == probe.value + 1
    before.assert_unchanged(cache)


def test_mint_exactly_when_storage_is_replaced() -> None:
    """ALLOC-13: in-place operations keep the id, replacements mint, refusals never mint."""
    cache = _filled(2)
    ids = [cache.alloc_id]

    def in_place(op: str) -> None:
        before = cache.alloc_id
        if op == "append":
            cache.append(*_data(GEOMETRY, 1))
        else:
            cache.truncate_to(max(len(cache) - 1, 0))
        assert cache.alloc_id == before, op

    def replaces(op: str) -> None:
        if op == "clear":
            cache.clear()
        else:
            cache.set_layer(0, _layer())
        assert cache.alloc_id > ids[-1], op
        ids.append(cache.alloc_id)

    def refused(call: object) -> None:
        before = cache.alloc_id
        with pytest.raises((CacheError, ValueError)):
            call()  # type: ignore[operator]
        assert cache.alloc_id == before

    in_place("append")
    in_place("truncate")
    replaces("clear")
    in_place("append")
    replaces("set_layer")
    in_place("truncate")
    refused(lambda: cache.set_layer(5, _layer()))
    refused(lambda: cache.set_layer(0, _layer(dim=3)))
    refused(lambda: cache.append(*_data(GEOMETRY, 9)))
    assert len(set(ids)) == len(ids) == 3


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda c: c.truncate_to(-1), id="negative-truncate"),
        pytest.param(
            lambda c: c.append(np.zeros((2, 1, 2, 3), np.float32), np.zeros((2, 1, 2, 3))),
            id="append-wrong-head-dim",
        ),
        pytest.param(
            lambda c: c.append(np.zeros((3, 1, 2, 4), np.float32), np.zeros((3, 1, 2, 4))),
            id="append-wrong-layers",
        ),
        pytest.param(
            lambda c: c.append(np.zeros((2, 1, 2, 4), np.float32), np.zeros((2, 2, 2, 4))),
            id="append-k-v-differ",
        ),
        pytest.param(
            lambda c: c.append(np.zeros((2, 1, 8), np.float32), np.zeros((2, 1, 8))),
            id="append-flattened",
        ),
        pytest.param(lambda c: c.set_layer(0, _layer(dtype=np.float16)), id="layer-f16-in-f32"),
        pytest.param(
            lambda c: c.set_layer(
                0, KvLayer(k=np.zeros((8, 2, 4), np.float32), v=np.zeros((4, 2, 4), np.float32))
            ),
            id="layer-k-v-shapes-differ",
        ),
    ],
)
def test_precondition_violations_are_refused_without_change(call: object) -> None:
    """ALLOC-14: usage errors are refused and leave length, contents and id unchanged."""
    cache = _filled(3)
    before = Snapshot.of(cache)
    with pytest.raises(Exception):  # noqa: B017 -- the kind is not normative in 1.0.0
        call(cache)  # type: ignore[operator]
    before.assert_unchanged(cache)


def test_replacement_whose_v_buffer_has_another_element_type_is_refused() -> None:
    """ALLOC-14: replacement storage whose element type is not the cache's is refused.

    REFERENCE BUG: ``KvCache.set_layer`` checks only ``layer.k.dtype``; a layer with
    f32 ``k`` and f16 ``v`` is accepted (and mints), leaving one cache with two
    element types -- the situation ALLOC-14's rationale rules out.
    """
    cache = _filled(3)
    before = Snapshot.of(cache)
    with pytest.raises(Exception):  # noqa: B017 -- the kind is not normative in 1.0.0
        cache.set_layer(0, _layer(dtype=np.float32, v_dtype=np.float16))
    before.assert_unchanged(cache)


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_storage_element_type_follows_the_geometry(dtype: str) -> None:
    """ALLOC-18 / ALLOC-14: storage (fresh and after clear) has the cache's element type."""
    g = CacheGeometry(1, 1, 2, 4, dtype=dtype)
    cache = KvCache(g)
    expected = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}[dtype]
    assert cache.layer(0).k.dtype == expected and cache.layer(0).v.dtype == expected
    cache.clear()
    assert cache.layer(0).k.dtype == expected


# ---------------------------------------------------------------------------
# Property: the id changes exactly on clear / set_layer
# ---------------------------------------------------------------------------

SMALL = CacheGeometry(n_layers=2, n_kv_heads=1, head_dim=2, max_seq_len=6)

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 8)),
        st.tuples(st.just("truncate"), st.integers(0, 8)),
        st.tuples(st.just("clear"), st.just(0)),
        st.tuples(st.just("set_layer"), st.integers(-1, 3)),
        st.tuples(st.just("read"), st.just(0)),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None, database=None)
@given(ops=OPS)
def test_property_alloc_id_moves_exactly_on_storage_replacement(
    ops: list[tuple[str, int]],
) -> None:
    """ALLOC-2..13 as a property over random sequences of cache operations.

    The id changes on (valid) clear and set_layer and on nothing else -- not on
    appends, truncations, reads or refused calls -- and each new id is greater
    than every earlier one. The length follows a simple model.
    """
    cache = KvCache(SMALL)
    seen = [cache.alloc_id]
    length = 0
    for op, arg in ops:
        before = cache.alloc_id
        mints = False
        if op == "append":
            data = _data(SMALL, arg)
            if length + arg > SMALL.max_seq_len:
                with pytest.raises(CapacityExceeded):
                    cache.append(*data)
            else:
                cache.append(*data)
                length += arg
        elif op == "truncate":
            cache.truncate_to(arg)
            length = min(length, arg)
        elif op == "clear":
            cache.clear()
            length = 0
            mints = True
        elif op == "set_layer":
            if 0 <= arg < SMALL.n_layers:
                cache.set_layer(arg, _layer(SMALL))
                mints = True
            else:
                with pytest.raises(LayerOutOfRange):
                    cache.set_layer(arg, _layer(SMALL))
        else:
            _ = cache.alloc_id, len(cache), cache.geometry
        assert len(cache) == length
        if mints:
            assert cache.alloc_id != before and cache.alloc_id > max(seen)
            seen.append(cache.alloc_id)
        else:
            assert cache.alloc_id == before, f"{op}({arg}) minted"
