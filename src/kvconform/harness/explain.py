"""What a case or a requirement is, in one place: ``kvconform explain ID``.

For a case: the scenario as written, each step in plain words with what it
expects, the requirements it cites with their full text and rationale, what its
verdict rests on (CONF-8) and the command that runs just that case. For a
requirement: its text and rationale, where it is defined, and every case and
vector that cites it. Everything shown comes from the suite's own files.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from kvconform.harness import generated, suite
from kvconform.harness.checks import (
    Answers,
    ErrorIs,
    Expectation,
    OutcomeCheck,
    Refuses,
    RelationCheck,
    ShapeMismatchIs,
    SignatureIs,
    Succeeds,
    Validity,
    ValueIs,
    ValueOneOf,
    one_of_text,
    rows_text,
    show,
    show_error,
)
from kvconform.harness.scenario import Case
from kvconform.protocol.steps import shown
from kvconform.values import DECISIONS

_RATIONALE = "*Rationale:*"


class UnknownId(LookupError):
    """Neither a case id nor a requirement id of this suite."""


def explain(identifier: str, cases: Sequence[Case] | None = None) -> str:
    """The explanation of a case id or a requirement id, as text."""
    cases = suite.all_cases() if cases is None else cases
    requirements = suite.requirements()
    if identifier in requirements:
        return explain_requirement(identifier, cases)
    by_id = {case.id: case for case in cases}
    if identifier in by_id:
        return explain_case(by_id[identifier])
    if identifier in generated.BY_ID:
        return explain_generated(identifier)
    close = sorted(i for i in (*by_id, *requirements) if identifier.lower() in i.lower())[:5]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise UnknownId(f"{identifier!r} is neither a case id nor a requirement id{hint}")


def requirement_summary(req_id: str) -> str:
    """A requirement's first sentence, short enough for one line of a report."""
    req = suite.requirements().get(req_id)
    if req is None:
        return ""
    text = req.text.split(_RATIONALE)[0].strip()
    first = re.split(r"(?<=[.;])\s", text, maxsplit=1)[0]
    return first if len(first) <= 140 else first[:137] + "..."


def explain_requirement(req_id: str, cases: Sequence[Case]) -> str:
    req = suite.requirements()[req_id]
    text, _, rationale = req.text.partition(_RATIONALE)
    lines = [f"{req_id}  (spec/{req.file}, line {req.line})", "", _wrap(text.strip())]
    if rationale:
        lines += ["", "Rationale: " + _wrap(rationale.strip())]
    decisions = [name for name, reqs in DECISIONS.items() if req_id in reqs]
    if decisions:
        lines += ["", f"Decision(s) of the specification: {', '.join(decisions)} (spec/README.md)"]
    citing = [c for c in cases if req_id in c.requires]
    scenarios = [c for c in citing if c.kind == "scenario"]
    vectors = [c for c in citing if c.kind != "scenario"]
    lines += ["", f"Checked by {len(scenarios)} scenario(s) and {len(vectors)} vector(s):"]
    lines += [f"  {c.id}  {c.title}" for c in scenarios]
    if len(vectors) > 10:
        lines += [f"  {c.id}" for c in vectors[:10]] + [f"  ... and {len(vectors) - 10} more"]
    else:
        lines += [f"  {c.id}" for c in vectors]
    if not citing:
        lines.append("  (none: see spec/coverage.md for the project tests that check it)")
    from kvconform.harness.coverage import MARK_KINDS, marks

    for mark in (m for m in marks() if m.id == req_id):
        what = f"the part {mark.part}" if mark.part else "the whole requirement"
        lines += [
            "",
            _wrap(f"Not judged by a case ({MARK_KINDS[mark.kind]}): {what}. {mark.reason}"),
        ]
    return "\n".join(lines)


def explain_case(case: Case) -> str:
    lines = [f"{case.kind} {case.id}: {case.title}"]
    where = f"{case.file_name}:{case.line}" if case.line else case.file_name
    lines += [f"  file:     {where}", f"  class:    {case.cls}", f"  basis:    {_basis(case)}"]
    if case.options:
        lines.append(f"  options:  {', '.join(f'{k}: {v}' for k, v in case.options)}")
    assumes = _format(case)
    if assumes:
        lines.append(f"  assumes:  {assumes}")
    lines += ["", "Why: " + _wrap(case.why)]
    if case.incident:
        lines.append(f"Incident: {case.incident}")
    written = _as_written(case)
    if written:
        lines += ["", "As written:", *("  " + line for line in written)]
    lines += [
        "",
        "Steps (each operation as sent under protocol 1, and what is expected of it; under",
        "protocol 2 every count travels as a decimal string, PROTO-33):",
    ]
    lines += [f"  {line}" for line in _steps(case)]
    lines += ["", "Requirements:"]
    for req_id in case.requires:
        req = suite.requirements().get(req_id)
        if req is None:
            continue
        text, _, rationale = req.text.partition(_RATIONALE)
        lines.append(f"  {req_id} (spec/{req.file}:{req.line}): {_wrap(text.strip())}")
        if rationale:
            lines.append(f"    Rationale: {_wrap(rationale.strip())}")
    lines += [
        "",
        "Run just this case:",
        f'  kvconform run --id {case.id} --adapter-cmd "<your adapter command>"',
        f"  kvconform run --id {case.id}            # against the built-in reference",
    ]
    return "\n".join(lines)


