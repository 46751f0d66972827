"""Shared pytest setup.

Lets the tests run from a source checkout whether or not the package is
installed: ``src/`` goes on ``sys.path``, and ``kvconform/__init__.py`` then
extends the package path to the checkout's top-level folders.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

try:
    import kvconform  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO_ROOT / "src"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The root of the checkout (the folder holding ``spec/`` and ``vectors/``)."""
    return REPO_ROOT
