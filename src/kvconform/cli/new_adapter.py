"""kvconform new-adapter: a skeleton adapter to start from."""

from __future__ import annotations

import argparse
from typing import TextIO

from kvconform.cli.common import EXIT_OK, UsageError
from kvconform.reports.untrusted import one_line


def cmd_new_adapter(args: argparse.Namespace, out: TextIO) -> int:
    """``kvconform new-adapter``: write an adapter skeleton (kvconform.skeletons)."""
    from kvconform import skeletons

    try:
        made = skeletons.generate(args.lang, skeletons.parse_classes(args.classes), args.directory)
    except skeletons.SkeletonError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write the skeleton into {args.directory}: {exc}") from None
    plan = made.plan
    folder = one_line(str(made.directory))  # a path the user typed: one line, breaks escaped
    for cls, by in plan.added.items():
        verb = "requires" if len(by) == 1 else "require"
        out.write(f"added the class {cls}: {' and '.join(by)} {verb} it (CONF-1)\n")
    out.write(
        f"wrote a {plan.language} adapter skeleton into {folder}: "
        f"{', '.join(made.files)}\n"
        f"it claims {', '.join(plan.classes)}; each of their {len(plan.claimed)} operation(s) "
        f"answers 'not implemented: <op>' until you replace it (README.md says how)\n"
        f"next, in {folder}:\n"
    )
    if made.build:
        out.write(f"  {one_line(made.build)}\n")
    out.write(f'  kvconform run --adapter-cmd "{one_line(made.command)}"\n')
    return EXIT_OK
