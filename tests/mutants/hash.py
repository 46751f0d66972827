"""HASH mutants: the key hasher with one misreading of spec/hash.md each.

Each mutant is a subclass of the reference ``KeyHasher`` that overrides one
primitive; :class:`~._kit.HasherAdapter` runs the hash programs *and* the plan
keys on it, as a real implementation with that hasher would.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from kvconform_reference import hasher
from kvconform_reference.hasher import OFFSET_BASIS, PRIME, KeyHasher, f64_bits, f64_from_bits

from kvconform import values

from . import mutant
from ._kit import HasherAdapter, run_program

_MASK = (1 << 64) - 1


# --- the fold: HASH-1, HASH-2, HASH-3 ----------------------------------------


class _Fnv1Order(KeyHasher):
    def mix_bytes(self, data: bytes) -> KeyHasher:
        state = self._state
        for byte in data:
            state = (state * PRIME) & _MASK  # MUTATION: multiply first (FNV-1)
            state ^= byte
        self._state = state
        return self


@mutant(
    "hash-fnv1-order",
    breaks=("HASH-2", "HASH-11"),
    half="contract",
    plausible="FNV-1 and FNV-1a differ only in the order of two lines, and both give the "
    "offset basis for the empty input, so a test of the empty string passes either way",
)
class HashFnv1Order(HasherAdapter):
    hasher = _Fnv1Order


class _ZeroBasis(KeyHasher):
    def __init__(self) -> None:
        self._state = 0  # MUTATION: FNV-0 start (a zero-initialised state)


@mutant(
    "hash-offset-basis-zero",
    breaks=("HASH-1", "HASH-11"),
    half="contract",
    plausible="a state field that starts at its type's default, or FNV-0 (the historic "
    "variant whose basis is 0) taken for FNV-1a",
)
class HashOffsetBasisZero(HasherAdapter):
    hasher = _ZeroBasis


class _Prime32(KeyHasher):
    def mix_bytes(self, data: bytes) -> KeyHasher:
        state = self._state
        for byte in data:
            state ^= byte
            state = (state * 0x01000193) & _MASK  # MUTATION: the 32-bit FNV prime
        self._state = state
        return self


@mutant(
    "hash-32-bit-prime",
    breaks=("HASH-1", "HASH-11"),
    half="contract",
    plausible="the FNV parameter table lists the 32-bit prime 16777619 right above the "
    "64-bit one, and the 64-bit basis is copied correctly next to it",
)
class Hash32BitPrime(HasherAdapter):
    hasher = _Prime32


class _Wrap63(KeyHasher):
    def mix_bytes(self, data: bytes) -> KeyHasher:
        state = self._state
        for byte in data:
            state ^= byte
            state = (state * PRIME) & ((1 << 63) - 1)  # MUTATION: keep it a positive int64
        self._state = state
        return self


@mutant(
    "hash-wrap-63-bits",
    breaks=("HASH-3", "HASH-11"),
    half="contract",
    plausible="masking to a non-negative signed 64-bit value so the key fits a Java long "
    "or an SQLite integer column; the state then keeps 63 bits, not 64",
)
class HashWrap63Bits(HasherAdapter):
    hasher = _Wrap63


class _SaltedPerHasher(KeyHasher):
    def __init__(self) -> None:
        super().__init__()
        self.mix_u64(random.getrandbits(64))  # MUTATION: a fresh random salt


@mutant(
    "hash-salted-per-hasher",
    breaks=("HASH-1", "HASH-11", "PLAN-3", "PLAN-4"),
    half="over",
    plausible="seeding every hasher at random, as SipHash and Python's hash() do against "
    "flooding, reads like hardening (SEC-1); the same components then never key alike "
    "twice, and no plan is ever reused",
)
class HashSaltedPerHasher(HasherAdapter):
    hasher = _SaltedPerHasher


# --- integers: HASH-4 ---------------------------------------------------------


class _BigEndian(KeyHasher):
    def mix_u64(self, value: int) -> KeyHasher:
        if not 0 <= value <= _MASK:
            raise ValueError(f"u64 out of range: {value}")
        return self.mix_bytes(value.to_bytes(8, "big"))  # MUTATION: network byte order


@mutant(
    "hash-u64-big-endian",
    breaks=("HASH-4", "HASH-11"),
    half="contract",
    plausible="network byte order is the habit of every wire format, and struct.pack('>Q') "
    "or to_bytes(8, 'big') reads as 'the canonical' encoding",
)
class HashU64BigEndian(HasherAdapter):
    hasher = _BigEndian


class _MinimalBytes(KeyHasher):
    def mix_u64(self, value: int) -> KeyHasher:
        if not 0 <= value <= _MASK:
            raise ValueError(f"u64 out of range: {value}")
        width = max(1, (value.bit_length() + 7) // 8)  # MUTATION: no high zero bytes
        return self.mix_bytes(value.to_bytes(width, "little"))


@mutant(
    "hash-u64-minimal-bytes",
    breaks=("HASH-4", "PLAN-16", "HASH-11"),
    half="under",
    plausible="dropping the high zero bytes looks like a harmless saving (varint habit); "
    "it makes integers run into the value mixed after them",
)
class HashU64MinimalBytes(HasherAdapter):
    hasher = _MinimalBytes


# --- strings: HASH-5 ----------------------------------------------------------


class _StrWithoutLength(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        return self.mix_bytes(text.encode("utf-8"))  # MUTATION: no count


@mutant(
    "hash-str-without-length",
    breaks=("HASH-5", "PLAN-16", "HASH-11"),
    half="under",
    plausible="hashing a string means hashing its bytes; the count looks redundant until "
    "('ab', 'c') and ('a', 'bc') collide (SGLang issue 24638)",
)
class HashStrWithoutLength(HasherAdapter):
    hasher = _StrWithoutLength


class _StrLengthInChars(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        self.mix_bytes(text.encode("utf-8"))
        return self.mix_u64(len(text))  # MUTATION: characters, not UTF-8 bytes


@mutant(
    "hash-str-length-in-chars",
    breaks=("HASH-5", "HASH-11"),
    half="contract",
    plausible="len(text) in Python counts code points; the seed's Rust s.len() counts "
    "bytes, and a port that translates len() literally is wrong for non-ASCII",
)
class HashStrLengthInChars(HasherAdapter):
    hasher = _StrLengthInChars


class _StrLengthFirst(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        encoded = text.encode("utf-8")
        self.mix_u64(len(encoded))  # MUTATION: length prefix (Pascal / protobuf style)
        return self.mix_bytes(encoded)


@mutant(
    "hash-str-length-before-bytes",
    breaks=("HASH-5", "HASH-11"),
    half="contract",
    plausible="every length-prefixed wire format puts the count first; it is just as "
    "injective, but it is not the byte sequence the vectors pin",
)
class HashStrLengthBeforeBytes(HasherAdapter):
    hasher = _StrLengthFirst


class _StrNulTerminated(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        return self.mix_bytes(text.encode("utf-8") + b"\x00")  # MUTATION: C string


@mutant(
    "hash-str-nul-terminated",
    breaks=("HASH-5", "HASH-11"),
    half="under",
    plausible="a C string delimits itself with a NUL; a string containing NUL then "
    "runs into the next one, and the bytes differ from the vectors anyway",
)
class HashStrNulTerminated(HasherAdapter):
    hasher = _StrNulTerminated


class _StrUtf16(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        encoded = text.encode("utf-16-le")  # MUTATION: the platform's string bytes
        self.mix_bytes(encoded)
        return self.mix_u64(len(encoded))


@mutant(
    "hash-str-utf16",
    breaks=("HASH-5", "HASH-11"),
    half="contract",
    plausible="a port to Java, C# or JavaScript hashes the string's native UTF-16 code "
    "units, which is what getBytes() or a char loop sees there",
)
class HashStrUtf16(HasherAdapter):
    hasher = _StrUtf16


# --- floats: HASH-6 -----------------------------------------------------------


class _NormalizeZero(KeyHasher):
    def mix_f64_bits(self, bits: int) -> KeyHasher:
        return self.mix_f64(f64_from_bits(bits))

    def mix_f64(self, value: float) -> KeyHasher:
        return KeyHasher.mix_f64_bits(self, f64_bits(value + 0.0))  # MUTATION: -0.0 -> +0.0


@mutant(
    "hash-negative-zero-normalized",
    breaks=("HASH-6", "PLAN-16", "HASH-11"),
    half="under",
    plausible="'-0.0 == 0.0, so they should hash alike' is the instinct of every hash "
    "table; the seed says in capitals not to 'fix' it",
)
class HashNegativeZeroNormalized(HasherAdapter):
    hasher = _NormalizeZero


class _CanonicalNan(KeyHasher):
    def mix_f64_bits(self, bits: int) -> KeyHasher:
        return self.mix_f64(f64_from_bits(bits))

    def mix_f64(self, value: float) -> KeyHasher:
        if math.isnan(value):
            return KeyHasher.mix_f64_bits(self, 0x7FF8000000000000)  # MUTATION: one NaN
        return KeyHasher.mix_f64_bits(self, f64_bits(value))


@mutant(
    "hash-nan-canonicalized",
    breaks=("HASH-6", "PLAN-16", "HASH-11"),
    half="under",
    plausible="canonicalizing NaN is what JavaScript engines and many serializers do, and "
    "it looks like making a non-comparable value hashable",
)
class HashNanCanonicalized(HasherAdapter):
    hasher = _CanonicalNan


# --- presence and instance: HASH-7, HASH-8 ------------------------------------


class _AbsentMixesNothing(KeyHasher):
    def mix_present(self, present: bool) -> KeyHasher:
        if present:
            self.mix_str("some")
        return self  # MUTATION: an absent component mixes nothing


@mutant(
    "hash-absent-mixes-nothing",
    breaks=("HASH-7", "PLAN-18", "HASH-11"),
    half="under",
    plausible="'if let Some(hook) = ... { mix(hook) }' is the natural shape of the code; "
    "the seed names it as the obvious implementation that has exactly this bug",
)
class HashAbsentMixesNothing(HasherAdapter):
    hasher = _AbsentMixesNothing


class _PresenceAsByte(KeyHasher):
    def mix_present(self, present: bool) -> KeyHasher:
        return self.mix_bytes(b"\x01" if present else b"\x00")  # MUTATION: a bool byte


@mutant(
    "hash-presence-as-byte",
    breaks=("HASH-7", "HASH-11"),
    half="contract",
    plausible="a bool is a byte in every serializer; it distinguishes the two states but "
    "is not the 'some'/'none' encoding the vectors pin",
)
class HashPresenceAsByte(HasherAdapter):
    hasher = _PresenceAsByte


class _InstanceWithoutMarker(KeyHasher):
    def mix_instance(self, instance_id: int) -> KeyHasher:
        return self.mix_u64(instance_id)  # MUTATION: no "instance" marker


@mutant(
    "hash-instance-without-marker",
    breaks=("HASH-8", "HASH-11"),
    half="contract",
    plausible="an id is just an integer, so mix_u64 looks sufficient; the marker is what "
    "keeps it from reading as one more structural integer",
)
class HashInstanceWithoutMarker(HasherAdapter):
    hasher = _InstanceWithoutMarker


# --- finish and the raw fold: HASH-9, HASH-14 ---------------------------------


class _FinishResets(KeyHasher):
    def finish(self) -> int:
        value = self._state
        self._state = OFFSET_BASIS  # MUTATION: finishing consumes the state
        return value


@mutant(
    "hash-finish-resets",
    breaks=("HASH-9",),
    half="contract",
    plausible="streaming digests often finalize into a fresh state ('digest and reset'), "
    "so a second read or mixing after a read starts over",
)
class HashFinishResets(HasherAdapter):
    hasher = _FinishResets


def _raw_with_count(h: hasher.KeyHasher, data: bytes) -> object:
    return h.mix_bytes(data).mix_u64(len(data))  # MUTATION: a count after raw bytes


@mutant(
    "hash-raw-fold-adds-count",
    breaks=("HASH-14", "HASH-11"),
    half="contract",
    plausible="an adapter that reaches the fold only through the public, length-"
    "delimited mixes adds a count to raw bytes, and no published vector then matches",
)
class HashRawFoldAddsCount(HasherAdapter):
    def hash(self, program: Sequence[values.MixOp]) -> list[int]:
        return run_program(self.hasher(), program, raw=_raw_with_count)
