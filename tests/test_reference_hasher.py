"""Unit tests of the reference key hasher, ``reference/hasher.py`` (spec/hash.md).

Counterparts of the hasher tests of seed 000 (fuel-tensor ``ShapeKeyHasher``), one
test per directly testable HASH requirement, and hypothesis properties of the
canonical encoding. Expected values come from the FNV-1a 64 published vectors and
the worked examples of spec/hash.md, or from ``_fold`` below: a raw FNV-1a 64 fold
written here without importing the reference, so the reference is never checked
only against itself.
"""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kvconform_reference import hasher
from kvconform_reference.hasher import KeyHasher

pytestmark = pytest.mark.covers(
    "HASH-1",
    "HASH-2",
    "HASH-3",
    "HASH-4",
    "HASH-5",
    "HASH-6",
    "HASH-7",
    "HASH-8",
    "HASH-9",
    "HASH-14",
    "HASH-11",
)

OFFSET_BASIS = 0xCBF29CE484222325
PRIME = 0x100000001B3
MASK64 = (1 << 64) - 1
U64_MAX = MASK64

PROPERTY = settings(max_examples=200, deadline=None, database=None)

#: Text with no surrogate code points (they have no UTF-8 form, HASH-13), astral included.
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)


def _fold(data: bytes, state: int = OFFSET_BASIS) -> int:
    """An independent FNV-1a 64 raw fold: xor the byte in, then multiply, mod 2**64."""
    for byte in data:
        state = ((state ^ byte) * PRIME) & MASK64
    return state


def _fold_fnv1(data: bytes) -> int:
    """The FNV-1 order (multiply first): the transposition HASH-2 rules out."""
    state = OFFSET_BASIS
    for byte in data:
        state = ((state * PRIME) & MASK64) ^ byte
    return state


def _u64(v: int) -> bytes:
    return struct.pack("<Q", v)


def _str(s: str) -> bytes:
    encoded = s.encode("utf-8")
    return encoded + _u64(len(encoded))


# ---------------------------------------------------------------------------
# Counterparts of the seed's tests (seed 000, fuel-tensor)
# ---------------------------------------------------------------------------


def test_hasher_matches_the_fnv1a_spec() -> None:
    """Seed 000 ``hasher_matches_the_fnv1a_spec`` (HASH-1, HASH-2, HASH-14).

    The empty input is the offset basis -- but that vector alone is NOT sufficient:
    FNV-1 and FNV-1a agree on empty input, so it cannot catch the xor/multiply
    transposition. The published raw folds of "a" and "foobar" can.
    """
    assert KeyHasher().finish() == 0xCBF29CE484222325
    # The empty vector cannot tell the two orders apart ...
    assert _fold_fnv1(b"") == _fold(b"") == OFFSET_BASIS
    # ... while content can: the published FNV-1a values, and they are not FNV-1's.
    assert KeyHasher().mix_bytes(b"a").finish() == 0xAF63DC4C8601EC8C
    assert KeyHasher().mix_bytes(b"foobar").finish() == 0x85944171F73967E8
    assert _fold_fnv1(b"a") != 0xAF63DC4C8601EC8C
    assert _fold_fnv1(b"foobar") != 0x85944171F73967E8
    assert hasher.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert hasher.fnv1a64(b"foobar") == 0x85944171F73967E8


def test_distinct_structure_gives_distinct_keys() -> None:
    """Seed 000 ``distinct_structure_gives_distinct_keys``: the model family discriminates."""
    a = KeyHasher().mix_str("llama").mix_u64(32).finish()
    b = KeyHasher().mix_str("qwen3").mix_u64(32).finish()
    assert a != b, "model family must discriminate"
    # ... and the same structure keys identically (the other half).
    assert a == KeyHasher().mix_str("llama").mix_u64(32).finish()


def test_adjacent_string_mixes_cannot_be_confused() -> None:
    """Seed 000 ``adjacent_string_mixes_cannot_be_confused`` (HASH-5).

    The length delimiter is load-bearing: without it ("ab", "c") and ("a", "bc")
    fold the same three bytes, as the raw folds show.
    """
    a = KeyHasher().mix_str("ab").mix_str("c").finish()
    b = KeyHasher().mix_str("a").mix_str("bc").finish()
    assert a != b
    assert a == 0x5091916F8CEEB7B0
    assert b == 0xD3EFFA61B782F8B8
    raw_a = KeyHasher().mix_bytes(b"ab").mix_bytes(b"c").finish()
    raw_b = KeyHasher().mix_bytes(b"a").mix_bytes(b"bc").finish()
    assert raw_a == raw_b == 0xE71FA2190541574B


