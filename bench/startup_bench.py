"""What a ``kvconform run`` costs from start to exit, measured side by side in one run.

    python bench/startup_bench.py
    python bench/startup_bench.py \
        --adapter-cmd examples/rust-adapter/target/release/kvconform-rust-adapter

Every series is a fresh process, timed from spawn to exit (wall time):

- ``python -c "import kvconform"``: the floor any command pays;
- ``python -c "import kvconform.cli"``: what the command imports before it reads an argument;
- ``kvconform run`` against the built-in reference, in process, warm cache;
- ``kvconform run --adapter-cmd ADAPTER`` with a cold cache (the cache folder emptied
  before each sample: every suite file parsed, validated and compiled) and with a
  warm one (the compiled suite read from the cache, kvconform.harness.cache);
- ``kvconform run --adapter-cmd ADAPTER --id CASE``, one case, warm cache.

The samples are taken in interleaved rounds (``--rounds``), so a change of machine load
affects every series alike; medians are printed, with each series' ratio to
``import kvconform``. The cases' own time (the ``seconds`` of the JSON report: running
the cases, without start-up, loading or reports) comes from one extra ``--json`` run of
each adapter per round. The target: a warm run within 2x of ``import kvconform`` plus
the cases' own time.

The cache lives in a temporary ``XDG_CACHE_HOME`` for the bench's processes, so the
user's cache is neither read nor written. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_ADAPTER = Path("examples/rust-adapter/target/release/kvconform-rust-adapter")


def kvconform_command() -> list[str]:
    """The ``kvconform`` script of this Python (not a shell shim), else ``python -m kvconform``."""
    script = Path(sys.executable).parent / "kvconform"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "kvconform"]


@dataclass
class Series:
    label: str
    argv: list[str]
    cold: bool = False  # empty the cache folder before each sample
    samples: list[float] = field(default_factory=list)
    summaries: set[str] = field(default_factory=set)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def _summary(stdout: str) -> str:
    """The verdict line of a run (``664 passed, 0 failed, ... of 674``), without its time."""
    lines = [line for line in stdout.splitlines() if " passed, " in line]
    return lines[-1].split(" in ")[0] if lines else ""


def _spawn(
    argv: Sequence[str], env: dict[str, str]
) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--adapter-cmd",
        default=str(DEFAULT_ADAPTER) if DEFAULT_ADAPTER.exists() else None,
        help=f"the adapter process to measure (default {DEFAULT_ADAPTER}, if built)",
    )
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--id", dest="case_id", help="the one case of --id (default: the first)")
    args = parser.parse_args(argv)
    if not args.adapter_cmd:
        print(
            "startup_bench: no adapter: build it (cd examples/rust-adapter && cargo build "
            "--release) or pass --adapter-cmd",
            file=sys.stderr,
        )
        return 2
    adapter = shlex.split(args.adapter_cmd)
    kvconform = kvconform_command()
    with tempfile.TemporaryDirectory(prefix="kvconform-startup-bench-") as home:
        env = {**os.environ, "XDG_CACHE_HOME": home}
        env.pop("KVCONFORM_NO_CACHE", None)
        return _bench(args, kvconform, adapter, env, Path(home) / "kvconform")


def _bench(
    args: argparse.Namespace,
    kvconform: list[str],
    adapter: list[str],
    env: dict[str, str],
    cache: Path,
) -> int:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"kvconform start-up bench: Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {load:.2f}; {args.rounds} rounds"
    )
    print(f"  kvconform = {shlex.join(kvconform)}; adapter = {shlex.join(adapter)}")
    listed = subprocess.run(
        [*kvconform, "list"], env=env, capture_output=True, text=True, check=True
    ).stdout
    case_id = args.case_id or listed.split()[0]
    run = [*kvconform, "run", "--quiet"]
    rust = [*run, "--adapter-cmd", shlex.join(adapter)]
    name = os.path.basename(adapter[0])
    series = [
        Series("python -c 'import kvconform'", [sys.executable, "-c", "import kvconform"]),
        Series("python -c 'import kvconform.cli'", [sys.executable, "-c", "import kvconform.cli"]),
        Series(f"run --adapter-cmd {name}, cold cache", rust, cold=True),
        Series(f"run --adapter-cmd {name}, warm cache", rust),
        Series(f"run --adapter-cmd {name} --id {case_id}, warm", [*rust, "--id", case_id]),
        Series("run (reference, in process), warm cache", run),
    ]
    own: dict[str, list[float]] = {"reference": [], name: []}
    report = cache.parent / "report.json"
    for _ in range(args.rounds):
        for s in series:
            if s.cold:
                shutil.rmtree(cache, ignore_errors=True)
            seconds, done = _spawn(s.argv, env)
            if done.returncode != 0:
                print(f"{s.label}: exit {done.returncode}\n{done.stderr}", file=sys.stderr)
                return 1
            s.samples.append(seconds)
            if s.argv[0] != sys.executable:
                s.summaries.add(_summary(done.stdout))
        for label, argv in (("reference", run), (name, rust)):
            subprocess.run([*argv, "--json", str(report)], env=env, capture_output=True, check=True)
            own[label].append(float(json.loads(report.read_text())["seconds"]))

    floor = series[0].median
    width = max(len(s.label) for s in series)
    print(f"\n  {'series':{width}s}   median      min   vs import kvconform")
    for s in series:
        print(
            f"  {s.label:{width}s} {s.median * 1e3:7.0f} ms {min(s.samples) * 1e3:6.0f} ms"
            f"   {s.median / floor:5.2f}x"
        )
    print("\n  verdicts:")
    for s in series:
        for line in sorted(s.summaries):
            print(f"    {s.label}: {line}")
    print("\n  target: a warm run within 2x of (import kvconform + the cases' own time)")
    for label, s in ((name, series[3]), ("reference", series[5])):
        cases = statistics.median(own[label])
        bound = floor + cases
        ratio = s.median / bound
        print(
            f"    {label}: cases' own time {cases * 1e3:.0f} ms; run {s.median * 1e3:.0f} ms / "
            f"({floor * 1e3:.0f} + {cases * 1e3:.0f} ms) = {ratio:.2f}x "
            f"({'met' if ratio <= 2 else 'NOT met'})"
        )
    cold, warm = series[2].median, series[3].median
    print(f"    cold / warm cache: {cold / warm:.2f}x ({(cold - warm) * 1e3:.0f} ms of loading)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
