"""The generated differential checks as the harness knows them: one description each.

``kvconform run --generated N`` adds three checks to the suite's cases. The harness
lists, selects, gates and explains them like any case, by the description here: the
id, the title, the class, the requirements it bears on and why it exists.
:mod:`kvconform.differential` (which sits above the harness and needs Hypothesis) draws
and judges their programs, one property per description, looked up by id: the harness
never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GeneratedCheck:
    """What a generated check is, without the code that draws its programs."""

    id: str
    title: str
    cls: str
    requires: tuple[str, ...]
    why: str


#: The generated checks, in the order they run.
CHECKS: tuple[GeneratedCheck, ...] = (
    GeneratedCheck(
        id="generated.key-state-machine",
        title="Random programs over models, caches and held plans agree with the reference",
        cls="plan",
        requires=("ID-3", "ID-6", "ID-10", "ALLOC-13", "PLAN-4", "PLAN-6", "PLAN-7", "PLAN-14"),
        why="Random construct, reload, drop, hook, append, truncate, clear and replace-layer "
        "sequences with validity checks under random per-step inputs: catches any key or id "
        "rule the hand-written scenarios do not exercise in that order.",
    ),
    GeneratedCheck(
        id="generated.hash",
        title="Random mix programs give the reference's 64-bit values",
        cls="hash",
        requires=("HASH-11",),
        why="Mix programs of every kind (NaN payloads, signed zeros, subnormals, astral "
        "strings, u64 extremes, finish mid-sequence, long repeated bytes): catches an "
        "encoding slip the known-answer vectors happen not to pin.",
    ),
    GeneratedCheck(
        id="generated.verify",
        title="Random blocks with random faults get the reference's verdict",
        cls="verify",
        requires=("SIG-7", "SIG-8", "SIG-9", "VERIFY-9", "VERIFY-4", "VERIFY-5"),
        why="Coherent blocks with layers added or dropped, shapes changed, buffers cut or "
        "extended, false seq_len claims, lying or missing stamps and changed expectations "
        "(under version 2 also layouts, valid or not, partial blocks and split V widths): "
        "catches a check run out of order or a field compared wrongly.",
    ),
)

#: Each generated check by its id.
BY_ID: dict[str, GeneratedCheck] = {check.id: check for check in CHECKS}
#: The ids, in the order the checks run.
IDS: tuple[str, ...] = tuple(check.id for check in CHECKS)
