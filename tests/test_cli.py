"""The kvconform command: exit statuses, selection, reports, expectations, integrity."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from kvconform import cli
from kvconform.adapters.reference import ReferenceAdapter
from kvconform.harness import manifest, suite
from kvconform.harness.yamlsource import Document, validate

pytestmark = pytest.mark.covers("CONF-3")

MUTANT = "tests.mutants.corpus:TruncateRemints"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def mutant_reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run of the whole suite against a mutant, with every report written."""
    directory = tmp_path_factory.mktemp("mutant")
    status, _, err = run("run", "--adapter", MUTANT, "--report-dir", str(directory), "--quiet")
    assert status == cli.EXIT_FAILED, err
    return directory


def test_default_run_is_green_against_the_reference() -> None:
    status, out, _ = run("run", "--quiet")
    assert status == cli.EXIT_OK
    assert "CONFORMANT for the declared classes" in out
    assert f"{len(suite.all_cases())} in" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["--report-dir", "made/deeper", "--id", "no.such.case"],  # refused after the folder
        ["--report-dir", "made", "--seed", "3"],  # --seed without --generated
        ["--report-dir", "made", "--export-counterexamples", "also/made", "--id", "no.such"],
        ["--report-dir", "kept", "--id", "no.such.case"],
        ["--report-dir", "made/" + "x" * 300],  # "made" is made, then the name is too long
    ],
)
def test_a_refused_run_leaves_no_folder_behind(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fails a command that makes its output folders, then refuses the run as a usage
    error and leaves them (a stray ``x/`` appeared in checkouts this way). Passes any
    command that refuses before making them or removes what it made; a folder that was
    there before, empty, is the user's and stays."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kept").mkdir()
    status, _, err = run("run", *argv)
    assert status == cli.EXIT_USAGE, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--bogus"], "unrecognized arguments: --bogus"),
        (["run", "--area", "no-such-area"], "matches no case"),
        (["run", "--requirement", "PLAN-999"], "no such requirement"),
        (["run", "--class", "planning"], "not one of"),
        (["run", "--timeout", "-1"], "above 0"),
        (["run", "--adapter", "json"], "expected 'module:factory'"),
        (["run", "--adapter", "x:y", "--adapter-cmd", "z"], "not allowed with"),
        (["compare", "nothing.json", "-o", "x.html"], "not a kvconform JSON report"),
        (["run", "--json", "same.out", "--html", "same.out"], "would both be written to"),
        (["run", "--junit", "r.xml", "--trace", "./r.xml"], "would both be written to"),
        (["run", "--expectations", "e.txt", "--markdown", "e.txt"], "would overwrite the --exp"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_2_with_one_clear_line(argv: list[str], fragment: str) -> None:
    status, _, err = run(*argv)
    assert status == cli.EXIT_USAGE
    assert fragment in err
    assert "Traceback" not in err
    assert err.count("\n") == 1
    for word in argv:  # a file the line names is named once
        if word.endswith(".json"):
            assert err.count(word) == 1, err


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("no_such_module:make", "cannot import 'no_such_module'"),
        ("json:no_such_factory", "has no attribute 'no_such_factory'"),
        ("builtins:object", "the factory returned no describe() method"),
    ],
)
def test_an_adapter_module_that_cannot_be_had_could_not_start(spec: str, fragment: str) -> None:
    """A well-formed --adapter naming what is not there is an adapter that could not
    start (exit 3, as for a missing --adapter-cmd program), not a bad argument."""
    status, _, err = run("run", "--quiet", "--adapter", spec)
    assert status == cli.EXIT_ADAPTER, err
    assert fragment in err and "Traceback" not in err


def test_a_run_that_judges_nothing_has_no_verdict() -> None:
    """Every selected case not applicable: status 5 and "NO VERDICT", never "CONFORMANT"."""
    status, out, err = run(
        "run", "--id", "verify.*", "--adapter", "tests.fixtures.hash_only_adapter:HashOnly"
    )
    assert status == cli.EXIT_NOTHING_JUDGED == 5, err
    assert "NO VERDICT" in out and "CONFORMANT" not in out
    assert "does not declare the class verify" in out
    status, out, _ = run(
        "run",
        "--id",
        "verify.*",
        "--id",
        "hash.*",
        "--adapter",
        "tests.fixtures.hash_only_adapter:HashOnly",
        "--quiet",
    )
    assert status == cli.EXIT_OK and "CONFORMANT" in out


