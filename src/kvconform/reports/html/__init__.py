"""Self-contained HTML: one page per run, and a matrix comparing several runs.

Pages carry their own CSS and load nothing, so they can be attached to a CI run
or mailed as they are. The run page, written for a person, shows the failures
first, grouped by the requirement each case is written for, each one opening to
its full text and the commands that explain and rerun it; the other cases follow,
collapsed by area.

The run page carries one small inline script of its own, a filter by class, area
and basis. It reads only ``data-`` attributes, its own form and the address's
fragment, and writes only ``hidden`` and ``open`` attributes and a line of counts
(``textContent``): it never turns text into markup. Without scripts the filter
stays hidden and everything is shown. Every page declares a Content-Security-Policy
that allows its own style and that one script, by hash, and nothing else: adapter
text is escaped (:mod:`.untrusted`), and markup that slipped past the escaping
still could not load or run anything.

The parts: :mod:`.page` (the frame every page shares, escaping, the counts tables),
:mod:`.run` (the run page) and :mod:`.compare` (the matrix page).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kvconform.files import write_atomic
from kvconform.reports.html.compare import compare_names, render_compare, suites_differ
from kvconform.reports.html.page import escape
from kvconform.reports.html.run import render_run

__all__ = [
    "compare_names",
    "escape",
    "render_compare",
    "render_run",
    "suites_differ",
    "write_compare",
    "write_run",
]


def write_run(report: Mapping[str, Any], path: Path) -> None:
    write_atomic(path, render_run(report))


def write_compare(
    reports: Sequence[Mapping[str, Any]], path: Path, sources: Sequence[str] | None = None
) -> None:
    write_atomic(path, render_compare(reports, sources))
