"""Re-expressing a profile v1 scenario for a writer and reader of version 2 (PROF-8,
CONF-14; ``conformance/INTERPRETING.md`` §6.4.2): the rule a v1 signature or verify
scenario checks holds unchanged under a layout, so the case is lifted into version 2
with a block of exactly the payload's tokens and no window, or set aside with the reason
its point needs version 1.

A scenario written for the readable set {1} (``profile: 1``) whose point is a version
that set does not hold is re-expressed for another declared readable set the same way
(§6.4.5, PROF-3, VERIFY-3): the refusal names the declared set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvconform.harness.checks import ErrorIs, OutcomeCheck, SignatureIs
from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.values import AdapterInfo, LayerDesc, Layout, Signature


def is_v1_scenario(case: Case) -> bool:
    return (
        case.cls in ("signature", "verify")
        and case.profile is None
        and case.format_writes is None
        and case.format_reads is None
        and not case.format_reads_include
    )


#: Refusals that come before a v2 measurement's block check (PROF-8), or before the
#: measurement at all (VERIFY-9): a zero-token payload leaves them as they are.
_BEFORE_THE_BLOCK = frozenset(
    {"unmarked", "unrepresentable", "empty_payload", "degenerate_layer", "ragged_payload"}
)


def _measured_tokens(payload: Sequence[LayerDesc]) -> int | None:
    """The token count a measurement of ``payload`` finds in its first layer (SIG-7)."""
    if not payload:
        return None
    width = payload[0].n_kv_heads * payload[0].head_dim
    return payload[0].k_len // width if width else None


def block_of(payload: Sequence[LayerDesc]) -> Layout:
    """The layout a v1 payload is lifted with: one block of exactly its tokens, no window."""
    tokens = _measured_tokens(payload)
    return Layout(tokens if tokens else 1, None)


def lift_to_v2(case: Case, info: AdapterInfo) -> Case | str | None:
    """A v1 scenario as a writer and reader of profile v2 meets it (§6.4.2), or why not."""
    writes = any(isinstance(op, ops.Measure | ops.Stamp) for op in case.program)
    verifies = any(isinstance(op, ops.Verify) for op in case.program)
    if (writes and info.format_writes != 2) or (verifies and 2 not in info.format_reads):
        return None
    if (not writes or info.format_writes == 1) and (not verifies or 1 in info.format_reads):
        return None  # applies as written
    expects = {
        c.op_index: (position, c)
        for position, c in enumerate(case.checks)
        if isinstance(c, OutcomeCheck)
    }
    split = info.option("profile_v2_revision") == "split_width"
    program = list(case.program)
    checks = list(case.checks)
    for index, op in enumerate(case.program):
        if not isinstance(op, ops.Measure | ops.Stamp | ops.Verify):
            continue
        position, check = expects[index]
        expect = check.expect
        layout = block_of(op.payload)
        tokens = _measured_tokens(op.payload)
        if (
            op.payload
            and tokens == 0
            and not (isinstance(expect, ErrorIs) and expect.kind in _BEFORE_THE_BLOCK)
        ):
            return (
                "its point is a payload of zero tokens, which profile v2 refuses as "
                "block_size_mismatch (SIG-10 is v1's own; PROF-9)"
            )
        if isinstance(op, ops.Measure | ops.Stamp):
            if op.layout is not None:
                return "it already gives a writer's layout"
            program[index] = replace(op, layout=layout)
        else:
            for sig in (op.recorded, op.expected):
                if sig is not None and (sig.format_version != 1 or sig.layout is not None):
                    return (
                        "its point is a signature of format version "
                        f"{sig.format_version}, which a lift to version 2 would erase"
                    )
            program[index] = replace(
                op,
                recorded=None if op.recorded is None else _v2(op.recorded, layout),
                expected=_v2(op.expected, layout),
            )
        if isinstance(expect, SignatureIs):
            if expect.signature.format_version != 1:
                return "its point is the format version a signature records"
            checks[position] = replace(check, expect=SignatureIs(_v2(expect.signature, layout)))
        elif isinstance(expect, ErrorIs):
            if expect.kind == "unsupported_format" or (
                expect.kind == "incompatible" and expect.field == "format_version"
            ):
                return "its point is the block's format version"
            if split and expect.kind == "ragged_payload" and expect.field == "seq_len":
                # the later line names the claim `positions` (PROF-11, ERR-12)
                checks[position] = replace(check, expect=replace(expect, field="positions"))
    how = (
        "lifted to profile v2: each block is one block of exactly its payload's tokens "
        "with no window, and every signature records version 2 with that layout"
    )
    if split and any(
        isinstance(c, OutcomeCheck)
        and isinstance(c.expect, ErrorIs)
        and c.expect.field == "positions"
        for c in checks
    ):
        how += "; a layer's claim is named positions (split_width, ERR-12)"
    return replace(
        case,
        program=tuple(program),
        checks=tuple(checks),
        format_writes=2 if writes else None,
        format_reads_include=(2,) if verifies else (),
        reexpressed=(*case.reexpressed, how),
    )


def for_readable_set(case: Case, info: AdapterInfo) -> Case | str | None:
    """A ``profile: 1`` case refusing an unreadable version, for the declared readable set (§6.4.5).

    ``None``: the declaration is profile v1 (the case applies as written), its readable
    set holds neither 1 nor 2 (nothing the suite writes would be read), or the case is
    not of the kind this rule rewrites; a string: why its point does not survive.
    """
    readable = tuple(sorted(info.format_reads))
    if case.profile != 1 or (info.format_writes == 1 and readable == (1,)):
        return None
    if case.cls != "verify" or any(isinstance(op, ops.Measure | ops.Stamp) for op in case.program):
        return None
    if 1 not in readable and 2 not in readable:  # no reader (or none of a version written)
        return None
    expects = {
        c.op_index: (position, c)
        for position, c in enumerate(case.checks)
        if isinstance(c, OutcomeCheck)
    }
    program = list(case.program)
    checks = list(case.checks)
    for index, op in enumerate(case.program):
        if not isinstance(op, ops.Verify):
            continue
        position, check = expects.get(index, (-1, None))
        expect = None if check is None else check.expect
        if check is None or not isinstance(expect, ErrorIs) or expect.kind != "unsupported_format":
            return "its point is what a reader of exactly {1} reads"
        if op.recorded is None or op.recorded.format_version in readable:
            return "its point is a version the declared readable set reads"
        values = {**expect.values, "readable": readable}
        checks[position] = replace(check, expect=replace(expect, values=values))
        if 1 not in readable:  # the expectation as the reader can read it (§6.4.2)
            program[index] = replace(op, expected=_v2(op.expected, block_of(op.payload)))
    how = f"the refusal names the declared readable set {list(readable)}"
    if 1 not in readable:
        how += (
            "; the expected signature is lifted to version 2 with one block of exactly "
            "the payload's tokens and no window"
        )
    return replace(
        case,
        program=tuple(program),
        checks=tuple(checks),
        profile=None,
        format_reads=readable,
        reexpressed=(*case.reexpressed, how),
    )


def _v2(sig: Signature, layout: Layout) -> Signature:
    return replace(sig, format_version=2, layout=layout)