def test_absent_and_present_hooks_differ() -> None:
    """Seed 000 ``absent_and_present_hooks_differ`` (HASH-7): absence is mixed, not skipped."""
    with_hook = KeyHasher().mix_present(True).finish()
    without = KeyHasher().mix_present(False).finish()
    assert with_hook != without, "a disabled hook must not key the same as an enabled one"
    assert without != KeyHasher().finish(), "absence must mix bytes, not be skipped"
    assert with_hook == KeyHasher().mix_present(True).finish()


# ---------------------------------------------------------------------------
# One test per requirement
# ---------------------------------------------------------------------------


def test_fresh_state_and_constants_are_the_fnv1a_parameters() -> None:
    """HASH-1: a fresh hasher is the offset basis and the multiplier is the 64-bit prime."""
    assert hasher.OFFSET_BASIS == 0xCBF29CE484222325 == 14695981039346656037
    assert hasher.PRIME == 0x100000001B3 == 1099511628211
    assert KeyHasher().finish() == OFFSET_BASIS
    # One byte pins the prime: (basis ^ 0) * prime mod 2**64.
    assert KeyHasher().mix_bytes(b"\x00").finish() == (OFFSET_BASIS * PRIME) & MASK64


def test_bytes_are_xored_before_the_multiplication() -> None:
    """HASH-2: FNV-1a order; "a" folds to the published value, not FNV-1's 0xaf63bd4c8601b7be."""
    assert KeyHasher().mix_bytes(b"a").finish() == 0xAF63DC4C8601EC8C
    assert _fold_fnv1(b"a") == 0xAF63BD4C8601B7BE
    assert KeyHasher().mix_bytes(b"a").finish() != 0xAF63BD4C8601B7BE


def test_multiplication_wraps_modulo_2_to_the_64() -> None:
    """HASH-3: the state keeps the low 64 bits, for every prefix of a long input."""
    h = KeyHasher()
    data = bytes(range(256)) * 8
    for i, byte in enumerate(data):
        h.mix_bytes(bytes([byte]))
        value = h.finish()
        assert 0 <= value <= MASK64
        if i % 257 == 0:
            assert value == _fold(data[: i + 1])
    assert h.finish() == _fold(data)


def test_u64_is_eight_little_endian_bytes() -> None:
    """HASH-4: fixed width, least significant byte first (worked example values)."""
    assert KeyHasher().mix_u64(1).finish() == 0x89CD31291D2AEFA4
    assert KeyHasher().mix_u64(1 << 56).finish() == 0xA8C7F732281A3812
    # No variable-length form: 0 is eight zero bytes, not one or none.
    assert KeyHasher().mix_u64(0).finish() == _fold(bytes(8)) == 0xA8C7F832281A39C5
    for value in (0, 1, 255, 256, 1 << 32, U64_MAX):
        assert KeyHasher().mix_u64(value).finish() == _fold(value.to_bytes(8, "little"))


def test_str_is_utf8_bytes_then_their_byte_count() -> None:
    """HASH-5: UTF-8 bytes first, then the count of *bytes* as u64; no terminator."""
    # "é" is one character but two UTF-8 bytes: the count is 2.
    expected = _fold(bytes.fromhex("c3a9") + bytes.fromhex("0200000000000000"))
    assert KeyHasher().mix_str("é").finish() == expected
    # A 4-byte (astral) character: count 4, not 1 code point nor 2 UTF-16 units.
    assert KeyHasher().mix_str("\U0001f600").finish() == _fold("\U0001f600".encode() + _u64(4))
    # The empty string is just its count, eight zero bytes.
    assert KeyHasher().mix_str("").finish() == _fold(bytes(8))


