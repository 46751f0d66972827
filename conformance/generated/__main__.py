"""``python -m kvconform.conformance.generated``: the generated checks from the command line.

    python -m kvconform.conformance.generated --against-mutants            # the kill matrix
    python -m kvconform.conformance.generated --against-mutants --examples 500 --seeds 0,1,2
    python -m kvconform.conformance.generated --adapter mypkg:make --examples 300 --seed 7

The mutant corpus and the correct variants live in the source checkout's
``tests/`` (run from the checkout's root). For an ordinary run of the whole
suite plus the generated checks, use ``kvconform run --generated N``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ..adapters import DEFAULT_ADAPTER, load_adapter
from ..driver import Driver, InProcessDriver
from .engine import DEFAULT_EXAMPLES, DEFAULT_SEED, case_result, new_seed, run_generated
from .matrix import Row, kill_matrix, load_subjects


def _seeds(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected seeds like 0,1,2") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvconform.conformance.generated",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--against-mutants", action="store_true",
                        help="run the generated checks alone, and the suite alone, against every "
                             "mutant, and report what each kills")
    parser.add_argument("--mutants", default="tests.mutants:all_mutants", metavar="MODULE:FUNC")
    parser.add_argument("--variants", default="tests.variants:all_variants", metavar="MODULE:FUNC",
                        help="correct variants that must survive (empty string: none)")
    parser.add_argument("--no-suite", action="store_true",
                        help="with --against-mutants: skip the hand-written suite")
    parser.add_argument("--examples", type=int, default=None, metavar="N",
                        help="examples per property (default: 200 against mutants, "
                             f"{DEFAULT_EXAMPLES} otherwise)")
    parser.add_argument("--seeds", type=_seeds, default=[0], metavar="S,S,...",
                        help="with --against-mutants: a mutant is killed if any seed kills it")
    parser.add_argument("--seed", default=None, metavar="S|random")
    parser.add_argument("--adapter", default=None, metavar="MODULE:FACTORY")
    parser.add_argument("--adapter-cmd", default=None, metavar="COMMAND")
    parser.add_argument("--export-counterexamples", type=Path, default=None, metavar="DIR")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path.cwd()))  # the checkout's tests/ package

    if args.against_mutants:
        mutants = load_subjects(*args.mutants.split(":"))
        variants = load_subjects(*args.variants.split(":")) if args.variants else []

        def progress(row: Row) -> None:
            gen = ", ".join(row.killers) or "-"
            print(f"  {row.subject.name:<40} suite {'K' if row.suite_kills else '-'}  "
                  f"generated {gen}  ({row.seconds:.1f} s)", file=sys.stderr, flush=True)

        matrix = kill_matrix(mutants, variants, examples=args.examples or 200, seeds=args.seeds,
                             with_suite=not args.no_suite, progress=progress)
        print(matrix.render())
        if args.json:
            args.json.write_text(json.dumps(matrix.to_json(), indent=2) + "\n", encoding="utf-8")
        return 0

    driver: Driver
    if args.adapter_cmd:
        from ..stdio import StdioDriver

        driver = StdioDriver(shlex.split(args.adapter_cmd))
    else:
        driver = InProcessDriver(load_adapter(args.adapter or DEFAULT_ADAPTER))
    if args.seed is None:
        seed = DEFAULT_SEED
    else:
        seed = new_seed() if args.seed == "random" else int(args.seed)
    examples = args.examples or DEFAULT_EXAMPLES
    try:
        results = run_generated(driver, examples=examples, seed=seed,
                                export_dir=args.export_counterexamples,
                                label=args.adapter_cmd or args.adapter)
    finally:
        driver.close()
    failed = 0
    for result in results:
        case = case_result(result)
        print(f"{result.prop.id:<32} {result.verdict:<15} {result.runs:>5} programs "
              f"{result.seconds:6.1f} s {result.reason}")
        if case.verdict == "failed":
            failed += 1
            print(case.report() + "\n")
    print(f"seed {seed}, {examples} examples per property "
          f"(reproduce with --seed {seed} --examples {examples})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
