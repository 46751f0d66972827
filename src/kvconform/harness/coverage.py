"""The requirement coverage table: which cases cite which requirement.

    python -m kvconform.harness.coverage           # rewrite spec/coverage.md
    python -m kvconform.harness.coverage --check   # exit 1 if it is stale

A requirement is judged by the scenarios and vectors that cite it; what no case
can judge is marked in spec/marks.yaml with its reason (:func:`marks`), whole or
in part. The project's tests fail when the table is stale, when a requirement
holding MUST, SHALL or REQUIRED has neither a case nor a mark, when a case cites
a requirement that does not exist, or when a mark is wrong (:func:`mark_problems`).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvconform.harness import suite
from kvconform.harness.scenario import Case
from kvconform.harness.yamlsource import load_yaml, validate

#: The kinds of mark (spec/marks.yaml), and what each says of the part marked.
MARK_KINDS: dict[str, str] = {
    "review": "observable only in review",
    "protocol": "not observable through protocol 1",
    "suite": "a rule for the suite itself, checked by the project's tests",
    "wire": "an adapter's exchange rule, which the harness applies to the responses it receives",
}

#: The key words that make a requirement something a case, or a mark, must answer for.
_BINDING = re.compile(r"\b(MUST|SHALL|REQUIRED)\b")
_RATIONALE = "*Rationale:*"


@dataclass(frozen=True)
class Mark:
    """A requirement, or a part of one, that no case can judge, and why."""

    id: str
    kind: str
    reason: str
    part: str | None
    judged: str | None
    line: int | None


def marks_path() -> Path:
    return suite.spec_dir() / "marks.yaml"


def marks() -> list[Mark]:
    """The marks of spec/marks.yaml, validated against its schema."""
    document = load_yaml(marks_path())
    validate(document, "marks")
    return [
        Mark(
            id=entry["id"],
            kind=entry["kind"],
            reason=" ".join(entry["reason"].split()),
            part=" ".join(entry["part"].split()) if "part" in entry else None,
            judged=" ".join(entry["judged"].split()) if "judged" in entry else None,
            line=document.line_of(("marks", index)),
        )
        for index, entry in enumerate(document.data["marks"])
    ]


def requirement_item(req: suite.Requirement) -> str:
    """The whole list item of a requirement: its line and its indented continuation."""
    lines = (suite.spec_dir() / req.file).read_text(encoding="utf-8").split("\n")
    item = [lines[req.line - 1]]
    for line in lines[req.line :]:
        if not line.startswith("  "):
            break
        item.append(line.strip())
    return " ".join(item)


def binding(req: suite.Requirement) -> bool:
    """Whether the requirement's text (its rationale aside) holds MUST, SHALL or REQUIRED."""
    return bool(_BINDING.search(requirement_item(req).split(_RATIONALE)[0]))


#: Project tests cite the requirements they check with ``@pytest.mark.covers("ID", ...)``.
_COVERS = re.compile(r"covers\(([^)]*)\)")
_ID = re.compile(r"[A-Z]+-\d+")

GROUP_ORDER = (
    "HASH",
    "ID",
    "ALLOC",
    "PLAN",
    "SIG",
    "PROF",
    "VERIFY",
    "ERR",
    "SEC",
    "CONF",
    "PROTO",
)


def coverage_path() -> Path:
    return suite.spec_dir() / "coverage.md"


def citations(cases: Sequence[Case]) -> dict[str, list[Case]]:
    cited: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        for req in case.requires:
            cited[req].append(case)
    return cited


def project_test_citations() -> dict[str, list[str]]:
    """Requirement -> the project test files that mark themselves as covering it."""
    tests_dir = suite.spec_dir().parent / "tests"
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(tests_dir.glob("test_*.py")) if tests_dir.is_dir() else []:
        for match in _COVERS.finditer(path.read_text(encoding="utf-8")):
            for req in _ID.findall(match.group(1)):
                if path.name not in found[req]:
                    found[req].append(path.name)
    return found


def uncited(cases: Sequence[Case], marked: Sequence[Mark] | None = None) -> list[str]:
    """Requirements in force that no case, project test or mark accounts for."""
    cited = citations(cases)
    tested = project_test_citations()
    marked_ids = {m.id for m in (marks() if marked is None else marked)}
    return [
        req.id
        for req in suite.requirements().values()
        if req.id not in cited
        and req.id not in tested
        and req.id not in marked_ids
        and not req.withdrawn
    ]