def test_f64_is_its_bit_pattern_without_normalization() -> None:
    """HASH-6: +0.0 and -0.0 differ; each NaN mixes its own payload (worked examples)."""
    assert KeyHasher().mix_f64(0.0).finish() == 0xA8C7F832281A39C5
    assert KeyHasher().mix_f64(-0.0).finish() == 0xA8C7783228196045
    quiet = hasher.f64_from_bits(0x7FF8000000000000)
    payload = hasher.f64_from_bits(0x7FF8000000000001)
    assert math.isnan(quiet) and math.isnan(payload)
    assert KeyHasher().mix_f64(quiet).finish() == 0xAA96293229A2E940
    assert KeyHasher().mix_f64(payload).finish() == 0x8D1818291FF72671
    # The same NaN bit pattern mixes identically although NaN != NaN.
    assert KeyHasher().mix_f64(payload).finish() == KeyHasher().mix_f64(payload).finish()
    assert KeyHasher().mix_f64_bits(0x7FF8000000000001).finish() == 0x8D1818291FF72671


def test_presence_mixes_some_or_none() -> None:
    """HASH-7: present(true) is str("some"), present(false) is str("none") (worked example)."""
    assert KeyHasher().mix_present(True).finish() == 0xB44EB8F658970175
    assert KeyHasher().mix_present(False).finish() == 0x985368C238DBBB5F
    assert KeyHasher().mix_present(True).finish() == KeyHasher().mix_str("some").finish()
    assert KeyHasher().mix_present(False).finish() == KeyHasher().mix_str("none").finish()


def test_instance_is_marker_then_u64() -> None:
    """HASH-8: instance(id) is str("instance") then u64(id) (worked example)."""
    assert KeyHasher().mix_instance(1).finish() == 0x249B0F642A4191FB
    assert KeyHasher().mix_instance(7).finish() == _fold(_str("instance") + _u64(7))
    # The marker keeps an instance id apart from a bare structural integer.
    assert KeyHasher().mix_instance(7).finish() != KeyHasher().mix_u64(7).finish()


def test_finish_returns_state_and_changes_nothing() -> None:
    """HASH-9: finish is the current state; it may be read repeatedly and mixing continues."""
    h = KeyHasher().mix_str("qwen3")
    first = h.finish()
    assert h.finish() == first == _fold(_str("qwen3"))
    h.mix_u64(32)
    assert h.finish() == _fold(_str("qwen3") + _u64(32))
    assert h.finish() == h.finish()


def test_raw_fold_adds_nothing() -> None:
    """HASH-14: the raw fold is reachable and adds no count, delimiter or marker."""
    assert KeyHasher().mix_bytes(b"").finish() == OFFSET_BASIS
    assert hasher.fnv1a64(b"abc") == KeyHasher().mix_bytes(b"ab").mix_bytes(b"c").finish()
    assert hasher.fnv1a64(b"abc") == 0xE71FA2190541574B == _fold(b"abc")


def test_primitives_are_byte_exact_over_a_mixed_program() -> None:
    """HASH-11: a sequence of every primitive equals the fold of the grammar's bytes."""
    h = (
        KeyHasher()
        .mix_bytes(b"\x00\xff")
        .mix_u64(U64_MAX)
        .mix_str("kv\u00e9\U0001f600")
        .mix_f64(-1.5)
        .mix_present(True)
        .mix_present(False)
        .mix_instance(U64_MAX)
    )
    expected = (
        b"\x00\xff"
        + _u64(U64_MAX)
        + _str("kv\u00e9\U0001f600")
        + struct.pack("<d", -1.5)
        + _str("some")
        + _str("none")
        + _str("instance")
        + _u64(U64_MAX)
    )
    assert h.finish() == _fold(expected)


@pytest.mark.covers("HASH-12", "HASH-13")
def test_values_with_no_canonical_bytes_are_refused() -> None:
    """HASH-12 and HASH-13 in the reference's own API (the suite probes them too, CONF-9).

    An integer outside 0 .. 2**64-1 is refused by every u64-mixing primitive, never
    reduced, clamped or reinterpreted; a string with an unpaired surrogate raises
    ``UnicodeEncodeError`` rather than being mixed after replacement.
    """
    for bad in (-1, 1 << 64, -(1 << 63), (1 << 64) + 1):
        h = KeyHasher().mix_str("x")
        before = h.finish()
        with pytest.raises(ValueError):
            h.mix_u64(bad)
        assert h.finish() == before, "a refused u64 must not be partially mixed"
        with pytest.raises(ValueError):
            KeyHasher().mix_f64_bits(bad)
        with pytest.raises(ValueError):
            KeyHasher().mix_instance(bad)
    # The edges of the range are accepted.
    KeyHasher().mix_u64(0).mix_u64(U64_MAX).mix_instance(U64_MAX).mix_f64_bits(U64_MAX)

    for bad_text in ("\ud800", "a\udfffb", "\udc00\ud800"):
        h = KeyHasher().mix_str("x")
        before = h.finish()
        with pytest.raises(UnicodeEncodeError):
            h.mix_str(bad_text)
        assert h.finish() == before, "a refused string must not be partially mixed"
    # A correctly paired astral character is fine.
    KeyHasher().mix_str("\U0001f600")


