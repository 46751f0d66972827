"""Unit tests of block verification, ``reference/verify.py`` (spec/verify.md, VERIFY).

Five checks in a fixed order -- marked, readable, coherent, honest, compatible --
and the first failure is the one reported. Counterparts of the verification
tests of seed 002 (ferrox-core), precedence combinations, one test per VERIFY
requirement, and properties over random stamped blocks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvconform_reference.errors import (
    EmptyPayload,
    Incompatible,
    KvError,
    PayloadMismatch,
    RaggedPayload,
    SignatureError,
    Unmarked,
    UnsupportedFormat,
)
from kvconform_reference.signature import (
    SIGNATURE_FIELDS,
    V1,
    CacheSignature,
    FormatProfile,
    StoredLayer,
    measure,
)
from kvconform_reference.verify import KvBlock, UnverifiedBlock, stamp, verify

pytestmark = pytest.mark.covers(
    "VERIFY-9",
    "VERIFY-2",
    "VERIFY-3",
    "VERIFY-4",
    "VERIFY-5",
    "VERIFY-6",
    "VERIFY-7",
    "VERIFY-8",
    "SIG-12",
    "PROF-2",
    "PROF-3",
)

NUMPY_DTYPES: dict[str, type[np.generic]] = {
    "f32": np.float32,
    "f16": np.float16,
    "bf16": np.uint16,
}


def layer(
    n_kv_heads: int, head_dim: int, tokens: int, *, dtype: type[np.generic] = np.float32
) -> StoredLayer:
    k = np.arange(tokens * n_kv_heads * head_dim).astype(dtype)
    return StoredLayer(n_kv_heads, head_dim, tokens, k, k.copy())


def payload(n_layers: int, n_kv_heads: int, head_dim: int, tokens: int) -> tuple[StoredLayer, ...]:
    return tuple(layer(n_kv_heads, head_dim, tokens) for _ in range(n_layers))


def expected(
    model: str, n_layers: int, n_kv_heads: int, head_dim: int, tokens: int
) -> CacheSignature:
    return CacheSignature.expected(model, n_layers, n_kv_heads, head_dim, tokens)


def refusal(
    block: UnverifiedBlock, want: CacheSignature, profile: FormatProfile = V1
) -> SignatureError:
    with pytest.raises(SignatureError) as excinfo:
        verify(block, want, profile)
    return excinfo.value


def _seq_len_7_at_layer_1(layers: Sequence[StoredLayer]) -> tuple[StoredLayer, ...]:
    out = list(layers)
    out[1] = dataclasses.replace(out[1], seq_len=7)
    return tuple(out)


# ---------------------------------------------------------------------------
# Counterparts of the seed's tests (seed 002, ferrox-core)
# ---------------------------------------------------------------------------


def test_a_stamped_block_round_trips_through_verification() -> None:
    """Seed 002 ``a_stamped_block_round_trips_through_verification``."""
    layers = payload(3, 2, 8, 4)
    signature = measure("model-a", layers)
    block = verify(UnverifiedBlock(signature, layers), expected("model-a", 3, 2, 8, 4))
    assert isinstance(block, KvBlock)
    assert len(block.layers) == 3
    assert block.signature == signature
    # And a block made by stamp() round-trips the same way.
    stamped = stamp("model-a", layers)
    again = verify(UnverifiedBlock(stamped.signature, stamped.layers), stamped.signature)
    assert again.signature == stamped.signature


def test_an_unmarked_block_is_rejected_not_trusted() -> None:
    """Seed 002 ``an_unmarked_block_is_rejected_not_trusted`` (VERIFY-2)."""
    err = refusal(UnverifiedBlock(None, payload(3, 2, 8, 4)), expected("model-a", 3, 2, 8, 4))
    assert err == Unmarked()
    assert err.kind == "unmarked"


def test_a_signature_that_overstates_its_payload_is_rejected() -> None:
    """Seed 002 ``a_signature_that_overstates_its_payload_is_rejected`` (VERIFY-4).

    The stamp is exactly what the reader expects -- and the payload is not.
    """
    want = expected("model-a", 3, 2, 16, 4)
    lying = want
    assert lying.head_dim == 16
    err = refusal(UnverifiedBlock(lying, payload(3, 2, 8, 4)), want)
    assert err == PayloadMismatch(field="head_dim", recorded=16, actual=8)

    # Overstated depth: 8 tokens claimed over a 4-token payload.
    lying = dataclasses.replace(lying, head_dim=8, tokens=8)
    err = refusal(UnverifiedBlock(lying, payload(3, 2, 8, 4)), expected("model-a", 3, 2, 8, 8))
    assert err == PayloadMismatch(field="tokens", recorded=8, actual=4)

    # Overstated layer count.
    lying = dataclasses.replace(lying, tokens=4, n_layers=4)
    err = refusal(UnverifiedBlock(lying, payload(3, 2, 8, 4)), expected("model-a", 4, 2, 8, 4))
    assert err == PayloadMismatch(field="n_layers", recorded=4, actual=3)


def test_an_honest_block_from_a_different_config_is_incompatible() -> None:
    """Seed 002 ``an_honest_block_from_a_different_config_is_incompatible`` (VERIFY-5)."""
    layers = payload(3, 2, 8, 4)
    signature = measure("model-a", layers)
    err = refusal(UnverifiedBlock(signature, layers), expected("model-b", 3, 2, 8, 4))
    assert err == Incompatible(field="model", expected="model-b", found="model-a")

    err = refusal(UnverifiedBlock(signature, layers), expected("model-a", 3, 4, 8, 4))
    assert err == Incompatible(field="n_kv_heads", expected=4, found=2)


def test_an_unreadable_format_version_is_rejected() -> None:
    """Seed 002 ``an_unreadable_format_version_is_rejected`` (VERIFY-3)."""
    layers = payload(2, 2, 8, 4)
    signature = dataclasses.replace(measure("model-a", layers), format_version=99)
    err = refusal(UnverifiedBlock(signature, layers), expected("model-a", 2, 2, 8, 4))
    assert err == UnsupportedFormat(found=99, readable=(1,))
    assert err.readable == V1.readable


# ---------------------------------------------------------------------------
# Precedence (VERIFY-9)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layers",
    [
        pytest.param((), id="empty"),
        pytest.param(_seq_len_7_at_layer_1(payload(3, 2, 8, 4)), id="ragged"),
        pytest.param(payload(3, 2, 8, 4), id="honest"),
    ],
)
def test_unmarked_beats_everything(layers: tuple[StoredLayer, ...]) -> None:
    """VERIFY-9 / VERIFY-2: no stamp -> unmarked, whatever the payload and expectation."""
    for want in (expected("model-a", 3, 2, 8, 4), expected("other", 9, 9, 9, 9)):
        assert refusal(UnverifiedBlock(None, layers), want) == Unmarked()


def test_unsupported_format_beats_a_broken_payload() -> None:
    """VERIFY-9: version 99 over a payload whose layer 1 claims seq_len 7 -> unsupported_format."""
    layers = _seq_len_7_at_layer_1(payload(3, 2, 8, 4))
    stamp_ = dataclasses.replace(expected("model-a", 3, 2, 8, 4), format_version=99)
    err = refusal(UnverifiedBlock(stamp_, layers), expected("model-b", 3, 2, 8, 4))
    assert err == UnsupportedFormat(found=99, readable=(1,))
    # ... and an empty payload.
    assert refusal(UnverifiedBlock(stamp_, ()), stamp_) == UnsupportedFormat(99, (1,))


def test_an_incoherent_payload_beats_a_lying_stamp() -> None:
    """VERIFY-9: step 3 (ragged/empty) is reported before step 4 (payload_mismatch)."""
    layers = _seq_len_7_at_layer_1(payload(3, 2, 8, 4))
    lying = expected("model-a", 5, 2, 16, 9)
    err = refusal(UnverifiedBlock(lying, layers), expected("model-b", 1, 1, 1, 1))
    assert err == RaggedPayload(layer_index=1, field="seq_len", expected=4, found=7)
    assert refusal(UnverifiedBlock(lying, ()), lying) == EmptyPayload()


def test_a_lying_stamp_beats_an_incompatible_expectation() -> None:
    """VERIFY-9: stamp head_dim 16 over an 8-wide payload, reader wants model-b:
    payload_mismatch on head_dim; the model difference is never reached."""
    stamp_ = CacheSignature(1, "model-a", 3, 2, 16, "f32", 4)
    want = CacheSignature(1, "model-b", 3, 2, 16, "f32", 4)
    err = refusal(UnverifiedBlock(stamp_, payload(3, 2, 8, 4)), want)
    assert err == PayloadMismatch(field="head_dim", recorded=16, actual=8)


# ---------------------------------------------------------------------------
# One test per requirement
# ---------------------------------------------------------------------------


def test_unmarked_empty_block_is_unmarked_not_empty() -> None:
    """VERIFY-2: neither stamp nor layers -> unmarked, not empty_payload."""
    err = refusal(UnverifiedBlock(None, ()), expected("model-a", 0, 0, 0, 0))
    assert isinstance(err, Unmarked) and not isinstance(err, EmptyPayload)


@pytest.mark.parametrize("version", [0, 2, 3, 99, (1 << 32) - 1])
def test_unreadable_versions_older_or_newer_are_refused(version: int) -> None:
    """VERIFY-3: any version outside the readable set, older or newer, is refused."""
    layers = payload(1, 1, 2, 1)
    stamp_ = dataclasses.replace(measure("m", layers), format_version=version)
    err = refusal(UnverifiedBlock(stamp_, layers), stamp_)
    assert err == UnsupportedFormat(found=version, readable=(1,))
    assert err.field_name == "format_version"
    assert err.values() == {"found": version, "readable": (1,)}


def test_readable_set_is_an_explicit_sorted_list() -> None:
    """VERIFY-3 / PROF-3: a listed set, not a range -- 3 is refused by a reader of {4, 1} --
    and it is reported sorted. (Versions 3 and 4 are hypothetical layout-free ones.)"""
    reader = FormatProfile(version=4, readable=(4, 1), payload_dtype="f32")
    layers = payload(1, 1, 2, 1)
    stamp_ = dataclasses.replace(measure("m", layers), format_version=3)
    err = refusal(UnverifiedBlock(stamp_, layers), stamp_, reader)
    assert err == UnsupportedFormat(found=3, readable=(1, 4))
    assert list(err.readable) == sorted(err.readable)
    # Both listed versions are read.
    for version in (1, 4):
        ok = dataclasses.replace(stamp_, format_version=version)
        assert verify(UnverifiedBlock(ok, layers), ok, reader).signature == ok


def test_stamp_compared_in_field_order_even_when_it_equals_the_expectation() -> None:
    """VERIFY-4: first differing field in order n_layers, n_kv_heads, head_dim, dtype, tokens."""
    layers = payload(3, 2, 8, 4)
    honest = measure("model-a", layers)
    wrong = {"n_layers": 4, "n_kv_heads": 1, "head_dim": 16, "dtype": "f16", "tokens": 5}
    names = [n for n in SIGNATURE_FIELDS if n in wrong]
    for i, name in enumerate(names):
        # Lie on this field and on every later one; the stamp is also the expectation.
        lying = dataclasses.replace(honest, **{n: wrong[n] for n in names[i:]})
        err = refusal(UnverifiedBlock(lying, layers), lying)
        assert err == PayloadMismatch(
            field=name, recorded=wrong[name], actual=getattr(honest, name)
        )


def test_stamp_model_is_never_a_payload_mismatch() -> None:
    """VERIFY-4 notes / SIG-3: the model is carried from the stamp, so a "wrong" model
    passes step 4 and is caught in step 5 as incompatible."""
    layers = payload(2, 2, 2, 2)
    stamp_ = measure("model-x", layers)
    err = refusal(UnverifiedBlock(stamp_, layers), measure("model-a", layers))
    assert err == Incompatible(field="model", expected="model-a", found="model-x")


def test_expectation_compared_in_field_order() -> None:
    """VERIFY-5: first differing field in order format_version, model, ..., tokens."""
    layers = payload(3, 2, 8, 4)
    honest = measure("model-a", layers)
    wrong: dict[str, object] = {
        "format_version": 2,
        "model": "model-b",
        "n_layers": 4,
        "n_kv_heads": 1,
        "head_dim": 16,
        "dtype": "bf16",
        "tokens": 5,
    }
    for i, name in enumerate(SIGNATURE_FIELDS):
        want = dataclasses.replace(honest, **{n: wrong[n] for n in SIGNATURE_FIELDS[i:]})
        err = refusal(UnverifiedBlock(honest, layers), want)
        assert err == Incompatible(field=name, expected=wrong[name], found=getattr(honest, name))


def test_expectation_contributes_nothing_to_the_measurement() -> None:
    """VERIFY-6: whatever the expectation, step 4 compares the stamp with the payload only,
    and step 5 reports measured values as ``found``."""
    layers = payload(3, 2, 8, 4)
    lying = CacheSignature(1, "model-a", 3, 2, 16, "f32", 4)
    for want in (lying, expected("model-a", 3, 2, 8, 4), expected("zzz", 7, 7, 7, 7)):
        err = refusal(UnverifiedBlock(lying, layers), want)
        assert err == PayloadMismatch(field="head_dim", recorded=16, actual=8)
    honest = measure("model-a", layers)
    err = refusal(UnverifiedBlock(honest, layers), expected("model-a", 3, 2, 8, 99))
    assert err == Incompatible(field="tokens", expected=99, found=4)


def test_success_yields_the_measured_signature_and_the_payload() -> None:
    """VERIFY-7: the result's signature equals stamp, expectation and measurement; the
    layers are the payload itself."""
    layers = payload(3, 2, 8, 4)
    stamp_ = CacheSignature(1, "model-a", 3, 2, 8, "f32", 4)
    want = expected("model-a", 3, 2, 8, 4)
    block = verify(UnverifiedBlock(stamp_, layers), want)
    assert block.signature == stamp_ == want == measure("model-a", layers)
    assert len(block.layers) == len(layers)
    assert all(a is b for a, b in zip(block.layers, layers, strict=True))


def _snapshot(layers: Sequence[StoredLayer]) -> list[tuple[int, int, int, bytes, bytes, str]]:
    return [
        (
            lay.n_kv_heads,
            lay.head_dim,
            lay.seq_len,
            lay.k.tobytes(),
            lay.v.tobytes(),
            str(lay.k.dtype),
        )
        for lay in layers
    ]


A_SIG = CacheSignature(1, "model-a", 3, 2, 8, "f32", 4)


@pytest.mark.parametrize(
    ("stamp_", "layers", "want", "outcome"),
    [
        pytest.param(A_SIG, payload(3, 2, 8, 4), A_SIG, None, id="success"),
        pytest.param(None, payload(3, 2, 8, 4), A_SIG, Unmarked, id="unmarked"),
        pytest.param(
            dataclasses.replace(A_SIG, format_version=99),
            payload(3, 2, 8, 4),
            A_SIG,
            UnsupportedFormat,
            id="unsupported",
        ),
        pytest.param(
            A_SIG, _seq_len_7_at_layer_1(payload(3, 2, 8, 4)), A_SIG, RaggedPayload, id="ragged"
        ),
        pytest.param(
            dataclasses.replace(A_SIG, head_dim=16),
            payload(3, 2, 8, 4),
            A_SIG,
            PayloadMismatch,
            id="lying",
        ),
        pytest.param(
            A_SIG,
            payload(3, 2, 8, 4),
            dataclasses.replace(A_SIG, model="model-b"),
            Incompatible,
            id="incompatible",
        ),
    ],
)
def test_verification_leaves_the_payload_untouched(
    stamp_: CacheSignature | None,
    layers: tuple[StoredLayer, ...],
    want: CacheSignature,
    outcome: type[KvError] | None,
) -> None:
    """VERIFY-8: buffers, declared shapes and seq_len claims unchanged, success or refusal."""
    before = _snapshot(layers)
    block = UnverifiedBlock(stamp_, layers)
    if outcome is None:
        verify(block, want)
    else:
        with pytest.raises(outcome):
            verify(block, want)
    assert _snapshot(layers) == before
    assert block.layers is layers and block.signature is stamp_


# ---------------------------------------------------------------------------
# Properties over random stamped blocks
# ---------------------------------------------------------------------------

BLOCKS = st.tuples(
    st.integers(1, 4),
    st.integers(1, 4),
    st.integers(1, 6),
    st.integers(0, 5),
    st.sampled_from(sorted(NUMPY_DTYPES)),
    st.text(max_size=8),
)

PROPERTY = settings(max_examples=200, deadline=None, database=None)


def _block(spec: tuple[int, int, int, int, str, str]) -> tuple[tuple[StoredLayer, ...], str]:
    n_layers, heads, dim, tokens, dtype, model = spec
    return tuple(
        layer(heads, dim, tokens, dtype=NUMPY_DTYPES[dtype]) for _ in range(n_layers)
    ), model


@PROPERTY
@given(spec=BLOCKS)
def test_property_stamped_block_verifies_against_its_own_signature(
    spec: tuple[int, int, int, int, str, str],
) -> None:
    """VERIFY-7 / SIG-13: stamp then verify against the stamp succeeds and yields it."""
    layers, model = _block(spec)
    block = stamp(model, layers)
    out = verify(UnverifiedBlock(block.signature, block.layers), block.signature)
    assert out.signature == block.signature


@PROPERTY
@given(spec=BLOCKS, data=st.data())
def test_property_changing_one_stamp_field_is_caught(
    spec: tuple[int, int, int, int, str, str], data: st.DataObject
) -> None:
    """VERIFY-3/4/5: changing any single stamp field is refused, naming that field.

    Shape fields and dtype -> payload_mismatch (recorded = the new value, actual = the
    measured one). ``model`` cannot be contradicted by a payload, so it passes step 4
    and is refused in step 5 as incompatible on ``model``; ``format_version`` is
    refused in step 2 as unsupported under profile v1.
    """
    layers, model = _block(spec)
    honest = stamp(model, layers).signature
    name = data.draw(st.sampled_from(SIGNATURE_FIELDS), label="field")
    old = getattr(honest, name)
    if name == "model":
        new: object = data.draw(st.text(max_size=8).filter(lambda s: s != old), label="new")
    elif name == "dtype":
        new = data.draw(
            st.sampled_from(["f32", "f16", "bf16", "F32", "int8"]).filter(lambda s: s != old)
        )
    elif name == "format_version":
        new = data.draw(st.integers(0, (1 << 32) - 1).filter(lambda v: v != old), label="new")
    else:
        new = data.draw(st.integers(0, 1 << 20).filter(lambda v: v != old), label="new")
    lying = dataclasses.replace(honest, **{name: new})
    with pytest.raises(SignatureError) as excinfo:
        verify(UnverifiedBlock(lying, layers), honest)
    err = excinfo.value
    if name == "format_version":
        assert err == UnsupportedFormat(found=new, readable=(1,))  # type: ignore[arg-type]
    elif name == "model":
        assert err == Incompatible(field="model", expected=old, found=new)
    else:
        assert err == PayloadMismatch(field=name, recorded=new, actual=old)
    assert err.field_name == name