def unjudged(cases: Sequence[Case], marked: Sequence[Mark] | None = None) -> list[str]:
    """Requirements in force holding MUST, SHALL or REQUIRED with neither a citing case nor a mark.

    A project test does not count: it checks the harness or the reference, not an
    implementation under test.
    """
    cited = citations(cases)
    marked_ids = {m.id for m in (marks() if marked is None else marked)}
    return [
        req.id
        for req in suite.requirements().values()
        if not req.withdrawn and req.id not in cited and req.id not in marked_ids and binding(req)
    ]


def mark_problems(cases: Sequence[Case], marked: Sequence[Mark] | None = None) -> list[str]:
    """Marks that cannot stand, one line each (empty when every mark is sound)."""
    reqs = suite.requirements()
    cited = citations(cases)
    tested = project_test_citations()
    problems: list[str] = []
    seen: set[tuple[str, str | None]] = set()
    for mark in marks() if marked is None else marked:
        where = f"spec/marks.yaml:{mark.line}: {mark.id}"
        if mark.id not in reqs:
            problems.append(f"{where}: no requirement line of spec/ defines it")
            continue
        if reqs[mark.id].withdrawn:
            problems.append(f"{where}: the requirement is withdrawn; nothing is owed to it")
        if (mark.id, mark.part) in seen:
            problems.append(f"{where}: marked twice for the same part")
        seen.add((mark.id, mark.part))
        citing = cited.get(mark.id, [])
        if citing and (mark.part is None or mark.judged is None):
            problems.append(
                f"{where}: {len(citing)} case(s) cite it (first {citing[0].id}), so the mark "
                "must say which part it covers (part) and what the cases judge (judged)"
            )
        if not citing and mark.judged is not None:
            problems.append(f"{where}: says what cases judge (judged), but no case cites it")
        if mark.kind in ("suite", "wire") and mark.id not in tested:
            problems.append(
                f"{where}: a {mark.kind} mark needs a project test marked "
                f'@pytest.mark.covers("{mark.id}")'
            )
    return problems


def withdrawn_citations(cases: Sequence[Case]) -> list[tuple[str, str]]:
    """(case, requirement) pairs where a case cites a withdrawn requirement (CONF-5)."""
    reqs = suite.requirements()
    return [
        (case.id, req)
        for case in cases
        for req in case.requires
        if req in reqs and reqs[req].withdrawn
    ]


def _order(req: str) -> tuple[int, int]:
    group, number = req.rsplit("-", 1)
    rank = GROUP_ORDER.index(group) if group in GROUP_ORDER else len(GROUP_ORDER)
    return rank, int(number)


def _cell(text: str) -> str:
    """Text for one cell of a Markdown table."""
    return text.replace("|", "\\|")


