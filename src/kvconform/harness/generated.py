"""The generated differential checks as the harness knows them: one description each.

``kvconform run --generated N`` adds four checks to the suite's cases. The harness
lists, selects, gates and explains them like any case, by the description here: the
id, the title, the class, the requirements it bears on and why it exists.
:mod:`kvconform.differential` (which sits above the harness and needs Hypothesis) draws
and judges their programs, one property per description, looked up by id: the harness
never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvconform.harness.case import Case


@dataclass(frozen=True)
class GeneratedCheck:
    """What a generated check is, without the code that draws its programs."""

    id: str
    title: str
    cls: str
    requires: tuple[str, ...]
    why: str
    #: What its expectations rest on, where it is not the reference under its defaults
    #: with programs kept where the implementation's declarations agree with them.
    basis: str = ""
    #: The decisions of the specification (spec/README.md, Decisions) its verdict rests on,
    #: as a scenario's ``basis`` names them (CONF-8); none: the seeds' semantics.
    decisions: tuple[str, ...] = ()


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
    GeneratedCheck(
        id="generated.prefix",
        title="Random stores and lookups of related requests reuse what the reference reuses",
        cls="prefix_cache",
        requires=(
            "PREFIX-1",
            "PREFIX-2",
            "PREFIX-3",
            "PREFIX-4",
            "PREFIX-5",
            "PREFIX-6",
            "PREFIX-7",
            "PREFIX-8",
            "PREFIX-9",
            "PREFIX-10",
            "PREFIX-11",
            "PREFIX-12",
            "PREFIX-13",
            "PREFIX-14",
            "PREFIX-15",
            "PREFIX-16",
            "PREFIX-17",
            "PREFIX-18",
            "PREFIX-19",
            "PREFIX-20",
            "PREFIX-21",
            "PREFIX-22",
            "PREFIX-24",
        ),
        why="Requests drawn from earlier ones (copied, cut, extended, changed in one token; "
        "media, embeddings, salts, user keys and adapters kept or changed, from vocabularies "
        "small enough that prefixes, salts and adapter names collide), stored and looked up "
        "at random block sizes in one or several prefix caches over a shared tier, adapters "
        "reloaded under equal names, runs of 512 distinct one-block requests, and, for an "
        "implementation that can bound a prefix cache, stores into a cache bounded at the "
        "blocks of its last few stores, or inside a store where no two share a block, "
        "followed by lookups of every request: each lookup's count is compared with the "
        "reference's (under a bound inside a store, the counts together with those of "
        "every order within it that PREFIX-24 leaves to the engine), so a miss where the "
        "same prefix and discriminants were stored (under-reuse, PREFIX-2) fails as surely "
        "as reuse "
        "across a difference (over-reuse).",
        basis="the reference's counts under your declared prefix options: under "
        "prefix_partial: tokens the reference with blocks of one position, under "
        "exact_tail the reference keeping a partial last block whole, under "
        "prefix_adapter_identity: content with loads of equal weights as one identity, under "
        "prefix_tier_layout: converted with every prefix cache in one layout; the "
        "programs stay where your other prefix options give the same answer (your block "
        "size, no empty salt under refuse, caller ids that name the content under caller, "
        "no equal weights in one process under instance, a tier only under shared, a bound "
        "only under the capability prefix_capacity (not under prefix_partial: tokens), and "
        "then at the blocks of whole stores "
        "that share no block, no store larger than it, no lookup before the last store, "
        "no tier)",
        decisions=(  # not the seeds': every rule of the class is a decision (spec/prefix.md)
            "prefix-observable-reuse",
            "prefix-partial",
            "prefix-block-size",
            "prefix-adapter-identity",
            "prefix-media-identity",
            "prefix-propagation",
            "prefix-salt",
            "prefix-empty-salt",
            "prefix-typed-extras",
            "prefix-key-strength",
            "prefix-chain-root",
            "prefix-shared-tier",
            "prefix-tier-layout",
            "prefix-capacity",
        ),
    ),
)


def as_case(check: GeneratedCheck) -> Case:
    """The case a generated check is in reports, listings, selections and expectation
    files: its description, with no program of its own (they are drawn when it runs)."""
    return Case(
        id=check.id,
        title=check.title,
        cls=check.cls,
        requires=check.requires,
        why=check.why,
        file=__file__,  # where the check is described
        line=None,
        program=(),
        checks=(),
        area="generated",
        kind="generated",
        basis=check.decisions,
    )


#: Each generated check by its id.
BY_ID: dict[str, GeneratedCheck] = {check.id: check for check in CHECKS}
#: The ids, in the order the checks run.
IDS: tuple[str, ...] = tuple(check.id for check in CHECKS)