def test_requirements_left_unjudged_are_named() -> None:
    """A conformant verdict says which requirements no applicable case judged."""
    status, out, _ = run(
        "run", "--id", "hash.*", "--id", "alloc.rewind.*", "--quiet",
        "--adapter", "tests.fixtures.hash_only_adapter:HashOnly",
    )  # fmt: skip
    assert status == cli.EXIT_OK
    line = next(x for x in out.splitlines() if x.startswith("not judged:"))
    assert "ALLOC-5" in line and "HASH-" not in line


def test_the_class_table_says_which_classes_were_not_declared() -> None:
    """A stranger read ``plan_validity 0 0 10`` as a class of theirs: a class the adapter
    does not declare is labelled so, and the columns stay aligned."""
    status, out, _ = run(
        "run", "--id", "hash.*", "--id", "verify.*", "--quiet",
        "--adapter", "tests.fixtures.hash_only_adapter:HashOnly",
    )  # fmt: skip
    assert status == cli.EXIT_OK
    table = out[out.index("\nclass ") + 1 :].split("\n\n")[0].splitlines()
    rows = {line.split("  ")[0].strip(): line for line in table[1:]}
    assert "hash" in rows and "verify (not declared)" in rows, table
    assert len({len(line) for line in table}) == 1, table  # aligned columns


def test_the_generated_checks_are_listed_and_said_when_a_selection_leaves_them_out() -> None:
    status, out, _ = run("list", "--id", "generated.*")
    assert status == cli.EXIT_OK
    assert out.splitlines()[0].startswith("generated.") and "4 case(s)" in out
    status, out, _ = run("list")
    assert "and 4 generated checks, run with --generated N" in out
    status, out, err = run("run", "--generated", "5", "--class", "plan_validity", "--quiet")
    assert status == cli.EXIT_OK and "holds none of the generated.* cases" in err
    assert "generated checks: 5 example(s)" not in out


def test_list_names_the_generated_checks_without_drawing_them() -> None:
    """Listing needs the descriptions only: neither Hypothesis nor the reference (numpy)
    is imported, and without Hypothesis installed no generated check is offered."""
    probe = (
        "import io, sys\n"
        "from kvconform import cli\n"
        "out = io.StringIO()\n"
        "assert cli.main(['list', '--id', 'generated.*'], out, io.StringIO()) == 0\n"
        "print(out.getvalue().count('(runs with --generated N)'),"
        " sorted(m for m in ('hypothesis', 'numpy') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.stdout.split(None, 1) == ["4", "[]\n"], done.stdout + done.stderr


def test_without_hypothesis_list_offers_no_generated_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "hypothesis" else real(name, *a),
    )
    status, out, _ = run("list")
    assert status == cli.EXIT_OK and "generated" not in out
    status, _, err = run("list", "--id", "generated.*")
    assert status == cli.EXIT_USAGE and "the selection matches no case" in err


def test_an_adapter_whose_factory_fails_exits_3() -> None:
    status, _, err = run("run", "--adapter", "tests.test_cli:broken_factory")
    assert status == cli.EXIT_ADAPTER
    assert "could not start" in err and "RuntimeError" in err


def broken_factory() -> object:
    raise RuntimeError("no GPU here")


def test_selection_by_area_class_requirement_and_id() -> None:
    status, out, _ = run("list", "--area", "alloc", "--requirement", "ALLOC-5")
    assert status == cli.EXIT_OK
    lines = out.strip().splitlines()
    assert lines[-1].endswith("case(s)") and int(lines[-1].split()[0]) >= 1
    assert all("ALLOC-5" in line for line in lines[:-1])
    status, out, _ = run("list", "--id", "alloc.rewind.*")
    assert all(line.startswith("alloc.rewind.") for line in out.strip().splitlines()[:-1])
    status, out, _ = run("list", "--class", "hash", "--area", "vectors/encoding")
    assert int(out.strip().splitlines()[-1].split()[0]) > 40


