"""How much the stdio protocol costs, measured side by side in one run.

    python bench/protocol_bench.py
    python bench/protocol_bench.py \
        --adapter-cmd examples/rust-adapter/target/release/kvconform-rust-adapter

(a) One operation: the median round trip of one request through the protocol
    (``StdioDriver.call`` against ``python -m kvconform.serve``) against a raw
    line echo over the same kind of pipe (a Python subprocess doing
    readline/write/flush). Samples of the two are interleaved in rounds, so a
    change of machine load affects both alike.
(b) The whole suite: wall time in process (``InProcessDriver``) against over
    stdio, for the reference and for any ``--adapter-cmd``. Every series is run
    once untimed first (imports, first-use set-up, the adapter binary in the page
    cache), then ``--repeat`` times in interleaved rounds; medians are compared.
    Timing the first in-process run would charge the in-process side with the
    warm-up and flatter the stdio ratio.

Prints times and ratios; asserts nothing. Targets: suite over stdio within 2x
of in process, one operation within 1.5x of the raw echo.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from kvconform.adapters import DEFAULT_ADAPTER, load_adapter
from kvconform.harness import suite
from kvconform.harness.runner import CaseResult, run_cases
from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.protocol.client import AdapterStartError, StdioDriver
from kvconform.protocol.codec import encode_line, to_wire
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.values import Geometry, MixOp, Ok

SERVE = [sys.executable, "-m", "kvconform.serve"]
ECHO = [
    sys.executable,
    "-c",
    "import sys\n"
    "r, w = sys.stdin.buffer, sys.stdout.buffer\n"
    "for line in r:\n"
    "    w.write(line)\n"
    "    w.flush()\n",
]
TINY_HASH = ops.Hash((MixOp("u64", 7), MixOp("finish")))


@dataclass
class SuiteSeries:
    """Whole-suite runs of one driver: run and start-up seconds of each timed repetition."""

    label: str
    make: Callable[[], Driver]
    freeze: bool = False
    seconds: list[float] = field(default_factory=list)
    start_seconds: list[float] = field(default_factory=list)
    verdicts: Counter[str] = field(default_factory=Counter)
    same_as_reference: bool = True

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def _median_us(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1e6


def _time_each(action: Callable[[], object], n: int, into: list[float]) -> None:
    clock = time.perf_counter
    for _ in range(n):
        start = clock()
        action()
        into.append(clock() - start)


@dataclass(frozen=True)
class RoundTrip:
    """One series of round trips: median wall time, and CPU per round trip on each side."""

    median_us: float
    harness_cpu_us: float
    child_cpu_us: float | None


def _child_cpu(pid: int) -> float | None:
    """CPU seconds used so far by process ``pid``, to the nanosecond (Linux; None elsewhere)."""
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
            return int(stat.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def one_operation(
    rounds: int, per_round: int, adapter_cmd: list[str] | None
) -> dict[str, RoundTrip]:
    """Round trips of each series, sampled in interleaved rounds."""
    echo = subprocess.Popen(ECHO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert echo.stdin is not None and echo.stdout is not None
    reader = os.fdopen(echo.stdout.fileno(), "rb", closefd=False)
    line = encode_line(12, to_wire(TINY_HASH))
    write, readline = echo.stdin.write, reader.readline

    def echo_once() -> None:
        write(line)
        readline()

    drivers = {"reference": StdioDriver(SERVE)}
    if adapter_cmd:
        drivers[os.path.basename(adapter_cmd[0])] = StdioDriver(adapter_cmd)
    geometry = Geometry(n_layers=2, n_kv_heads=2, head_dim=4, max_seq_len=16)
    actions: dict[str, tuple[Callable[[], object], int | None]] = {
        "raw echo": (echo_once, echo.pid)
    }
    for label, driver in drivers.items():
        pid = driver.pid
        actions[f"{label}: hash (call)"] = (functools.partial(driver.call, TINY_HASH), pid)
        actions[f"{label}: cache_len (call)"] = (
            functools.partial(driver.call, ops.CacheLen("c")),
            pid,
        )
        actions[f"{label}: 1-op program + reset (run)"] = (
            functools.partial(driver.run, [TINY_HASH]),
            pid,
        )
    samples: dict[str, list[float]] = {name: [] for name in actions}
    harness_cpu: dict[str, float] = dict.fromkeys(actions, 0.0)
    child_cpu: dict[str, float | None] = dict.fromkeys(actions, 0.0)

    def fresh_cache() -> None:  # run() ends with reset, which drops "c"
        for driver in drivers.values():
            driver.call(ops.Drop("c"))
            assert isinstance(driver.call(ops.CacheNew("c", geometry)), Ok)

    try:
        for action, _ in actions.values():  # warm up
            _time_each(action, 200, [])
        for _ in range(rounds):
            # run() first: it resets, and cache_len needs the cache.
            for name in sorted(actions, key=lambda n: not n.endswith("(run)")):
                if name.endswith("cache_len (call)"):
                    fresh_cache()
                action, pid = actions[name]
                child_before = None if pid is None else _child_cpu(pid)
                cpu_before = time.process_time()
                _time_each(action, per_round, samples[name])
                harness_cpu[name] += time.process_time() - cpu_before
                child_after = None if pid is None else _child_cpu(pid)
                if child_before is None or child_after is None or child_cpu[name] is None:
                    child_cpu[name] = None
                else:
                    child_cpu[name] = child_cpu[name] + child_after - child_before  # type: ignore[operator]
    finally:
        for driver in drivers.values():
            driver.close()
        echo.kill()
        echo.wait()
    n = rounds * per_round
    return {
        name: RoundTrip(
            _median_us(samples[name]),
            harness_cpu[name] / n * 1e6,
            None if child_cpu[name] is None else child_cpu[name] / n * 1e6,  # type: ignore[operator]
        )
        for name in actions
    }


def run_suite(series: SuiteSeries, cases: Sequence[Case]) -> tuple[float, float, list[CaseResult]]:
    """One whole-suite run: its seconds, the driver's start-up seconds, the results."""
    start = time.perf_counter()
    driver = series.make()
    started = time.perf_counter()
    if series.freeze:
        gc.freeze()
    try:
        results = run_cases(cases, driver)
    finally:
        if series.freeze:
            gc.unfreeze()
        driver.close()
    return time.perf_counter() - started, started - start, results


