"""The toolchains some tests build with (``cargo``, ``node``): found, or the test is
skipped loudly, and a ``cargo`` command that must succeed."""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest

#: How long one ``cargo`` command may take (a first build on a slow machine).
BUILD_TIMEOUT = 600.0


def tool(name: str, missing: str) -> str:
    """The path of the command ``name``; if there is none, warn ``missing`` (so that a
    run without the toolchain says what it did not test) and skip the test."""
    found = shutil.which(name)
    if found is None:
        warnings.warn(missing, stacklevel=2)
        pytest.skip(missing)
    return found


def cargo(
    executable: str, directory: Path, command: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """``cargo <command> --offline --quiet <args>`` in ``directory``, which must succeed
    (the crates are std-only: no registry is needed).

    Debug and test builds are made without debug information (unless the environment
    says otherwise): no test reads it, and it was a third of a skeleton's build and of
    the Rust adapter's ``cargo test`` build. Release builds have none anyway. Nor are
    they incremental: the tests build each crate once and never edit it, so the
    incremental state cargo writes for the next edit is never used, and writing it
    made the Rust adapter's first ``cargo test`` build take 2.4 s of CPU instead of 1.7 s.
    A release build is made in one codegen unit: the same optimisations over the whole
    crate, with no work split over threads and merged again (the Rust adapter's first
    release build: 4.1 s of CPU in 16 units, 3.2 s in one; the other cores run tests
    meanwhile).
    """
    env = {
        "CARGO_PROFILE_DEV_DEBUG": "0",
        "CARGO_PROFILE_TEST_DEBUG": "0",
        "CARGO_INCREMENTAL": "0",
        "CARGO_PROFILE_RELEASE_CODEGEN_UNITS": "1",
        **os.environ,
    }
    done = subprocess.run(
        [executable, command, "--offline", "--quiet", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
        env=env,
    )
    assert done.returncode == 0, f"cargo {command} failed:\n{done.stdout}\n{done.stderr}"
    return done