@pytest.mark.parametrize(
    "cls", ["hash", "identity", "plan", "signature", "verify", "plan_validity", "prefix_cache"]
)
def test_every_class_can_be_selected(cls: str) -> None:
    """Each conformance class (CONF-1) is a valid --class, and selects only its own cases."""
    status, out, err = run("list", "--class", cls)
    assert status == cli.EXIT_OK, err
    lines = out.strip().splitlines()[:-1]
    assert lines and all(line.split()[1] == cls for line in lines)


@pytest.mark.xdist_group("cli-mutant-reports")
def test_the_json_report_is_valid_and_complete(mutant_reports: Path) -> None:
    data = json.loads((mutant_reports / "report.json").read_text())
    validate(Document("report.json", data, {}), "report")
    assert data["adapter"]["name"] == "kvconform-reference"
    assert data["suite"]["digest"] == manifest.check().digest
    assert data["summary"]["total"] == len(suite.all_cases())
    assert data["summary"]["failed"] > 0
    failed = [r for r in data["results"] if r["verdict"] == "failed"]
    assert all(r["failure"]["requires"] and r["failure"]["why"] for r in failed)
    assert data["requirements"]["ALLOC-5"]["verdict"] == "failed"
    assert data["requirements"]["SIG-2"]["verdict"] == "passed"


@pytest.mark.xdist_group("cli-mutant-reports")
def test_the_junit_report_counts_match(mutant_reports: Path) -> None:
    data = json.loads((mutant_reports / "report.json").read_text())
    root = ET.parse(mutant_reports / "report.xml").getroot()
    assert int(root.get("tests", "0")) == data["summary"]["total"]
    assert int(root.get("failures", "0")) == data["summary"]["failed"]
    failures = root.findall(".//testcase/failure")
    assert len(failures) == data["summary"]["failed"]
    assert any("ALLOC-5" in (f.text or "") for f in failures)


@pytest.mark.xdist_group("cli-mutant-reports")
def test_the_markdown_summary_names_the_failures(mutant_reports: Path) -> None:
    text = (mutant_reports / "summary.md").read_text()
    assert "NOT conformant" in text
    assert "alloc.rewind.keeps-alloc-id" in text
    assert "| class | passed | failed | not applicable |" in text


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.cells: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        if attributes.get("id"):
            self.ids.append(str(attributes["id"]))
        if tag == "td" and "data-requirement" in attributes:
            self.cells.append(attributes)


@pytest.mark.xdist_group("cli-mutant-reports")
def test_compare_renders_a_matrix_with_links_to_failing_cases(
    mutant_reports: Path, tmp_path: Path
) -> None:
    status, _, _ = run("run", "--quiet", "--json", str(tmp_path / "ref.json"))
    assert status == cli.EXIT_OK
    out = tmp_path / "matrix.html"
    status, _, err = run(
        "compare", str(tmp_path / "ref.json"), str(mutant_reports / "report.json"), "-o", str(out)
    )
    assert status == cli.EXIT_OK, err
    page = _Tables()
    page.feed(out.read_text())
    assert "matrix" in page.ids
    n_reqs = len(suite.requirements())
    assert len(page.cells) == 2 * n_reqs
    failing = [c for c in page.cells if "failed" in (c.get("class") or "")]
    assert failing
    assert "impl1-ALLOC-5" in page.ids


@pytest.mark.xdist_group("cli-mutant-reports")
def test_compare_tells_apart_runs_of_one_version_and_warns_of_other_suites(
    mutant_reports: Path, tmp_path: Path
) -> None:
    """Three commits of one engine at one version are three columns named by their
    files; reports of different suites are said to be (a CI trial's doc gaps)."""
    first = json.loads((mutant_reports / "report.json").read_text())
    second = {**first, "suite": {**first["suite"], "digest": "0" * 64, "version": "0.0.1"}}
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(second))
    out = tmp_path / "m.html"
    status, _, err = run(
        "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "-o", str(out)
    )
    assert status == cli.EXIT_OK, err
    assert "warning: these reports come from different suites: 0.0.1" in err
    page = out.read_text()
    name = f"{first['adapter']['name']} {first['adapter']['version']}"
    assert f"<th>{name} ({tmp_path / 'a.json'})</th>" in page
    assert f"<th>{name} ({tmp_path / 'b.json'})</th>" in page
    assert "different suites" in page


