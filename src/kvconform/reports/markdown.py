"""A Markdown summary fit for a CI job summary (e.g. ``$GITHUB_STEP_SUMMARY``)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kvconform.files import write_atomic
from kvconform.reports.record import (
    advice_text,
    caveats,
    declared,
    failure_groups,
    gate_state,
    not_answers,
    stakes_text,
)
from kvconform.reports.record import verdict as record_verdict
from kvconform.reports.untrusted import markdown as _m

_MARK = {"passed": "pass", "failed": "FAIL", "not_applicable": "n/a", "not_run": "not run"}


_PLAIN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _code(text: object) -> str:
    """An id as inline code when it is plain, else as inert text (it may come from a file)."""
    shown = str(text)
    return f"`{shown}`" if _PLAIN_ID.fullmatch(shown) else _m(shown)


def _list(items: Iterable[object]) -> str:
    return ", ".join(_m(str(item)) for item in items)


def render(report: Mapping[str, Any], *, max_failures: int = 25) -> str:
    """The summary; each string from the adapter or the report file is inert (:mod:`.untrusted`)."""
    s = report["summary"]
    a = report["adapter"]
    verdict = {"conformant": "conformant", "not conformant": "NOT conformant"}.get(
        record_verdict(report), "not judged"
    )  # a run that stopped early with no wrong answer, or judged nothing, reaches no verdict
    gate = report.get("gate")

    if caveats(report):
        verdict = f"{verdict} ({'; '.join(c.split(':')[0].lower() for c in caveats(report))})"
    lines = [
        f"## kvconform {_m(report['suite']['version'])}: {_m(a['name'])} {_m(a['version'])} "
        f"is {verdict}"
        " for its declared classes"
        # the gate is what CI acts on: beside the verdict, so the two are read together
        + ("" if gate_state(report) is None else f"; gate {gate_state(report)}"),
        "",
        f"{s['passed']} passed, {s['failed']} failed, {s['not_applicable']} not applicable"
        + (f", {s['not_run']} not run" if s.get("not_run") else "")
        + f" of {s['total']} cases in {report['seconds']:.1f} s. "
        f"Classes declared: {_list(a['classes']) or 'none'}. "
        + _declared(a)
        + (f"Failed by stake: {stakes_text(s)}. " if stakes_text(s) else "")
        + f"Failed on the seeds' semantics: {s.get('failed_by_basis', {}).get('seed', 0)}; "
        f"on a decision: {s.get('failed_by_basis', {}).get('decision', 0)}" + not_answers(s) + ". "
        f"Suite digest {_code(report['suite']['digest'][:16])}.",
        "",
    ]
    lines += [f"**{_m(caveat)}**" for caveat in caveats(report)]
    if caveats(report):
        lines.append("")
    if gate:
        lines += [
            f"Expectations: gate **{gate_state(report)}**; "
            f"{len(gate['unexpected_failures'])} unexpected failure(s), "
            f"{len(gate['stale'])} stale entr(y/ies), {len(gate['expected_failures'])} expected "
            f"failure(s), {len(gate['unchecked'])} listed but not checked in this run.",
            "",
        ]
        changed = {c["id"]: c for c in gate.get("changed", [])}
        for label, key in (
            ("Unexpected failure", "unexpected_failures"),
            ("Listed as failing but passes (remove it)", "stale"),
            ("Listed, not checked", "unchecked"),
        ):
            for case_id in gate[key]:
                note = ""
                if case_id in changed:
                    c = changed[case_id]
                    note = f" (listed for {_m(c['listed'])}, now fails by {_m(c['now'])})"
                lines.append(f"- {label}: {_code(case_id)}{note}")
        if gate["unexpected_failures"] or gate["stale"] or gate["unchecked"]:
            lines.append("")
    lines += ["| class | passed | failed | not applicable |", "|---|---|---|---|"]
    for cls, c in s["by_class"].items():
        lines.append(f"| {_m(cls)} | {c['passed']} | {c['failed']} | {c['not_applicable']} |")
    lines += ["", "| area | passed | failed | not applicable |", "|---|---|---|---|"]
    for area, c in s["by_area"].items():
        lines.append(f"| {_m(area)} | {c['passed']} | {c['failed']} | {c['not_applicable']} |")
    failed = [r for r in report["results"] if r["verdict"] == "failed"]
    shown = 0
    for title, group in failure_groups(failed):
        if not group:
            continue
        lines += ["", f"### Failures, {title} ({len(group)})", ""]
        for r in group:
            if shown >= max_failures:
                break
            shown += 1
            f = r["failure"]
            basis = "" if r.get("basis") == "seed" else f" (decision {_list(r['basis'])})"
            known = " (known)" if gate and r["id"] in gate["expected_failures"] else ""
            lines += [
                f"- **{_code(r['id'])}**{known} ({_list(f['requires'])}){basis} at "
                f"{_m(f['step'])}: "
                f"expected {_m(f['expected'])}; got {_m(f['actual'])}",
            ]
    if len(failed) > shown:
        lines.append(f"- ... and {len(failed) - shown} more (see the JSON report)")
    advised = [r for r in report["results"] if r.get("advice")]
    if advised:  # apart from the failures: advice, not verdict (CONF-12)
        lines += [
            "",
            f"### Advice, not part of the verdict ({len(advised)})",
            "",
            f"{_m(advice_text(s))}.",
            "",
        ]
        for r in advised[:max_failures]:
            for a in r["advice"]:
                lines.append(f"- {_code(r['id'])} at {_m(a['step'])}: {_m(a['actual'])}")
        if len(advised) > max_failures:
            lines.append(f"- ... and {len(advised) - max_failures} more (see the JSON report)")
    reqs = report["requirements"]
    failing = [rid for rid, v in reqs.items() if v["verdict"] == "failed"]
    lines += [
        "",
        f"Requirements: {sum(v['verdict'] == 'passed' for v in reqs.values())} met, "
        f"{len(failing)} failed"
        + (f" ({_list(failing)})" if failing else "")
        + f", {sum(v['verdict'] in ('not_applicable', 'not_run') for v in reqs.values())} "
        "not checked.",
        "",
    ]
    return "\n".join(lines)


def _declared(adapter: Mapping[str, Any]) -> str:
    """The options an adapter answers other than by default (CONF-6) and the capabilities
    it declares (CONF-7), as one sentence."""
    chosen = [_m(item) for item in declared(adapter)]
    return f"Declared: {', '.join(chosen)}. " if chosen else ""


def write(report: Mapping[str, Any], path: Path) -> None:
    write_atomic(path, render(report))


__all__ = ["_MARK", "render", "write"]
