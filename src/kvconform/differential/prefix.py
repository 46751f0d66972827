"""The generated check of the class ``prefix_cache`` (``generated.prefix``): its parts.

Its programs are :mod:`.strategies.prefix`'s; its expectations the reference's, under
the implementation's prefix declaration where that changes the answer
(:mod:`.declared`). Judging stays the differential one: each lookup's count is compared
exactly (CONF-12); :func:`refine` says which half a disagreement on a lookup is, and
which rules it bears on, and the export helpers below what a scenario of it assumes.
Nothing here needs Hypothesis.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from kvconform.differential.compare import Mismatch, Program
from kvconform.differential.declared import other_orders, reference_for
from kvconform.harness import generated
from kvconform.protocol import operations as ops
from kvconform.values import DECISIONS, OPTION_DECISIONS, OPTIONS, AdapterInfo, Ok, Outcome

T = TypeVar("T")

#: Tells a disagreement in a property's own terms, from the program and both sides' outcomes.
Refiner = Callable[[Program, Sequence[Outcome], Sequence[Outcome], Mismatch], Mismatch]


def not_applicable(info: AdapterInfo) -> str | None:
    if "prefix_cache" not in info.classes:
        return f"{info.name} does not declare the class prefix_cache"
    return None


#: What a discriminant in a program brings into what a disagreement bears on.
_DISCRIMINANT_RULES: tuple[tuple[type[ops.Op], tuple[str, ...]], ...] = (
    (ops.RequestLora, ("PREFIX-7", "PREFIX-8")),
    (ops.RequestMedia, ("PREFIX-9", "PREFIX-10", "PREFIX-11")),
    (ops.RequestEmbeds, ("PREFIX-17",)),
    (ops.TierNew, ("PREFIX-21", "PREFIX-22")),
)


def _sorted(ids: set[str]) -> tuple[str, ...]:
    return tuple(sorted(ids, key=lambda i: (i.split("-")[0], int(i.split("-")[1]))))


def refine(
    program: Program, expected: Sequence[Outcome], actual: Sequence[Outcome], mismatch: Mismatch
) -> Mismatch:
    """A disagreement on a lookup, told by its half and the rules it bears on.

    Fewer positions than the reference is under-reuse: the same prefix and
    discriminants were stored and are not reused (PREFIX-2, with PREFIX-18 for the
    store and lookup paths, PREFIX-5 under partial reuse, PREFIX-22 across a tier).
    More is over-reuse: positions computed for another prefix or other discriminants
    (PREFIX-1, PREFIX-3, PREFIX-4, and the rule of every discriminant the program
    varies). Other disagreements keep the operation table's citations.
    """
    op = program[mismatch.index]
    ref, got = expected[mismatch.index], actual[mismatch.index]
    if not (
        isinstance(op, ops.PrefixLookup)
        and isinstance(ref, Ok)
        and isinstance(got, Ok)
        and isinstance(ref.value, int)
        and isinstance(got.value, int)
        and not isinstance(got.value, bool)
    ):
        return mismatch
    before = program[: mismatch.index]
    present = {type(o) for o in before}
    news = [o for o in before if isinstance(o, ops.RequestNew)]
    salted = any(o.salt is not None for o in news)
    keyed = any(o.user_key is not None for o in news)
    adapted = ops.RequestLora in present
    cites: set[str] = set()
    if got.value < ref.value:
        cites |= {"PREFIX-2", "PREFIX-18"}
        # the reuse half of each discriminant the program carries
        for present_here, rule in (
            (adapted, "PREFIX-7"),
            (adapted, "PREFIX-8"),
            (ops.RequestMedia in present, "PREFIX-11"),
            (ops.RequestEmbeds in present, "PREFIX-17"),
            (salted, "PREFIX-13"),
            (keyed, "PREFIX-15"),
            (ops.TierNew in present, "PREFIX-22"),
            (ref.value % _block_size(program, op) != 0, "PREFIX-5"),
        ):
            if present_here:
                cites.add(rule)
        half = "fewer: a miss where the same prefix and discriminants were stored (under-reuse)"
    else:
        cites |= {"PREFIX-1", "PREFIX-3", "PREFIX-4"}
        for kind, rules in _DISCRIMINANT_RULES:
            if kind in present:
                cites.update(rules)
        if salted:
            cites.add("PREFIX-13")
        if any(o.salt == "" for o in news):
            cites.add("PREFIX-14")
        if keyed:
            cites.add("PREFIX-15")
        if (
            salted
            or keyed
            or adapted
            or ops.RequestMedia in present
            or ops.RequestEmbeds in present
        ):
            cites.add("PREFIX-12")
        if sum((salted, keyed, adapted)) >= 2:
            cites.add("PREFIX-16")
        if any(len(o.tokens.split(" ")) % _block_size(program, op) for o in news):
            cites.add("PREFIX-5")
        if sum(1 for o in program if isinstance(o, ops.PrefixStore)) > 64:
            cites.add("PREFIX-19")
        half = "more: positions computed for another prefix or other discriminants (over-reuse)"
    made = _made(program, op)
    if made is not None and made.capacity is not None:
        cites.add("PREFIX-24")  # what a bounded cache holds after its stores
    return replace(
        mismatch,
        expected=f"{ref.value} leading positions reused",
        actual=f"{got.value} ({half})",
        requires=_sorted(cites),
    )


def _made(program: Program, lookup: ops.PrefixLookup) -> ops.PrefixNew | None:
    """The ``prefix_new`` that made the prefix cache ``lookup`` reads."""
    return next(
        (o for o in program if isinstance(o, ops.PrefixNew) and o.handle == lookup.prefix),
        None,
    )


def _block_size(program: Program, lookup: ops.PrefixLookup) -> int:
    made = _made(program, lookup)
    return 1 if made is None else max(1, made.block_size)


def prefix_property(make: Callable[..., T]) -> T:
    """The property ``generated.prefix``, made by ``make`` (the engine's ``Property``).

    Its writers are imported here, not above: this module is the exporter's too, which
    needs no Hypothesis."""
    from kvconform.differential import strategies

    fields: dict[str, Any] = {
        "described": generated.BY_ID["generated.prefix"],
        "not_applicable": not_applicable,
        "programs": lambda info: strategies.prefix_programs(strategies.PrefixScope.of(info)),
        "writer": strategies.prefix_writer,
        "reference_for": reference_for,
        "alternatives": other_orders,
        "refine": refine,
        "keeps": lambda info: functools.partial(
            strategies.within_promises, scope=strategies.PrefixScope.of(info)
        ),
    }
    return make(**fields)


# --- what an exported scenario of it rests on ----------------------------------------


def decisions(cls: str, requires: Sequence[str]) -> list[str]:
    """The decisions a scenario's verdict rests on (CONF-8): for the class prefix_cache,
    which rests on decisions and not on the seeds, every decision stating a requirement
    it bears on; for another class, those of its options."""
    if cls == "prefix_cache":
        return sorted(name for name, ids in DECISIONS.items() if set(ids) & set(requires))
    return sorted({OPTION_DECISIONS[r] for r in requires if r in OPTION_DECISIONS})


def assumed(
    found: Mapping[str, str], options: Mapping[str, str] | None, program: Program
) -> dict[str, str]:
    """``found`` and, for a program that looks up a prefix cache, ``prefix_partial`` even at
    its default: whole-block counts, which a partial-reuse implementation answers
    otherwise (PREFIX-5). A program of no prefix operation rests on no prefix option."""
    if not any(op.needs == "prefix_cache" for op in program):
        return {k: value for k, value in found.items() if not k.startswith("prefix_")}
    if not any(isinstance(op, ops.PrefixLookup) for op in program):
        return dict(found)
    declared = (options or {}).get("prefix_partial", OPTIONS["prefix_partial"].default)
    return dict(sorted({**found, "prefix_partial": declared}.items()))
