"""What the generated checks cost, per property and per program, side by side in one run.

    python bench/generated_bench.py                  # N=200, the suite version's seed
    python bench/generated_bench.py --hypothesis     # also through Hypothesis, for comparison
    python bench/generated_bench.py --adapter-cmd "python -m kvconform.serve"

For each generated property it runs ``--examples`` programs (``run_property``, as
``kvconform run --generated N`` does) against the reference in process, or against
``--adapter-cmd`` over stdio, and prints the wall time, the time per program, and
how that splits between writing the programs (the program writers alone, timed
separately) and running and judging them on both sides. The hand-written suite
is timed in process on the same driver kind as a yardstick, so the last column is
comparable across machines: the generated checks' time as a multiple of the suite's.

``--hypothesis`` also runs every property through Hypothesis (the same writers
drawing every choice from Hypothesis, as a property without a ``writer`` runs):
the way the generated checks were written before they wrote their own programs.

Each series is run ``--repeat`` times and the fastest is shown. Prints times and
ratios; asserts nothing (the project's tests assert no timing).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential.engine import (
    DEFAULT_SEED,
    PROPERTIES,
    Property,
    program_source,
    reference_driver,
    run_property,
)
from kvconform.harness import suite
from kvconform.harness.runner import run_cases
from kvconform.protocol.driver import Driver, InProcessDriver


@dataclass(frozen=True)
class Row:
    label: str
    verdict: str
    seconds: float
    runs: int
    write_seconds: float | None


def _best(times: Sequence[float]) -> float:
    return min(times)


def time_suite(make: Callable[[], Driver], repeat: int) -> float:
    cases = suite.all_cases()
    times = []
    for _ in range(repeat):
        driver = make()
        try:
            start = time.perf_counter()
            run_cases(cases, driver)
            times.append(time.perf_counter() - start)
        finally:
            driver.close()
    return _best(times)


def time_writing(prop: Property, driver: Driver, examples: int, seed: int, repeat: int) -> float:
    """The program writer alone: ``examples`` programs written, none run."""
    assert prop.writer is not None
    write = prop.writer(driver.info)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for index in range(examples):
            write(program_source(seed, prop.id, index))
        times.append(time.perf_counter() - start)
    return _best(times)


def time_property(
    prop: Property, driver: Driver, examples: int, seed: int, repeat: int, label: str
) -> Row:
    reference = reference_driver()
    best: Row | None = None
    for _ in range(repeat):
        result = run_property(prop, driver, examples=examples, seed=seed, reference=reference)
        row = Row(label, result.verdict, result.seconds, result.runs, None)
        if best is None or row.seconds < best.seconds:
            best = row
    assert best is not None
    if prop.writer is not None:
        best = dataclasses.replace(
            best, write_seconds=time_writing(prop, driver, examples, seed, repeat)
        )
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=200, metavar="N")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, metavar="S")
    parser.add_argument("--repeat", type=int, default=3, metavar="R")
    parser.add_argument(
        "--hypothesis", action="store_true", help="also run each property through Hypothesis"
    )
    parser.add_argument(
        "--adapter-cmd", default=None, metavar="COMMAND", help="an adapter over stdio"
    )
    args = parser.parse_args(argv)

    def make() -> Driver:
        if args.adapter_cmd:
            from kvconform.protocol.client import StdioDriver

            return StdioDriver(shlex.split(args.adapter_cmd))
        return InProcessDriver(ReferenceAdapter())

    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(
        f"Python {platform.python_version()}, {os.cpu_count()} CPU(s)"
        + (f", load average {load[0]:.1f}" if load else "")
        + f"; {args.examples} programs per property, seed {args.seed}, best of {args.repeat}"
    )
    print(f"driver: {args.adapter_cmd or 'the reference, in process'}")
    suite_seconds = time_suite(make, args.repeat)
    print(f"yardstick: the hand-written suite, {suite_seconds:.2f} s\n")

    rows: list[Row] = []
    driver = make()
    try:
        for prop in PROPERTIES:
            series = [(prop, "written")]
            if args.hypothesis:
                series.append((dataclasses.replace(prop, writer=None), "Hypothesis"))
            for each, how in series:
                label = f"{prop.id.removeprefix('generated.')} ({how})"
                rows.append(
                    time_property(each, driver, args.examples, args.seed, args.repeat, label)
                )
    finally:
        driver.close()

    header = (
        f"{'property':<32} {'verdict':<8} {'wall':>7} {'programs':>8} {'ms/program':>10} "
        f"{'writing':>8} {'vs suite':>8}"
    )
    print(header)
    print("-" * len(header))
    totals: dict[str, float] = {}
    for row in rows:
        how = row.label.rsplit("(", 1)[1].rstrip(")")
        totals[how] = totals.get(how, 0.0) + row.seconds
        writing = (
            f"{100 * row.write_seconds / row.seconds:7.0f}%"
            if row.write_seconds is not None and row.seconds > 0
            else f"{'-':>8}"
        )
        print(
            f"{row.label:<32} {row.verdict:<8} {row.seconds:6.2f}s {args.examples:>8} "
            f"{1000 * row.seconds / args.examples:10.2f} {writing} "
            f"{row.seconds / suite_seconds:7.2f}x"
        )
    print()
    for how, seconds in totals.items():
        print(
            f"all three properties ({how}): {seconds:.2f} s, "
            f"{1000 * seconds / args.examples:.2f} ms per N, "
            f"{seconds / suite_seconds:.2f}x the suite"
        )
    if "written" in totals and "Hypothesis" in totals:
        print(f"through Hypothesis / written: {totals['Hypothesis'] / totals['written']:.1f}x")
    print("\n'writing': the share of the wall time the program writers alone take")
    return 0


if __name__ == "__main__":
    sys.exit(main())
