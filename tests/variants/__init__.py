"""Correct variants: implementations that differ from the reference only where the
specification allows. The suite must pass every one of them; a failure means a
scenario judges something the specification leaves free (CONF-12).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from kvconform.protocol.adapter import Adapter

Transport = Literal["in-process", "stdio"]


@dataclass(frozen=True)
class Variant:
    name: str
    differs_in: str
    factory: Callable[[], Adapter]
    #: How the suite reaches it: called in process, or served by
    #: ``python -m kvconform.serve --adapter <spec>`` over the stdio protocol.
    transport: Transport = "in-process"

    @property
    def declares(self) -> bool:
        """Whether the variant declares an option value or a capability other than the default."""
        info = self.factory().describe()
        return bool(
            info.options
            or not info.raw_fold
            or info.dtypes is not None
            or info.uint_bits != 64
            or info.key_schema is not None
            or info.prefix_inputs is not None
        )

    @property
    def spec(self) -> str:
        return f"{self.factory.__module__}:{self.factory.__qualname__}"


VARIANTS: list[Variant] = []


def variant(
    name: str, differs_in: str, transport: Transport = "in-process"
) -> Callable[[type], type]:
    def register(cls: type) -> type:
        if any(v.name == name for v in VARIANTS):
            raise ValueError(f"variant {name!r} registered twice")
        VARIANTS.append(Variant(name, differs_in, cls, transport))
        return cls

    return register


#: The modules that register variants.
MODULES = (
    "renumbered",
    "block_storage",
    "python_lists",
    "tuple_sessions",
    "shift_add",
    "composition",
    "served",
    "options",
    "seeds_faithful",
    "enum_dtypes",
    "upstream_v2",
    "rebind_early",
    "upstream_shapes",
    "float_counts",
    "prefix",
)


def all_variants() -> list[Variant]:
    for module in MODULES:  # importing registers the variants
        importlib.import_module(f"{__name__}.{module}")
    return list(VARIANTS)