def explain_generated(property_id: str) -> str:
    """A generated differential check (``kvconform run --generated N``): what it draws,
    what it compares, and how to run and reproduce it."""
    case = generated.BY_ID[property_id]
    lines = [
        f"generated {case.id}: {case.title}",
        f"  class:    {case.cls}",
        "  basis:    "
        + (
            case.basis
            or "the reference's answers, judged by CONF-12 (ids and keys by relation, "
            "errors by kind, field, layer and values); programs are drawn only where your "
            "declared options and capabilities agree with the reference's defaults"
        ),
        "  rests on: "
        + (
            f"decisions {', '.join(case.decisions)} (spec/README.md, Decisions: points the "
            "seeds leave open; what a failure costs is its stake, CONF-18)"
            if case.decisions
            else "the seeds' semantics (a failure breaks a rule every implementation shares)"
        ),
        "",
        "Why: " + _wrap(case.why),
        "",
        "Requirements it bears on: " + ", ".join(case.requires),
        "",
        "Run it (N programs, from a seed; the default seed is the suite version's):",
        f'  kvconform run --generated 200 --id {case.id} --adapter-cmd "<your adapter command>"',
        f"  kvconform run --generated 200 --seed S --id {case.id} ...   # reproduce a run",
        "  ... --export-counterexamples DIR   # a disagreement, shrunk, as a scenario file",
        "  (running it needs the 'generated' extra: pip install 'kvconform[generated]')",
    ]
    return "\n".join(lines)


def _basis(case: Case) -> str:
    if not case.basis:
        return "the seeds' semantics (a failure breaks a rule every implementation shares)"
    return (
        f"decision {', '.join(case.basis)} (spec/README.md, Decisions: a point the seeds leave "
        "open; what a failure costs is its stake, CONF-18)"
    )


def _format(case: Case) -> str:
    parts = []
    if case.profile is not None:
        parts.append(f"profile v{case.profile} (writes {case.profile}, reads [{case.profile}])")
    if case.format_writes is not None:
        parts.append(f"writes {case.format_writes}")
    if case.format_reads is not None:
        parts.append(f"reads exactly {list(case.format_reads)}")
    if case.format_reads_include:
        parts.append(f"reads at least {list(case.format_reads_include)}")
    return "; ".join(parts)


def _as_written(case: Case) -> list[str]:
    """The scenario's own lines in its file, from its ``- id:`` to the next one."""
    if case.kind != "scenario" or not case.line:
        return []
    try:
        text = Path(case.file).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    start = case.line - 1
    indent = len(text[start]) - len(text[start].lstrip())
    end = start + 1
    while end < len(text):
        line = text[end]
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        end += 1
    while end > start and not text[end - 1].strip():
        end -= 1
    return [line[indent:] for line in text[start:end]]


def _steps(case: Case) -> list[str]:
    expected: dict[int, list[str]] = {}
    for check in case.checks:
        if isinstance(check, OutcomeCheck):
            expected.setdefault(check.op_index, []).append(expectation_text(check.expect))
    lines = []
    for index, op in enumerate(case.program):
        lines.append(f"{index + 1:>3}. {shown(op, ensure_ascii=False)}")
        for text in expected.get(index, []):
            lines.append(f"       expects {text}")
    for check in case.checks:
        if isinstance(check, RelationCheck):
            names = ", ".join(ref.name for ref in check.refs)
            rows = f", {rows_text(check.rows)}" if check.rows else ""
            lines.append(f"     then: {check.relation} over [{names}]{rows}")
    return lines


def expectation_text(expect: Expectation) -> str:
    """What an expectation asks for, in the words of a failure report."""
    if isinstance(expect, Succeeds):
        return "success"
    if isinstance(expect, Validity):
        return "plan valid" if expect.valid else "plan invalid"
    if isinstance(expect, ValueIs | SignatureIs):
        return show(expect.value if isinstance(expect, ValueIs) else expect.signature)
    if isinstance(expect, ValueOneOf):
        return one_of_text(expect.values)
    if isinstance(expect, ErrorIs):
        return show_error(expect.kind, expect.field, expect.layer, expect.values)
    if isinstance(expect, ShapeMismatchIs):
        return "error layer_shape_mismatch on the first differing field in the declared order"
    if isinstance(expect, Refuses):
        return "a refusal (any error or failure answer)"
    if isinstance(expect, Answers):
        return "not judged (a success, a typed error or a failure; the steps after it judge)"
    return repr(expect)


def _wrap(text: str) -> str:
    """One paragraph on one line: the reader's terminal wraps it."""
    return " ".join(text.split())
