"""Everything the other variants change, at once, served over the stdio protocol.

The suite reaches this one as a separate process,
``python -m kvconform.serve --adapter tests.variants.served:ServedEverything``,
through :class:`kvconform.protocol.client.StdioDriver`: handles, ids,
faults and signatures all cross the wire (spec/protocol.md). What it differs
in is the union of three in-process variants:

- :class:`~.renumbered.RenumberedReworded`: ids mapped far from 1 with a step
  of 13, every error message reworded;
- :class:`~.composition.BackToFrontComposition`: another plan-key composition;
- :class:`~.python_lists.PythonLists`: list storage, independent measuring and
  verifying, its own id counters.
"""

from __future__ import annotations

from dataclasses import replace

from kvconform.values import AdapterInfo

from . import variant
from .composition import BackToFrontComposition
from .python_lists import PythonLists
from .renumbered import RenumberedReworded


@variant(
    "served-everything-over-stdio",
    "the union of renumbered-reworded, back-to-front-composition and python-lists, run "
    "as a separate process over the stdio protocol",
    transport="stdio",
)
class ServedEverything(RenumberedReworded, BackToFrontComposition, PythonLists):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="variant-served-everything", version="0.0.1")
