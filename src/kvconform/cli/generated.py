"""The options of the generated differential checks (--generated)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TextIO

from kvconform.cli.common import UsageError
from kvconform.harness.runner import CaseResult
from kvconform.harness.scenario import Case
from kvconform.protocol.driver import Driver


class _Generated:
    """The generated checks of one run (kvconform.differential): N examples, a seed."""

    def __init__(
        self,
        examples: int,
        seed: int,
        export_dir: Path | None,
        label: str | None,
        quiet: bool = False,
    ) -> None:
        from kvconform.differential import engine

        self.engine = engine
        self.examples, self.seed, self.export_dir, self.label = examples, seed, export_dir, label
        self.quiet = quiet
        #: The counterexamples that could not be written (outputs of the run: exit 2).
        self.unwritten: list[str] = []
        self.cases = engine.generated_cases()
        self.reference = engine.reference_driver()

    def run(self, case: Case, driver: Driver, err: TextIO) -> CaseResult:
        prop = self.engine.PROPERTIES_BY_ID[case.id]
        tty = err.isatty() and not self.quiet
        shown = [0.0]

        def on_run(runs: int) -> None:  # on a terminal, at most ten updates a second
            now = time.perf_counter()
            if now - shown[0] >= 0.1:
                shown[0] = now
                err.write(f"\r  {case.id}: program {runs} of about {self.examples} ")
                err.flush()

        result = self.engine.run_property(
            prop,
            driver,
            examples=self.examples,
            seed=self.seed,
            reference=self.reference,
            export_dir=self.export_dir,
            label=self.label,
            on_run=on_run if tty else None,
        )
        if not self.quiet:  # a line per property, with what it cost
            clear = "\r" if tty else ""
            if result.verdict == "failed":  # shrinking runs programs of its own
                runs = f"{result.runs} programs run, shrinking included"
            elif result.verdict == "passed" and result.runs < self.examples:
                runs = f"{self.examples} programs drawn, {result.runs} distinct"
            else:
                runs = f"{result.runs} programs"
            err.write(
                f"{clear}  {case.id}: {result.verdict.replace('_', ' ')} "
                f"({runs}, {result.seconds:.1f} s)" + " " * 12 + "\n"
            )
        if result.exported is not None:
            err.write(f"wrote counterexample scenario {result.exported}\n")
        if result.export_error:
            self.unwritten.append(f"{case.id}: {result.export_error}")
        return self.engine.case_result(result)


def _generated_options(args: argparse.Namespace) -> _Generated | None:
    if args.generated is None:
        for flag, value in (
            ("--seed", args.seed),
            ("--export-counterexamples", args.export_counterexamples),
        ):
            if value is not None:
                raise UsageError(f"{flag} needs --generated N")
        return None
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise UsageError(
            "--generated needs Hypothesis: install the 'generated' extra "
            "(pip install '.[generated]' in a checkout, 'kvconform[generated]' after a release)"
        ) from None
    from kvconform.differential.engine import DEFAULT_SEED, new_seed

    seed = DEFAULT_SEED if args.seed is None else new_seed() if args.seed == "random" else args.seed
    return _Generated(
        args.generated,
        seed,
        args.export_counterexamples,
        args.adapter_cmd or args.adapter,
        quiet=args.quiet,
    )
