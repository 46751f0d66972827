"""The JSON report: what a run did, in a documented, versioned form."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import kvconform
from kvconform import limits
from kvconform.files import write_atomic
from kvconform.harness import suite
from kvconform.harness.runner import CAUSES, CaseResult, cause_of
from kvconform.harness.stakes import CASE_STAKES
from kvconform.harness.yamlsource import Document, validate
from kvconform.rendering import clip
from kvconform.values import OPTIONS, AdapterInfo

REPORT_FORMAT = "kvconform-report/1"

#: The longest a declared capability's value is shown in a line of a report.
_DECLARED_SHOWN = 200


def declared(adapter: Mapping[str, Any]) -> list[str]:
    """What a report's adapter declared besides the defaults, as ``name: value``: each
    option it answers otherwise (CONF-6), then each capability (CONF-7), whose value is
    shown as JSON text, clipped (a report read back may be anyone's)."""
    options = adapter.get("options")
    shown = [
        f"{name}: {value}"
        for name, value in (options.items() if isinstance(options, Mapping) else ())
        if name in OPTIONS and value != OPTIONS[name].default
    ]
    caps = adapter.get("capabilities")
    if isinstance(caps, Mapping):
        shown += [
            f"{name}: {clip(json.dumps(value, ensure_ascii=True), _DECLARED_SHOWN)}"
            for name, value in sorted(caps.items())
        ]
    return shown


VERDICTS = ("passed", "failed", "not_applicable", "not_run")


def build(
    results: Sequence[CaseResult],
    adapter: AdapterInfo,
    *,
    suite_digest: str,
    started: str,
    seconds: float,
    selection: Mapping[str, Any] | None = None,
    gate: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report document for one run."""
    file_names: dict[str, str] = {}  # a case's file name, worked out once per file
    return {
        "format": REPORT_FORMAT,
        "suite": {
            "version": kvconform.SUITE_VERSION,
            "digest": suite_digest,
            "kvconform_version": kvconform.__version__,
        },
        "adapter": {
            "name": adapter.name,
            "version": adapter.version,
            "language": adapter.language,
            "classes": sorted(adapter.classes),
            "format": {"writes": adapter.format_writes, "reads": sorted(adapter.format_reads)},
            "options": {name: adapter.option(name) for name in OPTIONS},
            "capabilities": adapter.declared_capabilities(),
        },
        "started": started,
        "seconds": round(seconds, 3),
        "selection": dict(selection or {}),
        "summary": summarize(results),
        "results": [_result(r, file_names) for r in results],
        "requirements": requirement_verdicts(results),
        "gate": dict(gate) if gate is not None else None,
    }


def _result(result: CaseResult, file_names: dict[str, str]) -> dict[str, Any]:
    case = result.case
    file_name = file_names.get(case.file)
    if file_name is None:
        file_name = file_names[case.file] = case.file_name
    out: dict[str, Any] = {
        "id": case.id,
        "kind": case.kind,
        "area": case.area,
        "class": case.cls,
        "title": case.title,
        "requires": list(case.requires),
        "verdict": result.verdict,
        "basis": basis_of(result),
        "seconds": round(result.seconds, 6),
        "file": file_name,
    }
    if result.verdict in ("not_applicable", "not_run"):
        out["reason"] = result.reason
    if result.stake is not None:  # which way a failed case erred (CONF-18)
        out["stake"] = result.stake
    if case.reexpressed:  # judged in the declared shape, not as written (CONF-14)
        out["reexpressed"] = list(case.reexpressed)
    if result.advice:  # apart from failures: not part of the verdict (CONF-12)
        out["advice"] = [
            {
                "step": a.where.step,
                "line": a.where.line,
                "expected": a.expected,
                "actual": a.actual,
                "requires": list(a.requires),
            }
            for a in result.advice
        ]
    if result.failures:
        first = result.failures[0]
        out["failure"] = {
            "step": first.where.step,
            "line": first.where.line,
            "expected": first.expected,
            "actual": first.actual,
            "requires": list(dict.fromkeys((*case.requires, *first.requires))),
            "why": case.why,
            "more": len(result.failures) - 1,
            "cause": cause_of(result.failures),
            "text": result.report(),
        }
    return out


def not_answers(summary: Mapping[str, Any]) -> str:
    """The failures that are not wrong answers, as a clause to append to the failure
    counts: "; of these, 2 only in an error message's wording (ERR-13) and 1 where the
    adapter broke instead of answering" (empty when there are none)."""
    by = summary.get("failed_by_cause", {})
    phrases = {
        "message": "only in an error message's wording (ERR-13, --strict-messages)",
        "adapter": "where the adapter broke instead of answering",
    }
    parts = [f"{by[key]} {text}" for key, text in phrases.items() if by.get(key)]
    return f"; of these, {' and '.join(parts)}" if parts else ""


def stakes_text(summary: Mapping[str, Any]) -> str:
    """The failed cases by stake (CONF-18), as a phrase: "2 unsafe (fix first), 1 lost
    reuse, 0 other" (empty for a report that does not count them, or with no failure)."""
    by = summary.get("failed_by_stake")
    if not isinstance(by, Mapping) or not summary.get("failed"):
        return ""
    return (
        f"{by.get('unsafe', 0)} unsafe (fix first), {by.get('lost_reuse', 0)} lost reuse, "
        f"{by.get('other', 0)} other"
    )


#: The groups a report shows failed cases in, gravest first (CONF-18).
STAKE_GROUPS = (
    ("unsafe", "unsafe: reused or accepted what must not be (fix first)"),
    ("lost_reuse", "lost reuse: gave up reuse it was owed"),
    ("other", "other: a wrong answer its step does not rank, or no answer"),
)


#: A ranked stake as a report names it; a result's ``stake`` outside it (``other``, or
#: anything else a JSON file says) is named by no tag (CONF-18).
STAKE_LABELS = {"unsafe": "unsafe", "lost_reuse": "lost reuse"}


def failure_groups(
    failed: Sequence[Mapping[str, Any]],
) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """The failed results of a JSON report by stake, each group with its heading; by basis
    (CONF-8) for a report of a suite before 7.2.0, which records no stake."""
    if failed and not any("stake" in r for r in failed):
        return [
            ("on the seeds' semantics", [r for r in failed if r.get("basis") == "seed"]),
            ("on a decision of the specification", [r for r in failed if r.get("basis") != "seed"]),
        ]
    return [
        (heading, [r for r in failed if r.get("stake", "other") == stake])
        for stake, heading in STAKE_GROUPS
    ]


def basis_of(result: CaseResult) -> str | list[str]:
    """``"seed"``, or the decisions the case's verdict rests on (CONF-8)."""
    return list(result.case.basis) if result.case.basis else "seed"


def basis_text(result: CaseResult) -> str:
    """How a report names a case's basis in one phrase (CONF-8)."""
    if not result.case.basis:
        return "the seeds' semantics"
    return "decision " + ", ".join(result.case.basis)


def summarize(results: Sequence[CaseResult]) -> dict[str, Any]:
    totals: Counter[str] = Counter(r.verdict for r in results)
    by_area: dict[str, Counter[str]] = defaultdict(Counter)
    by_class: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        by_area[r.case.area][r.verdict] += 1
        by_class[r.case.cls][r.verdict] += 1

    def counts(counter: Counter[str]) -> dict[str, int]:
        return {v: counter.get(v, 0) for v in VERDICTS}

    failed = [r for r in results if r.verdict == "failed"]
    return {
        "total": len(results),
        **counts(totals),
        "failed_by_basis": {
            "seed": sum(1 for r in failed if not r.case.basis),
            "decision": sum(1 for r in failed if r.case.basis),
        },
        "failed_by_stake": {k: sum(1 for r in failed if r.stake == k) for k in CASE_STAKES},
        "failed_by_cause": {c: sum(1 for r in failed if cause_of(r.failures) == c) for c in CAUSES},
        # cases with advice: a message that does not name its field or values (ERR-13),
        # not a failure unless the run was --strict-messages (CONF-12)
        "advised": sum(1 for r in results if r.advice),
        "by_area": {area: counts(c) for area, c in sorted(by_area.items())},
        "by_class": {cls: counts(c) for cls, c in sorted(by_class.items())},
    }


def requirement_verdicts(results: Sequence[CaseResult]) -> dict[str, dict[str, Any]]:
    """Each requirement: failed if a citing case failed; passed if every applicable one passed."""
    citing: dict[str, list[CaseResult]] = defaultdict(list)
    for r in results:
        for req in r.case.requires:
            citing[req].append(r)
    out: dict[str, dict[str, Any]] = {}
    for req in suite.requirements():
        cases = citing.get(req, [])
        failed = [r.case.id for r in cases if r.verdict == "failed"]
        passed = [r for r in cases if r.verdict == "passed"]
        if failed:
            verdict = "failed"
        elif passed:
            verdict = "passed"
        elif cases and any(r.verdict == "not_applicable" for r in cases):
            verdict = "not_applicable"
        else:
            verdict = "not_run"
        out[req] = {"verdict": verdict, "cases": len(cases), "failed": failed}
    return out


def write(report: Mapping[str, Any], path: Path) -> None:
    write_atomic(path, json.dumps(report, indent=2) + "\n")  # ASCII: lone surrogates escaped


def advice_text(summary: Mapping[str, Any]) -> str:
    """The advice line every rendering shows apart from the failures, or empty."""
    n = summary.get("advised", 0)
    if not n:
        return ""
    return (
        f"advice: {n} case(s) with an error message that does not name its field or "
        "values (ERR-13); not part of the verdict (CONF-12; --strict-messages makes them "
        "failures)"
    )


def only_broken(summary: Mapping[str, Any]) -> bool:
    """Whether the run failed cases and every failure was the adapter breaking: no
    answer was judged wrong."""
    failed = summary["failed"]
    return bool(failed) and summary.get("failed_by_cause", {}).get("adapter") == failed


def verdict(report: Mapping[str, Any]) -> str:
    """The run's verdict as every rendering states it: ``conformant``, ``not conformant``,
    or ``no verdict`` for a run that judged nothing, or that stopped early with no answer
    judged wrong (every failure the adapter breaking)."""
    s = report["summary"]
    if (report.get("incomplete") or not (s["passed"] or s["failed"])) and (
        not s["failed"] or only_broken(s)
    ):
        return "no verdict"
    return "not conformant" if s["failed"] else "conformant"


def gate_state(report: Mapping[str, Any]) -> str | None:
    """What the expectations file made of the run: ``passed``, ``failed``, ``not reached``
    (the run stopped early: cases were not run), or ``None`` without one."""
    gate = report.get("gate")
    if not gate:
        return None
    if report.get("incomplete"):
        return "not reached"
    return "failed" if gate["unexpected_failures"] or gate["stale"] else "passed"


def format_text(fmt: Mapping[str, Any]) -> str:
    """The declared block format in words: "writes 2, reads [1, 2]"; a reader that
    writes no version says so instead of a null."""
    writes = "no version" if fmt["writes"] is None else fmt["writes"]
    return f"writes {writes}, reads {list(fmt['reads'])}"


def caveats(report: Mapping[str, Any]) -> list[str]:
    """What every rendering must show before any verdict: a modified suite, an incomplete run."""
    out = []
    if report["suite"].get("modified"):
        out.append(f"MODIFIED SUITE (--allow-modified): {report['suite']['modified']}")
    if report.get("incomplete"):
        out.append(f"INCOMPLETE RUN: {report['incomplete']}")
    elif judged_nothing(report):
        total = report["summary"]["total"]
        out.append(
            f"NOTHING JUDGED: none of the {total} selected cases applies to what "
            f"{report['adapter']['name']} declares (each one's reason is listed)"
        )
    return out


def judged_nothing(report: Mapping[str, Any]) -> bool:
    """Whether the run passed or failed no case: every one was not applicable (or not run).

    Such a run reaches no verdict of conformance: it must not read as conformant.
    """
    s = report["summary"]
    return bool(s["passed"] == 0 and s["failed"] == 0)


def read(path: Path) -> dict[str, Any]:
    """Load and validate a saved JSON report."""
    from kvconform.harness.yamlsource import load_json

    document: Document = load_json(path)
    if isinstance(document.data, dict):  # counted before the schema walks them (limits.py)
        for member in ("requirements", "results"):
            entries = document.data.get(member)
            if isinstance(entries, list | dict) and len(entries) > limits.MAX_REPORT_ENTRIES:
                raise document.error(
                    (member,),
                    f"{len(entries)} entries, more than the {limits.MAX_REPORT_ENTRIES} a "
                    "report of this harness can hold",
                )
    validate(document, "report")
    data: dict[str, Any] = document.data
    return data
