"""Unit tests of the typed errors, ``reference/errors.py`` (spec/errors.md, ERR).

Every refusal is a kind from a closed set plus the field, layer and values that
identify it; its message is derived from those parts and names the field and
each scalar value. Counterpart of seed 002's ``errors_name_the_field_that_changed``,
one test per ERR requirement, each run over every error kind, and a property
over random error values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvconform_reference import errors
from kvconform_reference.errors import (
    ERROR_KINDS,
    CacheError,
    CapacityExceeded,
    DegenerateLayer,
    EmptyPayload,
    Incompatible,
    KvError,
    LayerOutOfRange,
    LayerShapeMismatch,
    PayloadMismatch,
    RaggedPayload,
    SignatureError,
    Unmarked,
    UnsupportedFormat,
)
from kvconform_reference.kv_cache import CacheGeometry, KvCache, KvLayer
from kvconform_reference.model import Model, ModelConfig
from kvconform_reference.plan import DecodePlan
from kvconform_reference.signature import (
    SIGNATURE_FIELDS,
    SIGNATURE_FIELDS_V2,
    V2,
    BlockLayout,
    CacheSignature,
    FormatProfile,
    StoredLayer,
    measure,
)
from kvconform_reference.verify import UnverifiedBlock, verify

pytestmark = pytest.mark.covers(
    "ERR-8", "ERR-2", "ERR-3", "ERR-4", "ERR-5", "ERR-6", "ERR-7", "ERR-10", "ERR-11", "ERR-12"
)


# ---------------------------------------------------------------------------
# Real refusals, one or more per kind, produced by the reference itself
# ---------------------------------------------------------------------------


def _layer(heads: int, dim: int, tokens: int) -> StoredLayer:
    k = np.zeros(tokens * heads * dim, np.float32)
    return StoredLayer(heads, dim, tokens, k, k.copy())


def _payload(n: int = 3, heads: int = 2, dim: int = 8, tokens: int = 4) -> list[StoredLayer]:
    return [_layer(heads, dim, tokens) for _ in range(n)]


SIG = CacheSignature(1, "model-a", 3, 2, 8, "f32", 4)
GEOMETRY = CacheGeometry(n_layers=2, n_kv_heads=3, head_dim=5, max_seq_len=7)


def _catch(action: Callable[[], object]) -> KvError:
    with pytest.raises(KvError) as excinfo:
        action()
    return excinfo.value


def _replace_layer(i: int, heads: int, dim: int, cap: int) -> Callable[[], object]:
    def run() -> None:
        cache = KvCache(GEOMETRY)
        shape = (cap, heads, dim)
        cache.set_layer(i, KvLayer(np.zeros(shape, np.float32), np.zeros(shape, np.float32)))

    return run


def _append(n: int) -> Callable[[], object]:
    def run() -> None:
        cache = KvCache(GEOMETRY)
        data = np.zeros((2, n, 3, 5), np.float32)
        cache.append(data, data)

    return run


def _with(layers: list[StoredLayer], index: int, **changes: object) -> list[StoredLayer]:
    out = list(layers)
    out[index] = dataclasses.replace(out[index], **changes)  # type: ignore[arg-type]
    return out


REAL: dict[str, Callable[[], object]] = {
    "unmarked": lambda: verify(UnverifiedBlock(None, tuple(_payload())), SIG),
    "unsupported_format": lambda: verify(
        UnverifiedBlock(dataclasses.replace(SIG, format_version=42), tuple(_payload())),
        SIG,
        FormatProfile(version=3, readable=(3, 1), payload_dtype="f32"),
    ),
    "empty_payload": lambda: measure("model-a", []),
    "degenerate_layer": lambda: measure("model-a", [_layer(3, 0, 0)]),
    "ragged_k_length": lambda: measure("model-a", _with(_payload(), 0, k=np.zeros(61, np.float32))),
    "ragged_v_length": lambda: measure("model-a", _with(_payload(), 2, v=np.zeros(9, np.float32))),
    "ragged_seq_len": lambda: measure("model-a", _with(_payload(), 1, seq_len=77)),
    "ragged_layer_shape": lambda: measure("model-a", [*_payload(2), _layer(6, 4, 4)]),
    "ragged_token_count": lambda: measure("model-a", [*_payload(2), _layer(2, 8, 9)]),
    "payload_mismatch": lambda: verify(
        UnverifiedBlock(dataclasses.replace(SIG, head_dim=128), tuple(_payload())), SIG
    ),
    "payload_mismatch_dtype": lambda: verify(
        UnverifiedBlock(dataclasses.replace(SIG, dtype="bf16"), tuple(_payload())), SIG
    ),
    "incompatible": lambda: verify(
        UnverifiedBlock(SIG, tuple(_payload())), dataclasses.replace(SIG, model="model-b")
    ),
    "incompatible_tokens": lambda: verify(
        UnverifiedBlock(SIG, tuple(_payload())), dataclasses.replace(SIG, tokens=4096)
    ),
    "capacity_exceeded": _append(9),
    "layer_out_of_range": _replace_layer(12, 3, 5, 7),
    "layer_shape_mismatch": _replace_layer(1, 3, 6, 7),
    "layer_shape_mismatch_cap": _replace_layer(0, 3, 5, 99),
    "bad_layout_block": lambda: measure("model-a", _payload(), V2, BlockLayout(0, 8)),
    "bad_layout_misaligned": lambda: measure("model-a", _payload(), V2, BlockLayout(4, 6)),
    "split_kv_head_width": lambda: measure(
        "model-a",
        _with(_payload(), 1, v_head_dim=4, v=np.zeros(32, np.float32)),
        V2,
        BlockLayout(4),
    ),
    "block_size_mismatch": lambda: measure("model-a", _payload(), V2, BlockLayout(8)),
    "residency_unknown": lambda: _rebind(KvCache(GEOMETRY, residency=None)),
    "residency_differs": lambda: _rebind(KvCache(GEOMETRY, residency="gpu1")),
    "missing_slot": lambda: _rebind(
        KvCache(dataclasses.replace(GEOMETRY, n_layers=1), layer_storage=("host-f32",))
    ),
    "storage_differs": lambda: _rebind(KvCache(GEOMETRY, layer_storage=("host-f32", "q8"))),
}


def _rebind(incoming: KvCache) -> None:
    DecodePlan(Model(ModelConfig("llama", {}, {})), KvCache(GEOMETRY)).rebind(incoming)


@pytest.fixture(params=sorted(REAL), scope="module")
def real_error(request: pytest.FixtureRequest) -> KvError:
    return _catch(REAL[request.param])


#: Per kind: (field name or None, has a layer, value names), from spec/errors.md ERR-2.
TABLE: dict[str, tuple[frozenset[str] | None, bool, tuple[str, ...]]] = {
    "unmarked": (None, False, ()),
    "unsupported_format": (frozenset({"format_version"}), False, ("found", "readable")),
    "unrepresentable": (frozenset(SIGNATURE_FIELDS), False, ("found",)),
    "empty_payload": (None, False, ()),
    "degenerate_layer": (None, True, ("n_kv_heads", "head_dim")),
    "ragged_payload": (
        frozenset({"k_length", "v_length", "seq_len", "layer_shape", "token_count"}),
        True,
        ("expected", "found"),
    ),
    "payload_mismatch": (frozenset(SIGNATURE_FIELDS), False, ("recorded", "actual")),
    "incompatible": (frozenset(SIGNATURE_FIELDS), False, ("expected", "found")),
    "capacity_exceeded": (frozenset({"max_seq_len"}), False, ("capacity", "requested")),
    "layer_out_of_range": (None, True, ("n_layers",)),
    "layer_shape_mismatch": (
        frozenset({"n_kv_heads", "head_dim", "max_seq_len"}),
        True,
        ("expected", "found"),
    ),
    "bad_layout": (
        frozenset({"block_size", "sliding_window"}),
        False,
        ("block_size", "sliding_window"),
    ),
    "split_kv_head_width": (None, True, ("head_dim", "v_head_dim")),
    "block_size_mismatch": (None, False, ("block_size", "tokens")),
    "residency_unknown": (None, False, ()),
    "residency_differs": (None, False, ("baked", "incoming")),
    "missing_slot": (None, True, ("which",)),
    "unbaked_slot": (None, True, ("which",)),
    "storage_differs": (None, True, ("which", "baked", "incoming")),
}


def _scalars(err: KvError) -> list[int | str]:
    return [v for v in err.values().values() if isinstance(v, int | str)]


def _names_field(message: str, field: str) -> bool:
    lowered = message.lower()
    return field.lower() in lowered or field.replace("_", " ").lower() in lowered


def _assert_message_ok(err: KvError) -> None:
    """The ERR-6 check as spec/errors.md describes it."""
    text = err.message()
    assert isinstance(text, str) and text.strip()
    if err.field_name is not None:
        assert _names_field(text, err.field_name), f"{err.kind}: {text!r} omits {err.field_name}"
    for value in _scalars(err):
        assert str(value) in text, f"{err.kind}: {text!r} omits {value!r}"


# ---------------------------------------------------------------------------
# Counterpart of the seed's test (seed 002, ferrox-core)
# ---------------------------------------------------------------------------


def test_errors_name_the_field_that_changed() -> None:
    """Seed 002 ``errors_name_the_field_that_changed`` (ERR-6)."""
    text = Incompatible(field="head_dim", expected=128, found=64).message()
    assert "head_dim" in text, text
    assert "64" in text, text
    assert "128" in text, text
    assert "unmarked" in Unmarked().message()
    assert str(Unmarked()) == Unmarked().message()


# ---------------------------------------------------------------------------
# One test per requirement, each over every kind
# ---------------------------------------------------------------------------


def test_error_kinds_are_a_closed_set() -> None:
    """ERR-8: exactly the eleven kinds, block kinds are SignatureErrors, cache kinds CacheErrors."""
    block = {
        "unmarked",
        "unsupported_format",
        "unrepresentable",
        "empty_payload",
        "degenerate_layer",
        "ragged_payload",
        "payload_mismatch",
        "incompatible",
    }
    cache = {"capacity_exceeded", "layer_out_of_range", "layer_shape_mismatch"}
    block_v2 = {"bad_layout", "split_kv_head_width", "block_size_mismatch"}  # ERR-10
    rebind = {  # ERR-11
        "residency_unknown",
        "residency_differs",
        "missing_slot",
        "unbaked_slot",
        "storage_differs",
    }
    assert set(ERROR_KINDS) == block | cache | block_v2 | rebind
    for name, cls in ERROR_KINDS.items():
        assert cls.kind == name
        family = (
            SignatureError
            if name in block | block_v2
            else CacheError
            if name in cache
            else errors.RebindRefusal
        )
        assert issubclass(cls, family)
    defined = {
        obj.kind
        for obj in vars(errors).values()
        if isinstance(obj, type) and issubclass(obj, KvError) and obj.kind
    }
    assert defined == set(ERROR_KINDS), "an error class outside the closed set"


def test_every_real_refusal_is_of_a_listed_kind(real_error: KvError) -> None:
    """ERR-8: each check reports exactly one kind, from the closed set."""
    assert real_error.kind in ERROR_KINDS
    assert type(real_error) is ERROR_KINDS[real_error.kind]


def test_every_kind_is_produced_by_some_check() -> None:
    """ERR-8: every kind but ``unrepresentable`` and ``unbaked_slot`` is reachable.

    The reference holds every stamp value (any dtype name as a string, unbounded
    integers), so it never meets a value it cannot represent (ERR-9); its plans
    bake every slot they have, so none is ever unbaked (PLAN-21).
    """
    reachable = set(ERROR_KINDS) - {"unrepresentable", "unbaked_slot"}
    assert {_catch(action).kind for action in REAL.values()} == reachable


def test_each_kind_carries_its_field_layer_and_values(real_error: KvError) -> None:
    """ERR-2: the parts given for the kind in the table, and no other normative parts."""
    fields, has_layer, value_names = TABLE[real_error.kind]
    if fields is None:
        assert real_error.field_name is None
    else:
        assert real_error.field_name in fields
    assert (real_error.layer is not None) is has_layer
    extra = ("remainder",) if getattr(real_error, "remainder", None) is not None else ()
    assert tuple(real_error.values()) == value_names + extra  # a misaligned window (PROF-7)


@pytest.mark.parametrize(
    ("name", "field", "layer", "values"),
    [
        ("unsupported_format", "format_version", None, {"found": 42, "readable": (1, 3)}),
        ("degenerate_layer", None, 0, {"n_kv_heads": 3, "head_dim": 0}),
        ("ragged_k_length", "k_length", 0, {"expected": 16, "found": 61}),
        ("ragged_v_length", "v_length", 2, {"expected": 64, "found": 9}),
        ("ragged_seq_len", "seq_len", 1, {"expected": 4, "found": 77}),
        ("ragged_layer_shape", "layer_shape", 2, {"expected": (2, 8), "found": (6, 4)}),
        ("ragged_token_count", "token_count", 2, {"expected": 4, "found": 9}),
        ("payload_mismatch", "head_dim", None, {"recorded": 128, "actual": 8}),
        ("payload_mismatch_dtype", "dtype", None, {"recorded": "bf16", "actual": "f32"}),
        ("incompatible", "model", None, {"expected": "model-b", "found": "model-a"}),
        ("incompatible_tokens", "tokens", None, {"expected": 4096, "found": 4}),
        ("capacity_exceeded", "max_seq_len", None, {"capacity": 7, "requested": 9}),
        ("layer_out_of_range", None, 12, {"n_layers": 2}),
        ("layer_shape_mismatch", "head_dim", 1, {"expected": 5, "found": 6}),
        ("layer_shape_mismatch_cap", "max_seq_len", 0, {"expected": 7, "found": 99}),
    ],
)
def test_real_refusals_carry_exact_parts(
    name: str, field: str | None, layer: int | None, values: dict[str, object]
) -> None:
    """ERR-2 / ERR-3 / ERR-4: exact canonical field, layer and typed values per refusal."""
    err = _catch(REAL[name])
    assert (err.field_name, err.layer, err.values()) == (field, layer, values)


def test_field_names_are_canonical(real_error: KvError) -> None:
    """ERR-3: underscored canonical identifiers, never the seed's spaced spellings."""
    allowed = set(SIGNATURE_FIELDS_V2) | {  # ERR-12 adds block_size, sliding_window, positions
        "positions",
        "layer_shape",
        "k_length",
        "v_length",
        "seq_len",
        "token_count",
        "max_seq_len",
    }
    if real_error.field_name is not None:
        assert real_error.field_name in allowed
        assert " " not in real_error.field_name


