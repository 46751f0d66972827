"""The wheel carries the whole suite and runs from anywhere (issue: packaging).

Builds a wheel, installs it into a fresh virtual environment and runs
``kvconform run`` from an unrelated directory. Needs the package index for
numpy, pyyaml and jsonschema (CI has it); slow-ish, so it runs once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


def _pip_version() -> tuple[int, ...]:
    import pip

    return tuple(int(part) for part in pip.__version__.split(".")[:2] if part.isdigit())


#: One worker builds and installs the wheel once (the module's fixture) for every test here.
pytestmark = pytest.mark.xdist_group("packaging-wheel")


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "-q",
            "-w",
            str(root / "dist"),
            str(REPO),
        ],
        cwd=root,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (root / "dist").glob("kvconform-*.whl")
    env_dir = root / "venv"
    python = env_dir / "bin" / "python"
    # A fresh environment without a pip of its own (ensurepip would install one), the
    # wheel installed into it by this pip (--python, pip 22.3 and later); nothing is
    # byte-compiled ahead: what the run imports is compiled as it is imported.
    if _pip_version() >= (22, 3):
        venv.create(env_dir, with_pip=False)
        install = [sys.executable, "-m", "pip", "--python", str(python), "install"]
    else:
        venv.create(env_dir, with_pip=True)
        install = [str(python), "-m", "pip", "install"]
    done = _run([*install, "-q", "--no-compile", str(wheel)], cwd=root)
    if done.returncode != 0 and "Could not find a version" in done.stderr:
        pytest.skip(
            f"NO PACKAGE INDEX: the wheel was built but not installed ({done.stderr[-300:]})"
        )
    assert done.returncode == 0, done.stderr[-3000:]
    return env_dir


def test_the_wheel_runs_the_whole_suite_from_an_unrelated_directory(
    installed: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = _run(
        [str(installed / "bin" / "kvconform"), "run", "--quiet", "--json", "report.json"],
        cwd=elsewhere,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "CONFORMANT for the declared classes" in result.stdout
    assert (elsewhere / "report.json").is_file()


def test_the_wheel_installs_no_top_level_reference_or_conformance(
    installed: Path, tmp_path: Path
) -> None:
    probe = (
        "import importlib.util as u; "
        "print(u.find_spec('reference'), u.find_spec('conformance'), "
        "u.find_spec('kvconform_reference') is not None)"
    )
    result = _run([str(installed / "bin" / "python"), "-c", probe], cwd=tmp_path)
    assert result.stdout.split() == ["None", "None", "True"], result.stdout + result.stderr


def test_the_wheel_writes_every_skeleton(installed: Path, tmp_path: Path) -> None:
    """The skeletons' templates are package data (skeletons/templates/): a wheel that
    left one out would write no skeleton in that language."""
    for language in ("python", "rust", "javascript"):
        target = tmp_path / language
        result = _run(
            [
                str(installed / "bin" / "kvconform"),
                "new-adapter",
                "--lang",
                language,
                str(target),
            ],
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert any(target.rglob("*")), language
