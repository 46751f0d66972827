"""The matrix page: several runs side by side, case by case."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kvconform.rendering import clip
from kvconform.reports.html.page import (
    _ID_LIMIT,
    _LABEL,
    _TEXT_LIMIT,
    _caveat_note,
    _page,
    _split,
    escape,
)
from kvconform.reports.record import STAKE_LABELS


def compare_names(
    reports: Sequence[Mapping[str, Any]], sources: Sequence[str] | None = None
) -> list[str]:
    """Each report's column name: its adapter's name and version, and, where two would
    read alike (three commits of one engine at one version), the report's source too."""
    names = [
        f"{clip(str(r['adapter']['name']), 200)} {clip(str(r['adapter']['version']), 200)}"
        for r in reports
    ]  # a report is a file anyone can edit: its words are clipped like an adapter's
    if sources is not None:
        alike = {n for n, times in Counter(names).items() if times > 1}
        names = [
            f"{n} ({clip(source, 200)})" if n in alike else n
            for n, source in zip(names, sources, strict=True)
        ]
    return names


def suites_differ(reports: Sequence[Mapping[str, Any]]) -> str:
    """A warning when the reports come from different suites (empty when they do not):
    a requirement's cases, and so its verdict, may differ between them."""
    suites = sorted({(r["suite"]["version"], r["suite"]["digest"]) for r in reports})
    if len(suites) < 2:
        return ""
    shown = ", ".join(
        f"{clip(str(version), 60)} (digest {str(digest)[:12]})" for version, digest in suites
    )
    return (
        f"these reports come from different suites: {shown}; a requirement's cases may "
        "differ between them, so compare its verdicts with care"
    )


def render_compare(
    reports: Sequence[Mapping[str, Any]], sources: Sequence[str] | None = None
) -> str:
    """A matrix: requirements by implementations; a failing cell links to its cases.
    ``sources`` (the reports' file names) tell apart reports of one name and version."""
    names = compare_names(reports, sources)
    # first seen first, each once: a dict, not a list's `in` (a report holding 80,000
    # ids made that quadratic, an hour at the input limit)
    requirement_ids = list(
        dict.fromkeys(rid for report in reports for rid in report["requirements"])
    )
    title = "kvconform comparison: " + ", ".join(names)
    differ = suites_differ(reports)
    body = [
        f"<h1>{escape(title)}</h1>",
        *([f'<p class="caveat"><strong>{escape(differ)}</strong></p>'] if differ else []),
        '<table id="summary"><tr><th>implementation</th>'
        "<th>language</th><th>suite</th><th>started</th><th>passed</th><th>failed</th>"
        "<th>n/a</th></tr>",
    ]
    for name, report in zip(names, reports, strict=True):
        s = report["summary"]
        body.append(
            f"<tr><td>{escape(name)}{_caveat_note(report)}</td>"
            f"<td>{escape(clip(str(report['adapter']['language']), 200))}"
            f"</td><td>{escape(clip(str(report['suite']['version']), 60))} "
            f"<code>{escape(report['suite']['digest'][:12])}</code></td>"
            f"<td>{escape(clip(str(report['started']), 60))}</td>"
            f'<td>{s["passed"]}</td><td class="{"failed" if s["failed"] else "passed"}">'
            f"{s['failed']}{escape(_split(s))}</td><td>{s['not_applicable']}</td></tr>"
        )
    body += [
        "</table>",
        "<h2>Requirements by implementation</h2>",
        '<table id="matrix"><tr><th>requirement</th>'
        + "".join(f"<th>{escape(n)}</th>" for n in names)
        + "</tr>",
    ]
    for rid in requirement_ids:
        cells = []
        for index, report in enumerate(reports):
            v = report["requirements"].get(rid, {"verdict": "not_run", "failed": []})
            label = _LABEL[v["verdict"]]
            if v["verdict"] == "failed":
                label = f'<a href="#impl{index}-{escape(rid)}">{label} ({len(v["failed"])})</a>'
            cells.append(
                f'<td class="cell {v["verdict"]}" data-requirement="{escape(rid)}">{label}</td>'
            )
        body.append(f"<tr><th>{escape(rid)}</th>{''.join(cells)}</tr>")
    body.append("</table>")
    body.append("<h2>Failing cases</h2>")
    for index, (name, report) in enumerate(zip(names, reports, strict=True)):
        by_id = {r["id"]: r for r in report["results"]}
        shown: set[str] = set()  # each failure's text once per implementation
        for rid in requirement_ids:
            v = report["requirements"].get(rid)
            if not v or v["verdict"] != "failed":
                continue
            body.append(f'<h3 id="impl{index}-{escape(rid)}">{escape(name)}: {escape(rid)}</h3>')
            for case_id in dict.fromkeys(v["failed"]):
                shown_id = escape(clip(str(case_id), _ID_LIMIT))
                if case_id in shown:
                    body.append(f"<p>{shown_id}: its failure is shown above</p>")
                    continue
                shown.add(case_id)
                result = by_id.get(case_id, {})
                text = clip(str(result.get("failure", {}).get("text", case_id)), _TEXT_LIMIT)
                basis = result.get("basis", "seed")
                on = "the seeds' semantics" if basis == "seed" else "decision " + ", ".join(basis)
                ranked = STAKE_LABELS.get(str(result.get("stake")))  # in words (CONF-18)
                on = f"{ranked}, on {on}" if ranked else f"on {on}"
                body.append(f"<p>{shown_id}: {escape(on)}</p><pre>{escape(text)}</pre>")
    return _page(title, body)