def _expectations(path: Path, ids: list[str]) -> Path:
    lines = ["kvconform: expectations/1", "known_failures:"]
    lines += [f"  - {{id: {i}, reason: known}}" for i in ids]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.xdist_group("cli-mutant-reports")
def test_expectations_gate_both_directions(mutant_reports: Path, tmp_path: Path) -> None:
    data = json.loads((mutant_reports / "report.json").read_text())
    failing = sorted(r["id"] for r in data["results"] if r["verdict"] == "failed")
    exact = _expectations(tmp_path / "exact.yaml", failing)
    assert run("run", "--adapter", MUTANT, "--quiet", "--expectations", str(exact))[0] == 0
    # a new failure: one failing case is not listed
    missing = _expectations(tmp_path / "missing.yaml", failing[1:])
    status, out, _ = run("run", "--adapter", MUTANT, "--quiet", "--expectations", str(missing))
    assert status == cli.EXIT_FAILED and f"unexpected failure: {failing[0]}" in out
    # the unexpected failure is shown first, before the known ones that ran before it, and
    # the known are marked: here the last failing case of the run is the one not listed
    in_run_order = [r["id"] for r in data["results"] if r["verdict"] == "failed"]
    late = _expectations(tmp_path / "late.yaml", in_run_order[:-1])
    status, out, _ = run(
        "run", "--adapter", MUTANT, "--quiet", "--expectations", str(late),
        "--max-failures-shown", "1", "--markdown", str(tmp_path / "late.md"),
    )  # fmt: skip
    first = next(line for line in out.splitlines() if " failed at " in line)
    assert f" {in_run_order[-1]} failed at " in first, out[:1000]
    md = (tmp_path / "late.md").read_text(encoding="utf-8")
    assert f"**`{in_run_order[-1]}`** (" in md and f"**`{in_run_order[0]}`** (known)" in md
    run("run", "--adapter", MUTANT, "--quiet", "--expectations", str(late),
        "--html", str(tmp_path / "late.html"))  # fmt: skip
    page = (tmp_path / "late.html").read_text(encoding="utf-8")
    assert page.count("known: listed in the expectations") == len(in_run_order) - 1
    # a stale entry: a listed case passes
    stale = _expectations(
        tmp_path / "stale.yaml",
        [*failing, "sig.measure.round-trip"]
        if any(c.id == "sig.measure.round-trip" for c in suite.all_cases())
        else [*failing, next(c.id for c in suite.all_cases() if c.id not in failing)],
    )
    status, out, _ = run("run", "--adapter", MUTANT, "--quiet", "--expectations", str(stale))
    assert status == cli.EXIT_FAILED and "listed as failing but passes" in out
    # the Markdown headline says the gate beside the verdict: CI acts on the gate
    for listed, state in ((exact, "passed"), (stale, "failed")):
        md = tmp_path / f"{state}.md"
        run("run", "--adapter", MUTANT, "--quiet", "--expectations", str(listed),
            "--markdown", str(md))  # fmt: skip
        headline = md.read_text(encoding="utf-8").splitlines()[0]
        assert headline.endswith(f"is NOT conformant for its declared classes; gate {state}")


