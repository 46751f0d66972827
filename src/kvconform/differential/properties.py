"""The generated properties: what each checks, for which implementations, and why.

A :class:`Property` pairs a generated check as the harness lists and explains it
(:mod:`kvconform.harness.generated`) with the programs that check it: a writer of
:mod:`.strategies`, or a Hypothesis strategy, and the implementations it applies to.
:mod:`.engine` runs them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential import prefix, strategies
from kvconform.differential.compare import Program
from kvconform.harness import generated
from kvconform.harness.generated import GeneratedCheck
from kvconform.harness.scenario import Case
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.values import AdapterInfo


@dataclass(frozen=True)
class Property:
    """One generated check: which programs, for which implementations, and why."""

    #: What the check is (id, title, class, requirements, why), as the harness lists,
    #: selects and explains it (:mod:`kvconform.harness.generated`).
    described: GeneratedCheck
    #: Why the property does not apply to an implementation, or ``None``.
    not_applicable: Callable[[AdapterInfo], str | None]
    #: The programs for an implementation (only operations of the classes it declares),
    #: as a Hypothesis strategy.
    programs: Callable[[AdapterInfo], st.SearchStrategy[Program]]
    #: The same programs as a writer of a choice source (:mod:`.strategies`): the fast
    #: path :func:`run_property` takes, with its own shrinker. Without one, the
    #: property runs through Hypothesis (``programs``).
    writer: Callable[[AdapterInfo], strategies.Writer[Program]] | None = None
    #: The reference to compare with for an implementation, when the shared default one
    #: (profile v1, every option at its default) would answer otherwise; else ``None``.
    reference_for: Callable[[AdapterInfo], Driver | None] | None = None
    refine: prefix.Refiner | None = None  # a disagreement told in the property's own terms
    #: For an implementation, whether a program shortened by deleting operations is still
    #: one the property's programs promise (:func:`.shrink.minimize`); ``None``: any
    #: well-formed program is.
    keeps: Callable[[AdapterInfo], Callable[[Program], bool]] | None = None
    #: For an implementation and a program, other engines the rules allow whose answers
    #: are as right as the reference's (``generated.prefix``: a bounded cache's other
    #: orders within one store, PREFIX-24); the program passes when one of them, or the
    #: reference, gives every answer the implementation gave. ``None``: the reference alone.
    alternatives: Callable[[AdapterInfo, Program], Sequence[Driver]] | None = None

    @property
    def id(self) -> str:
        return self.described.id

    @property
    def title(self) -> str:
        return self.described.title

    @property
    def cls(self) -> str:
        return self.described.cls

    @property
    def requires(self) -> tuple[str, ...]:
        return self.described.requires

    @property
    def why(self) -> str:
        return self.described.why

    @property
    def case(self) -> Case:
        """The case this property is in reports, selections and expectation files."""
        return generated.as_case(self.described)


def _without(info: AdapterInfo, cls: str) -> str | None:
    return None if cls in info.classes else f"{info.name} does not declare the class {cls}"


def _verify_not_applicable(info: AdapterInfo) -> str | None:
    """Blocks of the versions the implementation reads are verified, blocks of the one it
    writes measured and stamped (PROF-3, PROF-12), against the reference declaring the
    same (:func:`_reference_declaring_format`)."""
    return _without(info, "signature")


def _verifies(info: AdapterInfo) -> bool:
    return "verify" in info.classes


def _measures(info: AdapterInfo) -> bool:
    return "signature" in info.classes


def _reference_declaring_format(info: AdapterInfo) -> Driver | None:
    """The reference with the implementation's format declaration and v2 revision
    (PROF-3, PROF-11, PROF-12), when it is not the default profile v1."""
    if info.format_writes == 1 and set(info.format_reads) == {1}:
        return None
    return InProcessDriver(
        ReferenceAdapter(
            writes=info.format_writes or 1,
            reads=tuple(sorted(info.format_reads)),
            revision=info.option("profile_v2_revision"),
        )
    )


PROPERTIES: tuple[Property, ...] = (
    Property(
        described=generated.BY_ID["generated.key-state-machine"],
        not_applicable=lambda info: _without(info, "identity"),
        programs=lambda info: strategies.key_programs(
            plan="plan" in info.classes,
            scope=strategies.Scope.of(info),
            classes=frozenset(info.classes),
        ),
        writer=lambda info: functools.partial(
            strategies.key_program,
            plan="plan" in info.classes,
            scope=strategies.Scope.of(info),
            classes=frozenset(info.classes),
        ),
    ),
    Property(
        described=generated.BY_ID["generated.hash"],
        not_applicable=lambda info: _without(info, "hash"),
        programs=lambda info: strategies.hash_programs(scope=strategies.Scope.of(info)),
        writer=lambda info: functools.partial(
            strategies.hash_program_list, scope=strategies.Scope.of(info)
        ),
    ),
    Property(
        described=generated.BY_ID["generated.verify"],
        not_applicable=_verify_not_applicable,
        programs=lambda info: strategies.block_programs(
            verify=_verifies(info), signature=_measures(info), scope=strategies.Scope.of(info)
        ),
        reference_for=_reference_declaring_format,
        writer=lambda info: functools.partial(
            strategies.block_program,
            verify=_verifies(info),
            signature=_measures(info),
            scope=strategies.Scope.of(info),
        ),
    ),
    prefix.prefix_property(Property),
)

PROPERTIES_BY_ID: dict[str, Property] = {p.id: p for p in PROPERTIES}


def generated_cases() -> list[Case]:
    """The generated properties as cases, for selection and expectation files."""
    return [p.case for p in PROPERTIES]


#: The seed of a run that names none: fixed per suite version, so the same suite
#: generates the same programs on every machine and a CI job never goes red at
#: random. A fresh seed is opt-in (``--seed random``).
