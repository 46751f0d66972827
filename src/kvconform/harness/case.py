"""A conformance case: what a scenario or a known-answer vector compiles into."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

import kvconform
from kvconform.harness.checks import Check
from kvconform.protocol import operations as ops


@dataclass(frozen=True)
class Case:
    """One conformance case: a scenario or a known-answer vector."""

    id: str
    title: str
    cls: str
    requires: tuple[str, ...]
    why: str
    file: str
    line: int | None
    program: tuple[ops.Op, ...]
    checks: tuple[Check, ...]
    incident: str = ""
    #: The block format version the case assumes, if it depends on one (PROF-3).
    profile: int | None = None
    area: str = ""
    kind: str = "scenario"
    #: The decisions of this specification the verdict rests on (spec/README.md,
    #: Decisions); empty when it rests on the seeds' semantics alone (CONF-8).
    basis: tuple[str, ...] = ()
    #: The option values the case assumes (CONF-6).
    options: tuple[tuple[str, str], ...] = ()
    #: The version written and the readable set the case assumes, where it says
    #: (``format:`` in the file; PROF-3, CONF-11).
    format_writes: int | None = None
    format_reads: tuple[int, ...] | None = None
    #: Versions the readable set must contain, whatever else it holds.
    format_reads_include: tuple[int, ...] = ()
    #: How the case was rewritten into the shape an implementation declares, one line
    #: per rewriting (INTERPRETING.md §6.4); empty for a case judged as written.
    reexpressed: tuple[str, ...] = ()

    @property
    def basis_kind(self) -> str:
        """``seed`` or ``decision``: whether a failure breaks the seeds' semantics or a decision."""
        return "decision" if self.basis else "seed"

    @cached_property
    def file_name(self) -> str:
        """The file, relative to the suite's folders when it is one of theirs."""
        path = self.file if os.path.isabs(self.file) else str(Path(self.file).resolve())
        for root in _suite_roots(kvconform.data_root()):
            if path.startswith(root):
                return path[len(root) :].replace(os.sep, "/")
        return Path(path).name


@cache
def _suite_roots(data_root: Path) -> tuple[str, str]:
    """The folders a case file is named relative to, each ending in a separator."""
    root = data_root.resolve()
    return (str(root / "conformance") + os.sep, str(root) + os.sep)
