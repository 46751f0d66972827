"""Stamping and verifying stored KV blocks (spec/verify.md, VERIFY group).

Verification runs five checks, in this order, and reports the first that
fails (VERIFY-9)::

    1. marked      the block carries a signature             -> unmarked
    2. readable    its format version is in the readable set -> unsupported_format
    3. coherent    the payload measures without contradiction -> empty_payload,
                                                                 degenerate_layer,
                                                                 ragged_payload
    4. honest      the stamp equals the measurement           -> payload_mismatch
    5. compatible  the measurement equals the expectation     -> incompatible
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kvconform_reference.errors import (
    Incompatible,
    PayloadMismatch,
    SignatureError,
    Unmarked,
    UnsupportedFormat,
    Value,
)
from kvconform_reference.signature import (
    SIGNATURE_FIELDS,
    V1,
    CacheSignature,
    FormatProfile,
    StoredLayer,
    measure,
)


@dataclass(frozen=True)
class KvBlock:
    """A block whose signature was measured from its own payload.

    Only :func:`stamp` and :func:`verify` make one, so holding one is the proof.
    """

    signature: CacheSignature
    layers: tuple[StoredLayer, ...]


@dataclass(frozen=True)
class UnverifiedBlock:
    """A block as read back from an untrusted source. ``signature`` may be absent."""

    signature: CacheSignature | None
    layers: tuple[StoredLayer, ...]


def stamp(model: str, layers: Sequence[StoredLayer], profile: FormatProfile = V1) -> KvBlock:
    """Stamp a block from its payload; the caller supplies only the model (SIG-13)."""
    return KvBlock(signature=measure(model, layers, profile), layers=tuple(layers))


def verify(
    block: UnverifiedBlock, expected: CacheSignature, profile: FormatProfile = V1
) -> KvBlock:
    """Verify ``block`` in the order of VERIFY-9; ``expected`` is used only in step 5.

    Raises the :class:`~.errors.SignatureError` of the first failing check.
    """
    recorded = block.signature
    if recorded is None:  # 1. VERIFY-2
        raise Unmarked()
    if recorded.format_version not in profile.readable:  # 2. VERIFY-3
        raise UnsupportedFormat(
            found=recorded.format_version, readable=tuple(sorted(profile.readable))
        )
    # 3. Measured under the recorded version's layout (SIG-12). The model is
    # carried over from the stamp because no payload can prove it (SIG-3); it is
    # checked against the reader's expectation in step 5.
    actual = replace(
        measure(recorded.model, block.layers, profile),
        format_version=recorded.format_version,
    )
    _compare(recorded, actual, _payload_mismatch)  # 4. VERIFY-4
    _compare(expected, actual, _incompatible)  # 5. VERIFY-5
    return KvBlock(signature=actual, layers=block.layers)  # VERIFY-7


def _payload_mismatch(field: str, recorded: Value, actual: Value) -> SignatureError:
    return PayloadMismatch(field=field, recorded=recorded, actual=actual)


def _incompatible(field: str, expected: Value, found: Value) -> SignatureError:
    return Incompatible(field=field, expected=expected, found=found)


def _compare(
    claim: CacheSignature,
    actual: CacheSignature,
    error: Callable[[str, Value, Value], SignatureError],
) -> None:
    """Raise for the first field, in SIGNATURE_FIELDS order, where the two differ."""
    for name in SIGNATURE_FIELDS:
        claimed, measured = claim.field_value(name), actual.field_value(name)
        if claimed != measured:
            raise error(name, claimed, measured)
