"""The toolchains some tests build with (``cargo``, ``node``): found, or the test is
skipped loudly, and a ``cargo`` command that must succeed."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

#: How long one ``cargo`` command may take (a first build on a slow machine).
BUILD_TIMEOUT = 600.0

#: The Rust adapter's crate, and the binary its release build makes.
RUST_CRATE = Path(__file__).resolve().parent.parent / "examples" / "rust-adapter"
RUST_BINARY = RUST_CRATE / "target" / "release" / "kvconform-rust-adapter"


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
    the Rust adapter's ``cargo test`` build. Release builds have none anyway.
    """
    done = subprocess.run(
        [executable, command, "--offline", "--quiet", *args],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        check=False,
        env=_cargo_env(),
    )
    assert done.returncode == 0, f"cargo {command} failed:\n{done.stdout}\n{done.stderr}"
    return done


def _cargo_env() -> dict[str, str]:
    return {"CARGO_PROFILE_DEV_DEBUG": "0", "CARGO_PROFILE_TEST_DEBUG": "0", **os.environ}


def rust_adapter_built() -> bool:
    """Whether the Rust adapter's release binary is newer than every source file."""
    if not RUST_BINARY.is_file():
        return False
    built = RUST_BINARY.stat().st_mtime
    sources = [RUST_CRATE / "Cargo.toml", *(RUST_CRATE / "src").rglob("*.rs")]
    return all(path.stat().st_mtime < built for path in sources)


def build_rust_adapter_in_the_background() -> Callable[[], None]:
    """Start the Rust adapter's builds (its release binary, then its tests) in the
    background, where ``cargo`` is found and the binary is not up to date; the function
    returned stops what is still running.

    ``tests/test_rust_adapter.py`` builds the same with the same environment, and so
    finds them built, or waits on cargo's lock for them: whatever fails is built again
    there, and said there. Only the start of a run gains: in a new checkout the
    controlling process fills the suite cache (tests/conftest.py) with a core idle.
    """
    cargo = shutil.which("cargo")
    if cargo is None or rust_adapter_built():
        return lambda: None
    running: list[subprocess.Popen[bytes]] = []
    stopped = threading.Event()

    def build() -> None:
        for args in (["build", "--release"], ["test", "--no-run"]):
            if stopped.is_set():
                return
            with subprocess.Popen(
                [cargo, *args, "--offline", "--quiet"],
                cwd=RUST_CRATE,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=_cargo_env(),
            ) as process:
                running[:] = [process]
                if process.wait() != 0:
                    return

    thread = threading.Thread(target=build, name="rust-adapter-build", daemon=True)
    thread.start()

    def stop() -> None:
        stopped.set()
        for process in running:
            if process.poll() is None:
                process.terminate()
        thread.join(timeout=BUILD_TIMEOUT)

    return stop
