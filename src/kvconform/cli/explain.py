"""kvconform explain: a case or a requirement, whole."""

from __future__ import annotations

import argparse
from typing import TextIO

from kvconform.cli.common import EXIT_OK, UsageError, _integrity
from kvconform.cli.selection import _cases


def cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kvconform.harness import explain

    integrity = _integrity(args, err)
    try:
        out.write(explain.explain(args.id, _cases(args, integrity)) + "\n")
    except explain.UnknownId as exc:
        raise UsageError(str(exc)) from None
    return EXIT_OK
