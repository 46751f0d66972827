"""kvconform list: the selected cases, one a line."""

from __future__ import annotations

import argparse
import importlib.util
from typing import TextIO

from kvconform.cli.common import EXIT_OK, UsageError, _integrity
from kvconform.cli.selection import _cases, select
from kvconform.harness.generated import CHECKS, as_case
from kvconform.harness.yamlsource import SourceError


def cmd_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    integrity = _integrity(args, err)
    # Listed from their descriptions: drawing their programs needs Hypothesis (the
    # 'generated' extra), listing them only that it is installed.
    runnable = importlib.util.find_spec("hypothesis") is not None
    generated = [as_case(check) for check in CHECKS] if runnable else []
    selecting = bool(args.area or args.classes or args.requirement or args.ids)
    try:
        pool = _cases(args, integrity)
        cases = select([*pool, *generated] if selecting else pool, args)
    except SourceError as exc:
        raise UsageError(str(exc)) from None
    for case in cases:
        runs_with = "  (runs with --generated N)" if case.kind == "generated" else ""
        out.write(f"{case.id:<60} {case.cls:<10} {','.join(case.requires)}{runs_with}\n")
    out.write(f"{len(cases)} case(s)\n")
    if generated and not selecting:
        names = ", ".join(case.id for case in generated)
        out.write(f"and {len(generated)} generated checks, run with --generated N: {names}\n")
    return EXIT_OK
