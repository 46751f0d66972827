"""The project's static checks, run with the tests so CI holds them: mypy --strict and ruff.

Both tools are in the ``dev`` extra (the README's test command installs it).
Without them the checks are reported as skipped, naming the missing tool.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _tool(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]')")


def test_the_package_and_the_reference_type_check_strictly() -> None:
    _tool("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary"],  # files and strictness: pyproject
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_ruff_is_clean() -> None:
    _tool("ruff")
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "."],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:]
