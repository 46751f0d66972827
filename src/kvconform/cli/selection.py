"""Which cases a command selects (--area, --class, --requirement, --id)."""

from __future__ import annotations

import argparse
import fnmatch
from collections.abc import Callable, Sequence

from kvconform.cli.common import UsageError
from kvconform.harness import manifest, suite
from kvconform.harness.scenario import Case
from kvconform.values import CLASSES


def _cases(args: argparse.Namespace, integrity: manifest.Integrity) -> tuple[Case, ...]:
    """The suite's cases: from the cache when allowed and current, else loaded now.

    The cache is looked up by the digest the manifest check has just computed (the
    files are not hashed twice; see kvconform.harness.cache for why that is safe).
    """
    if args.no_cache:
        return suite.load_all_cases()
    return suite.all_cases(integrity.digest or None)


def select(cases: Sequence[Case], args: argparse.Namespace) -> list[Case]:
    """The cases matching every kind of selector given; an unknown selector is an error."""
    for cls in args.classes:
        if cls not in CLASSES:
            raise UsageError(f"--class {cls!r}: not one of {', '.join(CLASSES)}")
    reqs = suite.requirements()
    groups = {r.rsplit("-", 1)[0] for r in reqs}
    for req in args.requirement:
        if req not in reqs and req not in groups:
            raise UsageError(f"--requirement {req!r}: no such requirement or group in spec/")

    def wanted(case: Case) -> bool:
        checks: list[Callable[[], bool]] = []
        if args.area:
            checks.append(
                lambda: any(
                    case.area == a or case.area.startswith(a.rstrip("/") + "/") for a in args.area
                )
            )
        if args.classes:
            checks.append(lambda: case.cls in args.classes)
        if args.requirement:
            checks.append(
                lambda: any(
                    r in args.requirement or r.rsplit("-", 1)[0] in args.requirement
                    for r in case.requires
                )
            )
        if args.ids:
            checks.append(lambda: any(fnmatch.fnmatchcase(case.id, p) for p in args.ids))
        return all(check() for check in checks)

    chosen = [c for c in cases if wanted(c)]
    if not chosen:
        raise UsageError("the selection matches no case (see 'kvconform list')")
    return chosen
