"""Stamping and verifying stored KV blocks (spec/verify.md, VERIFY group).

Verification runs these checks, in this order, and reports the first that
fails (VERIFY-9; under profile v2 VERIFY-10 adds a layout check before step 3
and a whole-block check at its end)::

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
from dataclasses import dataclass

from kvconform_reference.errors import (
    Incompatible,
    PayloadMismatch,
    SignatureError,
    Unmarked,
    UnsupportedFormat,
    Value,
)
from kvconform_reference.signature import (
    V1,
    BlockLayout,
    CacheSignature,
    FormatProfile,
    StoredLayer,
    measure,
    profile_for,
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


def stamp(
    model: str,
    layers: Sequence[StoredLayer],
    profile: FormatProfile = V1,
    layout: BlockLayout | None = None,
) -> KvBlock:
    """Stamp a block from its payload; the caller supplies only the model, and under
    profile v2 the layout (SIG-13, PROF-6)."""
    return KvBlock(signature=measure(model, layers, profile, layout), layers=tuple(layers))


def verify(
    block: UnverifiedBlock,
    expected: CacheSignature,
    profile: FormatProfile = V1,
    *,
    readable: tuple[int, ...] | None = None,
) -> KvBlock:
    """Verify ``block`` in the order of VERIFY-9 (VERIFY-10 under v2); ``expected`` is
    used only in step 5.

    ``readable`` is the reader's readable set, by default its profile's own; a
    reader of several versions measures each block under the rules of its
    recorded version (SIG-12, PROF-12). Raises the
    :class:`~.errors.SignatureError` of the first failing check.
    """
    readable = profile.readable if readable is None else readable
    recorded = block.signature
    if recorded is None:  # 1. VERIFY-2
        raise Unmarked()
    if recorded.format_version not in readable:  # 2. VERIFY-3
        raise UnsupportedFormat(found=recorded.format_version, readable=tuple(sorted(readable)))
    rules = profile_for(recorded.format_version, profile.revision)
    layout = recorded.layout if rules.has_layout else None
    if rules.has_layout and layout is None:  # a v2 stamp without its layout is no layout
        raise ValueError("a version-2 stamp carries a layout (PROF-5)")
    # 2b, 3. Measured under the recorded version's rules (SIG-12), the recorded
    # layout (PROF-6, VERIFY-10) and the recorded model, because no payload can
    # prove either (SIG-3); both are checked against the expectation in step 5.
    actual = measure(recorded.model, block.layers, rules, layout)
    _compare(recorded, actual, rules.fields, _payload_mismatch)  # 4. VERIFY-4, PROF-10
    _compare(expected, actual, rules.fields, _incompatible)  # 5. VERIFY-5, PROF-10
    return KvBlock(signature=actual, layers=block.layers)  # VERIFY-7


def _payload_mismatch(field: str, recorded: Value, actual: Value) -> SignatureError:
    return PayloadMismatch(field=field, recorded=recorded, actual=actual)


def _incompatible(field: str, expected: Value, found: Value) -> SignatureError:
    return Incompatible(field=field, expected=expected, found=found)


def _compare(
    claim: CacheSignature,
    actual: CacheSignature,
    fields: tuple[str, ...],
    error: Callable[[str, Value, Value], SignatureError],
) -> None:
    """Raise for the first field, in the profile's order, where the two differ.

    An absent window equals only an absent window (PROF-10): ``None`` is a value.
    """
    for name in fields:
        claimed, measured = claim.field_value(name), actual.field_value(name)
        if claimed != measured or type(claimed) is not type(measured):
            raise error(name, claimed, measured)