def test_a_listed_case_that_fails_another_way_fails_the_gate(tmp_path: Path) -> None:
    """A known failure is known by its id and its cause: a listed case where the adapter
    now breaks is not the failure that was listed (a CI trial's gate stayed green while
    known cases crashed), unless the entry says ``cause: adapter``."""
    marker = tmp_path / "crashed"
    fixture = Path(__file__).resolve().parent / "fixtures" / "misbehaving_adapter.py"
    adapter = f"{sys.executable} {fixture} crash --op cache_truncate --once {marker}"

    def gated(expectations: Path | None) -> tuple[int, str, dict[str, Any]]:
        marker.unlink(missing_ok=True)
        report = tmp_path / "r.json"
        argv = ["run", "--adapter-cmd", adapter, "--quiet", "--area", "alloc"]
        argv += ["--json", str(report)]
        status, out, _ = run(
            *argv, *(["--expectations", str(expectations)] if expectations else [])
        )
        return status, out, json.loads(report.read_text())

    _, _, data = gated(None)
    (broken,) = [r for r in data["results"] if r["verdict"] == "failed"]
    assert broken["failure"]["cause"] == "adapter"
    status, out, data = gated(_expectations(tmp_path / "plain.yaml", [broken["id"]]))
    assert status == cli.EXIT_FAILED
    assert (
        "listed as failing by a wrong answer or a message's wording, now fails by the adapter "
        f"breaking: {broken['id']}" in out
    )
    assert data["gate"]["changed"] == [
        {"id": broken["id"], "listed": "answer or message", "now": "adapter"}
    ]
    crash = tmp_path / "crash.yaml"
    crash.write_text(
        "kvconform: expectations/1\nknown_failures:\n"
        f"  - {{id: {broken['id']}, reason: known crash, cause: adapter}}\n"
    )
    status, out, data = gated(crash)
    assert status == cli.EXIT_OK, out
    assert data["gate"]["expected_failures"] == [broken["id"]] and "gate passed" in out
    answer = tmp_path / "answer.yaml"
    answer.write_text(crash.read_text().replace("cause: adapter", "cause: answer"))
    status, out, _ = gated(answer)
    assert status == cli.EXIT_FAILED and "listed as failing by a wrong answer, now" in out


def test_a_generated_property_may_be_listed_and_is_unchecked_without_generated(
    tmp_path: Path,
) -> None:
    """One expectations file serves a quick job and a nightly --generated job: a listed
    generated property, or a listed case not selected, is unchecked, and said so."""
    listed = _expectations(tmp_path / "e.yaml", ["generated.hash", "verify.v2.round-trip"])
    status, out, _ = run("run", "--quiet", "--area", "hash", "--expectations", str(listed))
    assert status == cli.EXIT_OK, out
    assert "listed but not checked in this run" in out
    assert "generated.hash, verify.v2.round-trip" in out


@pytest.mark.xdist_group("cli-mutant-reports")
def test_junit_agrees_with_the_gate(mutant_reports: Path, tmp_path: Path) -> None:
    """Under an expectations file an expected failure is skipped and a stale entry is a
    failure, so a CI test tab agrees with the exit status."""
    data = json.loads((mutant_reports / "report.json").read_text())
    failing = sorted(r["id"] for r in data["results"] if r["verdict"] == "failed")
    passing = next(r["id"] for r in data["results"] if r["verdict"] == "passed")
    listed = _expectations(tmp_path / "e.yaml", [*failing, passing])
    xml = tmp_path / "r.xml"
    status, _, _ = run(
        "run", "--adapter", MUTANT, "--quiet", "--expectations", str(listed), "--junit", str(xml)
    )
    assert status == cli.EXIT_FAILED  # the stale entry
    root = ET.parse(xml).getroot()
    assert root.get("failures") == "1"
    (stale,) = root.findall(".//testcase/failure")
    assert "but passes" in (stale.get("message") or "")
    known = [
        c
        for c in root.iter("testcase")
        if any(": known): " in (s.get("message") or "") for s in c.findall("skipped"))
    ]  # fmt: skip  (the message carries the entry's reason, "known")
    assert sorted(c.get("name") for c in known) == failing


def test_write_expectations_starts_a_file_that_gates_green(tmp_path: Path) -> None:
    target = tmp_path / "expected.yaml"
    status, _, err = run("run", "--adapter", MUTANT, "--quiet", "--write-expectations", str(target))
    assert status == cli.EXIT_FAILED and "known failure(s)" in err
    status, _, err = run("run", "--adapter", MUTANT, "--quiet", "--expectations", str(target))
    assert status == 0 and "still give a TODO as the reason" in err


