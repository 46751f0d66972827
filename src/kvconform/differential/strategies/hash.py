"""The programs of the class ``hash``: mix programs of every kind, one ``hash``
operation each.
"""

from __future__ import annotations

from hypothesis import strategies as st

from kvconform.differential.compare import Program
from kvconform.differential.strategies.scope import Scope
from kvconform.differential.strategies.source import Source, flag, items, strategy
from kvconform.differential.strategies.values import any_text, binary, f64_pattern, u64
from kvconform.harness.declarations import as_u64_mixes
from kvconform.protocol import operations as ops
from kvconform.values import (
    MixOp,
)


def mix_op(src: Source) -> MixOp:
    branch = src.integer(0, 7)
    if branch == 0:
        return MixOp("u64", u64(src))
    if branch == 1:
        return MixOp("str", any_text(src))
    if branch == 2:
        return MixOp("bytes", binary(src, 0, 16), src.integer(1, 3))
    if branch == 3:
        return MixOp("f64", f64_pattern(src))
    if branch == 4:
        return MixOp("present", flag(src))
    if branch == 5:
        return MixOp("instance", u64(src))
    if branch == 6:
        return MixOp("finish")
    return MixOp("bytes", binary(src, 1, 32), src.integer(2, 1000))


def mix_program(src: Source) -> tuple[MixOp, ...]:
    """One mix program; it always ends with a finish, and may finish mid-way too."""
    return (*items(src, lambda: mix_op(src), 10), MixOp("finish"))


mix_ops: st.SearchStrategy[MixOp] = strategy(mix_op)

hash_program: st.SearchStrategy[tuple[MixOp, ...]] = strategy(mix_program)


def hash_program_list(src: Source, max_programs: int = 6, scope: Scope | None = None) -> Program:
    """Several mix programs, one ``hash`` operation each (one ``hash_batch`` over stdio).

    Without the raw fold (HASH-14), raw bytes whose length is a multiple of eight are
    mixed as the u64s that fold the same bytes, and other raw bytes are left out.
    """
    public = scope is not None and not scope.raw_bytes
    programs = items(src, lambda: mix_program(src), max_programs, min_size=1, mean_extra=3)
    return tuple(ops.Hash(program=_without_raw(p) if public else p) for p in programs)


def hash_programs(max_programs: int = 6, scope: Scope | None = None) -> st.SearchStrategy[Program]:
    """:func:`hash_program_list` as a Hypothesis strategy."""
    return strategy(lambda src: hash_program_list(src, max_programs, scope))


def _without_raw(program: tuple[MixOp, ...]) -> tuple[MixOp, ...]:
    """``program`` with raw bytes as u64 mixes where they can be, and left out elsewhere."""
    return tuple(m for mix in program for m in (as_u64_mixes(mix, 64) or ()))
