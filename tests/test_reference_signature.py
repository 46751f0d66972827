"""Unit tests of block signatures, ``reference/signature.py`` (spec/signature.md, SIG, PROF).

A signature is measured from the payload it describes; the only field a writer
supplies is the model. Counterparts of the measuring tests of seed 002
(ferrox-core), one test per SIG/PROF requirement, and a property over random
coherent payloads.
"""

from __future__ import annotations

import dataclasses
import inspect
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvconform_reference import verify as verify_mod
from kvconform_reference.errors import (
    DegenerateLayer,
    EmptyPayload,
    Incompatible,
    PayloadMismatch,
    RaggedPayload,
    SignatureError,
)
from kvconform_reference.signature import (
    DTYPES,
    SIGNATURE_FIELDS,
    V1,
    V2,
    BlockLayout,
    CacheSignature,
    FormatProfile,
    StoredLayer,
    measure,
)
from kvconform_reference.verify import UnverifiedBlock, stamp, verify

pytestmark = pytest.mark.covers(
    "SIG-1",
    "SIG-2",
    "SIG-3",
    "SIG-4",
    "SIG-5",
    "SIG-6",
    "SIG-7",
    "SIG-8",
    "SIG-9",
    "SIG-10",
    "SIG-14",
    "SIG-12",
    "SIG-13",
    "PROF-1",
    "PROF-2",
    "PROF-3",
    "SEC-3",
    "SEC-4",
)

NUMPY_DTYPES: dict[str, type[np.generic]] = {
    "f32": np.float32,
    "f16": np.float16,
    "bf16": np.uint16,
}


def layer(
    n_kv_heads: int, head_dim: int, tokens: int, *, dtype: type[np.generic] = np.float32
) -> StoredLayer:
    """The seed's ``layer``: ``tokens`` pushes of a 0.5-filled step, seq_len = tokens."""
    k = np.full(tokens * n_kv_heads * head_dim, 0.5, dtype=dtype)
    return StoredLayer(n_kv_heads, head_dim, tokens, k, k.copy())


def payload(n_layers: int, n_kv_heads: int, head_dim: int, tokens: int) -> list[StoredLayer]:
    return [layer(n_kv_heads, head_dim, tokens) for _ in range(n_layers)]


def _with(base: StoredLayer, **changes: object) -> StoredLayer:
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def _ragged(layers: list[StoredLayer]) -> RaggedPayload:
    with pytest.raises(RaggedPayload) as excinfo:
        measure("model-a", layers)
    return excinfo.value


# ---------------------------------------------------------------------------
# Counterparts of the seed's tests (seed 002, ferrox-core)
# ---------------------------------------------------------------------------


def test_signature_is_measured_from_the_payload() -> None:
    """Seed 002 ``signature_is_measured_from_the_payload``: stamp gets a model name only."""
    block = stamp("model-a", payload(3, 2, 8, 4))
    sig = block.signature
    assert sig.n_layers == 3
    assert sig.n_kv_heads == 2
    assert sig.head_dim == 8
    assert sig.tokens == 4
    assert sig.dtype == "f32"
    assert sig.format_version == V1.version == 1
    assert sig.model == "model-a"
    assert len(block.layers) == 3


def test_a_layer_whose_seq_len_contradicts_its_buffers_is_rejected() -> None:
    """Seed 002 ``a_layer_whose_seq_len_contradicts_its_buffers_is_rejected`` (SIG-7, SEC-3).

    seq_len is a claim, the buffer length is the evidence.
    """
    layers = payload(2, 2, 8, 4)
    layers[1] = _with(layers[1], seq_len=7)
    err = _ragged(layers)
    assert err == RaggedPayload(layer_index=1, field="seq_len", expected=4, found=7)


def test_a_ragged_payload_is_rejected() -> None:
    """Seed 002 ``a_ragged_payload_is_rejected``: layer shape, token count, v length (SIG-7/8)."""
    layers = payload(3, 2, 8, 4)
    layers[2] = layer(2, 4, 4)
    err = _ragged(layers)
    assert (err.layer, err.field_name) == (2, "layer_shape")
    assert (err.expected, err.found) == ((2, 8), (2, 4))

    layers = payload(3, 2, 8, 4)
    layers[1] = layer(2, 8, 3)
    err = _ragged(layers)
    assert (err.layer, err.field_name, err.expected, err.found) == (1, "token_count", 4, 3)

    layers = payload(2, 2, 8, 4)
    layers[0] = _with(layers[0], v=layers[0].v[:8])
    err = _ragged(layers)
    assert (err.layer, err.field_name, err.expected, err.found) == (0, "v_length", 64, 8)


