"""The wire's scalars and shapes: unsigned 64-bit integers as decimal strings, binary64
bit patterns as hex, and the checks of a decoded JSON value's shape that every decoder
of :mod:`kvconform.protocol.codec` starts from; :class:`WireError` for a value that
fails them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvconform.rendering import clip


class WireError(ValueError):
    """A message that does not have the shape the protocol gives it."""


def u64_to_wire(value: int) -> str:
    return str(value)


_U64_LIMIT = 1 << 64


def u64_of(text: object) -> int | None:
    """The value of a u64 as PROTO-17 and ``common.schema.json#/$defs/u64`` write it.

    ASCII decimal digits, no sign, no leading zero, at most 20 digits, at most
    2^64 - 1; anything else (``"²"``, Arabic-Indic digits, ``"007"``, 5,000
    digits) is ``None``. The length is checked before any conversion.
    """
    if (
        type(text) is not str
        or not 0 < len(text) <= 20
        or not text.isascii()
        or not text.isdigit()
        or (text[0] == "0" and len(text) > 1)
    ):
        return None
    number = int(text)
    return number if number < _U64_LIMIT else None


def u64_from_wire(value: object, where: str) -> int:
    number = u64_of(value)
    if number is None:
        raise WireError(
            f"{where}: expected an unsigned 64-bit integer as decimal digits "
            f"(0 to 18446744073709551615, no leading zero), got {clip(repr(value))}"
        )
    return number


def bits_to_wire(bits: int) -> str:
    return f"0x{bits:016x}"


def bits_from_wire(value: object, where: str) -> int:
    if not isinstance(value, str) or not value.startswith("0x") or len(value) != 18:
        raise WireError(f"{where}: expected '0x' and 16 hex digits, got {clip(repr(value))}")
    try:
        return int(value, 16)
    except ValueError:
        raise WireError(
            f"{where}: expected '0x' and 16 hex digits, got {clip(repr(value))}"
        ) from None


def _mapping(raw: object, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise WireError(f"{where}: expected an object")
    return raw


def _list(raw: object, where: str) -> list[Any]:
    if not isinstance(raw, list):
        raise WireError(f"{where}: expected a list")
    return raw


def _int(raw: object, where: str) -> int:
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
        raise WireError(f"{where}: expected a non-negative integer, got {clip(repr(raw))}")
    return raw


def _str(raw: object, where: str) -> str:
    if not isinstance(raw, str):
        raise WireError(f"{where}: expected a string, got {clip(repr(raw))}")
    return raw


def _bool(raw: object, where: str) -> bool:
    if not isinstance(raw, bool):
        raise WireError(f"{where}: expected true or false, got {clip(repr(raw))}")
    return raw
