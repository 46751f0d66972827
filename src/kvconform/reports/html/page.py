"""What every page has: its CSS, its Content-Security-Policy, its frame, escaping, the
counts tables, and the notes shown next to an implementation's name."""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Mapping
from typing import Any

from kvconform.reports.record import caveats, not_answers, stakes_text
from kvconform.reports.untrusted import visible


def escape(text: object) -> str:
    """Any text as HTML character data or an attribute value (:mod:`.untrusted`)."""
    return html.escape(visible(str(text)))


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:75em;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}h4{margin:1em 0 .3em}
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.25em .6em;
text-align:left;vertical-align:top}th{background:#f3f3f3}
.passed{background:#d9f2d9}.failed{background:#f8d0d0;font-weight:600}
.not_applicable,.not_run{background:#eee;color:#777}
td.cell a{color:inherit;text-decoration:none;display:block}
pre{background:#f7f7f7;padding:.6em;overflow-x:auto;white-space:pre-wrap}
.meta{color:#555}code{font-size:.95em}.caveat{background:#fff3cd;padding:.4em .6em}
[hidden]{display:none!important}
.text{font-weight:normal;color:#444}
details.case{border-left:4px solid #d33;margin:.4em 0;padding:.2em .6em;background:#fdf6f6}
details.case>summary{cursor:pointer}details.case[open]>summary{margin-bottom:.4em}
.tag{font-size:.85em;padding:0 .4em;border-radius:.3em;white-space:nowrap}
.tag.seed{background:#e4e4e4}.tag.decision{background:#fde9c4}.tag.known{background:#dde6f0}
.tag.unsafe{background:#f8d0d0;font-weight:bold}.tag.lost_reuse{background:#d8ecd8}
pre.cmd{background:#eef3fb}
details.area{margin:.3em 0}details.area>summary{cursor:pointer;font-weight:600}
form.filter{background:#f6f6f6;padding:.4em .8em;margin:1em 0}
form.filter fieldset{display:inline-block;border:1px solid #ddd;margin:.2em .4em .2em 0;
vertical-align:top}form.filter label{margin-right:.8em;white-space:nowrap}
"""

_LABEL = {"passed": "pass", "failed": "FAIL", "not_applicable": "n/a", "not_run": "not run"}


def _digest(source: str) -> str:
    """A CSP hash source for an inline element's exact text."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


def _page(title: str, body: list[str], script: str = "") -> str:
    scripts = _digest(script) if script else "'none'"
    policy = (
        f"default-src 'none'; style-src {_digest(_CSS)}; script-src {scripts}; "
        "base-uri 'none'; form-action 'none'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>\n"
        + "\n".join(body)
        + (f'\n<script id="filter-script">{script}</script>' if script else "")
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


#: What a comparison shows of a report it reads back (which may come from anywhere): a
#: case id, and a failure's text, clipped; each failure once per implementation, so a
#: small report that lists one case under many requirements cannot make a huge page.
_ID_LIMIT = 200
_TEXT_LIMIT = 8000


def _caveat_note(report: Mapping[str, Any]) -> str:
    notes = caveats(report)
    return "".join(f'<br><strong class="caveat">{escape(n)}</strong>' for n in notes)


def _split(summary: Mapping[str, Any]) -> str:
    """Failures by stake (CONF-18) and by basis (CONF-8), when there are any."""
    by = summary.get("failed_by_basis")
    if not by or not summary["failed"]:
        return ""
    extra = not_answers(summary)
    stakes = f"{stakes_text(summary)}; " if stakes_text(summary) else ""
    return f" ({stakes}{by['seed']} on the seeds' semantics, {by['decision']} on a decision{extra})"