def test_an_empty_payload_is_rejected() -> None:
    """Seed 002 ``an_empty_payload_is_rejected`` (SIG-5)."""
    with pytest.raises(EmptyPayload) as excinfo:
        measure("model-a", [])
    assert excinfo.value == EmptyPayload()
    with pytest.raises(EmptyPayload):
        stamp("model-a", [])


# ---------------------------------------------------------------------------
# One test per requirement
# ---------------------------------------------------------------------------


def test_signature_has_exactly_the_seven_fields() -> None:
    """SIG-1: format_version, model, n_layers, n_kv_heads, head_dim, dtype, tokens, in order;
    then the layout, which only a version-2 signature carries (PROF-5)."""
    names = tuple(f.name for f in dataclasses.fields(CacheSignature))
    assert names == (*SIGNATURE_FIELDS, "layout")
    assert measure("m", payload(1, 1, 1, 1)).layout is None
    assert SIGNATURE_FIELDS == (
        "format_version",
        "model",
        "n_layers",
        "n_kv_heads",
        "head_dim",
        "dtype",
        "tokens",
    )
    sig = measure("m", payload(1, 1, 1, 1))
    assert isinstance(sig.format_version, int) and 0 <= sig.format_version < 1 << 32
    assert isinstance(sig.model, str) and isinstance(sig.dtype, str)
    assert all(
        isinstance(getattr(sig, n), int) and getattr(sig, n) >= 0
        for n in SIGNATURE_FIELDS
        if n not in ("model", "dtype")
    )


def test_measuring_takes_no_expected_shape() -> None:
    """SIG-2 / SIG-13: measure and stamp take a model and the layers, nothing to fill from."""
    # The layout is the writer's, like the model (PROF-6); nothing is the reader's.
    assert list(inspect.signature(measure).parameters) == ["model", "layers", "profile", "layout"]
    assert list(inspect.signature(stamp).parameters) == ["model", "layers", "profile", "layout"]
    # Every shape field follows the payload, whatever the caller might have wanted.
    for shape in [(1, 1, 1, 0), (2, 3, 5, 7), (4, 8, 2, 1)]:
        sig = measure("m", payload(*shape))
        assert (sig.n_layers, sig.n_kv_heads, sig.head_dim, sig.tokens) == shape


@pytest.mark.parametrize(
    ("stamped", "expected"),
    [
        ("Model-A", "model-a"),
        ("model-a ", "model-a"),
        (unicodedata.normalize("NFD", "modèle"), unicodedata.normalize("NFC", "modèle")),
    ],
)
def test_model_is_opaque_and_compared_byte_for_byte(stamped: str, expected: str) -> None:
    """SIG-3: the writer's model string is kept verbatim; case, spaces and Unicode form count."""
    layers = payload(1, 2, 2, 1)
    sig = measure(stamped, layers)
    assert sig.model == stamped
    want = CacheSignature.expected(expected, 1, 2, 2, 1)
    with pytest.raises(Incompatible) as excinfo:
        verify(UnverifiedBlock(sig, tuple(layers)), want)
    assert excinfo.value == Incompatible(field="model", expected=expected, found=stamped)


def test_measurement_rules() -> None:
    """SIG-4: n_layers = #layers; heads and head_dim from layer 0; tokens = k length / width."""
    layers = [
        StoredLayer(2, 3, 5, np.zeros(30, np.float32), np.zeros(30, np.float32)) for _ in range(4)
    ]
    sig = measure("m", layers)
    assert sig == CacheSignature(1, "m", 4, 2, 3, "f32", 5)
    # Buffer dimensionality is irrelevant: the *length* (element count) is measured.
    shaped = [StoredLayer(2, 3, 5, np.zeros((5, 2, 3), np.float32), np.zeros((5, 6), np.float32))]
    assert measure("m", shaped).tokens == 5


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_dtype_is_measured_from_the_buffers(dtype: str) -> None:
    """SIG-4 / SIG-14: the element type is read off the buffers (f16 buffers measure "f16")."""
    layers = [layer(2, 4, 3, dtype=NUMPY_DTYPES[dtype]) for _ in range(2)]
    assert measure("m", layers).dtype == dtype
    assert stamp("m", layers).signature.dtype == dtype


@pytest.mark.parametrize(("heads", "dim"), [(0, 8), (2, 0), (0, 0)])
def test_degenerate_first_layer_is_refused(heads: int, dim: int) -> None:
    """SIG-6: layer 0 with no heads or zero head_dim -> degenerate_layer(0, heads, dim)."""
    layers = [StoredLayer(heads, dim, 0, np.zeros(0, np.float32), np.zeros(0, np.float32))]
    layers += payload(2, 2, 8, 4)
    with pytest.raises(DegenerateLayer) as excinfo:
        measure("m", layers)
    err = excinfo.value
    assert err == DegenerateLayer(layer_index=0, n_kv_heads=heads, head_dim=dim)
    assert err.layer == 0 and err.values() == {"n_kv_heads": heads, "head_dim": dim}


