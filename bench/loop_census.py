"""Where the project's test loop spends its CPU time: a pytest plugin and its report.

Record (any pytest arguments; the workers of pytest-xdist record too)::

    KVCONFORM_CENSUS=/tmp/census PYTHONPATH=bench python -m pytest -p loop_census

Report::

    python bench/loop_census.py /tmp/census            # by test file, dearest first
    python bench/loop_census.py /tmp/census --tests 30  # and the 30 dearest tests

Each test process writes one JSON line per test to ``<folder>/<pid>.jsonl``: the CPU
time the process itself spent on the test (``getrusage(RUSAGE_SELF)``, user + system),
the CPU time of the processes the test started and waited for
(``RUSAGE_CHILDREN``), the part of its own time spent in the cyclic garbage collector
(``gc.callbacks``) and its wall time; and, at the end, its totals, which also hold what
no test accounts for (start-up, collection, the end of the session). The report sums
them by test file. A process a test started and never waited for (killed, or left
running) is not counted; wall time under several workers includes waiting for a core.
It measures and asserts nothing; the figures are only comparable within one machine
and one load (bench/README.md).

The machine's own speed moves too: on a shared virtual machine the same code has taken
from 110 s to 180 s. So the controlling process times a fixed piece of work alone, before
the first test and after the last (:func:`gauge`: an FNV-1a fold of 1 MiB in Python),
and the report gives both times and the run's CPU time in those units: two runs are
comparable when their gauges are, and their CPU time in gauge units is, whatever the load.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

ENV = "KVCONFORM_CENSUS"


class _Collector:
    """The CPU time the cyclic garbage collector takes in this process, by generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.by_generation = [0.0, 0.0, 0.0]
        self.counts = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.process_time()
            return
        spent = time.process_time() - self._started
        generation = int(info["generation"])
        self.seconds += spent
        self.by_generation[generation] += spent
        self.counts[generation] += 1


#: The work :func:`gauge` times: bytes folded.
GAUGE_BYTES = 1024 * 1024


