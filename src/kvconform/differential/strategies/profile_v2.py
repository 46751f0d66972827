"""Blocks of format version 2 (PROF-5 to PROF-11): whole blocks under a layout, layouts
valid or not, stamps lying about them, split V widths, and the v2 verify, measure and
stamp operations.
"""

from __future__ import annotations

from dataclasses import replace

from kvconform.differential.strategies.signature import (
    _BLOCK_MODELS,
    _U64_LIMIT,
    Block,
    faulty_payload,
    lie,
)
from kvconform.differential.strategies.source import Source, flag, pick
from kvconform.differential.strategies.values import any_text
from kvconform.protocol import operations as ops
from kvconform.values import (
    LayerDesc,
    Layout,
    Signature,
)


def coherent_block_v2(src: Source) -> Block:
    """A whole version-2 block (PROF-5, PROF-8): a valid layout, exactly ``block_size``
    tokens in every layer, never empty (PROF-9)."""
    model = pick(src, _BLOCK_MODELS) if src.integer(0, 1) == 0 else any_text(src)
    n_layers, heads, dim = src.integer(1, 6), src.integer(1, 4), src.integer(1, 4)
    layout = valid_layout(src)
    size = heads * dim * layout.block_size
    layer = LayerDesc(heads, dim, layout.block_size, size, size)
    truth = Signature(2, model, n_layers, heads, dim, "f32", layout.block_size, layout)
    return Block((layer,) * n_layers, truth)


def valid_layout(src: Source, block_size: int | None = None) -> Layout:
    """A layout PROF-7 accepts: a window absent or a whole multiple of the block size."""
    size = src.integer(1, 4) if block_size is None else block_size
    return Layout(size, None if flag(src) else size * src.integer(1, 3))


def layout_lie(src: Source, layout: Layout, valid: bool) -> Layout:
    """``layout`` changed in one way: another valid layout, or (unless ``valid``) one
    PROF-7 refuses (a zero block size or window, a window not a multiple of it)."""
    kinds = ("block_size", "window", "window-absent") + (() if valid else ("bad",))
    kind = pick(src, kinds)
    if kind == "block_size":
        size = max(1, layout.block_size + pick(src, (1, -1, 2)))
        window = layout.sliding_window
        return Layout(size, None if window is None else size * max(1, window // layout.block_size))
    if kind == "window":
        multiple = src.integer(1, 4)
        window = layout.block_size * multiple
        if window == layout.sliding_window:
            window += layout.block_size
        return Layout(layout.block_size, window)
    if kind == "window-absent":
        if layout.sliding_window is None:
            return Layout(layout.block_size, layout.block_size * src.integer(1, 3))
        return Layout(layout.block_size, None)
    bad = pick(src, ("block_size", "window", "misaligned"))
    if bad == "block_size":
        return Layout(0, layout.sliding_window)
    if bad == "window":
        return Layout(layout.block_size, 0)
    return Layout(layout.block_size + 1, (layout.block_size + 1) * 2 + 1)


def lie_v2(src: Source, sig: Signature, fields: int, valid_layout_only: bool) -> Signature:
    """:func:`lie` for a version-2 signature, its layout included; a signature that ends
    as version 1 carries no layout, one of version 2 always one (protocol.md, Values)."""
    changed = lie(src, sig, fields)
    if flag(src):
        assert changed.layout is not None
        changed = replace(changed, layout=layout_lie(src, changed.layout, valid_layout_only))
    if changed.format_version == 1:
        return replace(changed, layout=None)
    return changed


def split_width(src: Source, layers: tuple[LayerDesc, ...]) -> tuple[LayerDesc, ...]:
    """Now and then one layer whose V heads are of another width, its V buffer sized to
    them (PROF-11: refused as split_kv_head_width or, under layout_only, on v_length)."""
    if not layers or src.integer(0, 3) != 0:
        return layers
    index = src.integer(0, len(layers) - 1)
    layer = layers[index]
    v_dim = layer.head_dim + pick(src, (1, 2))
    v_len = layer.n_kv_heads * v_dim * layer.seq_len
    if v_len >= _U64_LIMIT:  # a layer of edge_width's: a V buffer no payload can carry
        return layers
    split = replace(layer, v_head_dim=v_dim, v_len=v_len)
    return (*layers[:index], split, *layers[index + 1 :])


def verify_op_v2(src: Source) -> ops.Verify:
    """A verification of a version-2 block: honest or lying stamps (layout included, a
    stamp's layout possibly one PROF-7 refuses), faulty payloads, another expectation
    (always a valid layout: only the recorded one is checked, VERIFY-10)."""
    block = coherent_block_v2(src)
    truth = block.truth
    payload = split_width(src, faulty_payload(src, block, 2))
    mode = pick(src, ("honest", "lying", "faulty", "stamp-is-expected", "unmarked"))
    recorded: Signature | None = truth
    expected = truth
    if mode == "honest":
        payload = block.layers
        expected = lie_v2(src, truth, 2, valid_layout_only=True)
    elif mode == "lying":
        payload = block.layers
        recorded = lie_v2(src, truth, 2, valid_layout_only=False)
        expected = pick(src, (truth, recorded))
    elif mode == "faulty":
        recorded = pick(src, (truth, lie_v2(src, truth, 1, valid_layout_only=False)))
        expected = pick(src, (truth, lie_v2(src, truth, 1, valid_layout_only=True)))
    elif mode == "stamp-is-expected":
        recorded = lie_v2(src, truth, 1, valid_layout_only=True)
        expected = recorded
    else:
        recorded = None
        expected = lie_v2(src, truth, 1, valid_layout_only=True)
    if expected.layout is None and expected.format_version == 2:  # never a v2 one without
        expected = replace(expected, layout=truth.layout)
    if expected.layout is not None and not holdable(expected.layout):
        # A lying stamp picked as the expectation keeps its other lies, not a layout no
        # reader runs under (spec/protocol.md: an expectation's layout is always valid).
        expected = replace(expected, layout=truth.layout)
    return ops.Verify(recorded=recorded, payload=payload, expected=expected)


def holdable(layout: Layout) -> bool:
    """Whether PROF-7 accepts ``layout``: one a reader's configuration can hold."""
    size, window = layout.block_size, layout.sliding_window
    return size > 0 and (window is None or (window > 0 and window % size == 0))


def measuring_op_v2(src: Source) -> ops.Op:
    """A version-2 writer measures or stamps under a layout it supplies (PROF-6): the
    block's own, another valid one, or one PROF-7 refuses."""
    block = coherent_block_v2(src)
    payload = split_width(src, faulty_payload(src, block, 3))
    assert block.truth.layout is not None
    layout = block.truth.layout
    if src.integer(0, 2) == 0:
        layout = layout_lie(src, layout, valid=False)
    cls = pick(src, (ops.Measure, ops.Stamp))
    return cls(model=block.truth.model, payload=payload, layout=layout)
