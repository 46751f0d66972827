"""The programs of the classes ``verify`` and ``signature``: verifications of every
shape, measures and stamps, each within what the reader declares it reads and holds.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace

from hypothesis import strategies as st

from kvconform.differential.compare import Program
from kvconform.differential.strategies.profile_v2 import measuring_op_v2, verify_op_v2
from kvconform.differential.strategies.scope import Scope
from kvconform.differential.strategies.signature import (
    _FORMAT_LIES,
    coherent_block,
    faulty_payload,
    lie,
    measuring_op,
    respell,
)
from kvconform.differential.strategies.source import Source, Writer, items, pick, strategy
from kvconform.differential.strategies.values import U64_MAX
from kvconform.protocol import operations as ops
from kvconform.values import (
    Signature,
)

_VERIFY_MODES = (
    "honest",
    "lying",
    "faulty",
    "stamp-is-expected",
    "respelled",
    "unreadable",
    "free",
)


def verify_op(src: Source) -> ops.Verify:
    """One verification, in one of several shapes so that each check is reached often:
    an honest stamp and payload read by another expectation (compatibility, VERIFY-5);
    a lying stamp over an honest payload (honesty, VERIFY-4), possibly equal to the
    expectation; a faulty payload (coherence, SIG-7..9); the stamp equal to the
    expectation over a payload that differs (VERIFY-4's "even when"); a model or
    dtype spelled otherwise (compared byte for byte, SIG-3 and SIG-14); a stamp of
    an unreadable format over a payload that may be broken (VERIFY-3 before
    coherence); anything at all.
    """
    block = coherent_block(src)
    truth = block.truth
    mode = pick(src, _VERIFY_MODES)
    payload = block.layers
    recorded: Signature | None
    if mode == "unreadable":  # another format's stamp over a payload that may be broken
        payload = faulty_payload(src, block, 2)
        recorded = replace(truth, format_version=pick(src, _FORMAT_LIES))
        expected = pick(src, (truth, recorded))
    elif mode == "respelled":  # one field spelled otherwise, in the stamp or the expectation
        other = respell(src, truth)
        recorded, expected = pick(src, ((other, truth), (truth, other)))
    elif mode == "honest":
        recorded, expected = truth, lie(src, truth, 2)
    elif mode == "lying":
        recorded = lie(src, truth, 2)
        expected = pick(src, (truth, recorded))
    elif mode == "faulty":  # the stamp honest, or with one lie the order must put first
        payload = faulty_payload(src, block, 3)
        recorded = pick(src, (truth, lie(src, truth, 1)))
        expected = pick(src, (truth, lie(src, truth, 1)))
    elif mode == "stamp-is-expected":
        payload = faulty_payload(src, block, 2)
        recorded = lie(src, truth, 1)
        expected = recorded
    else:
        payload = faulty_payload(src, block, 3)
        recorded = None if src.integer(0, 9) == 0 else lie(src, truth, 3)
        expected = lie(src, truth, 3)
    return ops.Verify(recorded=recorded, payload=payload, expected=expected)


def verify_ops() -> st.SearchStrategy[ops.Verify]:
    return strategy(verify_op)


#: Attempts at an operation within a reader's narrower counts before the slot is left empty.
_WITHIN_ATTEMPTS = 20


def block_program(
    src: Source, verify: bool = True, signature: bool = True, scope: Scope | None = None
) -> Program:
    """Independent verify, measure and stamp operations (only the classes given).

    A reader that declares its dtypes (SIG-14) is never handed an expectation of
    another dtype: that is its own requirement, which it could not even hold.
    """
    reads = frozenset({1}) if scope is None else scope.reads
    writes = 1 if scope is None else scope.writes
    verifiers: list[Writer[ops.Op]] = []
    if 1 in reads:
        verifiers.append(verify_op)
    if 2 in reads:
        verifiers.append(verify_op_v2)
    if len(verifiers) == 1:
        verifiers *= 2
    choices: list[Writer[ops.Op]] = (verifiers if verify else []) + (
        [measuring_op if writes == 1 else measuring_op_v2] if signature else []
    )
    if not choices:
        raise ValueError("block_programs needs verify or signature")
    limit = U64_MAX if scope is None else scope.uint_max

    def one() -> ops.Op | None:
        for _ in range(_WITHIN_ATTEMPTS):
            op = pick(src, choices)(src)
            if limit >= U64_MAX or _counts_within(op, limit):
                return op
        return None

    program = tuple(op for op in items(src, one, 6, min_size=1, mean_extra=3) if op is not None)
    if scope is None:
        return program
    if scope.reads != {1}:
        program = _versions_within(program, scope.reads)
    if scope.dtypes is None:  # a reader of any name: every expectation is one it holds
        return program
    return _expectations_within(program, scope.dtypes)


def _versions_within(program: Program, reads: frozenset[int]) -> Program:
    """Every version-1 signature lying that it is of another version the reader reads
    becomes version 99: still unreadable, never a version-2 signature without a layout
    (no requirement says how that reads)."""

    def plain(sig: Signature) -> Signature:
        if sig.format_version == 1 or sig.format_version not in reads or sig.layout is not None:
            return sig
        return dataclasses.replace(sig, format_version=99)

    return tuple(
        dataclasses.replace(
            op,
            recorded=None if op.recorded is None else plain(op.recorded),
            expected=plain(op.expected),
        )
        if isinstance(op, ops.Verify)
        else op
        for op in program
    )


def block_programs(
    verify: bool = True, signature: bool = True, scope: Scope | None = None
) -> st.SearchStrategy[Program]:
    """:func:`block_program` as a Hypothesis strategy."""
    if not (verify or signature):
        raise ValueError("block_programs needs verify or signature")
    return strategy(lambda src: block_program(src, verify, signature, scope))


def _counts_within(op: ops.Op, limit: int) -> bool:
    """No count of the payload, the stamp or the expectation above ``limit`` (SIG-14)."""
    payload = getattr(op, "payload", ())
    sigs = [s for s in (getattr(op, "recorded", None), getattr(op, "expected", None)) if s]
    return all(
        max(layer.n_kv_heads, layer.head_dim, layer.seq_len, layer.k_len, layer.v_len) <= limit
        for layer in payload
    ) and all(max(s.n_layers, s.n_kv_heads, s.head_dim, s.tokens) <= limit for s in sigs)


def _expectations_within(program: Program, dtypes: tuple[str, ...]) -> Program:
    return tuple(
        dataclasses.replace(op, expected=dataclasses.replace(op.expected, dtype="f32"))
        if isinstance(op, ops.Verify) and op.expected.dtype not in dtypes
        else op
        for op in program
    )
