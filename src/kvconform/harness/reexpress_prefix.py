"""Re-expressing a prefix-cache case for an engine of one block size (CONF-17).

The prefix scenarios are written with small blocks (4 positions, one of 2) so that a
story fits on a line; an engine whose blocks hold one fixed number of positions
(``prefix_block_size: 16``, vLLM's default; ``1``, SGLang's default page; ``256``,
nano-vllm's) cannot make a cache of 4. Almost every such case is about blocks, not
about the number 4: which blocks are reused after which change. It is rewritten so
that each block of the case is one block of the engine's size, and every count scales
with it. The rules are ``conformance/INTERPRETING.md`` §6.4.4:

- **a larger size** (a multiple of the case's, by a factor ``s``): every token is
  written ``s`` times in a row, every media item and embedding span starts at ``s``
  times its position and covers ``s`` times its length, and every reuse count is
  ``s`` times the case's. Positions keep their order and equal tokens stay equal, so
  a longest common prefix, a partial block and a changed token all scale by ``s``;
- **a smaller size** (a divisor of the case's): every full block of the case becomes
  one block of the engine's, written as that many copies of one token id of its own
  (equal blocks, equal ids; ids above every token the case uses); a partial block is
  left out, which changes nothing under ``prefix_partial: none``, where it is never
  stored or reused; media, embeddings and counts are converted block for block.

Set aside, with the reason: a case whose caches differ in block size (the difference
is its point), sizes neither of which divides the other, and, for a smaller size, a
case about reuse inside a block (``prefix_partial: tokens``), an item or a count that
does not fall on the case's block boundaries, or a request with no full block.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace

from kvconform.harness.checks import Check, OutcomeCheck, RelationCheck, ValueIs, ValueOneOf
from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.values import AdapterInfo

#: Token ids are below 2^32 (spec/protocol.md, token list).
_TOKEN_LIMIT = 1 << 32


def reexpress_blocks(case: Case, info: AdapterInfo) -> Case | str | None:
    """``case`` rewritten into the one block size ``info`` declares, a reason it cannot
    be, or ``None`` when the case makes no prefix cache of another size (§6.4.4)."""
    size = fixed_block_size(info)
    if size is None or not other_block_size(case, size):
        return None
    return into_block_size(case, size)


def fixed_block_size(info: AdapterInfo) -> int | None:
    """The one block size ``info`` declares (``prefix_block_size``), or ``None`` for any."""
    declared = info.option("prefix_block_size")
    return None if declared in ("any", None) else int(declared)


def other_block_size(case: Case, size: int) -> bool:
    """Whether ``case`` makes a prefix cache of a block size other than ``size``."""
    return any(isinstance(op, ops.PrefixNew) and op.block_size != size for op in case.program)


def into_block_size(case: Case, size: int) -> Case | str:
    """``case`` with every prefix cache of block size ``size``, or why its point does not
    survive (§6.4.4)."""
    sizes = sorted({op.block_size for op in case.program if isinstance(op, ops.PrefixNew)})
    if len(sizes) != 1:
        shown = ", ".join(str(s) for s in sizes)
        return f"its prefix caches have the block sizes {shown}: the difference is its point"
    (written,) = sizes
    if size % written == 0:
        return _grow(case, written, size // written)
    if written % size == 0:
        return _shrink(case, written, size)
    return (
        f"its blocks hold {written} positions and the engine's {size}: neither divides "
        "the other, so its blocks cannot be written as whole blocks of the engine's"
    )


def _lookups(case: Case) -> dict[int, tuple[int, ...]]:
    """The counts each ``prefix_lookup`` judged by value accepts (one, or the several of
    ``expect_one_of``), by op index."""
    out: dict[int, tuple[int, ...]] = {}
    for check in case.checks:
        if not (
            isinstance(check, OutcomeCheck)
            and isinstance(case.program[check.op_index], ops.PrefixLookup)
        ):
            continue
        expect = check.expect
        if isinstance(expect, ValueIs) and isinstance(expect.value, int):
            out[check.op_index] = (expect.value,)
        elif isinstance(expect, ValueOneOf):
            out[check.op_index] = tuple(v for v in expect.values if isinstance(v, int))
    return out


def _rows(case: Case) -> list[int]:
    """Every count the ``together`` relations of ``case`` list."""
    return [
        value
        for check in case.checks
        if isinstance(check, RelationCheck) and check.relation == "together"
        for row in check.rows
        for value in row
        if isinstance(value, int)
    ]


def _with_counts(
    case: Case, counts: dict[int, tuple[int, ...]], convert: Callable[[int], int]
) -> tuple[Check, ...]:
    """The checks of ``case`` with each lookup's counts replaced by ``counts``, and every
    count a ``together`` relation lists converted by ``convert``."""

    def accepted(values: tuple[int, ...]) -> ValueIs | ValueOneOf:
        return ValueIs(values[0]) if len(values) == 1 else ValueOneOf(values)

    def converted(check: Check) -> Check:
        if isinstance(check, OutcomeCheck) and check.op_index in counts:
            return replace(check, expect=accepted(counts[check.op_index]))
        if isinstance(check, RelationCheck) and check.relation == "together":
            rows = tuple(tuple(convert(v) for v in row) for row in check.rows)  # type: ignore[arg-type]
            return replace(check, rows=rows)
        return check

    return tuple(converted(c) for c in case.checks)


def _tokens(text: str) -> list[int]:
    return [int(word) for word in text.split(" ")]


def _grow(case: Case, written: int, factor: int) -> Case:
    size = written * factor
    program: list[ops.Op] = []
    for op in case.program:
        if isinstance(op, ops.PrefixNew):
            op = replace(op, block_size=size)
        elif isinstance(op, ops.RequestNew):
            words = op.tokens.split(" ")
            op = replace(op, tokens=" ".join(w for w in words for _ in range(factor)))
        elif isinstance(op, ops.RequestMedia | ops.RequestEmbeds):
            op = replace(op, start=op.start * factor, length=op.length * factor)
        program.append(op)
    counts = {index: tuple(v * factor for v in values) for index, values in _lookups(case).items()}
    how = (
        f"blocks of {written} positions written as the engine's blocks of {size}: every "
        f"token {factor} times in a row, media and embeddings placed and sized {factor} "
        f"times over, every reuse count times {factor} (CONF-17)"
    )
    return dataclasses.replace(
        case,
        program=tuple(program),
        checks=_with_counts(case, counts, lambda value: value * factor),
        reexpressed=(*case.reexpressed, how),
    )


def _shrink(case: Case, written: int, size: int) -> Case | str:
    if dict(case.options).get("prefix_partial") == "tokens":
        return (
            f"it is about reuse inside a block (prefix_partial: tokens), which blocks of "
            f"{written} positions written as one block of {size} cannot hold"
        )
    used = [t for op in case.program if isinstance(op, ops.RequestNew) for t in _tokens(op.tokens)]
    next_id = max(used, default=0) + 1
    ids: dict[tuple[int, ...], int] = {}
    program: list[ops.Op] = []
    for op in case.program:
        if isinstance(op, ops.PrefixNew):
            op = replace(op, block_size=size)
        elif isinstance(op, ops.RequestNew):
            tokens = _tokens(op.tokens)
            blocks = [tuple(tokens[i : i + written]) for i in range(0, len(tokens), written)]
            full = [b for b in blocks if len(b) == written]
            if not full:
                return (
                    f"the request {op.handle!r} has no full block of {written} positions, "
                    f"so nothing of it is left in blocks of {size}"
                )
            out: list[str] = []
            for block in full:
                if block not in ids:
                    ids[block] = next_id
                    next_id += 1
                out += [str(ids[block])] * size
            op = replace(op, tokens=" ".join(out))
        elif isinstance(op, ops.RequestMedia | ops.RequestEmbeds):
            if op.start % written or op.length % written:
                what = "media item" if isinstance(op, ops.RequestMedia) else "embedding span"
                return (
                    f"a {what} at position {op.start} over {op.length} positions is not "
                    f"on its blocks of {written}: one block of {size} cannot place it"
                )
            op = replace(op, start=op.start // written * size, length=op.length // written * size)
        program.append(op)
    if next_id > _TOKEN_LIMIT:
        return "its blocks need token ids beyond 2^32 - 1"
    lookups = _lookups(case)
    for value in (*(v for values in lookups.values() for v in values), *_rows(case)):
        if value % written:
            return (
                f"it expects {value} positions reused, not a whole number of its blocks "
                f"of {written}"
            )
    counts = {
        index: tuple(v // written * size for v in values) for index, values in lookups.items()
    }
    how = (
        f"blocks of {written} positions written as the engine's blocks of {size}: each "
        f"full block as {size} copies of one token id of its own (equal blocks, equal ids), "
        "partial blocks left out, media, embeddings and reuse counts converted block for "
        "block (CONF-17)"
    )
    return dataclasses.replace(
        case,
        program=tuple(program),
        checks=_with_counts(case, counts, lambda value: value // written * size),
        reexpressed=(*case.reexpressed, how),
    )
