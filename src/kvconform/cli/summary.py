"""What a run prints on the console: its progress and its summary."""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Sequence
from typing import Any, TextIO

from kvconform.cli.common import _said
from kvconform.harness import manifest
from kvconform.harness.runner import CaseResult, render_advice
from kvconform.harness.stakes import CASE_STAKES
from kvconform.reports.record import declared as declared_text
from kvconform.reports.untrusted import one_line


class Progress:
    """A counter on a terminal; one line per finished area otherwise."""

    def __init__(self, total: int, stream: TextIO, quiet: bool) -> None:
        self.total, self.stream, self.quiet = total, stream, quiet
        self.tty = stream.isatty()
        self.done = 0
        self.area: str | None = None
        self.area_counts: Counter[str] = Counter()

    def __call__(self, result: CaseResult) -> None:
        self.done += 1
        if self.quiet:
            return
        area = result.case.area
        if self.area is not None and area != self.area:
            self._flush_area()
        self.area = area
        self.area_counts[result.verdict] += 1
        if self.tty:
            failed = self.area_counts["failed"]
            self.stream.write(f"\r[{self.done}/{self.total}] {area:<28} {failed} failed ")
            self.stream.flush()

    def _flush_area(self) -> None:
        c = self.area_counts
        line = (
            f"{self.area:<28} {c['passed']:>4} passed {c['failed']:>3} failed "
            f"{c['not_applicable']:>3} n/a"
        )
        self.stream.write(("\r" if self.tty else "") + line + " " * 8 + "\n")
        self.stream.flush()
        self.area_counts = Counter()

    def finish(self) -> None:
        if not self.quiet and self.area is not None:
            self._flush_area()