def test_values_are_typed(real_error: KvError) -> None:
    """ERR-4: integers for counts/lengths/indices/versions, strings for model and dtype,
    a pair for layer_shape, a sorted list of integers for readable."""
    for name, value in real_error.values().items():
        field = real_error.field_name
        if name == "readable":
            assert isinstance(value, tuple) and all(type(v) is int for v in value)
            assert list(value) == sorted(value)
        elif field == "layer_shape":
            assert isinstance(value, tuple) and len(value) == 2
            assert all(type(v) is int for v in value)
        elif field in ("model", "dtype") or name in ("which", "baked", "incoming"):
            assert isinstance(value, str)  # storage and residency labels are strings (ERR-11)
        elif name == "sliding_window":
            assert value is None or type(value) is int  # null when absent (ERR-12)
        else:
            assert type(value) is int, f"{real_error.kind}.{name} = {value!r}"
    if real_error.layer is not None:
        assert type(real_error.layer) is int


def test_errors_are_identified_by_their_parts() -> None:
    """ERR-5: equal parts make equal errors (whatever the message); any differing part differs."""
    a = PayloadMismatch(field="tokens", recorded=8, actual=4)
    b = PayloadMismatch(field="tokens", recorded=8, actual=4)
    assert a == b and hash(a) == hash(b)
    assert a != PayloadMismatch(field="tokens", recorded=8, actual=5)
    assert a != PayloadMismatch(field="n_layers", recorded=8, actual=4)
    # Same parts, different kind: not the same refusal.
    assert Incompatible(field="tokens", expected=8, found=4) != a
    assert RaggedPayload(1, "seq_len", 4, 7) != RaggedPayload(2, "seq_len", 4, 7)
    # The normative parts are exactly kind, field, layer and values.
    for err in (_catch(action) for action in REAL.values()):
        rebuilt = type(err)(**{f.name: getattr(err, f.name) for f in dataclasses.fields(err)})
        assert rebuilt == err
        assert (rebuilt.kind, rebuilt.field_name, rebuilt.layer, rebuilt.values()) == (
            err.kind,
            err.field_name,
            err.layer,
            err.values(),
        )