def test_a_malformed_expectations_file_is_a_usage_error(tmp_path: Path) -> None:
    bad = _expectations(tmp_path / "bad.yaml", ["no.such.case"])
    status, _, err = run("run", "--quiet", "--expectations", str(bad))
    assert status == cli.EXIT_USAGE and "no case has id 'no.such.case'" in err
    assert "bad.yaml:3" in err


def test_a_modified_suite_is_refused_unless_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = json.loads(manifest.manifest_path().read_text())
    name = next(iter(recorded["files"]))
    recorded["files"][name] = "0" * 64
    fake = tmp_path / "manifest.json"
    fake.write_text(json.dumps(recorded))
    monkeypatch.setattr(manifest, "manifest_path", lambda: fake)
    status, _, err = run("run", "--quiet")
    assert status == cli.EXIT_USAGE and f"altered: {name}" in err
    status, _, _ = run("run", "--quiet", "--json", str(tmp_path / "r.json"), "--allow-modified")
    assert status == cli.EXIT_OK
    assert "altered" in json.loads((tmp_path / "r.json").read_text())["suite"]["modified"]


def test_the_shipped_manifest_is_current() -> None:
    assert manifest.main(["--check"]) == 0, "run python -m kvconform.harness.manifest"


@pytest.mark.xdist_group("cli-mutant-reports")
def test_html_report_renders_in_a_real_browser(mutant_reports: Path, tmp_path: Path) -> None:
    import shutil
    import subprocess

    browser = next(
        (b for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None
    )
    if browser is None:
        pytest.skip(
            "NO HEADLESS BROWSER FOUND: the HTML report was not rendered "
            "(.ci/run installs Debian's chromium)"
        )
    out = tmp_path / "matrix.html"
    run("compare", str(mutant_reports / "report.json"), "-o", str(out))
    profile = tmp_path / "profile"
    result = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--dump-dom",
            out.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    dom = _Tables()
    dom.feed(result.stdout)
    assert "matrix" in dom.ids
    assert len(dom.cells) == len(suite.requirements())


@pytest.mark.covers("CONF-8", "CONF-18")
def test_every_report_shows_failures_by_basis_and_by_stake(tmp_path: Path) -> None:
    """A failure on the seeds' semantics and one on a decision are told apart everywhere, and
    so are failures by stake (CONF-18)."""
    status, out, err = run(
        "run",
        "--adapter",
        "tests.fixtures.two_kinds_of_failure:make",
        "--report-dir",
        str(tmp_path),
        "--quiet",
    )
    assert status == cli.EXIT_FAILED, err
    data = json.loads((tmp_path / "report.json").read_text())
    by = data["summary"]["failed_by_basis"]
    assert by["seed"] > 0 and by["decision"] > 0, by
    assert by["seed"] + by["decision"] == data["summary"]["failed"]
    truncates = [r for r in data["results"] if r["id"] == "alloc.rewind.keeps-alloc-id"]
    capacity = [r for r in data["results"] if r["id"] == "alloc.capacity.exceeded-is-refused-whole"]
    assert truncates[0]["basis"] == "seed" and truncates[0]["verdict"] == "failed"
    assert capacity[0]["basis"] == ["append-past-capacity"] and capacity[0]["verdict"] == "failed"
    assert f"{by['seed']} on the seeds' semantics, {by['decision']} on a decision" in out
    # the stake (CONF-18): a rewind that mints loses reuse; a refusal's wrong value is neither
    assert truncates[0]["stake"] == "lost_reuse" and capacity[0]["stake"] == "other"
    stakes = data["summary"]["failed_by_stake"]
    assert stakes["unsafe"] == 0 and stakes["lost_reuse"] > 0 and stakes["other"] > 0, stakes
    assert sum(stakes.values()) == data["summary"]["failed"]
    assert f"0 unsafe (fix first), {stakes['lost_reuse']} lost reuse" in out
    markdown = (tmp_path / "summary.md").read_text()
    lost = f"### Failures, lost reuse: gave up reuse it was owed ({stakes['lost_reuse']})"
    assert lost in markdown
    assert "### Failures, unsafe" not in markdown  # an empty group is not shown
    junit = ET.parse(tmp_path / "report.xml").getroot()
    types = Counter(f.get("type") for f in junit.iter("failure"))
    assert types == {"seed": by["seed"], "decision": by["decision"]}
    messages = [str(f.get("message")) for f in junit.iter("failure")]
    assert sum(m.startswith("[lost reuse; ") for m in messages) == stakes["lost_reuse"]
    page = (tmp_path / "report.html").read_text()
    assert f"Lost reuse: gave up reuse it was owed: {stakes['lost_reuse']}</h3>" in page
    assert "Unsafe: reused or accepted what must not be (fix first): 0</h3>" in page
    status, _, err = run("compare", str(tmp_path / "report.json"), "-o", str(tmp_path / "c.html"))
    assert status == cli.EXIT_OK, err
    matrix = (tmp_path / "c.html").read_text()
    split = (
        f"(0 unsafe (fix first), {stakes['lost_reuse']} lost reuse, {stakes['other']} other; "
        f"{by['seed']} on the seeds&#x27; semantics, {by['decision']} on a decision)"
    )
    assert split in matrix
    assert "alloc.rewind.keeps-alloc-id: lost reuse, on the seeds&#x27; semantics" in matrix
    assert "alloc.capacity.exceeded-is-refused-whole: on decision append-past-capacity" in matrix


def test_failures_that_are_not_wrong_answers_are_counted_apart(tmp_path: Path) -> None:
    """Under --strict-messages a message's wording (ERR-13) and a broken adapter are
    failures, and neither is read as a wrong answer (CONF-12)."""
    status, out, err = run(
        "run",
        "--adapter",
        "tests.fixtures.three_causes:make",
        "--report-dir",
        str(tmp_path),
        "--strict-messages",
        "--quiet",
    )
    assert status == cli.EXIT_FAILED, err
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["selection"]["strict_messages"] is True
    by = data["summary"]["failed_by_cause"]
    assert by["answer"] > 0 and by["message"] > 0 and by["adapter"] > 0, by
    assert sum(by.values()) == data["summary"]["failed"]
    assert data["summary"]["advised"] == 0
    causes = {r["id"]: r["failure"]["cause"] for r in data["results"] if r["verdict"] == "failed"}
    assert causes["alloc.rewind.plan-stays-valid"] == "answer"
    assert "message" in causes.values() and "adapter" in causes.values()
    phrase = f"of these, {by['message']} only in an error message's wording (ERR-13"
    assert phrase in out
    assert f"{by['adapter']} where the adapter broke instead of answering" in out
    assert phrase in (tmp_path / "summary.md").read_text()
    assert phrase in (tmp_path / "report.html").read_text().replace("&#x27;", "'")


def test_a_message_finding_is_advice_in_every_report_by_default(tmp_path: Path) -> None:
    """Without --strict-messages, a case whose only fault is its message's wording
    (ERR-13) passes, and every report shows the finding as advice, apart from the
    failures (CONF-12); with the flag, the same cases fail."""
    status, out, err = run(
        "run",
        "--adapter",
        "tests.fixtures.three_causes:make",
        "--report-dir",
        str(tmp_path),
        "--quiet",
    )
    assert status == cli.EXIT_FAILED, err  # its wrong answers still fail it
    data = json.loads((tmp_path / "report.json").read_text())
    s = data["summary"]
    assert s["failed_by_cause"]["message"] == 0
    advised = [r for r in data["results"] if r.get("advice")]
    assert advised and len(advised) == s["advised"]
    only_advice = [r for r in advised if r["verdict"] == "passed"]
    assert only_advice  # a case whose only finding is its message's wording passes
    assert all(a["requires"] == ["ERR-13"] for r in advised for a in r["advice"])
    first = advised[0]["id"]
    assert "advice (not part of the verdict" in out and first in out
    assert f"advice: {s['advised']} case(s)" in out
    assert "Advice, not part of the verdict" in (tmp_path / "summary.md").read_text()
    assert first in (tmp_path / "summary.md").read_text()
    html_text = (tmp_path / "report.html").read_text()
    assert 'id="advice"' in html_text and first in html_text
    junit = (tmp_path / "report.xml").read_text()
    assert "advice (ERR-13, not part of the verdict" in junit

    strict = tmp_path / "strict"
    run(
        "run",
        "--adapter",
        "tests.fixtures.three_causes:make",
        "--report-dir",
        str(strict),
        "--strict-messages",
        "--quiet",
    )
    data = json.loads((strict / "report.json").read_text())
    verdicts = {r["id"]: r["verdict"] for r in data["results"]}
    assert all(verdicts[r["id"]] == "failed" for r in only_advice)


def test_a_wrong_error_shows_the_expected_error_not_its_values(tmp_path: Path) -> None:
    """A refusal with another value reads as the expected kind, field and values (issue 10)."""
    status, out, _ = run(
        "run",
        "--adapter",
        "tests.fixtures.two_kinds_of_failure:make",
        "--id",
        "alloc.capacity.exceeded-is-refused-whole",
    )
    assert status == cli.EXIT_FAILED
    assert "expected: error capacity_exceeded (field=max_seq_len, capacity=8, requested=9)" in out
    assert "actual:   error capacity_exceeded (field=max_seq_len, capacity=8, requested=4)" in out
    assert "basis:    decision append-past-capacity" in out


def test_generated_checks_default_to_the_suite_versions_fixed_seed() -> None:
    """The default seed is fixed per suite version (printed); a random one is opt-in."""
    pytest.importorskip("hypothesis")
    from kvconform.differential.engine import DEFAULT_SEED

    first = run("run", "--generated", "2", "--id", "generated.hash", "--quiet")
    second = run("run", "--generated", "2", "--id", "generated.hash", "--quiet")
    assert first[0] == second[0] == cli.EXIT_OK, first[2]
    assert f"seed {DEFAULT_SEED}" in first[1] + first[2]
    assert f"seed {DEFAULT_SEED}" in second[1] + second[2]
    fresh = run("run", "--generated", "2", "--id", "generated.hash", "--quiet", "--seed", "random")
    assert fresh[0] == cli.EXIT_OK and f"seed {DEFAULT_SEED}" not in fresh[1] + fresh[2]
    status, _, err = run("run", "--generated", "2", "--seed", "soon")
    assert status == cli.EXIT_USAGE and "expected a whole number or 'random'" in err


class _NoMedia(ReferenceAdapter):
    """An engine with no media input: it refuses to attach an item (an adapter failure)
    and answers every later step for the request as it holds it, without the item."""

    def request_media(self, *args: object, **kwargs: object) -> None:
        raise RuntimeError("this engine has no media input")


def test_an_answer_after_the_adapter_broke_is_not_judged() -> None:
    """What follows a break is not judged (spec/security.md): a lookup of a request whose
    media the adapter refused to attach is of a request the scenario did not write, so
    its count is not a wrong answer (it was read as over-reuse: cause 'answer')."""
    from kvconform.harness import runner
    from kvconform.protocol.driver import InProcessDriver

    cases = [c for c in suite.all_cases() if c.id.startswith("prefix.media.")]
    results = runner.run_cases(cases, InProcessDriver(_NoMedia()))
    failed = [r for r in results if r.verdict == "failed"]
    assert failed and all(runner.cause_of(r.failures) == "adapter" for r in failed), [
        (r.case.id, [(f.where.step, f.broken) for f in r.failures]) for r in failed
    ]
    # a failure judged before the break is still a wrong answer: the break explains only
    # what follows it
    assert all(r.failures[0].broken for r in failed)


def test_a_gate_in_force_is_said_beside_the_verdict_even_with_no_failure(tmp_path: Path) -> None:
    """docs/validate-your-implementation.md §5: with an expectations file, the console's
    last line says the gate passed beside the verdict, failures or none (it said nothing
    of the gate for a run without failures, the one a fixed engine's CI meets)."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("kvconform: expectations/1\nknown_failures: []\n", encoding="utf-8")
    status, out, _ = run("run", "--id", "hash.stories.*", "--quiet", "--expectations", str(empty))
    assert status == cli.EXIT_OK
    last = out.rstrip().splitlines()[-1]
    assert last.endswith("CONFORMANT for the declared classes; gate passed"), last
