"""The HTML run report, written for a person (kvconform.reports.html.render_run).

Failures first, grouped by the requirement each case is written for, each one
opening to its full text and the commands that explain and rerun it; a filter by
class, area and basis that needs a script but hides nothing without one; the
other cases collapsed by area; adapter text inert throughout. The page is also
rendered in headless Chromium, when there is one.
"""

from __future__ import annotations

import base64
import hashlib
import html
import os
import re
import shutil
import subprocess
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from kvconform.harness import suite
from kvconform.harness.explain import requirement_summary
from kvconform.harness.runner import run_cases
from kvconform.protocol.adapter import Adapter
from kvconform.protocol.driver import InProcessDriver
from kvconform.reports import html as html_report
from kvconform.reports import record
from tests.fixtures import hostile_text
from tests.mutants import all_mutants

MUTANT = "prof-partial-block-accepted"
#: Characters no report may carry raw: C0 controls but tab and newline, DEL, C1, surrogates.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _report(adapter: Adapter, area: str | None = None) -> dict[str, Any]:
    """A run as ``kvconform run --trace`` records it, without the command around it."""
    cases = [c for c in suite.all_cases() if area is None or c.area == area]
    driver = InProcessDriver(adapter)
    try:
        results = run_cases(cases, driver, trace=True)
    finally:
        driver.close()
    return record.build(
        results, driver.info, suite_digest="0" * 64, started="2024-01-01T00:00:00+00:00", seconds=1
    )


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    mutant = next(m for m in all_mutants() if m.name == MUTANT)
    data = _report(mutant.factory())
    assert data["summary"]["failed"] > 0, "the mutant no longer fails: pick another"
    return data


@pytest.fixture(scope="module")
def page(report: dict[str, Any]) -> str:
    return html_report.render_run(report)


def _failed(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in report["results"] if r["verdict"] == "failed"]


class _Elements(HTMLParser):
    """Every start tag with its attributes, in document order; and the text of scripts."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data

    def with_attribute(self, name: str) -> list[tuple[str, dict[str, str | None]]]:
        return [(tag, attrs) for tag, attrs in self.tags if name in attrs]

    def ids(self) -> list[str]:
        return [str(attrs["id"]) for _, attrs in self.with_attribute("id")]


def _elements(text: str) -> _Elements:
    parsed = _Elements()
    parsed.feed(text)
    parsed.close()
    return parsed


def _sections(page: str) -> dict[str, str]:
    """Each requirement's group of failures, by the requirement id in its heading."""
    found = re.findall(
        r'<section class="requirement" data-group><h4>([^<:]+)(.*?)</section>', page, re.S
    )
    return {rid.strip(): rest for rid, rest in found}


# The page, as text -------------------------------------------------------------------


@pytest.mark.xdist_group("html-report")
def test_failures_come_before_the_passing_cases(report: dict[str, Any], page: str) -> None:
    failures = page.index('<h2 id="failures">')
    assert f'<h2 id="failures">Failures ({report["summary"]["failed"]})</h2>' in page
    for later in ("<h2>By class</h2>", "<h2>Requirements</h2>", '<details class="area"'):
        assert failures < page.index(later), later
    first_pass = next(r for r in report["results"] if r["verdict"] == "passed")
    assert failures < page.index(f"<code>{first_pass['id']}</code>")
    assert page.index("<h1>") < page.index('<p class="meta">') < failures


@pytest.mark.xdist_group("html-report")
def test_failures_are_grouped_by_requirement_with_its_text(
    report: dict[str, Any], page: str
) -> None:
    sections = _sections(page)
    expected: dict[str, list[str]] = {}
    for r in _failed(report):
        expected.setdefault(r["requires"][0], []).append(r["id"])
    assert set(sections) == set(expected)
    for rid, ids in expected.items():
        text = requirement_summary(rid)
        assert text, rid
        assert sections[rid].startswith(f': <span class="text">{html.escape(text)}</span>')
        assert f"({len(ids)} failing)" in sections[rid]
        for case_id in ids:
            assert f'id="case-{case_id}"' in sections[rid], (rid, case_id)
    # the gravest first (CONF-18): the split by stake survives the grouping
    by = report["summary"]["failed_by_stake"]
    unsafe = page.index(f"Unsafe: reused or accepted what must not be (fix first): {by['unsafe']}")
    lost = page.index(f"Lost reuse: gave up reuse it was owed: {by['lost_reuse']}</h3>")
    other = page.index(f"Other: a wrong answer its step does not rank, or no answer: {by['other']}")
    assert unsafe < lost < other


