"""Standing fuzz tests: no input ends in a traceback or a hang (issue 11; spec/security.md).

Hypothesis over what comes from outside the harness: response lines from an
adapter (arbitrary bytes, arbitrary JSON, well-shaped JSON with wrong types),
the text an adapter puts in reports, scenario and expectations files, and the
command line. Each must end in a per-case outcome or a one-line error with a
documented exit status. Derandomized, so CI is reproducible; the strategies
keep examples small so that the whole file runs in seconds.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvconform import cli
from kvconform.harness import suite
from kvconform.harness.expectations import load as load_expectations
from kvconform.harness.scenario import load_scenario_file
from kvconform.harness.yamlsource import SourceError
from kvconform.protocol import codec
from kvconform.protocol import operations as ops
from kvconform.protocol.channel import StreamFault
from kvconform.protocol.client import StdioDriver
from kvconform.reports import html, junit, markdown
from kvconform.values import Broken, Ok, Refused

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
OPERATIONS = [spec.cls for spec in ops.TABLE]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
#: Values where a result is read: digits, near-misses of digits, signature-shaped objects.
result_like = st.one_of(
    json_values,
    st.from_regex(r"[0-9\u0660-\u0669\u00b2 +-]{0,25}", fullmatch=True),
    st.lists(st.from_regex(r"[0-9]{0,22}", fullmatch=True), max_size=3),
    st.fixed_dictionaries(
        {
            "format_version": json_values,
            "model": json_values,
            "n_layers": json_values,
            "n_kv_heads": json_values,
            "head_dim": json_values,
            "dtype": json_values,
            "tokens": json_values,
        }
    ),
)


def _judge(op_class: type[ops.Op], line: bytes, seq: int) -> object:
    """What the client makes of ``line``: an outcome, or a stream fault's kind."""
    op = op_class.__new__(op_class)  # fields are never read when judging an answer
    quick = codec.quick_outcome(op, line, seq)
    try:
        response = StdioDriver._response(line, seq)
    except StreamFault as fault:
        assert quick is None
        return fault.what
    full = codec.outcome_of(op, response)
    assert isinstance(full, Ok | Refused | Broken)
    if quick is not None:
        assert quick == full
    return full


@FUZZ
@given(st.sampled_from(OPERATIONS), st.binary(max_size=200))
def test_any_bytes_as_a_response_line(op_class: type[ops.Op], line: bytes) -> None:
    _judge(op_class, line, 3)


@FUZZ
@given(st.sampled_from(OPERATIONS), json_values)
def test_any_json_as_a_response_line(op_class: type[ops.Op], value: Any) -> None:
    _judge(op_class, json.dumps(value).encode(), 3)


@FUZZ
@given(
    st.sampled_from(OPERATIONS),
    st.sampled_from(["ok", "error", "failure", "unsupported"]),
    result_like,
    st.sampled_from([3, 4, None, "3", True, 3.0]),
)
def test_well_shaped_responses_with_wrong_types(
    op_class: type[ops.Op], form: str, value: Any, seq: Any
) -> None:
    line = json.dumps({"seq": seq, form: value}).encode()
    _judge(op_class, line, 3)


def test_deep_nesting_in_a_response_is_a_fault_not_an_exception() -> None:
    for line in (b"[" * 200_000, b'{"seq":3,"ok":' + b"[" * 200_000 + b"]" * 200_000 + b"}"):
        assert _judge(ops.Hash, line, 3) in ("garbage", "no-seq") or isinstance(
            _judge(ops.Hash, line, 3), Broken
        )


# Reports -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def base_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("fuzz") / "r.json"
    status = cli.main(
        ["run", "--area", "hash", "--quiet", "--json", str(path)], io.StringIO(), io.StringIO()
    )
    assert status == 0
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return report


def _report_with(base: dict[str, Any], name: str, failure: str, reason: str) -> dict[str, Any]:
    """The base report with adapter text in its name, a failure and a reason."""
    report = json.loads(json.dumps(base))
    report["adapter"]["name"], report["adapter"]["version"] = name, failure[:10]
    first = report["results"][0]
    first["verdict"] = "failed"
    first["failure"] = {
        "step": reason,
        "expected": name,
        "actual": failure,
        "text": failure + "\n" + reason,
        "requires": first["requires"],
    }
    report["summary"]["failed"] = 1
    report["results"][1]["verdict"] = "not_applicable"
    report["results"][1]["reason"] = reason
    return report