def time_suites(series: Sequence[SuiteSeries], cases: Sequence[Case], repeat: int) -> None:
    """Warm every series up (one untimed run), then time ``repeat`` interleaved rounds.

    The verdicts of every run are compared with the first series' warm-up run.
    """
    reference: list[str] | None = None
    for s in series:
        _, _, results = run_suite(s, cases)
        verdicts: list[str] = [r.verdict for r in results]
        reference = verdicts if reference is None else reference
        s.same_as_reference = verdicts == reference
        s.verdicts = Counter[str](verdicts)
    for _ in range(repeat):
        for s in series:
            seconds, start_seconds, results = run_suite(s, cases)
            s.seconds.append(seconds)
            s.start_seconds.append(start_seconds)
            s.same_as_reference &= [r.verdict for r in results] == reference


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter-cmd", help="another adapter process to measure as well")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument(
        "--per-round", type=int, default=300, help="round trips per round (default 300)"
    )
    parser.add_argument(
        "--repeat", type=int, default=5,
        help="timed whole-suite runs of each series, after one untimed (default 5)",
    )  # fmt: skip
    parser.add_argument(
        "--skip-shipped", action="store_true",
        help="skip the in-process run as shipped (slow: it collects garbage after every drop)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    adapter_cmd = shlex.split(args.adapter_cmd) if args.adapter_cmd else None
    try:
        return _bench(args, adapter_cmd)
    except AdapterStartError as exc:
        print(f"protocol_bench: an adapter could not start: {exc}", file=sys.stderr)
        return 3


def _bench(args: argparse.Namespace, adapter_cmd: list[str] | None) -> int:

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(
        f"kvconform protocol bench: Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f}"
        if load
        else ""
    )
    cases = suite.all_cases()

    print(f"\n(a) one operation: median round trip, {args.rounds} x {args.per_round} samples")
    trips = one_operation(args.rounds, args.per_round, adapter_cmd)
    echo = trips["raw echo"].median_us
    width = max(len(name) for name in trips)
    print(f"  {'':{width}s}   median    ratio   CPU per round trip: harness    adapter")
    for name, trip in trips.items():
        child = "n/a" if trip.child_cpu_us is None else f"{trip.child_cpu_us:.1f} us"
        print(
            f"  {name:{width}s} {trip.median_us:6.1f} us  {trip.median_us / echo:5.2f}x  "
            f"{trip.harness_cpu_us:28.1f} us {child:>10s}"
        )
    print(
        f"\n(b) whole suite: {len(cases)} cases; each series warmed up once, then "
        f"{args.repeat} timed runs in interleaved rounds (median, min)"
    )
    reference_adapter = load_adapter(DEFAULT_ADAPTER)
    frozen = SuiteSeries(
        "in process, gc frozen", lambda: InProcessDriver(reference_adapter), freeze=True
    )
    rows = [frozen]
    shipped = SuiteSeries("in process (as shipped)", lambda: InProcessDriver(reference_adapter))
    if not args.skip_shipped:
        rows.append(shipped)
    stdio_ref = SuiteSeries("over stdio: reference server", lambda: StdioDriver(SERVE))
    rows.append(stdio_ref)
    if adapter_cmd:
        command = adapter_cmd
        rows.append(
            SuiteSeries(f"over stdio: {os.path.basename(command[0])}", lambda: StdioDriver(command))
        )
    time_suites(rows, cases, args.repeat)
    for row in rows:
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(row.verdicts.items()))
        same = "" if row is frozen else (
            "; verdicts = reference" if row.same_as_reference else "; VERDICTS DIFFER"
        )  # fmt: skip
        startup = (
            f" (+{statistics.median(row.start_seconds):.2f} s start)"
            if row.label.startswith("over")
            else ""
        )
        print(
            f"  {row.label:45s} {row.median:7.3f} s {min(row.seconds):7.3f} s{startup}  "
            f"[{verdicts}{same}]"
        )

    print("\nratios of medians")
    for row in rows:
        if row.label.startswith("over stdio"):
            print(f"  {row.label} / in process, gc frozen: {row.median / frozen.median:.2f}")
            if not args.skip_shipped:
                print(f"  {row.label} / in process (as shipped): {row.median / shipped.median:.2f}")
    op_ratio = trips["reference: hash (call)"].median_us / echo
    suite_ratio = stdio_ref.median / frozen.median
    print(
        f"\ntargets: suite over stdio <= 2x in process: {suite_ratio:.2f}x "
        f"({'met' if suite_ratio <= 2 else 'NOT met'}, against the gc-frozen in-process run); "
        f"one op <= 1.5x raw echo: {op_ratio:.2f}x ({'met' if op_ratio <= 1.5 else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
