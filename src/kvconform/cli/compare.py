"""kvconform compare: several reports side by side."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from kvconform.cli.common import EXIT_OK, UsageError, _said, _same_file, _writable_file
from kvconform.harness.yamlsource import SourceError


def cmd_compare(args: argparse.Namespace, err: TextIO) -> int:
    from kvconform.reports import html, record

    for path in args.reports:
        if _same_file(path, args.output):
            raise UsageError(f"-o {args.output} would overwrite the report it reads")
    _writable_file(args.output, "-o")  # before any report is read, as run checks its outputs
    seen: dict[Path, Path] = {}
    for path in args.reports:  # one report twice would be two identical columns
        try:
            where = path.resolve()
        except (OSError, RuntimeError):  # a link loop: reading it will say so
            where = path.absolute()
        same = seen.setdefault(where, path)
        if same is not path:
            raise UsageError(f"{path} is given twice (as {same})")
    reports = []
    for path in args.reports:
        try:
            reports.append(record.read(path))
        except SourceError as exc:
            raise UsageError(f"not a kvconform JSON report: {exc}") from None  # exc names the file
    differ = html.suites_differ(reports)
    if differ:
        err.write(f"kvconform: warning: {_said(differ)}\n")
    try:
        html.write_compare(reports, args.output, [str(path) for path in args.reports])
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc}") from None
    many = "implementation" if len(reports) == 1 else "implementations"
    err.write(f"wrote {_said(args.output)} ({len(reports)} {many})\n")
    return EXIT_OK
