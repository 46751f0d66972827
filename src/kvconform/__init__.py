"""kvconform: specification and conformance suite for state-reuse rules in LLM engines.

Subpackages:

- ``kvconform.reference``: the minimal reference implementation of ``spec/``.
- ``kvconform.conformance``: scenarios, schemas, the harness and adapters.

In a built wheel those subpackages live inside this package. In a source
checkout (including an editable install) they are the top-level folders
``reference/`` and ``conformance/`` the project layout prescribes, and the
package path is extended to reach them.
"""

from __future__ import annotations

from pathlib import Path as _Path

__version__ = "0.1.0"
#: The version of the specification and scenario set. Bumped whenever a
#: requirement or a scenario changes meaning.
SUITE_VERSION = "2.0.0"

_here = _Path(__file__).resolve().parent
_checkout = _here.parent.parent
if not (_here / "reference").is_dir() and (_checkout / "reference" / "__init__.py").is_file():
    __path__.append(str(_checkout))  # type: ignore[name-defined]


def data_root() -> _Path:
    """The folder that holds ``spec/``, ``vectors/`` and ``conformance/`` data."""
    if (_here / "vectors").is_dir():
        return _here
    return _checkout
