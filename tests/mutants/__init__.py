"""The mutant corpus: adapters that each misread the specification in one way.

Every mutant is the reference with exactly one deliberate misreading, named
after it, with the requirement it breaks and why someone might plausibly write
it. The suite must fail every one of them (``tests/test_mutants.py``); a
mutant that survives means a scenario is missing or has no teeth.

``half`` says which way the misreading fails:

- ``under``: under-keying or under-checking -- a silent wrong answer;
- ``over``: over-keying -- a silent performance loss only a scenario that
  asserts "still valid" can catch;
- ``contract``: a wrong answer of another kind (a wrong error, a wrong value).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kvconform.protocol.adapter import Adapter


@dataclass(frozen=True)
class Mutant:
    name: str
    breaks: tuple[str, ...]
    half: Literal["under", "over", "contract"]
    plausible: str
    factory: Callable[[], Adapter]
    #: Non-empty when no scenario *can* kill the mutant through the adapter
    #: interface as it stands: why, and what the harness would need. The kill
    #: test expects such a mutant to survive (strict xfail), so a harness change
    #: that starts killing it is noticed and the gap can be closed.
    gap: str = ""

    @property
    def spec(self) -> str:
        """The ``module:factory`` string that loads this mutant."""
        return f"{self.factory.__module__}:{self.factory.__qualname__}"


MUTANTS: list[Mutant] = []


def mutant(
    name: str,
    breaks: tuple[str, ...],
    half: Literal["under", "over", "contract"],
    plausible: str,
    gap: str = "",
) -> Callable[[type], type]:
    """Class decorator: register an adapter class as a mutant."""

    def register(cls: type) -> type:
        if any(m.name == name for m in MUTANTS):
            raise ValueError(f"mutant {name!r} registered twice")
        MUTANTS.append(Mutant(name, breaks, half, plausible, cls, gap))
        return cls

    return register


#: The modules that register mutants, one per requirement area.
MODULES = (
    "corpus",
    "hash",
    "identity",
    "alloc",
    "plan",
    "plan_validity",
    "signature",
    "profile_v2",
    "verify",
    "errors",
    "teeth",
    "widths",
    "storage_options",
    "prefix",
    "prefix_capacity",
)


def all_mutants() -> list[Mutant]:
    import importlib

    for module in MODULES:  # importing registers the mutants
        importlib.import_module(f"{__name__}.{module}")
    return list(MUTANTS)