def test_every_message_names_its_field_and_values(real_error: KvError) -> None:
    """ERR-6: for every kind, the message names the field and contains each scalar value."""
    _assert_message_ok(real_error)


def test_message_examples_of_the_spec() -> None:
    """ERR-6: the spec's illustrative cases, including the k_length width and the layer pair."""
    ragged = RaggedPayload(layer_index=0, field="k_length", expected=16, found=60)
    assert "k_length" in ragged.message() and "16" in ragged.message()
    assert "60" in ragged.message()
    shape = RaggedPayload(layer_index=2, field="layer_shape", expected=(2, 8), found=(2, 4))
    assert "layer_shape" in shape.message()
    unsupported = UnsupportedFormat(found=99, readable=(1, 2))
    assert "format_version" in unsupported.message() and "99" in unsupported.message()
    degenerate = DegenerateLayer(layer_index=0, n_kv_heads=2, head_dim=0)
    assert "2" in degenerate.message() and "0" in degenerate.message()
    assert "17" in LayerOutOfRange(layer_index=3, n_layers=17).message()
    capacity = CapacityExceeded(capacity=8, requested=9)
    assert "max_seq_len" in capacity.message()
    assert "8" in capacity.message() and "9" in capacity.message()
    assert EmptyPayload().message()


def test_messages_are_derived_from_the_typed_error(real_error: KvError) -> None:
    """ERR-7: str() is message(), the same parts always render the same message, and the
    parts cannot be changed after the fact (frozen), so a message never drifts from them."""
    assert str(real_error) == real_error.message()
    clone = type(real_error)(
        **{f.name: getattr(real_error, f.name) for f in dataclasses.fields(real_error)}
    )
    assert clone.message() == real_error.message()
    for f in dataclasses.fields(real_error):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(real_error, f.name, getattr(real_error, f.name))


