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

from kvconform.conformance.adapter import Adapter


@dataclass(frozen=True)
class Mutant:
    name: str
    breaks: tuple[str, ...]
    half: Literal["under", "over", "contract"]
    plausible: str
    factory: Callable[[], Adapter]

    @property
    def spec(self) -> str:
        """The ``module:factory`` string that loads this mutant."""
        return f"{self.factory.__module__}:{self.factory.__qualname__}"


MUTANTS: list[Mutant] = []


def mutant(
    name: str, breaks: tuple[str, ...], half: Literal["under", "over", "contract"], plausible: str
) -> Callable[[type], type]:
    """Class decorator: register an adapter class as a mutant."""

    def register(cls: type) -> type:
        MUTANTS.append(Mutant(name, breaks, half, plausible, cls))
        return cls

    return register


def all_mutants() -> list[Mutant]:
    from . import corpus  # noqa: F401 -- importing registers the mutants

    return list(MUTANTS)