# ---------------------------------------------------------------------------
# Properties
# ---------------------------------------------------------------------------


@PROPERTY
@given(data=st.data(), text=TEXT.filter(lambda t: len(t) >= 1))
def test_property_different_splits_never_encode_alike(data: st.DataObject, text: str) -> None:
    """HASH-5: splitting the same text at two different points gives different keys."""
    i = data.draw(st.integers(0, len(text)), label="i")
    j = data.draw(st.integers(0, len(text)).filter(lambda x: x != i), label="j")
    a = KeyHasher().mix_str(text[:i]).mix_str(text[i:]).finish()
    b = KeyHasher().mix_str(text[:j]).mix_str(text[j:]).finish()
    assert a != b


@PROPERTY
@given(text=TEXT)
def test_property_str_is_utf8_then_le_length(text: str) -> None:
    """HASH-5: str(s) folds utf8(s) + 8-byte LE byte count, for any text incl. astral."""
    encoded = text.encode()
    raw = _fold(encoded + struct.pack("<Q", len(encoded)))
    assert KeyHasher().mix_str(text).finish() == raw


@PROPERTY
@given(value=st.integers(0, U64_MAX))
def test_property_u64_is_a_fold_of_eight_le_bytes(value: int) -> None:
    """HASH-4: u64(v) folds the 8 little-endian bytes of v, over the whole range."""
    assert KeyHasher().mix_u64(value).finish() == _fold(struct.pack("<Q", value))


FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan]),
    st.integers(0, U64_MAX).map(hasher.f64_from_bits),
)


@PROPERTY
@given(value=FLOATS)
def test_property_f64_is_a_fold_of_its_bits(value: float) -> None:
    """HASH-6: f64(x) folds struct.pack('<d', x) for every float, NaN payloads and -0.0 too."""
    packed = struct.pack("<d", value)
    assert KeyHasher().mix_f64(value).finish() == _fold(packed)
    bits = int.from_bytes(packed, "little")
    assert hasher.f64_bits(value) == bits
    assert KeyHasher().mix_f64_bits(bits).finish() == _fold(packed)


OPS = st.one_of(
    st.tuples(st.just("bytes"), st.binary(max_size=12)),
    st.tuples(st.just("u64"), st.integers(0, U64_MAX)),
    st.tuples(st.just("str"), TEXT),
    st.tuples(st.just("f64"), FLOATS),
    st.tuples(st.just("present"), st.booleans()),
    st.tuples(st.just("instance"), st.integers(0, U64_MAX)),
)


def _apply(h: KeyHasher, op: tuple[str, object]) -> None:
    kind, value = op
    getattr(h, f"mix_{kind}")(value)


@PROPERTY
@given(ops=st.lists(OPS, max_size=12), data=st.data())
def test_property_finish_never_changes_state(
    ops: list[tuple[str, object]], data: st.DataObject
) -> None:
    """HASH-9: interleaving extra finish() calls anywhere changes no later value."""
    plain = KeyHasher()
    plain_values = []
    for op in ops:
        _apply(plain, op)
        plain_values.append(plain.finish())

    extra = data.draw(st.lists(st.integers(0, 3), min_size=len(ops) + 1, max_size=len(ops) + 1))
    noisy = KeyHasher()
    for _ in range(extra[0]):
        noisy.finish()
    noisy_values = []
    for op, n_finish in zip(ops, extra[1:], strict=True):
        _apply(noisy, op)
        for _ in range(n_finish):
            noisy.finish()
        noisy_values.append(noisy.finish())
    assert noisy_values == plain_values
