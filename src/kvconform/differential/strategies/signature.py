"""Blocks for the class ``signature`` (and the blocks ``verify`` reads): coherent blocks,
faults in their payloads, stamps that lie, and the measure and stamp operations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from hypothesis import strategies as st

from kvconform.differential.strategies.plan import _other
from kvconform.differential.strategies.source import Source, flag, pick, strategy
from kvconform.differential.strategies.values import any_text
from kvconform.protocol import operations as ops
from kvconform.values import (
    LayerDesc,
    Signature,
)

_U64_LIMIT = 1 << 64

#: Per-token widths ``n_kv_heads * head_dim`` at the edge of a u64 (SIG-15): two that no
#: u64 holds ((2^63 + 1) * 2 wraps to 2, 2^32 * 2^32 to 0) and two of exactly 2^64 - 1.
_EDGE_SHAPES = ((2**63 + 1, 2), (1 << 32, 1 << 32), (2**64 - 1, 1), (2**32 - 1, 2**32 + 1))

_BLOCK_MODELS = ("llama-3-8b", "Llama-3-8B", "mistral-7b", "", "模型-ä", "𝄞")

#: Stamp and expectation dtypes: the vocabulary and names outside it (SIG-14).
_LYING_DTYPES = ("f16", "bf16", "F32", "F32", "f64")

_FORMAT_LIES = (0, 2, 99)


@dataclass(frozen=True)
class Block:
    """A coherent block's truth: the payload it had and the signature measuring it gives."""

    layers: tuple[LayerDesc, ...]
    truth: Signature


def coherent_block(src: Source) -> Block:
    model = pick(src, _BLOCK_MODELS) if src.integer(0, 1) == 0 else any_text(src)
    n_layers, heads, dim = src.integer(1, 6), src.integer(1, 4), src.integer(1, 4)
    tokens = src.integer(0, 5)
    size = heads * dim * tokens
    layer = LayerDesc(heads, dim, tokens, size, size)
    return Block((layer,) * n_layers, Signature(1, model, n_layers, heads, dim, "f32", tokens))


def coherent_blocks() -> st.SearchStrategy[Block]:
    return strategy(coherent_block)


_PAYLOAD_FAULTS = (
    "seq_len",
    "k_len",
    "v_len",
    "tokens",
    "shape",
    "transpose",
    "depth",
    "add",
    "drop",
    "empty",
    "zero",
)


def payload_fault(
    src: Source, layers: list[LayerDesc], last: int | None = None
) -> tuple[list[LayerDesc], int | None]:
    """One fault in a payload; returns the layers and the index of the layer it touched.

    Faults: a layer added or dropped, or every layer gone; a layer's shape
    changed (its buffers resized to match, or not), or transposed to the same
    width, or given a zero dimension; its depth changed consistently; k or v cut
    or extended (by elements, or both by whole tokens); a false ``seq_len``. A fault often hits
    the layer the previous one hit, so faults combine within one layer too.
    """
    kind = pick(src, _PAYLOAD_FAULTS)
    layers = list(layers)
    if kind == "empty":  # every layer gone: a block that can vouch for nothing (SIG-5)
        return [], None
    if kind == "add" or not layers:
        if layers and flag(src):
            extra = pick(src, layers)
        else:
            h, d, t = src.integer(0, 4), src.integer(0, 4), src.integer(0, 5)
            extra = LayerDesc(h, d, t, h * d * t, h * d * t)
        at = src.integer(0, len(layers))
        layers.insert(at, extra)
        return layers, at
    if last is not None and last < len(layers) and flag(src):
        index = last
    else:
        index = src.integer(0, len(layers) - 1)
    layer = layers[index]
    per_token = max(1, layer.n_kv_heads * layer.head_dim)
    if kind == "drop":
        del layers[index]
        return layers, None
    if kind == "seq_len":
        layers[index] = replace(layer, seq_len=src.integer(0, 8))
    elif kind in ("k_len", "v_len"):
        delta = _other(src.integer(-per_token - 1, per_token + 1), 0)
        layers[index] = replace(layer, **{kind: max(0, getattr(layer, kind) + delta)})
    elif kind == "tokens":  # whole tokens cut from or added to k and v; the claim kept
        size = (
            layer.n_kv_heads
            * layer.head_dim
            * max(0, layer.seq_len + _other(src.integer(-2, 2), 0))
        )
        layers[index] = replace(layer, k_len=size, v_len=size)
    elif kind == "depth":  # another token count, told consistently
        tokens = src.integer(0, 6)
        size = layer.n_kv_heads * layer.head_dim * tokens
        layers[index] = replace(layer, seq_len=tokens, k_len=size, v_len=size)
    elif kind == "zero":  # a degenerate layer: no heads or a zero head_dim, buffers kept
        which = pick(src, ("n_kv_heads", "head_dim"))
        layers[index] = replace(layer, **{which: 0})
    elif kind == "transpose":  # the same width, another shape
        layers[index] = replace(layer, n_kv_heads=layer.head_dim, head_dim=layer.n_kv_heads)
    else:
        heads = _kept_zero_or_any(src, layer.n_kv_heads)
        dim = _kept_zero_or_any(src, layer.head_dim)
        if flag(src):  # buffers resized to the new shape, or left as they were
            size = heads * dim * layer.seq_len
            layers[index] = LayerDesc(heads, dim, layer.seq_len, size, size)
        else:
            layers[index] = replace(layer, n_kv_heads=heads, head_dim=dim)
    return layers, index


