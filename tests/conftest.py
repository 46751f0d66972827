"""Shared pytest setup.

Lets the tests run from a source checkout whether or not the package is
installed: ``src/`` goes on ``sys.path``, and ``kvconform/__init__.py`` then
extends the package path to the checkout's top-level folders.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def _keep_bytecode_outside_the_checkout() -> None:
    """Under ``PYTHONDONTWRITEBYTECODE``, keep compiled modules in the user's cache folder.

    The test run starts hundreds of Python processes (adapters served over stdio, the
    command run as a user runs it, the workers of pytest-xdist); with no bytecode kept,
    each one compiles every module it imports again, and pytest rewrites the asserts of
    every test module again in each worker. An environment that asks for no bytecode
    asks that nothing be written beside the sources: it is kept in
    ``$XDG_CACHE_HOME/kvconform/pycache`` (else ``~/.cache/...``) instead, through
    ``PYTHONPYCACHEPREFIX``, never in the checkout. Only in a folder that is the user's
    own and that no one else may write: compiled code found there is run as it stands
    (a shared temporary folder would let another user plant it). Otherwise nothing is
    kept, as the environment asked.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.pycache_prefix:
        return
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    prefix = os.path.join(base, "kvconform", "pycache")
    try:
        os.makedirs(prefix, mode=0o700, exist_ok=True)
        st = os.lstat(prefix)
    except OSError:
        return
    own = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    if not (stat.S_ISDIR(st.st_mode) and own and not st.st_mode & 0o022):
        return
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_keep_bytecode_outside_the_checkout()


#: A hash program folding at least this many bytes is a long fold (the four 1 MiB
#: known-answer vectors): worth remembering.
LONG_FOLD = 64 * 1024


def _fold_long_programs_once() -> None:
    """The reference adapter's long folds, computed once per test process.

    ``kvconform.adapters.reference.run_program`` is a pure function of the program. A
    test process runs the whole suite in process dozens of times (``kvconform run``
    through the command's own driver, the applicability and report checks), and each
    run would fold the four 1 MiB vectors again, byte by byte in Python: about 0.4 s a
    run, more than the rest of the run. A program folding at least :data:`LONG_FOLD`
    bytes is computed by the real function the first time and answered from memory
    after; every other program runs anew each time. Processes the tests start (adapters
    over stdio, the command run as a user runs it) compute everything themselves; so
    does every adapter with a hashing code path of its own (mutants, variants).
    """
    from kvconform.adapters import reference

    compute = reference.run_program
    folded: dict[tuple[object, ...], list[int]] = {}

    def run_program(program: Sequence[Any]) -> list[int]:
        size = sum(len(op.value) * op.repeat for op in program if isinstance(op.value, bytes))
        if size < LONG_FOLD:
            return compute(program)
        key = tuple(program)
        if key not in folded:
            folded[key] = compute(program)
        return list(folded[key])

    reference.run_program = run_program  # type: ignore[assignment]


try:
    import kvconform  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO_ROOT / "src"))

_fold_long_programs_once()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two workers per core, at most four more workers than cores.

    Many tests wait on a process of their own (an adapter started over stdio, its
    timeouts, the command run as a user runs it); with one worker per core, a core
    sits idle while its worker waits (on 2 cores: 200 s for the loop, against 144 s
    with two workers per core, the CPU time the same). ``-n N`` still sets the number.
    """
    if hasattr(os, "sched_getaffinity"):
        cores: int | None = len(os.sched_getaffinity(0))  # the cores this process may use
    else:
        cores = os.cpu_count()
    cores = cores or 1
    return min(2 * cores, cores + 4)  # many cores: a few extra workers fill the waits


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The root of the checkout (the folder holding ``spec/`` and ``vectors/``)."""
    return REPO_ROOT
