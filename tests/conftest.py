"""Shared pytest setup.

Lets the tests run from a source checkout whether or not the package is
installed: ``src/`` goes on ``sys.path``, and ``kvconform/__init__.py`` then
extends the package path to the checkout's top-level folders.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _keep_bytecode_outside_the_checkout() -> None:
    """Under ``PYTHONDONTWRITEBYTECODE``, cache compiled modules in a temporary folder.

    The test run starts hundreds of Python processes (adapters served over stdio, the
    command run as a user runs it, the workers of pytest-xdist); with no bytecode kept,
    each one compiles every module it imports again, and pytest rewrites the asserts of
    every test module again in each worker. An environment that asks for no bytecode
    asks that nothing be written beside the sources: it is kept under the system's
    temporary folder instead (``PYTHONPYCACHEPREFIX``), never in the checkout.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.pycache_prefix:
        return
    prefix = os.path.join(tempfile.gettempdir(), f"kvconform-pycache-{os.getuid()}")
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_keep_bytecode_outside_the_checkout()

try:
    import kvconform  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO_ROOT / "src"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The root of the checkout (the folder holding ``spec/`` and ``vectors/``)."""
    return REPO_ROOT
