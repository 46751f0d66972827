"""One stdio round trip through ``StdioDriver`` against a raw line echo, side by side.

    python bench/roundtrip_bench.py \
        --adapter-cmd examples/rust-adapter/target/release/kvconform-rust-adapter

Series, sampled in interleaved rounds after a warm-up so that a change of machine
load affects every series alike:

(a) ``raw echo``: a Python subprocess doing readline/write/flush (the echo of
    ``protocol_bench.py``), fed the request bytes of a ``hash`` request and read
    with ``readline``: what a line round trip over a pipe costs at all.
(b) the adapter through ``StdioDriver``: ``call`` of a two-step ``hash`` (the same
    operation object every time, so its request bytes are encoded once, and its
    answer, judged once, is remembered by its bytes), the same with the memo of
    judged answers emptied before each call (an answer never seen before), the same
    with a new, equal operation object every call (encoded every time), ``call`` of a
    new ``cache_len`` every time, and ``run`` of a one-operation program (two round
    trips, the program's request and its ``reset``, pipelined).
(c) ``adapter floor``: the same adapter process driven by hand like the echo
    (pre-encoded request bytes, ``readline``, no decoding): the echo plus the
    adapter's own work, the floor for (b).
(d) ``suite mix``: the round trips of a whole ``kvconform run`` against this adapter,
    one at a time: every operation of every applicable scenario in order, each case
    ended by its ``reset``, through ``StdioDriver.call`` (``run([])`` for the reset),
    beside the raw echo of the same request lines in the same order. At the start of
    each pass over the suite the driver forgets the requests it encoded and the codec
    the answers it judged, as a fresh run would: the mix of remembered, new and fully
    decoded answers is a real run's. Compared by mean (the operations differ), not
    median. Beside them, the ``least harness``: the same adapter driven by hand (the
    pre-encoded lines, ``readline``) that also decodes each answer with the standard
    library's ``json.loads`` and judges nothing: the least a Python harness that reads
    its answers does, under any driver.
(e) ``suite as run``: the same cases as ``kvconform run`` sends them, each case's
    program and its ``reset`` written at once (``StdioDriver.run``), beside the echo
    and the adapter by hand fed the same batches; a sample is a case, and the figure
    is the time per line, by mean, over the same cases in every series. Pipelining
    helps the echo as much as the driver, so the echo of the same batches is the
    fair baseline; the time per line is also set beside one raw echo round trip,
    for scale only.

Each series's median round trip, and its ratio to the raw echo, are given twice:
over all samples, and as the median of the per-round ratios (the steadier figure
on a loaded machine). The CPU columns split a round trip between the harness
process (``time.process_time``) and the child (``/proc/<pid>/schedstat``, Linux).

``--cpu N`` runs everything on CPU N (Linux): every round trip is then a switch
between two processes on one CPU, which takes away the run-to-run lottery of where
the scheduler puts each process (on a loaded machine a round trip across CPUs can
cost several times one on the same CPU, for the echo as for the adapter).

Prints; asserts nothing. Target (issue 13): one operation's round trip, (b) ``hash
(call)``, within 1.5x of the raw echo. The suite mix (d) is shown, not a target: by
mean it weighs the adapter's own work (a few heavy operations take a millisecond in the
adapter) and the decoding of every answer, and the least harness alone already measures
close to 1.5x there or above it (1.46-1.62x in this bench's interleaved rounds, 1.74-1.79x
over whole passes, 2026-12-02): meeting 1.5x by mean would leave a Python harness on
the standard library's decoder (the fallback the issue requires) no time to judge an
answer. ``the driver / the least harness`` is the figure that says what the driver's
judging costs.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from protocol_bench import ECHO, TINY_HASH  # the same echo and program, side by side

from kvconform.protocol import codec
from kvconform.protocol import operations as ops
from kvconform.protocol.client import AdapterStartError, StdioDriver
from kvconform.protocol.codec import lines as codec_lines
from kvconform.values import Geometry, Ok

#: Empties the memo of answers already judged (codec_lines._EXACT_MEMO) for the series that
#: shows what a round trip costs when its answer was never seen before.
FORGET = codec_lines._EXACT_MEMO["u64_list"].clear

GEOMETRY = Geometry(n_layers=2, n_kv_heads=2, head_dim=4, max_seq_len=16)


def _child_cpu(pid: int | None) -> float | None:
    """CPU seconds used so far by process ``pid`` (Linux; None elsewhere)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/schedstat", encoding="ascii") as stat:
            return int(stat.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Series:
    """One series: its action, the process answering it, and what was measured."""

    name: str
    action: Callable[[], object]
    pid: int | None
    trips_per_call: int = 1
    #: For a series whose samples are whole cases: the lines of each case, in the order
    #: the samples cycle through them (warm-up included).
    case_lines: list[int] | None = None
    samples: list[float] = field(default_factory=list)
    per_round: list[float] = field(default_factory=list)
    harness_cpu: float = 0.0
    child_cpu: float | None = 0.0

    def sample(self, n: int) -> None:
        clock = time.perf_counter
        action = self.action
        child_before = _child_cpu(self.pid)
        cpu_before = time.process_time()
        this_round = []
        for _ in range(n):
            start = clock()
            action()
            this_round.append(clock() - start)
        self.harness_cpu += time.process_time() - cpu_before
        child_after = _child_cpu(self.pid)
        if child_before is None or child_after is None or self.child_cpu is None:
            self.child_cpu = None
        else:
            self.child_cpu += child_after - child_before
        self.samples += this_round
        self.per_round.append(statistics.median(this_round))


class _RawLines:
    """A process driven by hand: write pre-encoded bytes, ``readline`` the answer."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.reader = os.fdopen(self.proc.stdout.fileno(), "rb", closefd=False)
        self.write = self.proc.stdin.write
        self.readline = self.reader.readline

    def round_trip(self, line: bytes) -> Callable[[], bytes]:
        write, readline = self.write, self.readline

        def once() -> bytes:
            write(line)
            return readline()

        return once

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.reader.close()


def _forget(driver: StdioDriver) -> None:
    """At the start of a pass over the suite: nothing encoded or judged is remembered,
    as in a fresh run."""
    driver._tails.clear()
    driver._named_tails.clear()
    for memo in codec_lines._EXACT_MEMO.values():
        memo.clear()


def _suite_mix(driver: StdioDriver) -> list[ops.Op | None]:
    """Every operation of every scenario that applies to the adapter, in run order, each
    case's followed by ``None`` for its ``reset`` (what ``kvconform run`` sends)."""
    from kvconform.harness import suite
    from kvconform.harness.declarations import adapt
    from kvconform.harness.runner import not_applicable

    steps: list[ops.Op | None] = []
    for case in suite.all_cases():
        if not_applicable(case, driver.info) is None:
            steps += [*adapt(case, driver.info).program, None]
    return steps


def _mix_actions(
    driver: StdioDriver,
    echo: _RawLines,
    floor: _RawLines,
    least: _RawLines,
    steps: list[ops.Op | None],
) -> tuple[Callable[[], object], ...]:
    """The next round trip of the suite mix through the driver, to the echo, to the
    adapter by hand (its floor), and to the adapter by the least harness, each in the
    same order."""
    lines = []
    for seq, op in enumerate(steps, 1):
        wire = {"op": "reset"} if op is None else codec.to_wire(op)
        lines.append(codec.encode_line(seq, wire))
    on_adapter = itertools.cycle(steps)
    on_echo = itertools.cycle(lines)
    on_floor = itertools.cycle(lines)
    on_least = itertools.cycle(lines)
    done = [0]
    write, readline = echo.write, echo.readline
    floor_write, floor_readline = floor.write, floor.readline
    least_write, least_readline, loads = least.write, least.readline, json.loads

    def adapter_once() -> object:
        if done[0] % len(steps) == 0:
            _forget(driver)
        done[0] += 1
        op = next(on_adapter)
        return driver.run([]) if op is None else driver.call(op)

    def echo_once() -> bytes:
        write(next(on_echo))
        return readline()

    def floor_once() -> bytes:
        floor_write(next(on_floor))
        return floor_readline()

    def least_once() -> object:
        least_write(next(on_least))
        return loads(least_readline())

    return adapter_once, echo_once, floor_once, least_once


def _case_actions(
    driver: StdioDriver, echo: _RawLines, floor: _RawLines
) -> tuple[Callable[[], object], Callable[[], object], Callable[[], object], list[int]]:
    """The next case of the suite as ``kvconform run`` sends it (its program and its
    ``reset`` pipelined, through ``StdioDriver.run``), and the same lines written at
    once to the echo and to the adapter by hand, each answer read with ``readline``;
    and the number of lines of each case."""
    from kvconform.harness import suite
    from kvconform.harness.declarations import adapt
    from kvconform.harness.runner import not_applicable

    programs = [
        adapt(case, driver.info).program
        for case in suite.all_cases()
        if not_applicable(case, driver.info) is None
    ]
    batches, sizes, seq = [], [], 1
    for program in programs:
        wires = [*(codec.to_wire(op) for op in program), {"op": "reset"}]
        batches.append(b"".join(codec.encode_line(seq + i, w) for i, w in enumerate(wires)))
        sizes.append(len(wires))
        seq += len(wires)
    on_adapter = itertools.cycle(programs)
    done = [0]

    def adapter_once() -> object:
        if done[0] % len(programs) == 0:
            _forget(driver)
        done[0] += 1
        return driver.run(next(on_adapter))

    def by_hand(raw: _RawLines) -> Callable[[], object]:
        cases = itertools.cycle(zip(batches, sizes, strict=True))
        write, readline = raw.write, raw.readline

        def once() -> object:
            batch, size = next(cases)
            write(batch)
            for _ in range(size):
                readline()
            return None

        return once

    return adapter_once, by_hand(echo), by_hand(floor), sizes


def measure(adapter_cmd: list[str], rounds: int, per_round: int, warmup: int) -> list[Series]:
    line = codec.encode_line(12, codec.to_wire(TINY_HASH))
    echo = _RawLines(ECHO)
    mix_echo = _RawLines(ECHO)
    floor = _RawLines(adapter_cmd)
    mix_floor = _RawLines(adapter_cmd)
    mix_least = _RawLines(adapter_cmd)
    driver = StdioDriver(adapter_cmd)
    mix_driver = StdioDriver(adapter_cmd)
    drivers = [driver, mix_driver]
    extra: list[_RawLines] = []
    try:
        hello = floor.round_trip(codec.encode_line(0, codec.hello_request()))()
        if b'"ok"' not in hello:
            raise AdapterStartError(f"the adapter refused hello: {hello!r}")
        answer = floor.round_trip(line)()
        if b'"ok"' not in answer:
            raise AdapterStartError(f"the adapter did not answer hash: {answer!r}")
        name = os.path.basename(adapter_cmd[0])
        # More distinct (equal) operations than a driver keeps encoded: each call encodes.
        fresh = itertools.cycle([ops.Hash(TINY_HASH.program) for _ in range(5000)])
        series = [
            Series("raw echo", echo.round_trip(line), echo.proc.pid),
            Series(f"{name} floor: hash (by hand)", floor.round_trip(line), floor.proc.pid),
            Series(f"{name}: hash (call)", lambda: driver.call(TINY_HASH), driver.pid),
            Series(
                f"{name}: hash (call, answer not remembered)",
                lambda: (FORGET(), driver.call(TINY_HASH)),
                driver.pid,
            ),
            Series(
                f"{name}: hash (call, new op each time)",
                lambda: driver.call(next(fresh)),
                driver.pid,
            ),
            Series(f"{name}: cache_len (call)", lambda: driver.call(ops.CacheLen("c")), driver.pid),
            Series(
                f"{name}: 1-op program + reset (run)",
                lambda: driver.run([TINY_HASH]),
                driver.pid,
                trips_per_call=2,
            ),
        ]
        steps = _suite_mix(mix_driver)
        for raw in (mix_floor, mix_least):
            hello = raw.round_trip(codec.encode_line(0, codec.hello_request()))()
            if b'"ok"' not in hello:
                raise AdapterStartError(f"the adapter refused hello: {hello!r}")
        on_adapter, on_echo, on_floor, on_least = _mix_actions(
            mix_driver, mix_echo, mix_floor, mix_least, steps
        )
        series += [
            Series(f"raw echo: suite mix ({len(steps)} lines)", on_echo, mix_echo.proc.pid),
            Series(f"{name} floor: suite mix (by hand)", on_floor, mix_floor.proc.pid),
            Series(f"{name}: suite mix (least harness)", on_least, mix_least.proc.pid),
            Series(f"{name}: suite mix (call)", on_adapter, mix_driver.pid),
        ]

        case_echo = _RawLines(ECHO)
        case_floor = _RawLines(adapter_cmd)
        case_driver = StdioDriver(adapter_cmd)
        extra += [case_echo, case_floor]
        drivers.append(case_driver)
        hello = case_floor.round_trip(codec.encode_line(0, codec.hello_request()))()
        if b'"ok"' not in hello:
            raise AdapterStartError(f"the adapter refused hello: {hello!r}")
        on_case, on_case_echo, on_case_floor, sizes = _case_actions(
            case_driver, case_echo, case_floor
        )
        gc.freeze()  # as kvconform run does once the suite is loaded (cli.cmd_run)
        series += [
            Series(
                f"raw echo: suite as run ({len(sizes)} cases)",
                on_case_echo,
                case_echo.proc.pid,
                case_lines=sizes,
            ),
            Series(
                f"{name} floor: suite as run (by hand)",
                on_case_floor,
                case_floor.proc.pid,
                case_lines=sizes,
            ),
            Series(f"{name}: suite as run (run)", on_case, case_driver.pid, case_lines=sizes),
        ]

        def fresh_cache() -> None:  # run() ends with reset, which drops "c"
            driver.call(ops.Drop("c"))
            if not isinstance(driver.call(ops.CacheNew("c", GEOMETRY)), Ok):
                raise AdapterStartError("the adapter did not create a cache")

        fresh_cache()
        for one in series:  # warm up
            for _ in range(warmup):
                one.action()
        for one in series:
            one.samples.clear()
        for _ in range(rounds):
            for one in series:
                if "cache_len" in one.name:
                    fresh_cache()
                one.sample(per_round)
        for used in drivers:
            if used.restarts or used.incidents:
                raise AdapterStartError(f"the adapter misbehaved: {used.incidents}")
        check = driver.call(TINY_HASH)
        if not isinstance(check, Ok):
            raise AdapterStartError(f"the adapter answered hash with {check}")
    finally:
        for used in drivers:
            used.close()
        for raw in extra:
            raw.close()
        echo.close()
        mix_echo.close()
        floor.close()
        mix_floor.close()
        mix_least.close()
    return series


def report(all_series: list[Series], rounds: int, per_round: int, warmup: int) -> None:
    series = [one for one in all_series if one.case_lines is None]
    as_run = [one for one in all_series if one.case_lines is not None]
    echo = series[0]
    echo_median = statistics.median(echo.samples)
    n = rounds * per_round
    width = max(len(s.name) for s in series)
    print(
        f"  {'':{width}s}   median  vs echo  (per-round ratio, median)  "
        "CPU per call: harness   child"
    )
    for one in series:
        median = statistics.median(one.samples)
        ratios = [mine / theirs for mine, theirs in zip(one.per_round, echo.per_round, strict=True)]
        child = "n/a" if one.child_cpu is None else f"{one.child_cpu / n * 1e6:.1f} us"
        print(
            f"  {one.name:{width}s} {median * 1e6:6.1f} us  {median / echo_median:5.2f}x"
            f"  ({statistics.median(ratios):5.2f}x, {min(ratios):.2f}-{max(ratios):.2f}x)"
            f"  {one.harness_cpu / n * 1e6:18.1f} us {child:>8s}"
        )
    floor, call = series[1], series[2]
    floor_ratio = statistics.median(floor.per_round) / statistics.median(echo.per_round)
    call_ratio = statistics.median(
        [c / e for c, e in zip(call.per_round, echo.per_round, strict=True)]
    )
    over_floor = statistics.median(call.samples) - statistics.median(floor.samples)
    print(
        f"\n  floor (the adapter's own work + echo) / echo: {floor_ratio:.2f}x;"
        f" {call.name} costs {over_floor * 1e6:.1f} us over the floor"
    )
    print(
        f"  target: {call.name} <= 1.5x raw echo: {call_ratio:.2f}x "
        f"({'met' if call_ratio <= 1.5 else 'NOT met'})"
    )
    mix_echo, mix_floor, mix_least, mix = series[-4:]
    width = max(len(s.name) for s in all_series)

    def by_mean(mine: Series, theirs: Series) -> str:
        per = [
            statistics.fmean(a) / statistics.fmean(b)
            for a, b in zip(_rounds(mine, per_round), _rounds(theirs, per_round), strict=True)
        ]
        ratio = statistics.fmean(mine.samples) / statistics.fmean(theirs.samples)
        spread = f"{min(per):.2f}-{max(per):.2f}x"
        return f"{ratio:.2f}x (per round {statistics.median(per):.2f}x, {spread})"

    print(
        f"  suite mix, by mean: the adapter's floor / echo {by_mean(mix_floor, mix_echo)};"
        f" the least harness / echo {by_mean(mix_least, mix_echo)}"
    )
    print(
        f"  suite mix, by mean: the driver / echo {by_mean(mix, mix_echo)};"
        f" the driver / the least harness {by_mean(mix, mix_least)}"
        " (not a target: see the docstring)"
    )

    # The suite as run: samples are whole cases, the same cases in every series.
    def per_line(one: Series) -> float:
        assert one.case_lines is not None
        sizes = one.case_lines
        lines = sum(sizes[(warmup + k) % len(sizes)] for k in range(len(one.samples)))
        return sum(one.samples) / lines

    run_echo, run_floor, run = as_run
    print(
        f"\n  {run.name}: every case's program and reset written at once, as kvconform run"
        " does; per line, by mean:"
    )
    for one in as_run:
        print(
            f"    {one.name:{width - 2}s} {per_line(one) * 1e6:6.1f} us"
            f"  {per_line(one) / per_line(run_echo):5.2f}x the echo of the same batches"
        )
    print(
        f"  the adapter's floor / echo {by_mean(run_floor, run_echo)};"
        f" the driver / the adapter's floor {by_mean(run, run_floor)}"
    )
    print(
        f"  a line of a run costs {per_line(run) * 1e6:.1f} us, against"
        f" {echo_median * 1e6:.1f} us for one raw echo round trip"
        f" ({per_line(run) / echo_median:.2f}x; not a target: pipelining helps the echo too)"
    )


def _rounds(one: Series, per_round: int) -> list[list[float]]:
    return [one.samples[i : i + per_round] for i in range(0, len(one.samples), per_round)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapter-cmd", required=True, help="the adapter process to measure")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument(
        "--per-round", type=int, default=400, help="round trips per round (default 400)"
    )
    parser.add_argument(
        "--warmup", type=int, default=500, help="warm-up calls per series (default 500)"
    )
    parser.add_argument(
        "--cpu", type=int, default=None, help="run the bench and its processes on this CPU"
    )
    args = parser.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})  # the processes started later inherit it
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    client = sys.modules[StdioDriver.__module__].__file__
    print(
        f"kvconform round-trip bench: Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {load:.2f}\n  driver: {client}\n"
        f"  {args.rounds} rounds x {args.per_round} samples per series, "
        f"{args.warmup} warm-up calls each"
        f"{'' if args.cpu is None else f', everything on CPU {args.cpu}'}\n"
    )
    try:
        series = measure(shlex.split(args.adapter_cmd), args.rounds, args.per_round, args.warmup)
    except AdapterStartError as exc:
        print(f"roundtrip_bench: {exc}", file=sys.stderr)
        return 3
    report(series, args.rounds, args.per_round, args.warmup)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
