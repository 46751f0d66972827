"""kvconform: specification and conformance suite for state-reuse rules in LLM engines.

The package holds the code; the suite itself is data (``spec/``,
``conformance/``, ``vectors/``), found by :func:`data_root`.

- :mod:`kvconform.values` -- the values exchanged with an implementation.
- :mod:`kvconform.protocol` -- the operation table, wire codec, drivers, stdio client and server.
- :mod:`kvconform.harness` -- loading, compiling and judging the suite's data.
- :mod:`kvconform.differential` -- generated differential checks against the reference.
- :mod:`kvconform.adapters` -- the built-in adapters (the reference implementation).
- :mod:`kvconform.reports` -- JSON, JUnit, Markdown and HTML reports.
- :mod:`kvconform.cli` and :mod:`kvconform.plugin` -- the command and the pytest plugin.

The reference implementation is the separate top-level package
``kvconform_reference`` (folder ``reference/``).
"""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.1.0"
#: The version of the specification and scenario set. Bumped whenever a
#: requirement or a scenario changes meaning.
SUITE_VERSION = "7.3.0"

_here = _Path(__file__).resolve().parent


def data_root() -> _Path:
    """The folder that holds ``spec/``, ``vectors/`` and ``conformance/``.

    In a wheel they are package data under ``kvconform/data/``; in a checkout
    (including an editable install) they are the repository's top-level folders.
    """
    return _DATA_ROOT


def _find_data_root() -> _Path:
    shipped = _here / "data"
    if (shipped / "conformance").is_dir():
        return shipped
    return _here.parent.parent


_DATA_ROOT = _find_data_root()
