"""``python -m kvconform.differential``: the generated checks from the command line.

    python -m tests.kill_matrix --mutants mypkg:mutants
    python -m kvconform.differential --adapter mypkg:make --examples 300 --seed 7

Subjects are named as ``MODULE:FUNC`` (a function returning them). The
project's own mutant corpus and correct variants live in the source
checkout's ``tests/``; ``python -m tests.kill_matrix`` (from the checkout's
root) runs this command with them. For an ordinary run of the whole suite
plus the generated checks, use ``kvconform run --generated N``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from kvconform.adapters import DEFAULT_ADAPTER, load_adapter
from kvconform.differential.engine import (
    DEFAULT_EXAMPLES,
    DEFAULT_SEED,
    case_result,
    new_seed,
    run_generated,
)
from kvconform.differential.matrix import Row, kill_matrix, load_subjects
from kvconform.protocol.driver import Driver, InProcessDriver


def _seeds(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seeds like 0,1,2") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kvconform.differential", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--against-mutants",
        action="store_true",
        help="run the generated checks alone, and the suite alone, against every "
        "mutant, and report what each kills",
    )
    parser.add_argument(
        "--mutants",
        default=None,
        metavar="MODULE:FUNC",
        help="with --against-mutants (required there): the wrong implementations to kill",
    )
    parser.add_argument(
        "--variants",
        default="",
        metavar="MODULE:FUNC",
        help="correct variants that must survive (default: none)",
    )
    parser.add_argument(
        "--no-suite",
        action="store_true",
        help="with --against-mutants: skip the hand-written suite",
    )
    parser.add_argument(
        "--examples",
        type=int,
        default=None,
        metavar="N",
        help=f"examples per property (default: 200 against mutants, {DEFAULT_EXAMPLES} otherwise)",
    )
    parser.add_argument(
        "--seeds",
        type=_seeds,
        default=[0],
        metavar="S,S,...",
        help="with --against-mutants: a mutant is killed if any seed kills it",
    )
    parser.add_argument("--seed", default=None, metavar="S|random")
    parser.add_argument("--adapter", default=None, metavar="MODULE:FACTORY")
    parser.add_argument("--adapter-cmd", default=None, metavar="COMMAND")
    parser.add_argument("--export-counterexamples", type=Path, default=None, metavar="DIR")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path.cwd()))  # subjects named relative to the working directory

    if args.against_mutants:
        if not args.mutants:
            parser.error("--against-mutants needs --mutants MODULE:FUNC")
        mutants = load_subjects(*args.mutants.split(":"))
        variants = load_subjects(*args.variants.split(":")) if args.variants else []

        def progress(row: Row) -> None:
            gen = ", ".join(row.killers) or "-"
            print(
                f"  {row.subject.name:<40} suite {'K' if row.suite_kills else '-'}  "
                f"generated {gen}  ({row.seconds:.1f} s)",
                file=sys.stderr,
                flush=True,
            )

        matrix = kill_matrix(
            mutants,
            variants,
            examples=args.examples or 200,
            seeds=args.seeds,
            with_suite=not args.no_suite,
            progress=progress,
        )
        print(matrix.render())
        if args.json:
            args.json.write_text(json.dumps(matrix.to_json(), indent=2) + "\n", encoding="utf-8")
        return 0

    driver: Driver
    if args.adapter_cmd:
        from kvconform.protocol.client import StdioDriver

        driver = StdioDriver(shlex.split(args.adapter_cmd))
    else:
        driver = InProcessDriver(load_adapter(args.adapter or DEFAULT_ADAPTER))
    if args.seed is None:
        seed = DEFAULT_SEED
    else:
        seed = new_seed() if args.seed == "random" else int(args.seed)
    examples = args.examples or DEFAULT_EXAMPLES
    try:
        results = run_generated(
            driver,
            examples=examples,
            seed=seed,
            export_dir=args.export_counterexamples,
            label=args.adapter_cmd or args.adapter,
        )
    finally:
        driver.close()
    failed = 0
    for result in results:
        case = case_result(result)
        print(
            f"{result.prop.id:<32} {result.verdict:<15} {result.runs:>5} programs "
            f"{result.seconds:6.1f} s {result.reason}"
        )
        if case.verdict == "failed":
            failed += 1
            print(case.report() + "\n")
    print(
        f"seed {seed}, {examples} examples per property "
        f"(reproduce with --seed {seed} --examples {examples})"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
