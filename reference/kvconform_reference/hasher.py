"""The key hasher: FNV-1a 64 over a canonical encoding (spec/hash.md).

Grammar of the encoding, as the specification gives it::

    u64(v)        = the 8 bytes of v, little-endian                 (HASH-4)
    str(s)        = utf8(s) || u64(byte_length(utf8(s)))             (HASH-5)
    f64(x)        = u64(ieee754_binary64_bits(x))                    (HASH-6)
    present(b)    = str("some") if b else str("none")                (HASH-7)
    instance(id)  = str("instance") || u64(id)                       (HASH-8)

and every byte is folded into the state with the FNV-1a step (HASH-2).
"""

from __future__ import annotations

import struct

#: FNV-1a 64 offset basis (HASH-1).
OFFSET_BASIS = 0xCBF29CE484222325
#: FNV 64-bit prime (HASH-1).
PRIME = 0x100000001B3
_MASK = (1 << 64) - 1


class KeyHasher:
    """FNV-1a 64 state with the canonical mix primitives.

    Mix methods return ``self`` so that calls chain, as in the seed crate.
    There is deliberately no primitive that mixes an object address (ID-4).
    """

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state = OFFSET_BASIS  # HASH-1

    def mix_bytes(self, data: bytes) -> KeyHasher:
        """Fold raw bytes with no delimiter (HASH-2, HASH-3, HASH-14)."""
        state = self._state
        for byte in data:
            state ^= byte  # xor first, then multiply: FNV-1a, not FNV-1 (HASH-2)
            state = (state * PRIME) & _MASK  # wrapping (HASH-3)
        self._state = state
        return self

    def mix_u64(self, value: int) -> KeyHasher:
        """Mix an unsigned 64-bit integer as 8 little-endian bytes (HASH-4)."""
        if not 0 <= value <= _MASK:
            raise ValueError(f"u64 out of range: {value}")
        return self.mix_bytes(value.to_bytes(8, "little"))

    def mix_str(self, text: str) -> KeyHasher:
        """Mix a string: its UTF-8 bytes, then their *byte* count as u64 (HASH-5)."""
        encoded = text.encode("utf-8")
        self.mix_bytes(encoded)
        return self.mix_u64(len(encoded))

    def mix_f64_bits(self, bits: int) -> KeyHasher:
        """Mix a binary64 float given as its bit pattern (HASH-6)."""
        return self.mix_u64(bits)

    def mix_f64(self, value: float) -> KeyHasher:
        """Mix a float by its bit pattern, with no normalization (HASH-6).

        ``+0.0`` and ``-0.0`` mix differently; a NaN mixes its own payload.
        """
        return self.mix_f64_bits(f64_bits(value))

    def mix_present(self, present: bool) -> KeyHasher:
        """Mix whether an optional component is present (HASH-7)."""
        return self.mix_str("some" if present else "none")

    def mix_instance(self, instance_id: int) -> KeyHasher:
        """Mix a model-instance id behind its marker string (HASH-8)."""
        if not 0 <= instance_id <= _MASK:  # refuse before mixing anything (HASH-12)
            raise ValueError(f"u64 out of range: {instance_id}")
        return self.mix_str("instance").mix_u64(instance_id)

    def finish(self) -> int:
        """The current 64-bit value. Reading it changes nothing (HASH-9)."""
        return self._state


def f64_bits(value: float) -> int:
    """The IEEE-754 binary64 bit pattern of ``value``."""
    return int.from_bytes(struct.pack("<d", value), "little")


def f64_from_bits(bits: int) -> float:
    """The float whose binary64 bit pattern is ``bits``."""
    value: float = struct.unpack("<d", bits.to_bytes(8, "little"))[0]
    return value


def fnv1a64(data: bytes) -> int:
    """FNV-1a 64 of ``data``: a raw fold from the offset basis."""
    return KeyHasher().mix_bytes(data).finish()