def test_a_later_degenerate_layer_is_a_shape_disagreement() -> None:
    """SIG-6 / SIG-8: a zero dimension after layer 0 is reported as layer_shape."""
    layers = payload(3, 2, 8, 4)
    layers[2] = StoredLayer(0, 8, 4, np.zeros(0, np.float32), np.zeros(0, np.float32))
    err = _ragged(layers)
    assert (err.layer, err.field_name, err.expected, err.found) == (
        2,
        "layer_shape",
        (2, 8),
        (0, 8),
    )


def test_layer_checks_run_in_order_k_then_v_then_seq_len() -> None:
    """SIG-7: k_length (expected = per-token width) before v_length before seq_len."""
    base = payload(1, 2, 8, 4)[0]
    # All three faults at once: k_length wins, and its expected value is the width 16.
    broken = _with(base, k=base.k[:60], v=base.v[:8], seq_len=9)
    err = _ragged([broken])
    assert (err.layer, err.field_name, err.expected, err.found) == (0, "k_length", 16, 60)
    # v and seq_len wrong: v_length wins.
    err = _ragged([_with(base, v=base.v[:8], seq_len=9)])
    assert (err.field_name, err.expected, err.found) == ("v_length", 64, 8)
    # v longer than k is also v_length.
    err = _ragged([_with(base, v=np.zeros(80, np.float32))])
    assert (err.field_name, err.expected, err.found) == ("v_length", 64, 80)
    # Only seq_len wrong.
    err = _ragged([_with(base, seq_len=3)])
    assert (err.field_name, err.expected, err.found) == ("seq_len", 4, 3)


def test_later_layers_check_shape_then_measure_then_token_count() -> None:
    """SIG-8: layer_shape before the layer is measured; token_count after it is measured."""
    layers = payload(2, 2, 8, 4)
    # Other shape AND a k length that is no multiple of the width: layer_shape first.
    layers[1] = StoredLayer(2, 4, 4, np.zeros(5, np.float32), np.zeros(5, np.float32))
    assert _ragged(layers).field_name == "layer_shape"
    # Fewer tokens AND a lying seq_len: the layer's own seq_len check comes first.
    layers[1] = _with(layer(2, 8, 3), seq_len=4)
    err = _ragged(layers)
    assert (err.field_name, err.expected, err.found) == ("seq_len", 3, 4)
    # Fewer tokens, honest seq_len: token_count.
    layers[1] = layer(2, 8, 3)
    err = _ragged(layers)
    assert (err.field_name, err.expected, err.found) == ("token_count", 4, 3)


def test_first_fault_in_index_order_is_reported() -> None:
    """SIG-9: with faults at layers 1 and 2, layer 1's is reported."""
    layers = payload(4, 2, 8, 4)
    layers[2] = layer(2, 4, 4)  # layer_shape at 2
    layers[1] = _with(layers[1], seq_len=7)  # seq_len at 1
    layers[3] = layer(2, 8, 1)  # token_count at 3
    err = _ragged(layers)
    assert (err.layer, err.field_name) == (1, "seq_len")


def test_zero_token_payload_is_coherent() -> None:
    """SIG-10: layers with empty buffers and seq_len 0 measure with tokens = 0."""
    sig = measure("model-a", payload(3, 2, 8, 0))
    assert sig == CacheSignature(1, "model-a", 3, 2, 8, "f32", 0)
    block = stamp("model-a", payload(3, 2, 8, 0))
    assert block.signature.tokens == 0
    # And such a block verifies against an expectation of 0 tokens.
    layers = payload(3, 2, 8, 0)
    verify(UnverifiedBlock(sig, tuple(layers)), CacheSignature.expected("model-a", 3, 2, 8, 0))


def test_dtype_vocabulary_and_string_comparison() -> None:
    """SIG-14: vocabulary "f32", "f16", "bf16" (lower case), compared as strings."""
    assert DTYPES == ("f32", "f16", "bf16")
    layers = tuple(payload(1, 2, 2, 1))
    honest = measure("m", layers)
    for other in ("F32", "float32", "f16", "bf16", ""):
        lying = dataclasses.replace(honest, dtype=other)
        with pytest.raises(PayloadMismatch) as excinfo:
            verify(UnverifiedBlock(lying, layers), honest)
        assert excinfo.value == PayloadMismatch(field="dtype", recorded=other, actual="f32")
    with pytest.raises(Incompatible) as inc:
        verify(UnverifiedBlock(honest, layers), dataclasses.replace(honest, dtype="f16"))
    assert inc.value == Incompatible(field="dtype", expected="f16", found="f32")


