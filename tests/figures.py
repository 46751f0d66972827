"""The counts the documentation gives, computed from the data, and the marks that hold them.

A count in a Markdown file that follows the data (how many vectors a file holds, how
many scenarios rest on a decision, how many cases a declaration leaves not applicable,
how many mutants the corpus has) is written with a mark right after it, an HTML comment
that Markdown does not show::

    | total | 444<!--#vectors.total--> | | |

``tests/test_figures.py`` fails when a marked figure differs from the data (naming the
file, the line, the figure and the value it should be), or names a figure that does
not exist. After adding scenarios, vectors, mutants or variants::

    python -m tests.figures            # rewrite every marked figure from the data
    python -m tests.figures --check    # exit 1 and list the figures that drifted
    python -m tests.figures --list     # every figure's name and value

then regenerate the manifest (a figure in ``spec/`` is part of it):
``python -m kvconform.harness.manifest``.

Figures of a measurement rather than of the data (timings, the kill matrix of the
generated checks, a mutmut run) are measured by the command that stands beside them. A
count of cases, scenarios, vectors, requirements, mutants or variants that is such a
measurement (or history) is marked ``<!--#measured-->``, which says so and is not
checked; any other such count left unmarked fails the test (:func:`unmarked`). The
change log (``spec/README.md`` from ``## Change log``) and the generated coverage
table (``spec/coverage.md``, checked by its own test) are history and output, not read.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The files whose figures are marked and checked.
DOCUMENTS = ("README.md", "vectors/README.md", "conformance/*.md", "docs/*.md", "spec/*.md")

#: A figure and its mark: digits (a thousands comma allowed), then ``<!--#name-->``.
MARK = re.compile(r"(\d[\d,]*)<!--#([A-Za-z0-9_.:/\-]+)-->")

#: The reference's declarations whose not-applicable counts the documents give, by the
#: factory's name in :mod:`kvconform.adapters.reference`.
DECLARATIONS = ("ReferenceAdapter", "rolling_v1", "rolling_v2", "v2", "v2_layout_only")


def documents() -> list[Path]:
    found: list[Path] = []
    for pattern in DOCUMENTS:
        found += sorted(ROOT.glob(pattern))
    return found


@cache
def figures() -> dict[str, int]:
    """Every figure the documents may mark, by name."""
    out: dict[str, int] = {}
    for part in (_requirements, _cases, _declarations, _decisions, _mutants, _variants, _teeth):
        out.update(part())
    return out


def _requirements() -> dict[str, int]:
    from kvconform.harness import suite

    reqs = suite.requirements().values()
    in_force = [r for r in reqs if not r.withdrawn]
    out = {
        "requirements": len(in_force),
        "requirements.withdrawn": sum(1 for r in reqs if r.withdrawn),
        "requirements.ids": len(reqs),
    }
    for group, n in Counter(r.group for r in in_force).items():
        out[f"requirements.{group}"] = n
    return out


def _cases() -> dict[str, int]:
    from kvconform.harness import suite

    cases = suite.all_cases()
    scenarios = [c for c in cases if c.kind == "scenario"]
    out = {
        "cases": len(cases),
        "scenarios": len(scenarios),
        "scenarios.seed": sum(1 for c in scenarios if c.basis_kind == "seed"),
        "scenarios.decision": sum(1 for c in scenarios if c.basis_kind == "decision"),
        "vectors": len(cases) - len(scenarios),
        "scenarios.profile1": sum(1 for c in scenarios if c.profile == 1),
    }
    for path in suite.vector_files():
        name = path.name.removesuffix(".json")
        out[f"vectors.{name}"] = sum(1 for c in cases if Path(c.file).name == path.name)
    # the groups of the fold vectors, by their ids (fnv1a64.fold.<group>.<name>)
    folds = Counter(c.id.split(".")[2] for c in cases if c.id.startswith("fnv1a64.fold."))
    for group, n in folds.items():
        out[f"vectors.fnv1a64-fold.{group}"] = n
    return out


def _declarations() -> dict[str, int]:
    """For each declaration of the reference: the cases judged (the reference passes
    every one: the suite's own run of itself checks that), those not applicable, and of
    these the ``signature`` and ``verify`` scenarios written for another format and the
    cases written for another option answer. As ``kvconform run`` reports them: a case
    re-expressed into the declared shape (INTERPRETING.md §6.4) is judged."""
    from kvconform.adapters import reference
    from kvconform.harness import runner, suite

    cases = suite.all_cases()
    out: dict[str, int] = {}
    for name in DECLARATIONS:
        info = getattr(reference, name)().describe()
        skipped = [c for c in cases if runner.in_declared_shape(c, info)[1]]
        out[f"applicable.{name}"] = len(cases) - len(skipped)
        out[f"not_applicable.{name}"] = len(skipped)
        out[f"not_applicable.{name}.format"] = sum(
            1
            for c in skipped
            if c.cls in ("signature", "verify") and runner.profile_not_declared(c, info)
        )
        out[f"not_applicable.{name}.option"] = sum(
            1
            for c in skipped
            if runner.not_applicable(c, info) == runner.option_not_declared(c, info)
        )
    return out


def _decisions() -> dict[str, int]:
    from kvconform.harness import suite
    from kvconform.values import DECISIONS, OPTIONS

    table = (suite.spec_dir() / "README.md").read_text(encoding="utf-8")
    return {
        "decisions": len(DECISIONS),
        "options": len(OPTIONS),
        "capabilities": len(set(re.findall(r"capability `(\w+)`", table))),
    }


def _mutants() -> dict[str, int]:
    from kvconform.values import DECISIONS
    from tests.mutants import all_mutants

    mutants = all_mutants()
    # profile v2, the class plan_validity and the window keying: the mutants of their two
    # modules, and any other that breaks a requirement of the profile-v2 or key-window
    # decision.
    newer = set(DECISIONS["profile-v2"]) | set(DECISIONS["key-window"])
    out = {
        "mutants": len(mutants),
        "mutants.killable": sum(1 for m in mutants if not m.gap),
        "mutants.gaps": sum(1 for m in mutants if m.gap),
        "mutants.v2": sum(
            1
            for m in mutants
            if m.factory.__module__.rsplit(".", 1)[-1] in ("profile_v2", "plan_validity")
            or newer & set(m.breaks)
        ),
    }
    for half, n in Counter(m.half for m in mutants).items():
        out[f"mutants.{half}"] = n
    for module, n in Counter(m.factory.__module__.rsplit(".", 1)[-1] for m in mutants).items():
        out[f"mutants.module.{module}"] = n
    # a mutant counts in every requirement group it breaks, gaps included
    groups = Counter(g for m in mutants for g in {b.rsplit("-", 1)[0] for b in m.breaks})
    for group, n in groups.items():
        out[f"mutants.group.{group}"] = n
    return out


def _teeth() -> dict[str, int]:
    from tests.teeth_matrix import counts

    return counts()


def _variants() -> dict[str, int]:
    from tests.variants import all_variants

    return {"variants": len(all_variants())}


# Marks ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mark:
    path: Path
    line: int
    name: str
    written: str
    root: Path = ROOT

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(self.root).as_posix()}:{self.line}"

    @property
    def value(self) -> int:
        return int(self.written.replace(",", ""))


def marks(paths: Sequence[Path] | None = None, root: Path = ROOT) -> Iterator[Mark]:
    for path in documents() if paths is None else paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for found in MARK.finditer(line):
                yield Mark(path, number, found.group(2), found.group(1), root)


#: A count of the data written in words a reader takes for the data's: ``320 scenarios``.
COUNT = re.compile(
    r"(?<![\w.\-/])(?<!FNV-1a )(\d[\d,]*)(?!<!--#)( (?:known-answer |generated |correct )?"
    r"(?:scenarios|cases|vectors|requirements|mutants|variants)\b)"
)
#: Files and parts of files that hold no hand-written figure of the current data.
NOT_READ = {"spec/coverage.md": None, "spec/README.md": "## Change log"}


def unmarked(paths: Sequence[Path] | None = None, root: Path = ROOT) -> list[str]:
    """Counts of the data written without a mark (neither a figure's nor ``measured``)."""
    out = []
    for path in documents() if paths is None else paths:
        name = path.relative_to(root).as_posix()
        if name in NOT_READ and NOT_READ[name] is None:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if NOT_READ.get(name) and line.startswith(str(NOT_READ[name])):
                break
            for found in COUNT.finditer(line):
                out.append(
                    f"{name}:{number}: {found.group(0)!r} is written by hand: mark it with "
                    "the figure it is (<!--#name-->, tests/figures.py) or <!--#measured-->"
                )
    return out


def problems(
    known: dict[str, int], paths: Sequence[Path] | None = None, root: Path = ROOT
) -> list[str]:
    """One line per marked figure that is not the data's: where, which, and what it should be."""
    out = []
    for mark in marks(paths, root):
        if mark.name == "measured":
            continue
        if mark.name not in known:
            out.append(f"{mark.where}: no figure named {mark.name!r} (tests/figures.py)")
        elif mark.value != known[mark.name]:
            out.append(
                f"{mark.where}: {mark.name} is written {mark.written}, "
                f"the data give {known[mark.name]}"
            )
    return out


def rewrite(known: dict[str, int], paths: Sequence[Path] | None = None) -> list[Path]:
    """Every known marked figure set to the data's value; the files changed."""
    changed = []
    for path in documents() if paths is None else paths:
        text = path.read_text(encoding="utf-8")

        def fix(found: re.Match[str]) -> str:
            name = found.group(2)
            return f"{known.get(name, found.group(1))}<!--#{name}-->"

        new = MARK.sub(fix, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.figures",
        description="Rewrite (or --check) the documents' marked figures from the data.",
    )
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 on drift")
    parser.add_argument("--list", action="store_true", help="print every figure and its value")
    args = parser.parse_args(argv)
    known = figures()
    if args.list:
        for name, value in sorted(known.items()):
            out(f"{name} {value}")
        return 0
    found = problems(known)
    if args.check:
        for line in found:
            out(line)
        return 1 if found else 0
    unknown = [line for line in found if "no figure named" in line]
    for path in rewrite(known):
        out(f"rewrote {path.relative_to(ROOT)}")
    for line in unknown:
        out(line)
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
