"""Block signatures, measured from the payload (spec/signature.md, SIG and PROF).

A signature is derived from the block's own payload, never from what the
reader expects; the only field a writer supplies is ``model`` (SIG-2, SIG-3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from kvconform_reference.errors import (
    BadLayout,
    BlockSizeMismatch,
    DegenerateLayer,
    EmptyPayload,
    RaggedPayload,
    SplitKvHeadWidth,
    Value,
)

#: The dtype vocabulary (SIG-14): names a signature's ``dtype`` may take.
DTYPES = ("f32", "f16", "bf16")

#: How a buffer's element type is named in a measured signature (SIG-4).
#: bfloat16 has no numpy type; its 16-bit patterns are stored as ``uint16``.
_BUFFER_DTYPES = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.uint16): "bf16",
}

#: The signature fields under profile v1, in the order every comparison visits them
#: (SIG-1, VERIFY-4, VERIFY-5).
SIGNATURE_FIELDS = (
    "format_version",
    "model",
    "n_layers",
    "n_kv_heads",
    "head_dim",
    "dtype",
    "tokens",
)
#: The same under profile v2: the layout's two fields come last (PROF-10).
SIGNATURE_FIELDS_V2 = (*SIGNATURE_FIELDS, "block_size", "sliding_window")

#: The two readings of profile v2 (PROF-11, option ``profile_v2_revision``).
REVISIONS = ("split_width", "layout_only")


@dataclass(frozen=True)
class BlockLayout:
    """The layout a v2 block is cut under (PROF-5): ``None`` window = full causal."""

    block_size: int
    sliding_window: int | None = None

    def check(self) -> None:
        """Refuse a layout that is not one, in the order of PROF-7."""
        bs, window = self.block_size, self.sliding_window
        if bs < 1:
            raise BadLayout(field="block_size", block_size=bs, sliding_window=window)
        if window is None:
            return
        if window < 1:  # a zero window attends to nothing; "no window" is None
            raise BadLayout(field="sliding_window", block_size=bs, sliding_window=window)
        if window % bs:
            raise BadLayout(
                field="sliding_window", block_size=bs, sliding_window=window, remainder=window % bs
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
    #: The fields compared, in order (VERIFY-4, PROF-10).
    fields: tuple[str, ...] = SIGNATURE_FIELDS
    #: Under v2, which upstream reading of a layer's width and claim (PROF-11).
    revision: str = "split_width"
    #: Whether every block carries a layout (PROF-5).
    has_layout: bool = False

    @property
    def claim_field(self) -> str:
        """The name a layer's position claim is reported under (SIG-7, PROF-11)."""
        return "positions" if self.has_layout and self.revision == "split_width" else "seq_len"


#: Format version 1 (PROF-2): reads exactly {1}, payload buffers are f32.
V1 = FormatProfile(version=1, readable=(1,), payload_dtype="f32")
#: Format version 2 (PROF-5): a layout on every block, reads exactly {2}.
V2 = FormatProfile(
    version=2, readable=(2,), payload_dtype="f32", fields=SIGNATURE_FIELDS_V2, has_layout=True
)


def profile_for(version: int, revision: str = "split_width") -> FormatProfile:
    """The rules a block of ``version`` is measured under (SIG-12, PROF-12).

    Version 2 has a layout (PROF-5); every other version a reader lists is
    measured without one, as version 1 is (PROF-2).
    """
    if version == 2:
        return replace(V2, revision=revision)
    return replace(V1, version=version, readable=(version,), revision=revision)


@dataclass(frozen=True)
class CacheSignature:
    """What a block's payload is: the shape any reader must match to use it (SIG-1, PROF-5)."""

    format_version: int
    model: str
    n_layers: int
    n_kv_heads: int
    head_dim: int
    dtype: str
    tokens: int
    #: Present exactly for a version-2 signature (PROF-5).
    layout: BlockLayout | None = None

    def field_value(self, name: str) -> Value:
        if name in ("block_size", "sliding_window"):
            return None if self.layout is None else getattr(self.layout, name)
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
        layout: BlockLayout | None = None,
    ) -> CacheSignature:
        """A reader's requirement. Compared against blocks, never stamped on one."""
        return cls(profile.version, model, n_layers, n_kv_heads, head_dim, dtype, tokens, layout)


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
    #: The width of the V heads, when stated and other than ``head_dim`` (PROF-11).
    v_head_dim: int | None = None


#: The largest per-token width a u64 holds (SIG-15).
U64_MAX = (1 << 64) - 1


def measure(
    model: str,
    layers: Sequence[StoredLayer],
    profile: FormatProfile = V1,
    layout: BlockLayout | None = None,
) -> CacheSignature:
    """Derive a signature by measuring ``layers`` (SIG-2, SIG-4).

    There is no parameter to fill a gap from. Under profile v2 the writer's
    ``layout`` is checked first (PROF-7) and carried into the result (PROF-6).
    Raises the first incoherence found, checking layers in index order (SIG-9):
    an empty payload (SIG-5), a degenerate first layer (SIG-6, SIG-15), a later
    layer that disagrees with the first (SIG-8), a split head width (PROF-11),
    a layer whose buffers contradict its own claim (SIG-7), and under v2 a
    payload that is not one whole block (PROF-8).
    """
    if profile.has_layout:
        if layout is None:
            raise ValueError("profile v2 measures under a layout the writer supplies (PROF-6)")
        layout.check()
    elif layout is not None:
        raise ValueError("profile v1 has no layout (PROF-2)")
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
    tokens = _measure_layer(0, first, per_token, profile)
    for index, layer in enumerate(layers[1:], start=1):
        if (layer.n_kv_heads, layer.head_dim) != (n_kv_heads, head_dim):
            raise RaggedPayload(
                layer_index=index,
                field="layer_shape",
                expected=(n_kv_heads, head_dim),
                found=(layer.n_kv_heads, layer.head_dim),
            )
        layer_tokens = _measure_layer(index, layer, per_token, profile)
        if layer_tokens != tokens:
            raise RaggedPayload(
                layer_index=index, field="token_count", expected=tokens, found=layer_tokens
            )
    if layout is not None and tokens != layout.block_size:  # PROF-8, PROF-9
        raise BlockSizeMismatch(block_size=layout.block_size, tokens=tokens)
    return CacheSignature(
        format_version=profile.version,
        model=model,
        n_layers=len(layers),
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        dtype=_BUFFER_DTYPES.get(first.k.dtype, str(first.k.dtype)),
        tokens=tokens,
        layout=layout,
    )


def _measure_layer(index: int, layer: StoredLayer, per_token: int, profile: FormatProfile) -> int:
    """Tokens stored in one layer, from its buffers; the claim must agree (SIG-7, PROF-11)."""
    if profile.has_layout and profile.revision == "split_width":
        v_head_dim = layer.head_dim if layer.v_head_dim is None else layer.v_head_dim
        if v_head_dim != layer.head_dim:
            raise SplitKvHeadWidth(
                layer_index=index, head_dim=layer.head_dim, v_head_dim=v_head_dim
            )
    k_len, v_len = layer.k.size, layer.v.size
    if k_len % per_token != 0:
        raise RaggedPayload(layer_index=index, field="k_length", expected=per_token, found=k_len)
    if v_len != k_len:
        raise RaggedPayload(layer_index=index, field="v_length", expected=k_len, found=v_len)
    tokens = k_len // per_token
    if layer.seq_len != tokens:
        raise RaggedPayload(
            layer_index=index, field=profile.claim_field, expected=tokens, found=layer.seq_len
        )
    return tokens