def _kept_zero_or_any(src: Source, own: int) -> int:
    branch = src.integer(0, 2)
    return own if branch == 0 else 0 if branch == 1 else src.integer(0, 5)


def faulty_payload(src: Source, block: Block, max_faults: int) -> tuple[LayerDesc, ...]:
    layers, last = list(block.layers), None
    for _ in range(src.integer(0, max_faults)):
        layers, last = payload_fault(src, layers, last)
    return edge_width(src, tuple(layers))


def edge_width(src: Source, layers: tuple[LayerDesc, ...]) -> tuple[LayerDesc, ...]:
    """Now and then one layer, most often the first, whose width is at the edge of a u64
    (SIG-15). A width that overflows keeps its tokens, its buffers sized by what a
    wrapping multiply gives, so that only the width check can refuse it; a width that
    fits exactly has no tokens and empty buffers, a coherent layer (SIG-10)."""
    if not layers or src.integer(0, 7) != 7:  # 0, the simplest choice, changes nothing
        return layers
    index = 0 if flag(src) else src.integer(0, len(layers) - 1)
    heads, dim = pick(src, _EDGE_SHAPES)
    layer = layers[index]
    wrapped = heads * dim % _U64_LIMIT
    tokens = layer.seq_len if heads * dim >= _U64_LIMIT else 0
    size = wrapped * tokens
    if size >= _U64_LIMIT:  # pragma: no cover - the shapes above wrap to 0 or 2
        tokens, size = 0, 0
    edge = LayerDesc(heads, dim, tokens, size, size)
    return (*layers[:index], edge, *layers[index + 1 :])


_LIES = (
    "tokens",
    "n_layers",
    "n_kv_heads",
    "head_dim",
    "dtype",
    "model",
    "format_version",
    "transpose",
)


def lie(src: Source, sig: Signature, fields: int) -> Signature:
    """``sig`` with up to ``fields`` fields changed: the stamp lying, or another expectation.

    As many single changes as double ones: a change behind an earlier one in the
    comparison order is masked, so the field a check is about must often be alone.
    """
    pool = list(_LIES)
    names = [pool.pop(src.integer(0, len(pool) - 1)) for _ in range(src.integer(0, fields))]
    changes: dict[str, Any] = {}
    for name in names:
        if name == "transpose":  # heads and head_dim swapped: the same width
            changes.update(n_kv_heads=sig.head_dim, head_dim=sig.n_kv_heads)
            continue
        value = getattr(sig, name)
        if name == "format_version":
            changes[name] = pick(src, _FORMAT_LIES)
        elif name == "dtype":
            changes[name] = pick(src, _LYING_DTYPES)
        elif name == "model":
            changes[name] = pick(
                src, (value.swapcase(), value.upper(), value + " ", "", "other-model")
            )
        else:
            changes[name] = max(0, value + pick(src, (1, -1, 2, 7)))
    return replace(sig, **changes)


def respell(src: Source, sig: Signature) -> Signature:
    """``sig`` with its model or dtype spelled otherwise: the same to a person, not a byte."""
    if flag(src):
        model = pick(
            src,
            (
                sig.model.upper(),
                sig.model.swapcase(),
                sig.model + " ",
                " " + sig.model,
                sig.model.title(),
            ),
        )
        return replace(sig, model=model)
    return replace(sig, dtype=pick(src, (sig.dtype.upper(), " " + sig.dtype, sig.dtype + "\x00")))


def measuring_op(src: Source) -> ops.Op:
    block = coherent_block(src)
    payload = faulty_payload(src, block, 3)
    cls = pick(src, (ops.Measure, ops.Stamp))
    return cls(model=block.truth.model, payload=payload)


def measuring_ops() -> st.SearchStrategy[ops.Op]:
    return strategy(measuring_op)
