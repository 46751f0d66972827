"""Correct variants: implementations that differ from the reference only where the
specification allows. The suite must pass every one of them; a failure means a
scenario judges something the specification leaves free (CONF-4).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kvconform.conformance.adapter import Adapter


@dataclass(frozen=True)
class Variant:
    name: str
    differs_in: str
    factory: Callable[[], Adapter]

    @property
    def spec(self) -> str:
        return f"{self.factory.__module__}:{self.factory.__qualname__}"


VARIANTS: list[Variant] = []


def variant(name: str, differs_in: str) -> Callable[[type], type]:
    def register(cls: type) -> type:
        VARIANTS.append(Variant(name, differs_in, cls))
        return cls

    return register


def all_variants() -> list[Variant]:
    from . import renumbered  # noqa: F401 -- importing registers the variants

    return list(VARIANTS)