def gauge() -> float:
    """CPU seconds this process takes to fold :data:`GAUGE_BYTES` with FNV-1a in Python.

    Written out here rather than calling the reference's hasher, on purpose: a gauge
    must stay the same work from commit to commit, whatever the reference becomes."""
    data = bytes(range(256)) * (GAUGE_BYTES // 256)
    started = time.process_time()
    state = 0xCBF29CE484222325
    for byte in data:
        state = ((state ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return time.process_time() - started


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


class _Census:
    """The plugin object: one line per test, and the process's totals at the end."""

    def __init__(self, folder: Path, controller: bool) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._out = (folder / f"{os.getpid()}.jsonl").open("a", encoding="utf-8")
        self._controller = controller
        if controller:  # alone on the machine: no worker has started yet
            self._write({"gauge": gauge(), "when": "start"})
        self._collector = _Collector()
        gc.callbacks.append(self._collector)

    def _write(self, record: dict[str, object]) -> None:
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Generator[None, object, object]:
        own, children = _cpu()
        collected, started = self._collector.seconds, time.monotonic()
        result = yield
        own_after, children_after = _cpu()
        self._write(
            {
                "test": item.nodeid,
                "own": own_after - own,
                "children": children_after - children,
                "gc": self._collector.seconds - collected,
                "wall": time.monotonic() - started,
            }
        )
        return result

    def pytest_unconfigure(self, config: Any) -> None:
        if self._controller:  # every worker has ended
            self._write({"gauge": gauge(), "when": "end"})
        own, children = _cpu()
        self._write(
            {
                "process": os.getpid(),
                "own": own,
                "children": children,
                "gc": self._collector.seconds,
                "gc_by_generation": self._collector.by_generation,
                "gc_collections": self._collector.counts,
            }
        )
        self._out.close()
        gc.callbacks.remove(self._collector)


def pytest_configure(config: Any) -> None:
    """Loaded with ``-p loop_census``: records where ``KVCONFORM_CENSUS`` names a folder."""
    folder = os.environ.get(ENV)
    if folder:
        controller = not hasattr(config, "workerinput")  # pytest-xdist's workers have it
        config.pluginmanager.register(_Census(Path(folder), controller), "loop-census")


def _records(
    folder: Path,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    if not folder.is_dir():
        raise SystemExit(f"{folder}: not a folder")
    tests: list[dict[str, Any]] = []
    processes: list[dict[str, Any]] = []
    gauges: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                raise SystemExit(f"{path}:{number}: not a census line") from None
            if "gauge" in record:
                gauges.append(record)
            else:
                (tests if "test" in record else processes).append(record)
    return tests, processes, gauges


def _area(test: str) -> str:
    """A test's file under ``tests/``; the suite's own cases by their top folder
    (``conformance/scenarios``, ``vectors``), one row each."""
    path = test.split("::", 1)[0]
    if path.startswith("tests/"):
        return path
    return "/".join(path.split("/")[:2]) if path.startswith("conformance/") else path.split("/")[0]


def report(folder: Path, dearest: int) -> str:
    """The census in ``folder``, by test file (:func:`_area`), dearest first."""
    tests, processes, gauges = _records(folder)
    if not tests:
        raise SystemExit(f"{folder}: no census lines (run pytest with -p loop_census and {ENV})")
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for record in tests:
        row = by_file[_area(record["test"])]
        row[0] += record["own"]
        row[1] += record["children"]
        row[2] += record["gc"]
        row[3] += 1
    own = sum(r["own"] for r in tests)
    children = sum(r["children"] for r in tests)
    collector = sum(r["gc"] for r in tests)
    lines = [
        f"{len(tests)} tests in {len(processes)} processes: "
        f"{own + children:.1f} s of CPU ({own:.1f} s in the test processes, "
        f"{children:.1f} s in processes they started; {collector:.1f} s in the collector)",
    ]
    if processes:
        total = sum(p["own"] for p in processes)
        lines.append(
            f"the test processes in all: {total:.1f} s of their own, "
            f"{total - own:.1f} s of it outside any test (start-up, collection, the end)"
        )
    if gauges:
        times = {g["when"]: g["gauge"] for g in gauges}
        mean = sum(times.values()) / len(times)
        said = ", ".join(f"{seconds:.3f} s at the {when}" for when, seconds in times.items())
        lines.append(
            f"the machine's gauge ({GAUGE_BYTES // 1024} KiB folded alone): {said}; "
            f"the run's CPU time is {(own + children) / mean:.0f} gauges"
        )
    lines.append(f"{'CPU s':>7} {'own':>6} {'child':>6} {'gc':>5} {'tests':>5}  file")
    for name, (mine, theirs, gc_s, count) in sorted(
        by_file.items(), key=lambda kv: -(kv[1][0] + kv[1][1])
    ):
        lines.append(
            f"{mine + theirs:7.1f} {mine:6.1f} {theirs:6.1f} {gc_s:5.1f} {int(count):5d}  {name}"
        )
    if dearest:
        lines.append(f"the {dearest} dearest tests:")
        for record in sorted(tests, key=lambda r: -(r["own"] + r["children"]))[:dearest]:
            cost = record["own"] + record["children"]
            lines.append(f"{cost:7.2f} {_clipped(record['test'])}")
    return "\n".join(lines)


#: The longest test name a report line shows: a parameter can be kilobytes long (a
#: nesting probe's ``[[[[...``), which made one line of the report unreadable.
SHOWN = 160


def _clipped(name: str) -> str:
    """``name``, its middle left out when it is longer than :data:`SHOWN`."""
    if len(name) <= SHOWN:
        return name
    head, tail = SHOWN - 60, 20
    return f"{name[:head]} ... ({len(name) - head - tail} characters) ... {name[-tail:]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("folder", type=Path, help="the folder KVCONFORM_CENSUS named")
    parser.add_argument("--tests", type=int, default=0, help="also list the N dearest tests")
    args = parser.parse_args(argv)
    print(report(args.folder, args.tests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