def test_changing_a_value_changes_the_message() -> None:
    """ERR-7: the message follows the values it is derived from."""
    assert (
        LayerShapeMismatch(0, "head_dim", 64, 128).message()
        != LayerShapeMismatch(0, "head_dim", 64, 129).message()
    )
    assert Incompatible("model", "a", "b").message() != Incompatible("model", "a", "c").message()


# ---------------------------------------------------------------------------
# Property: ERR-6 holds for arbitrary values of every kind
# ---------------------------------------------------------------------------

INTS = st.integers(0, 1 << 40)
TEXT = st.text(min_size=1, max_size=10)
SHAPE = st.tuples(INTS, INTS)

ANY_ERROR = st.one_of(
    st.just(Unmarked()),
    st.just(EmptyPayload()),
    st.builds(
        UnsupportedFormat,
        found=INTS,
        readable=st.lists(INTS, max_size=4).map(lambda v: tuple(sorted(v))),
    ),
    st.builds(DegenerateLayer, layer_index=st.just(0), n_kv_heads=INTS, head_dim=INTS),
    st.builds(
        RaggedPayload,
        layer_index=INTS,
        field=st.sampled_from(["k_length", "v_length", "seq_len", "token_count"]),
        expected=INTS,
        found=INTS,
    ),
    st.builds(
        RaggedPayload, layer_index=INTS, field=st.just("layer_shape"), expected=SHAPE, found=SHAPE
    ),
    st.sampled_from([n for n in SIGNATURE_FIELDS if n not in ("model", "dtype")]).flatmap(
        lambda f: st.one_of(
            st.builds(PayloadMismatch, field=st.just(f), recorded=INTS, actual=INTS),
            st.builds(Incompatible, field=st.just(f), expected=INTS, found=INTS),
        )
    ),
    st.sampled_from(["model", "dtype"]).flatmap(
        lambda f: st.one_of(
            st.builds(PayloadMismatch, field=st.just(f), recorded=TEXT, actual=TEXT),
            st.builds(Incompatible, field=st.just(f), expected=TEXT, found=TEXT),
        )
    ),
    st.builds(CapacityExceeded, capacity=INTS, requested=INTS),
    st.builds(LayerOutOfRange, layer_index=INTS, n_layers=INTS),
    st.builds(
        LayerShapeMismatch,
        layer_index=INTS,
        field=st.sampled_from(["n_kv_heads", "head_dim", "max_seq_len"]),
        expected=INTS,
        found=INTS,
    ),
)


@settings(max_examples=200, deadline=None, database=None)
@given(err=ANY_ERROR)
def test_property_every_message_names_field_and_values(err: KvError) -> None:
    """ERR-6 as a property over random values of every kind."""
    _assert_message_ok(err)