def test_format_version_written_and_measured_under_the_recorded_version() -> None:
    """SIG-12: stamping records the written version; verification measures under the stamp's."""
    layers = tuple(payload(2, 2, 4, 3))
    assert stamp("m", layers).signature.format_version == V1.version
    reader = FormatProfile(version=1, readable=(1, 2), payload_dtype="f32")
    v2_stamp = dataclasses.replace(
        measure("m", layers), format_version=2, layout=BlockLayout(3, None)
    )
    block = verify(UnverifiedBlock(v2_stamp, layers), v2_stamp, reader)
    assert block.signature == v2_stamp  # measured as v2, under its recorded layout
    # The v2 block measured as v2 is then judged in step 5 against a v1 expectation.
    with pytest.raises(Incompatible) as excinfo:
        verify(UnverifiedBlock(v2_stamp, layers), measure("m", layers), reader)
    assert excinfo.value == Incompatible(field="format_version", expected=1, found=2)
    # A profile that writes 2 stamps 2, under the layout its writer supplies (PROF-6).
    assert stamp("m", layers, V2, BlockLayout(3, 6)).signature == v2_stamp.__class__(
        2, "m", 2, 2, 4, "f32", 3, BlockLayout(3, 6)
    )


def test_stamping_is_measuring() -> None:
    """SIG-13: the stamped signature is exactly the measured one, and the payload is kept."""
    layers = payload(3, 2, 8, 4)
    block = stamp("model-a", layers)
    assert block.signature == measure("model-a", layers)
    assert all(a is b for a, b in zip(block.layers, layers, strict=True))
    # Stamping refuses exactly what measuring refuses.
    bad = payload(2, 2, 8, 4)
    bad[1] = _with(bad[1], seq_len=7)
    with pytest.raises(RaggedPayload):
        stamp("model-a", bad)


def test_profiles_fix_version_readable_set_and_payload_type() -> None:
    """PROF-1 / PROF-2 / PROF-3: v1 writes 1, reads exactly {1} (a listed set), f32 payloads."""
    fields = {f.name for f in dataclasses.fields(FormatProfile)}
    assert fields == {"version", "readable", "payload_dtype", "fields", "revision", "has_layout"}
    assert FormatProfile(version=1, readable=(1,), payload_dtype="f32") == V1
    assert isinstance(V1.readable, tuple)
    assert verify_mod.stamp("m", payload(1, 1, 1, 1)).signature.format_version == 1


def test_geometry_is_part_of_the_signature() -> None:
    """SEC-4: payloads of the same total size but another shape measure differently."""
    a = measure("m", payload(2, 2, 8, 3))  # 48 elements per layer
    b = measure("m", payload(2, 8, 2, 3))
    c = measure("m", payload(2, 4, 4, 3))
    d = measure("m", payload(2, 2, 4, 6))
    assert len({a, b, c, d}) == 4


def test_negative_declared_dimensions_never_yield_a_signature() -> None:
    """SIG-1 / SIG-6: a signature's n_kv_heads and head_dim are non-negative.

    REFERENCE BUG: ``measure`` only refuses a first layer whose n_kv_heads or head_dim
    is *zero*. A layer from an untrusted store declaring (-2, -8) has width 16, measures
    "coherently" and yields a signature with n_kv_heads=-2, head_dim=-8.
    """
    k = np.zeros(64, np.float32)
    layers = [StoredLayer(-2, -8, 4, k, k.copy())]
    try:
        sig = measure("m", layers)
    except SignatureError:
        return
    assert sig.n_kv_heads >= 0 and sig.head_dim >= 0, f"measured {sig}"


# ---------------------------------------------------------------------------
# Property: a coherent payload measures exactly its shape
# ---------------------------------------------------------------------------

SHAPES = st.tuples(
    st.integers(1, 4),  # n_layers
    st.integers(1, 4),  # n_kv_heads
    st.integers(1, 8),  # head_dim
    st.integers(0, 6),  # tokens
    st.sampled_from(sorted(NUMPY_DTYPES)),
)


@settings(max_examples=200, deadline=None, database=None)
@given(shape=SHAPES, model=st.text(max_size=12))
def test_property_measure_returns_exactly_the_shape(
    shape: tuple[int, int, int, int, str], model: str
) -> None:
    """SIG-2 / SIG-4 / SIG-10 / SIG-13 as a property over coherent random payloads."""
    n_layers, heads, dim, tokens, dtype = shape
    layers = [layer(heads, dim, tokens, dtype=NUMPY_DTYPES[dtype]) for _ in range(n_layers)]
    sig = measure(model, layers)
    assert sig == CacheSignature(1, model, n_layers, heads, dim, dtype, tokens)
    assert stamp(model, layers).signature == sig