#: Adapter text: any characters, markup's own among them often.
adapter_text = st.text(st.sampled_from("<>&\"'/") | st.characters(codec="utf-8"), max_size=60)
#: The characters of markup, replaced by a letter: the same text, unable to make markup.
_INERT = str.maketrans("<>&\"'", "xxxxx")


@FUZZ
@given(adapter_text, adapter_text, adapter_text)
@pytest.mark.xdist_group("fuzz-base-report")
def test_any_adapter_text_in_every_report(
    base_report: dict[str, Any], name: str, failure: str, reason: str
) -> None:
    """Whatever an adapter says, each report keeps its shape: Markdown headings, XML that
    parses, and a page with exactly the markup of the same text made inert (every ``<``,
    ``>`` and quote the page has is its own). Catches text let through unescaped."""
    report = _report_with(base_report, name, failure, reason)
    md = markdown.render(report)
    assert md.startswith("## kvconform ") and "NOT conformant" in md.splitlines()[0]
    assert all(line.startswith(("## kvconform", "### Failures")) for line in md.splitlines()
               if line.startswith("#"))  # fmt: skip
    ET.fromstring(junit.render(report).split("\n", 1)[1])
    page = html.render_run(report)
    inert = [text.translate(_INERT) for text in (name, failure, reason)]
    plain = html.render_run(_report_with(base_report, *inert))
    for mark in "<>\"'":
        assert page.count(mark) == plain.count(mark), mark
    for text in (md, page):
        assert not RAW_CONTROL.search(text)


# Files -------------------------------------------------------------------------------


SCENARIO = sorted(suite.scenario_files())[0].read_text(encoding="utf-8").splitlines(keepends=True)


@st.composite
def mangled_scenarios(draw: st.DrawFn) -> str:
    """A real scenario file with lines dropped, doubled, cut or replaced."""
    lines = list(SCENARIO)
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "double", "cut", "replace"]))
        if action == "drop":
            del lines[index]
        elif action == "double":
            lines.insert(index, lines[index])
        elif action == "cut":
            lines[index] = lines[index][: draw(st.integers(0, len(lines[index])))]
        else:
            lines[index] = draw(st.text(max_size=40)) + "\n"
        if not lines:
            break
    return "".join(lines)


def _load_or_refuse(loader: Any, path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        loader(path)
    except SourceError as exc:
        assert str(exc).startswith(str(path)) and "\n" not in str(exc).strip()


@FUZZ
@given(st.one_of(mangled_scenarios(), st.text(max_size=200)))
def test_any_scenario_file_loads_or_is_refused_in_one_line(tmp_path: Path, text: str) -> None:
    _load_or_refuse(load_scenario_file, tmp_path / "fuzz.yaml", text)


@FUZZ
@given(
    st.one_of(
        st.text(max_size=200),
        st.builds(
            lambda ids, reason: (
                "kvconform: expectations/1\nknown_failures:\n"
                + "".join(
                    f"  - id: {json.dumps(i)}\n    reason: {json.dumps(reason)}\n" for i in ids
                )
            ),
            st.lists(st.sampled_from(["hash.fold.ascii", "nope", "", "hash.*"]), max_size=3),
            st.text(max_size=20),
        ),
    )
)
def test_any_expectations_file_loads_or_is_refused_in_one_line(tmp_path: Path, text: str) -> None:
    ids = [c.id for c in suite.all_cases()]
    _load_or_refuse(lambda p: load_expectations(p, ids), tmp_path / "known.yaml", text)


# The command line ---------------------------------------------------------------------

_WORDS = [
    "run", "list", "compare", "--area", "hash", "plan", "--class", "--id", "*", "--requirement",
    "HASH-1", "--timeout", "nan", "-1", "0.5", "--max-failures-shown", "3", "--seed", "random",
    "--generated", "--adapter", "nope:x", "--adapter-cmd", "'", "--json", "--report-dir",
    "--expectations", "--allow-modified", "--no-cache", "-o", "x.html", "r.json", "\x1b[2J",
    "\ud800", "", "--quiet",
]  # fmt: skip


@settings(FUZZ, max_examples=60)
@given(st.lists(st.sampled_from(_WORDS), max_size=6))
def test_any_command_line_ends_in_a_documented_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    if argv and argv[0] == "run":  # keep each run small: one area, no progress
        argv = [*argv, "--area", "hash", "--quiet"]
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(argv, out, err)
    assert status in (0, 1, 2, 3, 4), (argv, err.getvalue())
    assert "Traceback" not in err.getvalue()
    if status == 2:
        assert err.getvalue().count("\n") <= 2, err.getvalue()  # one line (and a warning)
