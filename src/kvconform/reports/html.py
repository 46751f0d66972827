"""Self-contained HTML: one page per run, and a matrix comparing several runs.

Pages carry their own CSS and no script or external resource, so they can be
attached to a CI run or mailed as they are.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kvconform.reports.files import write_atomic
from kvconform.reports.record import caveats
from kvconform.reports.untrusted import visible


def escape(text: object) -> str:
    """Any text as HTML character data or an attribute value (:mod:`.untrusted`)."""
    return html.escape(visible(str(text)))


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:75em;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.25em .6em;
text-align:left;vertical-align:top}th{background:#f3f3f3}
.passed{background:#d9f2d9}.failed{background:#f8d0d0;font-weight:600}
.not_applicable,.not_run{background:#eee;color:#777}
td.cell a{color:inherit;text-decoration:none;display:block}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;white-space:pre-wrap}
.meta{color:#555}code{font-size:.95em}.caveat{background:#fff3cd;padding:.4em .6em}
"""

_LABEL = {"passed": "pass", "failed": "FAIL", "not_applicable": "n/a", "not_run": "not run"}


def _page(title: str, body: list[str]) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _counts_table(title: str, rows: Mapping[str, Mapping[str, int]]) -> list[str]:
    out = [
        f"<table><tr><th>{escape(title)}</th><th>passed</th><th>failed</th>"
        "<th>not applicable</th></tr>"
    ]
    for name, c in rows.items():
        cls = "failed" if c["failed"] else "passed"
        out.append(
            f"<tr><td>{escape(name)}</td><td>{c['passed']}</td>"
            f'<td class="{cls}">{c["failed"]}</td><td>{c["not_applicable"]}</td></tr>'
        )
    out.append("</table>")
    return out


def render_run(report: Mapping[str, Any]) -> str:
    a, s = report["adapter"], report["summary"]
    title = f"kvconform {report['suite']['version']}: {a['name']} {a['version']}"
    body = [
        f"<h1>{escape(title)}</h1>",
        *(f'<p class="caveat"><strong>{escape(c)}</strong></p>' for c in caveats(report)),
        f'<p class="meta">{s["passed"]} passed, {s["failed"]} failed{escape(_split(s))}, '
        f"{s['not_applicable']} not applicable"
        f"{f', {n} not run' if (n := s.get('not_run')) else ''} of {s['total']} cases in "
        f"{report['seconds']:.1f} s. Language {escape(a['language'])}; classes "
        f"{escape(', '.join(a['classes']))}; format writes {a['format']['writes']}, reads "
        f"{escape(str(a['format']['reads']))}. Suite digest "
        f"<code>{escape(report['suite']['digest'])}</code>; "
        f"started {escape(report['started'])}.</p>",
        "<h2>By class</h2>",
        *_counts_table("class", s["by_class"]),
        "<h2>By area</h2>",
        *_counts_table("area", s["by_area"]),
    ]
    failed = [r for r in report["results"] if r["verdict"] == "failed"]
    body.append(f'<h2 id="failures">Failures ({len(failed)})</h2>')
    for title, group in (
        ("On the seeds' semantics (safety)", [r for r in failed if r.get("basis") == "seed"]),
        (
            "On a decision of the specification (policy)",
            [r for r in failed if r.get("basis") != "seed"],
        ),
    ):
        body.append(f'<h3 class="basis">{title}: {len(group)}</h3>')
        for r in group:
            basis = "" if r.get("basis") == "seed" else f" (decision {', '.join(r['basis'])})"
            body.append(
                f'<h4 id="case-{escape(r["id"])}"><code>{escape(r["id"])}</code>'
                f"{escape(basis)}</h4><pre>{escape(r['failure']['text'])}</pre>"
            )
    body += [
        "<h2>Requirements</h2>",
        "<table><tr><th>requirement</th><th>verdict</th><th>cases</th><th>failing cases</th></tr>",
    ]
    for rid, v in report["requirements"].items():
        links = ", ".join(f'<a href="#case-{escape(c)}">{escape(c)}</a>' for c in v["failed"])
        body.append(
            f'<tr><td>{escape(rid)}</td><td class="{v["verdict"]}">'
            f"{_LABEL[v['verdict']]}</td><td>{v['cases']}</td><td>{links}</td></tr>"
        )
    body += [
        "</table>",
        "<h2>All cases</h2>",
        "<table><tr><th>case</th><th>area</th><th>class</th><th>basis</th><th>verdict</th></tr>",
    ]
    for r in report["results"]:
        note = f" ({escape(r['reason'])})" if r.get("reason") else ""
        basis = r.get("basis", "seed")
        basis_cell = "seed" if basis == "seed" else ", ".join(basis)
        body.append(
            f"<tr><td><code>{escape(r['id'])}</code></td><td>{escape(r['area'])}</td>"
            f'<td>{escape(r["class"])}</td><td>{escape(basis_cell)}</td><td class="{r["verdict"]}">'
            f"{_LABEL[r['verdict']]}{note}</td></tr>"
        )
    body.append("</table>")
    return _page(title, body)


def render_compare(reports: Sequence[Mapping[str, Any]]) -> str:
    """A matrix: requirements by implementations; a failing cell links to its cases."""
    names = [f"{r['adapter']['name']} {r['adapter']['version']}" for r in reports]
    requirement_ids: list[str] = []
    for report in reports:
        for rid in report["requirements"]:
            if rid not in requirement_ids:
                requirement_ids.append(rid)
    title = "kvconform comparison: " + ", ".join(names)
    body = [
        f"<h1>{escape(title)}</h1>",
        '<table id="summary"><tr><th>implementation</th>'
        "<th>language</th><th>suite</th><th>passed</th><th>failed</th><th>n/a</th></tr>",
    ]
    for name, report in zip(names, reports, strict=True):
        s = report["summary"]
        body.append(
            f"<tr><td>{escape(name)}{_caveat_note(report)}</td>"
            f"<td>{escape(report['adapter']['language'])}"
            f"</td><td>{escape(report['suite']['version'])} "
            f"<code>{escape(report['suite']['digest'][:12])}</code></td>"
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
        for rid in requirement_ids:
            v = report["requirements"].get(rid)
            if not v or v["verdict"] != "failed":
                continue
            body.append(f'<h3 id="impl{index}-{escape(rid)}">{escape(name)}: {escape(rid)}</h3>')
            for case_id in v["failed"]:
                result = by_id.get(case_id, {})
                text = result.get("failure", {}).get("text", case_id)
                basis = result.get("basis", "seed")
                on = "the seeds' semantics" if basis == "seed" else "decision " + ", ".join(basis)
                body.append(f"<p>{escape(case_id)}: on {escape(on)}</p><pre>{escape(text)}</pre>")
    return _page(title, body)


def _caveat_note(report: Mapping[str, Any]) -> str:
    notes = caveats(report)
    return "".join(f'<br><strong class="caveat">{escape(n)}</strong>' for n in notes)


def _split(summary: Mapping[str, Any]) -> str:
    """Failures on the seeds' semantics and on a decision, when there are any (CONF-8)."""
    by = summary.get("failed_by_basis")
    if not by or not summary["failed"]:
        return ""
    return f" ({by['seed']} on the seeds' semantics, {by['decision']} on a decision)"


def write_run(report: Mapping[str, Any], path: Path) -> None:
    write_atomic(path, render_run(report))


def write_compare(reports: Sequence[Mapping[str, Any]], path: Path) -> None:
    write_atomic(path, render_compare(reports))