@pytest.mark.xdist_group("html-report")
def test_each_failure_opens_to_its_text_and_the_commands_for_it(
    report: dict[str, Any], page: str
) -> None:
    for r in _failed(report):
        start = page.index(f'<details class="case" id="case-{r["id"]}"')
        block = page[start : page.index("</details>", start)]
        assert "<summary>" in block and html.escape(r["title"]) in block
        assert html.escape(r["failure"]["text"]) in block
        assert "trace (&gt; sent, &lt; received)" in block  # the run used --trace
        assert f"kvconform explain {r['id']}\n" in block
        assert f"kvconform run --id {r['id']} " in block
        assert "decision profile-v2</span>" in block or "seed:" in block
        # and, one level further in, what `kvconform explain` would print for it
        explained = page[page.index('<details class="explain">', start) :]
        assert explained.index("As written:") < explained.index("</details>")
        assert f"kvconform run --id {r['id']} --adapter-cmd" in html.unescape(explained)


def test_a_run_and_the_failures_its_page_explains_share_one_load_of_the_suite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``kvconform run --html``: the page explains each failure from the suite the run
    loaded, not from a second load (which took a third of a failing run's own time)."""
    import io

    from kvconform import cli
    from kvconform.harness import cache

    loads: list[str | None] = []
    real = cache.cached_cases

    def counted(build: Any, suite_digest: str | None = None) -> Any:
        loads.append(suite_digest)
        return real(build, suite_digest)

    monkeypatch.setattr(cache, "cached_cases", counted)
    suite.all_cases.cache_clear()
    try:
        status = cli.main(
            ["run", "--quiet", "--id", "alloc.rewind.rewind-then-append-reuses-positions",
             "--adapter", "tests.fixtures.inprocess_misbehaving:WrongThenCrash",
             "--html", str(tmp_path / "run.html")],
            io.StringIO(), io.StringIO(),
        )  # fmt: skip
    finally:
        suite.all_cases.cache_clear()
    assert status == cli.EXIT_FAILED
    assert len(loads) == 1 and loads[0], loads  # once, by the manifest check's digest
    page = (tmp_path / "run.html").read_text(encoding="utf-8")
    assert '<details class="explain">' in page and "As written:" in page


@pytest.mark.xdist_group("html-report")
def test_every_case_is_listed_by_area_collapsed(report: dict[str, Any], page: str) -> None:
    areas = Counter(r["area"] for r in report["results"])
    assert page.count('<details class="area" data-group>') == len(areas)
    elements = _elements(page)
    assert not [attrs for tag, attrs in elements.tags if tag == "details" and "open" in attrs]
    rows = [attrs for tag, attrs in elements.with_attribute("data-class") if tag == "tr"]
    assert len(rows) == len(report["results"])
    for area, n in areas.items():
        assert sum(1 for attrs in rows if attrs["data-area"] == area) == n
    for r in _failed(report):  # a failing row links to its failure above
        assert f'<a href="#case-{r["id"]}"><code>{r["id"]}</code></a>' in page


@pytest.mark.xdist_group("html-report")
def test_the_filter_needs_its_script_and_hides_nothing_without_it(
    report: dict[str, Any], page: str
) -> None:
    elements = _elements(page)
    hidden = elements.with_attribute("hidden")
    assert hidden == [("form", {"id": "filter", "class": "filter", "hidden": None})]
    boxes = [attrs for tag, attrs in elements.tags if tag == "input"]
    assert {a["value"] for a in boxes if a["name"] == "class"} == {
        r["class"] for r in report["results"]
    }
    assert {a["value"] for a in boxes if a["name"] == "area"} == {
        r["area"] for r in report["results"]
    }
    assert all("checked" in a and a["type"] == "checkbox" for a in boxes)
    options = {attrs["value"] for tag, attrs in elements.tags if tag == "option"}
    assert {"any", "seed", "decision", "decision:profile-v2"} <= options
    assert '<select name="basis">' in page and 'id="filter-status"' in page
    # one script, the page's own, allowed by hash and nothing else
    assert [tag for tag, _ in elements.tags].count("script") == 1
    (script,) = elements.scripts
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    (policy,) = [
        attrs["content"]
        for tag, attrs in elements.tags
        if tag == "meta" and attrs.get("http-equiv") == "Content-Security-Policy"
    ]
    assert policy is not None and f"script-src 'sha256-{digest}';" in policy
    assert "default-src 'none'" in policy


@pytest.mark.xdist_group("html-report")
def test_existing_content_and_anchors_stay(report: dict[str, Any], page: str) -> None:
    s = report["summary"]
    assert f"{s['passed']} passed, {s['failed']} failed" in page
    assert "<h2>By class</h2>" in page and "<h2>By area</h2>" in page
    ids = _elements(page).ids()
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    assert "failures" in ids
    links = re.findall(r'href="#([^"]+)"', page)
    assert links and set(links) <= set(ids)
    for rid, v in report["requirements"].items():
        for case_id in v["failed"]:
            assert f'<a href="#case-{case_id}">{case_id}</a>' in page, rid


def test_adapter_text_stays_inert() -> None:
    data = _report(hostile_text.make(), area="alloc")
    assert data["summary"]["failed"] > 0
    page = html_report.render_run(data)
    assert not RAW_CONTROL.search(page)
    assert "<script>alert" not in page and "&lt;/pre&gt;&lt;script&gt;alert(1)" in page
    assert "&lt;!-- comment" in page and "<!--" not in page
    assert "\\x1b" in page and "\\ud800" in page  # shown, as escapes
    elements = _elements(page)
    tags = Counter(tag for tag, _ in elements.tags)
    assert tags["script"] == 1 and tags["a"] == page.count('<a href="#')
    allowed = {
        "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "p",
        "strong", "code", "span", "br", "form", "fieldset", "legend", "label", "input",
        "select", "option", "button", "table", "tr", "th", "td", "a", "section",
        "details", "summary", "pre", "script",
    }  # fmt: skip
    assert set(tags) <= allowed, set(tags) - allowed
    for _, attrs in elements.tags:
        assert not [name for name in attrs if name.startswith("on")], attrs
        assert str(attrs.get("href", "#")).startswith("#"), attrs


# The page, in a browser ---------------------------------------------------------------


def _browser() -> str:
    browser = next(
        (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
    )
    if browser is None:
        pytest.skip(
            "NO HEADLESS BROWSER FOUND: the HTML report was not rendered "
            "(.ci/run installs Debian's chromium)"
        )
    return browser


def _chromium(tmp_path: Path, *argv: str) -> str:
    result = subprocess.run(
        [
            _browser(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def _hidden_ids(dom: _Elements) -> list[str]:
    return [str(a.get("id") or a.get("data-class")) for _, a in dom.with_attribute("hidden")]


@pytest.mark.xdist_group("html-report")
def test_the_page_renders_in_headless_chromium(
    report: dict[str, Any], page: str, tmp_path: Path
) -> None:
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    shot = tmp_path / "report.png"
    _chromium(tmp_path, "--window-size=1200,1600", f"--screenshot={shot}", path.as_uri())
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000, len(png)

    failed = _failed(report)
    target = f"case-{failed[-1]['id']}"
    text = _chromium(tmp_path, "--dump-dom", f"{path.as_uri()}#{target}")
    dom = _elements(text)
    assert _hidden_ids(dom) == []  # the script ran: it showed the filter, hid nothing
    status = f"Showing {len(failed)} of {len(failed)} failing case(s) and "
    assert status in text and f"Failures ({len(failed)})" in text
    assert all(f'id="case-{r["id"]}"' in text for r in failed)
    opened = [a["id"] for tag, a in dom.with_attribute("open") if tag == "details"]
    assert opened == [target]  # a failure linked to opens


@pytest.mark.xdist_group("html-report")
def test_the_filter_hides_what_is_unticked(
    report: dict[str, Any], page: str, tmp_path: Path
) -> None:
    failed = _failed(report)
    dropped = Counter(r["class"] for r in failed).most_common(1)[0][0]
    kept = [r for r in failed if r["class"] != dropped]
    box = f'name="class" value="{dropped}" checked>'
    assert page.count(box) == 1
    path = tmp_path / "filtered.html"
    path.write_text(page.replace(box, f'name="class" value="{dropped}">'), encoding="utf-8")
    text = _chromium(tmp_path, "--dump-dom", path.as_uri())
    dom = _elements(text)
    hidden = [a for _, a in dom.with_attribute("hidden")]
    assert hidden and all(a.get("data-class") == dropped or "data-group" in a for a in hidden)
    cases = [a for tag, a in dom.with_attribute("data-class") if tag == "details"]
    shown = [str(a["id"]) for a in cases if "hidden" not in a]
    assert shown == [f"case-{r['id']}" for r in kept]
    assert f"Showing {len(kept)} of {len(failed)} failing case(s)" in text


def test_every_report_shows_what_the_adapter_declared(report: dict[str, Any]) -> None:
    """The HTML page and the Markdown summary say which options and capabilities the
    adapter declared (CONF-6, CONF-7): a run set aside for a declaration is read with
    it (PREFIX-23's cases of an input left out, say). A value from a report read back is
    anyone's text: shown inert."""
    from kvconform.reports import markdown
    from kvconform.values import OPTIONS

    adapter = {
        **report["adapter"],
        "options": {**report["adapter"]["options"], "prefix_key": "verified"},
        "capabilities": {"prefix_inputs": [], "dtypes": ["f32", "<script>x</script>\u202e"]},
    }
    declared = {**report, "adapter": adapter}
    page = html_report.render_run(declared)
    assert "Declared: prefix_key: verified;" in page and "; prefix_inputs: []. " in page
    assert "<script>x" not in page and "\u202e" not in page
    summary = markdown.render(declared)
    from kvconform.reports.untrusted import markdown as inert

    assert f"Declared: {inert('prefix_key: verified')}, " in summary
    assert inert("prefix_inputs: []") in summary
    assert "<script>" not in summary and "\u202e" not in summary
    defaults = {name: spec.default for name, spec in OPTIONS.items()}
    plain = {**report, "adapter": {**report["adapter"], "options": defaults, "capabilities": {}}}
    assert "Declared:" not in html_report.render_run(plain)
    assert "Declared:" not in markdown.render(plain)
