"""bench/loop_census.py, the census of the test loop's CPU time, counts what it says.

It measures the project's own tests (bench/README.md); these check that the plugin
records a test's own and its children's CPU time and that the report sums them by file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _census() -> ModuleType:
    spec = importlib.util.spec_from_file_location("loop_census", BENCH / "loop_census.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _lines(folder: Path, name: str, *records: dict[str, object]) -> None:
    folder.mkdir(exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def test_the_report_sums_by_file_dearest_first(tmp_path: Path) -> None:
    census = _census()
    test = {"own": 1.0, "children": 0.5, "gc": 0.25, "wall": 2.0}
    _lines(
        tmp_path,
        "1.jsonl",
        {**test, "test": "tests/test_a.py::test_one"},
        {**test, "test": "tests/test_a.py::test_two[x]"},
        {**test, "test": "conformance/scenarios/plan/validity.yaml::plan.one"},
        {"process": 1, "own": 2.5, "children": 1.0, "gc": 0.75},
    )
    _lines(tmp_path, "2.jsonl", {**test, "own": 4.0, "test": "tests/test_b.py::test_dear"})
    text = census.report(tmp_path, 1)
    lines = text.splitlines()
    assert lines[0].startswith("4 tests in 1 processes: 9.0 s of CPU (7.0 s in the test")
    rows = [line for line in lines if line.strip().endswith(".py") or "scenarios" in line]
    assert rows[0].split()[-1] == "tests/test_b.py"  # 4.5 s, before test_a's 3.0 s
    assert rows[1].split()[:5] == ["3.0", "2.0", "1.0", "0.5", "2"]
    assert rows[2].split()[-1] == "conformance/scenarios"
    assert lines[-1].split() == ["4.50", "tests/test_b.py::test_dear"]


def test_a_line_that_is_not_json_is_named_with_its_file_and_line(tmp_path: Path) -> None:
    census = _census()
    (tmp_path / "7.jsonl").write_text('{"test": "t", "own": 0, "children": 0, "gc": 0}\n{oops\n')
    with pytest.raises(SystemExit, match=r"7\.jsonl:2: not a census line"):
        census.report(tmp_path, 0)
    with pytest.raises(SystemExit, match="not a folder"):
        census.report(tmp_path / "missing", 0)


def census_report_line(folder: Path) -> str:
    """The report's line about the machine's gauge."""
    text = _census().report(folder, 0)
    return next(line for line in text.splitlines() if "gauge" in line)


def test_the_report_gives_the_run_in_gauges(tmp_path: Path) -> None:
    census = _census()
    _lines(
        tmp_path,
        "1.jsonl",
        {"gauge": 0.1, "when": "start"},
        {"test": "tests/test_a.py::test_one", "own": 3.0, "children": 1.5, "gc": 0.0},
        {"gauge": 0.05, "when": "end"},
    )
    line = census_report_line(tmp_path)
    assert "0.100 s at the start, 0.050 s at the end" in line
    assert line.endswith("the run's CPU time is 60 gauges")  # 4.5 s / 0.075 s
    assert census.report(tmp_path, 0).startswith("1 tests in 0 processes")  # not a test


def test_the_plugin_counts_a_test_and_the_process_it_waits_for(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_spin.py").write_text(
        textwrap.dedent(
            """
            import subprocess, sys

            def test_spins_a_child():
                subprocess.run([sys.executable, "-c", "sum(range(3 * 10**6))"], check=True)
            """
        )
    )
    folder = tmp_path / "census"
    env = {**os.environ, "KVCONFORM_CENSUS": str(folder), "PYTHONPATH": str(BENCH)}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "loop_census", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (path,) = folder.glob("*.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    (test,) = [r for r in records if "test" in r]
    (process,) = [r for r in records if "process" in r]
    gauges = {r["when"]: r["gauge"] for r in records if "gauge" in r}
    assert set(gauges) == {"start", "end"} and all(g > 0 for g in gauges.values())
    assert census_report_line(folder).startswith("the machine's gauge (1024 KiB folded alone): ")
    assert test["test"] == "test_spin.py::test_spins_a_child"
    assert test["children"] > 0.01  # the child's CPU time, not the test's own
    assert process["own"] >= test["own"] and process["children"] >= test["children"]


def test_a_long_test_name_is_clipped_in_the_middle(tmp_path: Path) -> None:
    census = _census()
    name = "tests/test_c.py::test_deep[" + "[" * 5000 + "]" * 5000 + "-nested]"
    test = {"own": 1.0, "children": 0.0, "gc": 0.0, "wall": 1.0}
    _lines(tmp_path, "1.jsonl", {**test, "test": name})
    last = census.report(tmp_path, 1).splitlines()[-1]
    assert len(last) < 200
    assert "tests/test_c.py::test_deep[[[" in last and last.endswith("]]]-nested]")
    assert f"({len(name) - 120} characters)" in last
