"""Adapter strings are data in every report (issue 11; spec/security.md).

One run against an adapter whose name, version, language and failure texts are
built to break each medium (tests/fixtures/hostile_text.py); every report must
be written whole, well formed, and show the hostile text as inert text.
"""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kvconform import cli
from kvconform.reports import untrusted

ADAPTER = "tests.fixtures.hostile_text:make"
#: Characters no report may carry raw: C0 controls but tab and newline, DEL, C1, surrogates.
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _strict_stream() -> io.TextIOWrapper:
    """A text stream that raises on what a real UTF-8 terminal cannot take (lone surrogates)."""
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)


def _text(stream: io.TextIOWrapper) -> str:
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8")


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str, str, Path]:
    directory = tmp_path_factory.mktemp("hostile")
    out, err = _strict_stream(), _strict_stream()
    status = cli.main(
        ["run", "--adapter", ADAPTER, "--area", "alloc", "--report-dir", str(directory)], out, err
    )
    return status, _text(out), _text(err), directory


@pytest.mark.xdist_group("hostile-reports-run")
def test_the_run_reaches_its_verdict_and_writes_every_report(
    hostile_run: tuple[int, str, str, Path],
) -> None:
    status, _, err, directory = hostile_run
    assert status == cli.EXIT_FAILED, err
    for name in ("report.json", "report.xml", "summary.md", "report.html"):
        assert (directory / name).stat().st_size > 0, name


@pytest.mark.xdist_group("hostile-reports-run")
def test_the_console_shows_no_control_sequence(hostile_run: tuple[int, str, str, Path]) -> None:
    _, out, err, _ = hostile_run
    for text in (out, err):
        assert not RAW_CONTROL.search(text), RAW_CONTROL.search(text)
    assert "\\x1b" in out + err  # shown, as an escape


@pytest.mark.xdist_group("hostile-reports-run")
def test_junit_is_well_formed_xml_with_the_text_escaped(
    hostile_run: tuple[int, str, str, Path],
) -> None:
    path = hostile_run[3] / "report.xml"
    root = ET.parse(path).getroot()
    failures = root.findall(".//failure")
    assert failures
    assert any("\\ud800" in (f.text or "") for f in failures)
    assert not RAW_CONTROL.search(path.read_text(encoding="utf-8"))


@pytest.mark.xdist_group("hostile-reports-run")
def test_the_markdown_summary_cannot_be_spoofed(hostile_run: tuple[int, str, str, Path]) -> None:
    text = (hostile_run[3] / "summary.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("## kvconform ") and "NOT conformant" in lines[0]
    headings = [line for line in lines if line.startswith("#")]
    assert all(line.startswith(("## kvconform ", "### Failures, ")) for line in headings)
    assert len([h for h in headings if h.startswith("## ")]) == 1
    for raw in ("<!--", "](", "<script", "www.evil", "a@evil", "https:"):
        assert raw not in text, raw
    table_rows = [line for line in lines if line.startswith("|")]
    assert all(line.count("|") == 5 for line in table_rows), table_rows
    assert not RAW_CONTROL.search(text)


@pytest.mark.xdist_group("hostile-reports-run")
def test_the_html_report_shows_the_text_and_runs_nothing(
    hostile_run: tuple[int, str, str, Path],
) -> None:
    text = (hostile_run[3] / "report.html").read_text(encoding="utf-8")
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert not RAW_CONTROL.search(text)
    HTMLParser().feed(text)


@pytest.mark.xdist_group("hostile-reports-run")
def test_compare_reads_the_json_report_back(
    hostile_run: tuple[int, str, str, Path], tmp_path: Path
) -> None:
    report = hostile_run[3] / "report.json"
    assert "\\ud800" in report.read_text(encoding="ascii")  # JSON escapes, ASCII only
    out, err = _strict_stream(), _strict_stream()
    status = cli.main(["compare", "-o", str(tmp_path / "c.html"), str(report)], out, err)
    assert status == 0, _text(err)
    page = (tmp_path / "c.html").read_text(encoding="utf-8")
    assert not RAW_CONTROL.search(page) and "<script>" not in page


@pytest.mark.parametrize(
    "text",
    ["", "plain", "\ud800", "a\x00b", "\x1b[2J", "x\r\ny", "\ufffe", "<!--", "| a |", "#"],
)
def test_each_medium_renders_any_text(text: str) -> None:
    for render in (untrusted.visible, untrusted.one_line, untrusted.xml, untrusted.markdown):
        shown = render(text)
        shown.encode("utf-8")  # never a lone surrogate
        assert not RAW_CONTROL.search(shown)
    assert "\n" not in untrusted.markdown(text) and "\n" not in untrusted.one_line(text)
    without_references = re.sub(r"&#[0-9]+;", "", untrusted.markdown(text))
    assert not re.search(r"[<>|\[\]`*_#&]", without_references)
    ET.fromstring(f"<a>{untrusted.xml(text).replace('&', '&amp;').replace('<', '&lt;')}</a>")
