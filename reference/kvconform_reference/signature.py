"""Block signatures, measured from the payload (spec/signature.md, SIG and PROF).

A signature is derived from the block's own payload, never from what the
reader expects; the only field a writer supplies is ``model`` (SIG-2, SIG-3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kvconform_reference.errors import DegenerateLayer, EmptyPayload, RaggedPayload, Value

#: The dtype vocabulary (SIG-14): names a signature's ``dtype`` may take.
DTYPES = ("f32", "f16", "bf16")

#: How a buffer's element type is named in a measured signature (SIG-4).
#: bfloat16 has no numpy type; its 16-bit patterns are stored as ``uint16``.
_BUFFER_DTYPES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.uint16): "bf16",
}

#: The signature fields, in the order every comparison visits them (SIG-1, VERIFY-4, VERIFY-5).
SIGNATURE_FIELDS = (
    "format_version",
    "model",
    "n_layers",
    "n_kv_heads",
    "head_dim",
    "dtype",
    "tokens",
)


@dataclass(frozen=True)
class FormatProfile:
    """What one block format version fixes (PROF-1)."""

    #: The version this profile writes.
    version: int
    #: The versions a reader of this profile accepts, listed, not a range (VERIFY-3).
    readable: tuple[int, ...]
    #: The element type of payload buffers under this profile.
    payload_dtype: str


#: Format version 1 (PROF-2): reads exactly {1}, payload buffers are f32.
V1 = FormatProfile(version=1, readable=(1,), payload_dtype="f32")


@dataclass(frozen=True)
class CacheSignature:
    """What a block's payload is: the shape any reader must match to use it (SIG-1)."""

    format_version: int
    model: str
    n_layers: int
    n_kv_heads: int
    head_dim: int
    dtype: str
    tokens: int

    def field_value(self, name: str) -> Value:
        value: Value = getattr(self, name)
        return value

    @classmethod
    def expected(
        cls,
        model: str,
        n_layers: int,
        n_kv_heads: int,
        head_dim: int,
        tokens: int,
        *,
        dtype: str = "f32",
        profile: FormatProfile = V1,
    ) -> CacheSignature:
        """A reader's requirement. Compared against blocks, never stamped on one."""
        return cls(profile.version, model, n_layers, n_kv_heads, head_dim, dtype, tokens)


@dataclass(frozen=True)
class StoredLayer:
    """One layer of a stored block: declared shape, a ``seq_len`` claim, flat K/V buffers.

    ``seq_len`` is a claim; the buffer lengths are the evidence (SIG-7).
    """

    n_kv_heads: int
    head_dim: int
    seq_len: int
    k: np.ndarray
    v: np.ndarray


#: The largest per-token width a u64 holds (SIG-15).
U64_MAX = (1 << 64) - 1


def measure(
    model: str, layers: Sequence[StoredLayer], profile: FormatProfile = V1
) -> CacheSignature:
    """Derive a signature by measuring ``layers`` (SIG-2, SIG-4).

    There is no parameter to fill a gap from. Raises the first incoherence
    found, checking layers in index order (SIG-9): an empty payload (SIG-5), a
    degenerate first layer (SIG-6, SIG-15), a later layer that disagrees with
    the first (SIG-8), or a layer whose buffers contradict its own claim (SIG-7).
    """
    if not layers:
        raise EmptyPayload()
    first = layers[0]
    n_kv_heads, head_dim = first.n_kv_heads, first.head_dim
    per_token = n_kv_heads * head_dim
    # A negative count is no more a shape than zero (SIG-6); a per-token width
    # no u64 can hold cannot be measured either, and wrapping it would measure
    # a different, bogus shape (SIG-15).
    if n_kv_heads < 1 or head_dim < 1 or per_token > U64_MAX:
        raise DegenerateLayer(layer_index=0, n_kv_heads=n_kv_heads, head_dim=head_dim)
    tokens = _measure_layer(0, first, per_token)
    for index, layer in enumerate(layers[1:], start=1):
        if (layer.n_kv_heads, layer.head_dim) != (n_kv_heads, head_dim):
            raise RaggedPayload(
                layer_index=index,
                field="layer_shape",
                expected=(n_kv_heads, head_dim),
                found=(layer.n_kv_heads, layer.head_dim),
            )
        layer_tokens = _measure_layer(index, layer, per_token)
        if layer_tokens != tokens:
            raise RaggedPayload(
                layer_index=index, field="token_count", expected=tokens, found=layer_tokens
            )
    return CacheSignature(
        format_version=profile.version,
        model=model,
        n_layers=len(layers),
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        dtype=_BUFFER_DTYPES.get(first.k.dtype, str(first.k.dtype)),
        tokens=tokens,
    )


def _measure_layer(index: int, layer: StoredLayer, per_token: int) -> int:
    """Tokens stored in one layer, from its buffers; the claim must agree (SIG-7)."""
    k_len, v_len = layer.k.size, layer.v.size
    if k_len % per_token != 0:
        raise RaggedPayload(layer_index=index, field="k_length", expected=per_token, found=k_len)
    if v_len != k_len:
        raise RaggedPayload(layer_index=index, field="v_length", expected=k_len, found=v_len)
    tokens = k_len // per_token
    if layer.seq_len != tokens:
        raise RaggedPayload(
            layer_index=index, field="seq_len", expected=tokens, found=layer.seq_len
        )
    return tokens
