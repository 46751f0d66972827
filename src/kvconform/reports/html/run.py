"""The run page, written for a person: the failures first, grouped by requirement, each
opening to its text and the commands that explain and rerun it; the other cases by
area; a filter by class, area and basis (its one inline script)."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from kvconform.rendering import clip
from kvconform.reports.html.page import _LABEL, _TEXT_LIMIT, _counts_table, _page, _split, escape
from kvconform.reports.record import (
    STAKE_LABELS,
    advice_text,
    caveats,
    declared,
    failure_groups,
    format_text,
    gate_state,
)

#: The run page's script: the filter, and a failure linked to (``#case-<id>``) opens.
#: It reads ``data-class``, ``data-area``, ``data-basis``, the form and the address's
#: fragment, and writes ``hidden``, ``open`` and the status line's ``textContent`` only.
_FILTER_SCRIPT = """
(function () {
  "use strict";
  var form = document.getElementById("filter");
  if (!form) { return; }
  function picked(name) {
    var set = new Set();
    form.querySelectorAll("input[name='" + name + "']").forEach(function (box) {
      if (box.checked) { set.add(box.value); }
    });
    return set;
  }
  function basisMatches(wanted, basis) {
    if (wanted === "any") { return true; }
    if (wanted === "seed") { return basis === "seed"; }
    if (wanted === "decision") { return basis !== "seed"; }
    return basis !== "seed" && basis.split(" ").indexOf(wanted.slice(9)) >= 0;
  }
  function apply() {
    var classes = picked("class"), areas = picked("area");
    var wanted = form.elements.namedItem("basis").value;
    var shown = {failures: 0, cases: 0}, total = {failures: 0, cases: 0};
    document.querySelectorAll("[data-class]").forEach(function (item) {
      var on = classes.has(item.getAttribute("data-class")) &&
        areas.has(item.getAttribute("data-area")) &&
        basisMatches(wanted, item.getAttribute("data-basis") || "seed");
      var kind = item.tagName === "DETAILS" ? "failures" : "cases";
      item.hidden = !on;
      total[kind] += 1;
      if (on) { shown[kind] += 1; }
    });
    document.querySelectorAll("[data-group]").forEach(function (group) {
      group.hidden = !group.querySelector("[data-class]:not([hidden])");
    });
    document.getElementById("filter-status").textContent =
      "Showing " + shown.failures + " of " + total.failures + " failing case(s) and " +
      shown.cases + " of " + total.cases + " case(s) by area.";
  }
  function openTarget() {
    var target;
    try {
      target = document.getElementById(decodeURIComponent(window.location.hash.slice(1)));
    } catch (malformed) { return; }
    if (target && target.tagName === "DETAILS") { target.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  form.addEventListener("change", apply);
  form.addEventListener("submit", function (event) { event.preventDefault(); });
  form.addEventListener("reset", function () { window.setTimeout(apply, 0); });
  form.hidden = false;
  apply();
  openTarget();
})();
"""


def render_run(report: Mapping[str, Any]) -> str:
    a, s = report["adapter"], report["summary"]
    results: list[Mapping[str, Any]] = report["results"]
    title = f"kvconform {report['suite']['version']}: {a['name']} {a['version']}"
    failed = [r for r in results if r["verdict"] == "failed"]
    body = [
        f"<h1>{escape(title)}</h1>",
        *(f'<p class="caveat"><strong>{escape(c)}</strong></p>' for c in caveats(report)),
        f'<p class="meta">{s["passed"]} passed, {s["failed"]} failed{escape(_split(s))}, '
        f"{s['not_applicable']} not applicable"
        f"{f', {n} not run' if (n := s.get('not_run')) else ''} of {s['total']} cases in "
        f"{report['seconds']:.1f} s. Language {escape(a['language'])}; classes "
        f"{escape(', '.join(a['classes']))}; format {escape(format_text(a['format']))}. "
        + (f"Declared: {escape('; '.join(chosen))}. " if (chosen := declared(a)) else "")
        + f"Suite digest "
        f"<code>{escape(report['suite']['digest'])}</code>; "
        f"started {escape(report['started'])}.</p>",
        *_gate(report.get("gate"), gate_state(report)),
        *_filter(results),
        f'<h2 id="failures">Failures ({len(failed)})</h2>',
        *_failures(failed, report["requirements"], _known(report.get("gate"))),
        *_advice(results, s),
        "<h2>By class</h2>",
        *_counts_table("class", s["by_class"]),
        "<h2>By area</h2>",
        *_counts_table("area", s["by_area"]),
        *_requirements(report["requirements"]),
        *_cases_by_area(results),
    ]
    return _page(title, body, script=_FILTER_SCRIPT)


def _advice(results: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> list[str]:
    """Advice, apart from the failures and not part of the verdict (ERR-13, CONF-12)."""
    advised = [r for r in results if r.get("advice")]
    if not advised:
        return []
    out = [
        f'<h2 id="advice">Advice, not part of the verdict ({len(advised)})</h2>',
        f'<p class="meta">{escape(advice_text(summary))}.</p>',
        "<ul>",
    ]
    for r in advised[:_ADVICE_SHOWN]:
        out += [
            f"<li><code>{escape(str(r['id']))}</code> at {escape(str(a.get('step', '')))}: "
            f"{escape(clip(str(a.get('actual', '')), _TEXT_LIMIT))}</li>"
            for a in r["advice"]
        ]
    if len(advised) > _ADVICE_SHOWN:
        out.append(f"<li>... and {len(advised) - _ADVICE_SHOWN} more (see the JSON report)</li>")
    return [*out, "</ul>"]


#: The most advised cases the run page lists (each one's findings in full).
_ADVICE_SHOWN = 200


def _gate(gate: Mapping[str, Any] | None, state: str | None) -> list[str]:
    """What the expectations file made of the run (docs: "5. Gate CI"), before any case."""
    if not gate:
        return []
    lines = [
        '<h2 id="gate">Expectations</h2>',
        f"<p>{escape(gate['file'])}: gate <strong>{escape(state)}</strong>; "
        f"{len(gate['expected_failures'])} expected failure(s), "
        f"{len(gate['unexpected_failures'])} unexpected, {len(gate['stale'])} stale, "
        f"{len(gate['unchecked'])} listed but not checked in this run.</p>",
    ]
    changed = {c["id"]: c for c in gate.get("changed", [])}
    groups = (
        ("Unexpected failures", gate["unexpected_failures"]),
        ("Listed as failing, but passed (remove them)", gate["stale"]),
        ("Listed, not checked (not selected or not applicable)", gate["unchecked"]),
    )
    for title, ids in groups:
        if not ids:
            continue
        items = []
        for case_id in ids:
            note = ""
            if case_id in changed:
                note = (
                    f" (listed for {changed[case_id]['listed']}, "
                    f"now fails by {changed[case_id]['now']})"
                )
            items.append(f"<li><code>{escape(case_id)}</code>{escape(note)}</li>")
        lines += [f"<p>{escape(title)}:</p>", "<ul>", *items, "</ul>"]
    return lines


def _basis(result: Mapping[str, Any]) -> str | list[str]:
    basis: str | list[str] = result.get("basis", "seed")
    return basis


def _data(result: Mapping[str, Any]) -> str:
    """The attributes the filter reads: class, area, and ``seed`` or the decisions."""
    basis = _basis(result)
    key = "seed" if basis == "seed" else " ".join(basis)
    return (
        f'data-class="{escape(result["class"])}" data-area="{escape(result["area"])}" '
        f'data-basis="{escape(key)}"'
    )


def _filter(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """The filter's form: hidden until its script shows it, so no script shows everything."""
    decisions = sorted({d for r in results if (b := _basis(r)) != "seed" for d in b})

    def boxes(name: str, values: Sequence[str]) -> str:
        return "".join(
            f'<label><input type="checkbox" name="{name}" value="{escape(v)}" checked> '
            f"{escape(v)}</label>"
            for v in values
        )

    options = [
        ("any", "any"),
        ("seed", "the seeds' semantics"),
        ("decision", "any decision of the specification"),
        *((f"decision:{d}", f"decision {d}") for d in decisions),
    ]
    return [
        '<form id="filter" class="filter" hidden>',
        f"<fieldset><legend>class</legend>{boxes('class', sorted({r['class'] for r in results}))}"
        "</fieldset>",
        f"<fieldset><legend>area</legend>{boxes('area', sorted({r['area'] for r in results}))}"
        "</fieldset>",
        '<fieldset><legend>basis</legend><select name="basis">'
        + "".join(f'<option value="{escape(v)}">{escape(label)}</option>' for v, label in options)
        + '</select> <button type="reset">show all</button></fieldset>',
        '<p id="filter-status" class="meta" role="status"></p>',
        "</form>",
    ]


def _known(gate: Mapping[str, Any] | None) -> frozenset[str]:
    """The failures an expectations file lists (none without a gate)."""
    return frozenset(str(i) for i in gate["expected_failures"]) if gate else frozenset()


def _failures(
    failed: Sequence[Mapping[str, Any]],
    requirements: Mapping[str, Any],
    known: frozenset[str] = frozenset(),
) -> list[str]:
    """The failures by stake, the unsafe ones first (CONF-18; by basis, CONF-8, for a
    report of a suite before 7.2.0, which has no stakes), each grouped by its requirement;
    a failure the expectations list is marked known."""
    out = [
        '<p class="meta">Grouped by the requirement each case is written for (the first it '
        "cites). Each failure opens to its full text (with its trace when the run used "
        "<code>--trace</code>) and the commands that explain it and rerun it alone; give the "
        "rerun the <code>--adapter</code> or <code>--adapter-cmd</code> of this run.</p>"
    ]
    order = {rid: index for index, rid in enumerate(requirements)}
    for heading, group in failure_groups(failed):
        out.append(f'<h3 class="basis">{heading[0].upper()}{heading[1:]}: {len(group)}</h3>')
        by_requirement: dict[str, list[Mapping[str, Any]]] = {}
        for r in group:
            by_requirement.setdefault(_primary(r), []).append(r)
        for rid in sorted(by_requirement, key=lambda k: (order.get(k, len(order)), k)):
            cases = by_requirement[rid]
            out.append(
                f'<section class="requirement" data-group><h4>{escape(rid)}'
                f'{_requirement_line(rid, ": ")} <span class="meta">({len(cases)} failing)</span>'
                "</h4>"
            )
            out += [_failure(r, str(r["id"]) in known) for r in cases]
            out.append("</section>")
    return out


def _primary(result: Mapping[str, Any]) -> str:
    """The requirement a case is written for: the first it cites."""
    cited = result.get("requires") or result.get("failure", {}).get("requires") or []
    return str(cited[0]) if cited else "(no requirement)"


def _failure(result: Mapping[str, Any], known: bool = False) -> str:
    case_id = str(result["id"])
    basis = _basis(result)
    if basis == "seed":
        tag = '<span class="tag seed">seed: the seeds&#x27; semantics</span>'
    else:
        tag = f'<span class="tag decision">decision {escape(", ".join(basis))}</span>'
    stake = str(result.get("stake"))
    if stake in STAKE_LABELS:
        tag = f'<span class="tag {stake}">{STAKE_LABELS[stake]}</span> ' + tag
    if known:
        tag += ' <span class="tag known">known: listed in the expectations</span>'
    failure = result.get("failure", {})
    also = [str(req) for req in failure.get("requires", result.get("requires", []))]
    also = [req for req in also if req != _primary(result)]
    quoted = escape(shlex.quote(case_id))
    return (
        f'<details class="case" id="case-{escape(case_id)}" {_data(result)}><summary>'
        f"<code>{escape(case_id)}</code> {escape(result.get('title', ''))} {tag}"
        + (f' <span class="meta">also {escape(", ".join(also))}</span>' if also else "")
        + "</summary>"
        f'<pre class="cmd">kvconform explain {quoted}\n'
        f"kvconform run --id {quoted} --trace trace.txt "
        f'--adapter-cmd "&lt;your adapter command&gt;"</pre>'
        f"<pre>{escape(failure.get('text', ''))}</pre>{_explained(case_id)}</details>"
    )


def _explained(case_id: str) -> str:
    """The output of ``kvconform explain`` for the case, when this suite has it."""
    from kvconform.harness import explain
    from kvconform.harness.yamlsource import SourceError

    try:
        text = explain.explain(case_id)
    except (explain.UnknownId, OSError, SourceError):
        return ""  # a report of another suite version: the command above still applies
    return (
        '<details class="explain"><summary>kvconform explain: the case as written, on the '
        f"wire, and its requirements' text</summary><pre>{escape(text)}</pre></details>"
    )


def _requirement_line(req_id: str, before: str) -> str:
    """``before`` and a requirement's one line from the suite's specification, if it has one."""
    from kvconform.harness.explain import requirement_summary
    from kvconform.harness.yamlsource import SourceError

    try:
        text = requirement_summary(req_id)
    except (OSError, SourceError):
        text = ""
    return f'{before}<span class="text">{escape(text)}</span>' if text else ""


def _requirements(requirements: Mapping[str, Any]) -> list[str]:
    out = [
        "<h2>Requirements</h2>",
        "<table><tr><th>requirement</th><th>verdict</th><th>cases</th><th>failing cases</th></tr>",
    ]
    for rid, v in requirements.items():
        links = ", ".join(f'<a href="#case-{escape(c)}">{escape(c)}</a>' for c in v["failed"])
        out.append(
            f"<tr><td>{escape(rid)}{_requirement_line(rid, '<br>')}</td>"
            f'<td class="{v["verdict"]}">{_LABEL[v["verdict"]]}</td><td>{v["cases"]}</td>'
            f"<td>{links}</td></tr>"
        )
    out.append("</table>")
    return out


def _cases_by_area(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every case, one closed section per area; a failing one links to its failure above."""
    out = [
        f'<h2 id="cases">All cases ({len(results)})</h2>',
        '<p class="meta">By area, collapsed: open one to see its cases.</p>',
    ]
    areas: dict[str, list[Mapping[str, Any]]] = {}
    for r in results:
        areas.setdefault(str(r["area"]), []).append(r)
    for area in sorted(areas):
        rows = areas[area]
        counts = Counter(r["verdict"] for r in rows)
        tally = ", ".join(
            f"{counts[v]} {label}"
            for v, label in (
                ("passed", "passed"),
                ("failed", "failed"),
                ("not_applicable", "not applicable"),
                ("not_run", "not run"),
            )
            if counts[v] or v == "passed"
        )
        out += [
            f'<details class="area" data-group><summary>{escape(area)}: {tally}</summary>',
            "<table><tr><th>case</th><th>class</th><th>basis</th><th>verdict</th>"
            "<th>title</th></tr>",
        ]
        for r in rows:
            note = f" ({escape(r['reason'])})" if r.get("reason") else ""
            if r.get("reexpressed"):  # judged in the declared shape (CONF-14)
                note += f" (re-expressed: {escape('; '.join(r['reexpressed']))})"
            basis = _basis(r)
            basis_cell = "seed" if basis == "seed" else ", ".join(basis)
            name = f"<code>{escape(r['id'])}</code>"
            if r["verdict"] == "failed":
                name = f'<a href="#case-{escape(r["id"])}">{name}</a>'
            out.append(
                f"<tr {_data(r)}><td>{name}</td><td>{escape(r['class'])}</td>"
                f'<td>{escape(basis_cell)}</td><td class="{r["verdict"]}">'
                f"{_LABEL[r['verdict']]}{note}</td><td>{escape(r.get('title', ''))}</td></tr>"
            )
        out += ["</table>", "</details>"]
    return out