def render(cases: Sequence[Case], marked: Sequence[Mark] | None = None) -> str:
    reqs = suite.requirements()
    cited = citations(cases)
    all_marks = marks() if marked is None else list(marked)
    marks_for: dict[str, list[Mark]] = defaultdict(list)
    for mark in all_marks:
        marks_for[mark.id].append(mark)
    scenarios = [c for c in cases if c.kind == "scenario"]
    in_force = [r for r in reqs.values() if not r.withdrawn]
    bound = [r for r in in_force if binding(r)]
    whole = [r for r in bound if r.id in marks_for and r.id not in cited]
    partly = [r for r in bound if r.id in marks_for and r.id in cited]
    judged = [r for r in bound if r.id not in marks_for and r.id in cited]
    lines = [
        "# Requirement coverage",
        "",
        "Generated by `python -m kvconform.harness.coverage`; do not edit by hand.",
        "A test fails when this file is stale, or when a requirement holding MUST, SHALL or",
        "REQUIRED has neither a case that cites it nor a mark in [marks.yaml](marks.yaml).",
        "",
        f"{len(reqs)} requirements ({sum(r.withdrawn for r in reqs.values())} withdrawn); "
        f"{len(scenarios)} scenarios; {len(cases) - len(scenarios)} known-answer vectors.",
        "",
        f"Of the {len(in_force)} requirements in force, {len(bound)} hold MUST, SHALL or "
        f"REQUIRED: {len(judged)} are judged by the cases that cite them, {len(partly)} "
        f"are judged in part (the rest marked), {len(whole)} are marked whole (no case "
        f"can judge them); {len(in_force) - len(bound)} hold only MAY or SHOULD.",
        "",
        "## Not judged by a case (marks)",
        "",
        "What no case can judge is marked in [marks.yaml](marks.yaml) with its reason: "
        "the whole requirement, or the part named. A partly judged requirement is counted "
        "as covered only for the part its cases judge.",
        "",
        "| kind | meaning | marks (whole) | marks (a part) |",
        "|---|---|---|---|",
    ]
    for kind, meaning in MARK_KINDS.items():
        of_kind = [m for m in all_marks if m.kind == kind]
        n_part = sum(1 for m in of_kind if m.part is not None)
        lines.append(f"| {kind} | {meaning} | {len(of_kind) - n_part} | {n_part} |")
    lines += [
        "",
        "| requirement | kind | part not judged | why | what the cases judge |",
        "|---|---|---|---|---|",
    ]
    for mark in sorted(all_marks, key=lambda m: _order(m.id)):
        lines.append(
            f"| {mark.id} | {mark.kind} | {_cell(mark.part or 'the whole requirement')} "
            f"| {_cell(mark.reason)} | {_cell(mark.judged or '--')} |"
        )
    lines += [
        "",
        "## Scenarios by basis (CONF-8)",
        "",
        "| basis | scenarios |",
        "|---|---|",
        f"| the seeds' semantics | {sum(1 for c in scenarios if not c.basis)} |",
    ]
    per_decision: dict[str, int] = defaultdict(int)
    for case in scenarios:
        for decision in case.basis:
            per_decision[decision] += 1
    lines += [f"| decision `{d}` | {n} |" for d, n in sorted(per_decision.items())]
    lines += [
        "",
        "## Scenarios per area",
        "",
        "| area | scenarios |",
        "|---|---|",
    ]
    per_area: dict[str, int] = defaultdict(int)
    for case in scenarios:
        per_area[case.area] += 1
    lines += [f"| {area} | {n} |" for area, n in sorted(per_area.items())]
    lines += [
        "",
        "## Cases per requirement group",
        "",
        "| group | requirements | scenarios | vectors |",
        "|---|---|---|---|",
    ]
    by_group: dict[str, list[str]] = defaultdict(list)
    for req in reqs:
        by_group[req.rsplit("-", 1)[0]].append(req)
    for group in sorted(by_group, key=lambda g: _order(f"{g}-0")):
        group_cases = {c.id: c for r in by_group[group] for c in cited.get(r, [])}
        n_sc = sum(1 for c in group_cases.values() if c.kind == "scenario")
        lines.append(f"| {group} | {len(by_group[group])} | {n_sc} | {len(group_cases) - n_sc} |")
    tested = project_test_citations()
    lines += [
        "",
        "## Requirement to cases",
        "",
        "| requirement | defined in | scenarios | vectors | marked | project tests |",
        "|---|---|---|---|---|---|",
    ]
    for req_id in sorted(reqs, key=_order):
        requirement = reqs[req_id]
        cases_for = cited.get(req_id, [])
        sc = ", ".join(f"`{c.id}`" for c in cases_for if c.kind == "scenario") or "--"
        n_vec = sum(1 for c in cases_for if c.kind == "vector")
        tests = ", ".join(f"`{t}`" for t in tested.get(req_id, []))
        mark_cell = "; ".join(
            f"{m.kind}: {'part' if m.part is not None else 'whole'}" for m in marks_for[req_id]
        )
        if requirement.withdrawn:
            tests = "withdrawn"
        lines.append(
            f"| {req_id} | [{requirement.file}]({requirement.file}) | {sc} "
            f"| {n_vec or '--'} | {mark_cell or '--'} | {tests or '--'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvconform.harness.coverage")
    parser.add_argument("--check", action="store_true", help="exit 1 if spec/coverage.md is stale")
    args = parser.parse_args(argv)
    text = render(suite.all_cases())
    path = coverage_path()
    if args.check:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != text:
            print(f"{path} is stale: run python -m kvconform.harness.coverage", file=sys.stderr)
            return 1
        return 0
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