def _print_summary(
    report: dict[str, Any],
    results: Sequence[CaseResult],
    args: argparse.Namespace,
    integrity: manifest.Integrity,
    out: TextIO,
) -> None:
    from kvconform.reports.record import (
        advice_text,
        caveats,
        format_text,
        gate_state,
        not_answers,
        only_broken,
        stakes_text,
    )
    from kvconform.reports.record import verdict as record_verdict

    s, a = report["summary"], report["adapter"]
    failed = [r for r in results if r.verdict == "failed"]
    known = set(report["gate"]["expected_failures"]) if report.get("gate") else set()
    # under a gate, what CI must act on first: the failures the expectations do not list;
    # then the gravest first: unsafe, lost reuse, the others (CONF-18)
    failed.sort(key=lambda r: (r.case.id in known, CASE_STAKES.index(r.stake or "other")))
    for r in failed[: args.max_failures_shown]:
        mark = "(a known failure, listed in the expectations)\n" if r.case.id in known else ""
        out.write("\n" + mark + r.report() + "\n")
    if len(failed) > args.max_failures_shown:
        out.write(
            f"\n... {len(failed) - args.max_failures_shown} more failure(s); see the reports\n"
        )
    advised = [r for r in results if r.advice]
    if advised:  # apart from the failures: advice, not verdict (CONF-12)
        out.write("\nadvice (not part of the verdict; --strict-messages makes these failures):\n")
        for r in advised[: args.max_failures_shown]:
            out.write(render_advice(r) + "\n")
        if len(advised) > args.max_failures_shown:
            out.write(f"... {len(advised) - args.max_failures_shown} more; see the reports\n")
    out.write(
        f"\nkvconform {report['suite']['version']} (digest {integrity.digest[:16]}) "
        f"against {a['name']} {a['version']} ({a['language']}"
        + (f", protocol {a['protocol']}" if "protocol" in a else "")
        + ")\n"
    )
    out.write(
        f"classes declared: {', '.join(a['classes']) or 'none'}; "
        f"format {format_text(a['format'])}\n"
    )
    chosen = declared_text(a)
    if chosen:
        out.write(
            "declared: "
            + "; ".join(chosen)
            + " (CONF-6, CONF-7; every other option at its default)\n"
        )
    out.write("\n")
    declared = set(a["classes"])
    labels = {cls: cls if cls in declared else f"{cls} (not declared)" for cls in s["by_class"]}
    width = max([12, *map(len, labels.values())])
    out.write(f"{'class':<{width}} {'passed':>7} {'failed':>7} {'n/a':>5}\n")
    for cls, c in s["by_class"].items():
        out.write(
            f"{labels[cls]:<{width}} {c['passed']:>7} {c['failed']:>7} {c['not_applicable']:>5}\n"
        )
    out.write(
        f"\n{'area':<28} {'passed':>7} {'failed':>7} {'n/a':>5}"
        "   (the same cases by scenario folder or vector file)\n"
    )
    for area, c in s["by_area"].items():
        out.write(f"{area:<28} {c['passed']:>7} {c['failed']:>7} {c['not_applicable']:>5}\n")
    reasons = Counter(r.reason for r in results if r.verdict == "not_applicable")
    if reasons:
        out.write("\nnot applicable:\n")
        for reason, n in reasons.most_common():
            out.write(f"  {n:>4}  {reason}\n")
    unjudged = [
        req for req, v in report["requirements"].items() if v["verdict"] == "not_applicable"
    ]
    if unjudged and (s["passed"] or s["failed"]):
        shown = ", ".join(unjudged[:24]) + (
            f" and {len(unjudged) - 24} more" if len(unjudged) > 24 else ""
        )
        out.write(
            f"\nnot judged: {len(unjudged)} requirement(s) whose every selected case was not "
            f"applicable to this declaration (the verdict says nothing of them): {shown}\n"
        )
    incidents = report["adapter"].get("incidents", [])
    if incidents:
        out.write("\nadapter incidents (against the protocol; not part of the verdict):\n")
        out.writelines(f"  {one_line(line)}\n" for line in incidents[:10])
        if len(incidents) > 10:
            out.write(f"  ... and {len(incidents) - 10} more (in the JSON report)\n")
    gate = report.get("gate")
    if gate:
        out.write(
            f"\nexpectations {_said(gate['file'])}: {len(gate['expected_failures'])} expected "
            f"failure(s), {len(gate['unexpected_failures'])} unexpected, "
            f"{len(gate['stale'])} stale\n"
        )
        changed = {c["id"]: c for c in gate.get("changed", [])}
        for case_id in gate["unexpected_failures"]:
            if case_id in changed:
                was, now = changed[case_id]["listed"], changed[case_id]["now"]
                listed = _CAUSE_WORDS.get(was, "a wrong answer or a message's wording")
                out.write(
                    f"  listed as failing by {listed}, now fails by {_CAUSE_WORDS[now]}:"
                    f" {case_id}\n"
                )
            else:
                out.write(f"  unexpected failure: {case_id}\n")
        for case_id in gate["stale"]:
            out.write(f"  listed as failing but passes (remove it): {case_id}\n")
        if gate["unchecked"]:
            shown = ", ".join(gate["unchecked"][:10])
            more = f" and {len(gate['unchecked']) - 10} more" if len(gate["unchecked"]) > 10 else ""
            out.write(
                f"  listed but not checked in this run (not selected, not applicable, or a "
                f"generated property without --generated): {shown}{more}\n"
            )
    verdict = {
        "conformant": "CONFORMANT for the declared classes",
        "not conformant": "NOT CONFORMANT",
        "no verdict": "NO VERDICT",
    }[record_verdict(report)]
    state = gate_state(report)
    if state == "passed":  # said beside the verdict whenever a gate is in force
        verdict += "; gate passed" + (": every failure is a known one" if s["failed"] else "")
    elif state is not None:
        verdict += f"; gate {state}"
    split = ""
    if only_broken(s):
        # No answer was judged: the basis says what a wrong answer would have meant.
        by = s["failed_by_basis"]
        split = (
            " (every one where the adapter broke instead of answering, so none judged an "
            f"answer; {by['seed']} on the seeds' semantics, {by['decision']} on a decision)"
        )
    elif s["failed"]:
        by = s["failed_by_basis"]
        split = (
            f" ({stakes_text(s)}; {by['seed']} on the seeds' semantics, "
            f"{by['decision']} on a decision of the specification{not_answers(s)})"
        )
    reexpressed = sum(1 for c in report.get("results", []) if c.get("reexpressed"))
    if reexpressed:
        out.write(
            f"\n{reexpressed} cases judged re-expressed into the declared shape "
            "(INTERPRETING.md 6.4; each case's reexpressed in the JSON report says how)\n"
        )
    notes = caveats(report)
    if notes:
        verdict += f" ({'; '.join(n.split(':')[0] for n in notes)})"
        out.write("".join(f"\n{note}" for note in notes) + "\n")
    if advice_text(s):
        out.write(f"\n{advice_text(s)}\n")
    out.write(
        f"\n{s['passed']} passed, {s['failed']} failed{split}, {s['not_applicable']} not "
        f"applicable{_not_run(s)} of {s['total']} in {report['seconds']:.1f} s: {verdict}\n"
    )


#: How the console names a failure's cause (runner.CAUSES).
_CAUSE_WORDS = {
    "answer": "a wrong answer",
    "message": "a message's wording",
    "adapter": "the adapter breaking",
}


def _not_run(summary: dict[str, Any]) -> str:
    return f", {summary['not_run']} not run" if summary.get("not_run") else ""
