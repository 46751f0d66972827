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
    stdio, for the reference and for any ``--adapter-cmd``.

Prints times and ratios; asserts nothing. Targets: suite over stdio within 2x
of in process, one operation within 1.5x of the raw echo.
"""

from __future__ import annotations

import argparse
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
from dataclasses import dataclass

from kvconform.adapters import DEFAULT_ADAPTER, load_adapter
from kvconform.harness import suite
from kvconform.harness.runner import CaseResult, run_cases
from kvconform.protocol import operations as ops
from kvconform.protocol.client import AdapterStartError, StdioDriver, encode_line
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


@dataclass(frozen=True)
class SuiteTime:
    label: str
    seconds: float
    start_seconds: float
    verdicts: Counter[str]
    same_as_reference: bool | None


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
    line = encode_line(12, ops.to_wire(TINY_HASH))
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
        actions[f"{label}: hash (call)"] = (lambda d=driver: d.call(TINY_HASH), pid)
        actions[f"{label}: cache_len (call)"] = (lambda d=driver: d.call(ops.CacheLen("c")), pid)
        actions[f"{label}: 1-op program + reset (run)"] = (lambda d=driver: d.run([TINY_HASH]), pid)
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


def time_suite(label: str, make: Callable[[], Driver], reference: list[CaseResult] | None,
               freeze: bool = False) -> tuple[SuiteTime, list[CaseResult]]:  # fmt: skip
    cases = suite.all_cases()
    start = time.perf_counter()
    driver = make()
    started = time.perf_counter()
    if freeze:
        gc.freeze()
    try:
        results = run_cases(cases, driver)
    finally:
        if freeze:
            gc.unfreeze()
        driver.close()
    seconds = time.perf_counter() - started
    same = None
    if reference is not None:
        same = [r.verdict for r in results] == [r.verdict for r in reference]
    verdicts = Counter(r.verdict for r in results)
    return SuiteTime(label, seconds, started - start, verdicts, same), results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter-cmd", help="another adapter process to measure as well")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    parser.add_argument(
        "--per-round", type=int, default=300, help="round trips per round (default 300)"
    )
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
    print(f"\n(b) whole suite: {len(cases)} cases")
    reference_adapter = load_adapter(DEFAULT_ADAPTER)
    frozen, reference = time_suite(
        "in process, gc frozen", lambda: InProcessDriver(reference_adapter), None, freeze=True
    )
    rows = [frozen]
    if not args.skip_shipped:
        shipped, _ = time_suite(
            "in process (as shipped)", lambda: InProcessDriver(reference_adapter), reference
        )
        rows.append(shipped)
    stdio_ref, _ = time_suite("over stdio: reference server", lambda: StdioDriver(SERVE), reference)
    rows.append(stdio_ref)
    if adapter_cmd:
        other, _ = time_suite(
            f"over stdio: {os.path.basename(adapter_cmd[0])}",
            lambda: StdioDriver(adapter_cmd),
            reference,
        )
        rows.append(other)
    for row in rows:
        verdicts = ", ".join(f"{n} {v}" for v, n in sorted(row.verdicts.items()))
        same = "" if row.same_as_reference is None else (
            "; verdicts = reference" if row.same_as_reference else "; VERDICTS DIFFER"
        )  # fmt: skip
        startup = f" (+{row.start_seconds:.2f} s start)" if row.label.startswith("over") else ""
        print(f"  {row.label:45s} {row.seconds:7.2f} s{startup}  [{verdicts}{same}]")

    print("\nratios")
    for row in rows:
        if row.label.startswith("over stdio"):
            print(f"  {row.label} / in process, gc frozen: {row.seconds / frozen.seconds:.2f}")
            if not args.skip_shipped:
                print(
                    f"  {row.label} / in process (as shipped): {row.seconds / shipped.seconds:.2f}"
                )
    op_ratio = trips["reference: hash (call)"].median_us / echo
    suite_ratio = stdio_ref.seconds / frozen.seconds
    print(
        f"\ntargets: suite over stdio <= 2x in process: {suite_ratio:.2f}x "
        f"({'met' if suite_ratio <= 2 else 'NOT met'}, against the gc-frozen in-process run); "
        f"one op <= 1.5x raw echo: {op_ratio:.2f}x ({'met' if op_ratio <= 1.5 else 'NOT met'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
