"""The third round of hostile inputs (issue 26; spec/security.md, "The harness and a
hostile adapter"): no hang, no lie, no stale or mixed report, one suite on every surface.

Each test names the item of the issue it holds to. Every one ends in a clear failure of
a case, one line with its documented exit status, or a silent cache miss; each is bounded
in time and memory.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from kvconform import cli, limits
from kvconform.adapters import DEFAULT_ADAPTER, load_adapter
from kvconform.cli import outputs as cli_outputs
from kvconform.cli import run as cli_run
from kvconform.differential import export
from kvconform.harness import cache, expectations, manifest, yamlsource
from kvconform.protocol import codec
from kvconform.protocol import operations as ops
from kvconform.protocol.client import AdapterStartError, StdioDriver
from kvconform.protocol.driver import InProcessDriver
from kvconform.reports import record
from kvconform.values import AdapterInfo, Fault, Ok

FIXTURES = Path(__file__).resolve().parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent
STDIO = [sys.executable, str(FIXTURES / "round3_stdio.py")]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def _hello(**members: object) -> dict[str, object]:
    return {
        "name": "x",
        "version": "1",
        "language": "python",
        "protocol": codec.PROTOCOL_VERSION,
        "classes": ["hash"],
        "format": {"writes": None, "reads": []},
        **members,
    }


# --- 1: a hostile hello -----------------------------------------------------------------


def test_1_a_hello_listing_many_classes_is_refused_at_once() -> None:
    # 20,000 distinct names took the quadratic duplicate check about 5 s; 200,000, minutes
    started = time.perf_counter()
    with pytest.raises(codec.WireError, match="20000 entries, more than the 64"):
        codec.info_from_wire(_hello(classes=[f"class{i}" for i in range(20_000)]))
    with pytest.raises(codec.WireError, match="entries, more than the 64"):
        codec.info_from_wire(_hello(classes=["hash"] * 1_000_000))
    assert time.perf_counter() - started < 1.0


def test_1_an_adapter_whose_hello_lists_200000_classes_cannot_start_promptly() -> None:
    started = time.perf_counter()
    with pytest.raises(AdapterStartError, match="200000 entries, more than the 64"):
        StdioDriver([*STDIO, "many-classes", "200000"], timeout=20)
    assert time.perf_counter() - started < 10  # the process's own start included


# --- 2 and 11: the suite cache never waits, follows or reads a large file -------------


def test_2_a_fifo_at_the_cache_path_is_a_silent_miss_not_a_hang(tmp_path: Path) -> None:
    entry = tmp_path / "suite-x.pickle"
    os.mkfifo(entry)
    found: list[object] = []
    reader = threading.Thread(target=lambda: found.append(cache.read(entry, "key")), daemon=True)
    reader.start()
    reader.join(5.0)
    if reader.is_alive():  # the old code waits for a writer: give it one, so it ends
        descriptor = os.open(entry, os.O_WRONLY | os.O_NONBLOCK)
        os.close(descriptor)
        reader.join(5.0)
        pytest.fail("reading a FIFO at the cache path waited for a writer")
    assert found == [None]


def test_11_a_cache_entry_that_links_to_a_large_file_is_not_read(tmp_path: Path) -> None:
    large = tmp_path / "large"
    with large.open("wb") as stream:  # sparse: no disk is used
        stream.truncate(limits.MAX_FILE_BYTES // 2)
    entry = tmp_path / "suite-x.pickle"
    entry.symlink_to(large)
    tracemalloc.start()
    try:
        assert cache.read(entry, "key") is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    # a regular file whose header names another key: not read past its header either
    other = tmp_path / "other.pickle"
    with other.open("wb") as stream:
        stream.write(f"{cache.FORMAT}\nanother-key\n".encode())
        stream.truncate(limits.MAX_FILE_BYTES // 2)
    os.chmod(other, 0o600)
    tracemalloc.start()
    try:
        assert cache.read(other, "key") is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak


# --- 3 and 4: in process, exact types --------------------------------------------------


@pytest.fixture()
def fixtures_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES))


@pytest.mark.usefixtures("fixtures_on_path")
def test_3_a_refusal_whose_kind_is_a_str_subclass_breaks_the_step() -> None:
    status, out, err = run(
        "run", "--adapter", "round3_adapters:LyingRefusals", "--quiet",
        "--id", "alloc.capacity.exceeded-is-refused-whole",
    )  # fmt: skip
    assert status == cli.EXIT_FAILED, (status, out[-2000:], err)
    assert "malformed refusal" in out and "its kind is a AgreeingText" in out
    assert "NOT CONFORMANT" in out


def test_3_fault_problem_holds_every_part_to_its_exact_type() -> None:
    class Text(str):
        pass

    class Number(int):
        pass

    class SubFault(Fault):
        pass

    assert codec.fault_problem(Fault("capacity_exceeded", None, None, {"n": 1}, "m")) is None
    bad = [
        Fault(Text("capacity_exceeded"), None, None, {}, "m"),
        Fault("capacity_exceeded", Text("tokens"), None, {}, "m"),
        Fault("capacity_exceeded", None, None, {Text("n"): 1}, "m"),
        Fault("capacity_exceeded", None, None, {"n": Text("1")}, "m"),
        Fault("capacity_exceeded", None, None, {"n": Number(1)}, "m"),
        Fault("capacity_exceeded", None, Number(0), {}, "m"),
        Fault("capacity_exceeded", None, None, {}, Text("m")),
        SubFault("capacity_exceeded", None, None, {}, "m"),
    ]
    for fault in bad:
        assert codec.fault_problem(fault) is not None, fault


@pytest.mark.usefixtures("fixtures_on_path")
def test_4_an_adapter_info_subclass_cannot_declare_past_conf_1() -> None:
    status, out, err = run("run", "--adapter", "round3_adapters:PlanWithoutIdentity", "--quiet")
    assert status == cli.EXIT_ADAPTER, (status, out[-1000:], err)
    assert "not an AdapterInfo" in err and err.count("\n") == 1


# --- 5: a stray line is not blamed on the next case ------------------------------------


@pytest.mark.parametrize("mode", ["reset-twice", "reset-twice-late"])
def test_5_a_stray_line_after_reset_is_an_incident_not_the_next_cases_failure(
    tmp_path: Path, mode: str
) -> None:
    status, out, err = run(
        "run", "--adapter-cmd", " ".join([*STDIO, mode]), "--quiet",
        "--id", "identity.instance.reload*", "--id", "identity.instance.read-twice-same",
        "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["summary"]["failed"] == 0, out[-3000:]
    assert status == cli.EXIT_OK, (status, err)
    incidents = report["adapter"]["incidents"]
    assert incidents and all("PROTO-6" in line for line in incidents[:-1] or incidents)


def test_5_a_stray_line_found_before_the_next_program_cites_proto_6_too() -> None:
    """A stray line can be found at three moments: just after its program's ``reset``,
    before the next program is sent, or in the next program's answers. Which one is
    timing (a loaded machine moves it), so each incident names the rule it breaks."""
    driver = StdioDriver([*STDIO, "reset-twice-late"])
    try:
        program = [ops.ModelNew("m", ops.ModelSpec("llama", (("n", 3),), ()))]
        assert isinstance(driver.run(program)[0], Ok)
        time.sleep(0.5)  # the late second answer to reset has come before the next program
        assert isinstance(driver.run(program)[0], Ok)
        incidents = list(driver.incidents)  # closing adds its own (the stray of shutdown)
    finally:
        driver.close()
    assert any("between two programs" in line for line in incidents), incidents
    assert all("PROTO-6" in line for line in incidents), incidents


# --- 6: capabilities are bounded --------------------------------------------------------


def test_6_declared_capabilities_are_bounded_on_the_wire_and_in_process() -> None:
    many = ["f32", *(f"d{i}" for i in range(300_000))]
    with pytest.raises(codec.WireError, match=r"capabilities\.dtypes: 300001 entries"):
        codec.info_from_wire(_hello(capabilities={"dtypes": many}))
    families = {f"f{i}": {"p": "u64"} for i in range(100_000)}
    with pytest.raises(codec.WireError, match=r"capabilities\.key_schema: 100000 entries"):
        codec.info_from_wire(
            _hello(options={"plan_key_params": "fixed"}, capabilities={"key_schema": families})
        )
    with pytest.raises(codec.WireError, match="a name of 5000 characters"):
        codec.info_from_wire(_hello(capabilities={"dtypes": ["f32", "x" * 5000]}))
    info = AdapterInfo(
        "x", "1", "python", frozenset({"hash"}), None, frozenset(), dtypes=frozenset(many)
    )
    problems = info.problems()
    assert problems and "more than the 64" in problems[0] and len(problems[0]) < 200


# --- 7: compare stays linear and bounded -------------------------------------------------


def test_7_compare_refuses_a_report_of_more_requirements_than_a_run_can_hold(
    tmp_path: Path,
) -> None:
    base = tmp_path / "base.json"
    status, _, err = run("run", "--quiet", "--id", "hash.stories.*", "--json", str(base))
    assert status == cli.EXIT_OK, err
    report = json.loads(base.read_text(encoding="utf-8"))
    entry = next(iter(report["requirements"].values()))
    report["requirements"] = {f"HASH-{i}": entry for i in range(limits.MAX_REPORT_ENTRIES + 1)}
    big = tmp_path / "big.json"
    big.write_text(json.dumps(report), encoding="utf-8")
    started = time.perf_counter()
    status, _, err = run("compare", str(base), str(big), "-o", str(tmp_path / "c.html"))
    assert status == cli.EXIT_USAGE and "more than the 20000" in err and err.count("\n") == 1
    assert time.perf_counter() - started < 2.0


def test_7_the_comparison_lists_requirements_in_linear_time() -> None:
    from kvconform.reports import html

    ids = [f"HASH-{i}" for i in range(3000)]
    entry = {"verdict": "passed", "cases": 1, "failed": []}
    compared = [0]

    class Id(str):
        def __eq__(self, other: object) -> bool:
            compared[0] += 1
            return str.__eq__(self, other)

        __hash__ = str.__hash__

    reports = [
        {
            "adapter": {"name": f"a{n}", "version": "1", "language": "py"},
            "suite": {"version": "1", "digest": "0" * 64},
            "started": "now",
            "summary": {"passed": 1, "failed": 0, "not_applicable": 0},
            "requirements": {Id(i): entry for i in ids},
            "results": [],
        }
        for n in range(2)
    ]
    html.render_compare(reports)
    assert compared[0] < 10 * len(ids)  # a list's `in` compared about n^2/2 = 4.5 million


# --- 8: a signal while the suite loads --------------------------------------------------


def test_8_a_signal_while_the_suite_loads_leaves_no_earlier_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "report.json").write_text('{"stale": "from the previous run"}', encoding="utf-8")

    def stopped_while_loading(*_: object) -> object:
        raise cli.Stopped(signal.SIGTERM)

    monkeypatch.setattr(cli_run, "_cases", stopped_while_loading)
    status, _, err = run("run", "--no-cache", "--quiet", "--report-dir", str(tmp_path))
    assert status == cli.EXIT_INTERRUPTED, err
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert "SIGTERM" in report["incomplete"] and "while the suite loaded" in report["incomplete"]
    assert report["stopped_by"] == "interrupted"
    assert "INCOMPLETE RUN" in (tmp_path / "summary.md").read_text(encoding="utf-8")


# --- 9 and 18: the pytest plugin judges the manifest's suite ---------------------------


def _installed_copy(tmp_path: Path) -> tuple[Path, list[str]]:
    """A small suite installed in ``tmp_path`` (the hash and identity areas, one vector
    file, its own manifest), and the pytest command line that uses it as installed."""
    import kvconform

    data = tmp_path / "data"
    shutil.copytree(REPO / "spec", data / "spec")
    shutil.copytree(REPO / "conformance" / "schema", data / "conformance" / "schema")
    for area in ("hash", "identity"):
        shutil.copytree(
            REPO / "conformance" / "scenarios" / area, data / "conformance" / "scenarios" / area
        )
    (data / "vectors").mkdir()
    shutil.copy(REPO / "vectors" / "fnv1a64-published.json", data / "vectors")
    shutil.copy(REPO / "vectors" / "README.md", data / "vectors")
    installed, kvconform._DATA_ROOT = kvconform._DATA_ROOT, data
    try:
        manifest.manifest_path().write_text(manifest.render(), encoding="utf-8")
    finally:
        kvconform._DATA_ROOT = installed
    (tmp_path / "installed_here.py").write_text(
        f"import pathlib, kvconform\nkvconform._DATA_ROOT = pathlib.Path({str(data)!r})\n",
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "pytest", "-p", "installed_here", "-p", "kvconform",
               "-p", "no:cacheprovider", "-q"]  # fmt: skip
    return data, command


def _pytest(command: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    return subprocess.run(
        command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip


def test_9_the_plugin_refuses_files_the_manifest_does_not_list(tmp_path: Path) -> None:
    data, command = _installed_copy(tmp_path)
    scenarios = data / "conformance" / "scenarios"
    source = next((scenarios / "identity").glob("*.yaml"))
    text = source.read_text(encoding="utf-8")
    (scenarios / "identity" / "x.yml").write_text(text, encoding="utf-8")
    (data / "vectors" / "sub").mkdir()
    shutil.copy(next((data / "vectors").glob("*.json")), data / "vectors" / "sub" / "x.json")
    refused = _pytest([*command, "--kv-suite", "--co"], tmp_path)
    assert refused.returncode == 4, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert "scenarios/identity/x.yml" in refused.stderr and "vectors/sub/x.json" in refused.stderr
    allowed = _pytest([*command, "--kv-suite", "--co", "--kv-allow-modified", "-v"], tmp_path)
    assert allowed.returncode == 0, allowed.stdout[-2000:] + allowed.stderr[-2000:]
    assert "not in the manifest and not run: scenarios/identity/x.yml" in allowed.stdout
    assert "x.yml" not in allowed.stdout.replace("not run: scenarios/identity/x.yml", "")


def test_9_the_plugin_refuses_a_conftest_dropped_into_the_suite(tmp_path: Path) -> None:
    data, command = _installed_copy(tmp_path)
    (data / "conformance" / "scenarios" / "conftest.py").write_text(
        "import pytest\n"
        "@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n",
        encoding="utf-8",
    )
    for flags in ([], ["--kv-allow-modified"]):
        refused = _pytest([*command, "--kv-suite", "--co", *flags], tmp_path)
        assert refused.returncode == 4, refused.stdout[-2000:] + refused.stderr[-2000:]
        assert "scenarios/conftest.py" in refused.stderr and "as code" in refused.stderr


def test_18_pytest_on_the_installed_folder_checks_each_file_against_the_manifest(
    tmp_path: Path,
) -> None:
    data, command = _installed_copy(tmp_path)
    folder = data / "conformance" / "scenarios" / "hash"
    altered = next(folder.glob("*.yaml"))
    altered.write_text(altered.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    refused = _pytest([*command, "--co", str(folder)], tmp_path)
    assert refused.returncode != 0, refused.stdout[-2000:]
    assert f"hash/{altered.name} differs from the installed suite's manifest" in refused.stdout
    allowed = _pytest([*command, "--co", str(folder), "--kv-allow-modified"], tmp_path)
    assert allowed.returncode == 0, allowed.stdout[-2000:] + allowed.stderr[-2000:]


# --- 10: the manifest check reads at most the limit -------------------------------------


def test_10_the_manifest_check_never_reads_a_huge_file(tmp_path: Path) -> None:
    huge = tmp_path / "huge.md"
    with huge.open("wb") as stream:  # sparse
        stream.truncate(limits.MAX_FILE_BYTES + 1)
    tracemalloc.start()
    try:
        said = manifest._sha256(huge)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert said == f"larger than {limits.MAX_FILE_BYTES} bytes"
    assert peak < 4 << 20, peak
    small = tmp_path / "small.md"
    small.write_bytes(b"x" * 3_000_000)  # hashed in chunks, same digest
    import hashlib

    assert manifest._sha256(small) == hashlib.sha256(small.read_bytes()).hexdigest()


# --- 12: an output name too long for the file system -----------------------------------


@pytest.mark.parametrize(
    "option",
    ["--json", "--junit", "--markdown", "--html", "--report-dir", "--trace",
     "--write-expectations", "--export-counterexamples"],
)  # fmt: skip
def test_12_an_output_name_too_long_is_a_usage_error(tmp_path: Path, option: str) -> None:
    name = str(tmp_path / ("n" * 300) / "out")
    extra = ["--generated", "1"] if option == "--export-counterexamples" else []
    status, out, err = run("run", "--quiet", *extra, option, name)
    assert status == cli.EXIT_USAGE, (status, err)
    assert err.startswith("kvconform: error: ") and err.count("\n") == 1 and out == ""


# --- 13: an exported counterexample reads as it means ----------------------------------


def test_13_bidi_controls_and_noncharacters_are_escaped_in_an_exported_scenario() -> None:
    said = "ok\u202eevil\u2066x\u200fy\ufdd0 caf\u00e9"
    exported = export.Exported(
        document={"kvconform": "scenarios/2", "name": said, "plain": "caf\u00e9"},
        scenario_id="x",
        area="x",
        step=1,
    )
    text = export.dump(exported)
    for raw in ("\u202e", "\u2066", "\u200f", "\ufdd0"):
        assert raw not in text
    assert "\\u202E" in text and "plain: caf\u00e9" in text  # only the risky scalar escaped
    import yaml

    assert yaml.safe_load(text)["name"] == said


# --- 14: two runs writing one --report-dir ----------------------------------------------


def test_14_outputs_wait_for_another_run_writing_the_same_folder(tmp_path: Path) -> None:
    import fcntl

    args = cli._parser().parse_args(["run", "--report-dir", str(tmp_path)])
    written: list[Path] = []
    descriptor = os.open(tmp_path, os.O_RDONLY)
    fcntl.flock(descriptor, fcntl.LOCK_EX)  # another run, writing its set

    def writer() -> None:
        with cli_outputs._outputs_locked(args):
            written.append(tmp_path / "report.json")

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    time.sleep(0.3)
    assert written == []  # waits for the other run's set to be whole
    os.close(descriptor)
    thread.join(5.0)
    assert written == [tmp_path / "report.json"]


# --- 15: a large file with no aliases is not said to have them -------------------------


def test_15_a_file_of_too_many_nodes_without_aliases_is_not_blamed_on_aliases(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(yamlsource, "MAX_NODES", 50)
    known = tmp_path / "known.yaml"
    known.write_text(
        "kvconform: expectations/1\nknown_failures:\n"
        + "".join(f"  - {{id: hash.x{i}, reason: r}}\n" for i in range(30)),
        encoding="utf-8",
    )
    with pytest.raises(yamlsource.SourceError) as refused:
        expectations.load(known, ())
    assert "holds more than 50 nodes" in str(refused.value)
    assert "alias" not in str(refused.value)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [1, 2, 3, 4, 5, 6, 7, 8]\nb: [*a, *a, *a, *a, *a, *a, *a]\n")
    with pytest.raises(yamlsource.SourceError, match="once its aliases are expanded"):
        yamlsource.load_yaml(bomb)


# --- 16: a folder name with a line break -------------------------------------------------


def test_16_new_adapter_names_a_folder_with_a_line_break_on_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "a\nkvconform: forged"
    status, out, err = run("new-adapter", "--lang", "python", str(folder))
    assert status == cli.EXIT_OK, err
    assert not any(line.startswith("kvconform: forged") for line in out.splitlines())
    assert "a\\nkvconform: forged" in out


# --- 17: the default adapter ignores the current folder --------------------------------


def test_17_the_reference_is_loaded_without_the_current_folder_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    load_adapter(DEFAULT_ADAPTER)
    assert str(tmp_path) not in sys.path
    (tmp_path / "mine.py").write_text(
        "from kvconform.adapters.reference import ReferenceAdapter as Mine\n", encoding="utf-8"
    )
    load_adapter("mine:Mine")  # a module of the user's is still found beside them
    assert str(tmp_path) in sys.path


# --- the grace after shutdown --------------------------------------------------------------


@pytest.mark.xdist_group("waits")  # mostly waiting: one worker waits for all of these
def test_the_shutdown_grace_is_short_and_configurable() -> None:
    for grace, most in ((limits.SHUTDOWN_GRACE, limits.SHUTDOWN_GRACE + 1.0), (0.0, 0.8)):
        driver = StdioDriver([*STDIO, "deaf"], timeout=10, shutdown_grace=grace)
        pid = driver.pid
        assert pid is not None
        started = time.perf_counter()
        driver.close()
        assert time.perf_counter() - started < most, grace  # the old grace was about 4 s
        with pytest.raises(ProcessLookupError):
            os.killpg(pid, 0)  # the whole group is gone
    status, _, err = run("run", "--shutdown-grace", "-1")
    assert status == cli.EXIT_USAGE and "--shutdown-grace" in err
    status, _, err = run("run", "--shutdown-grace", "nan")
    assert status == cli.EXIT_USAGE


def test_in_process_describe_with_many_dtypes_cannot_start() -> None:
    class Many:
        def describe(self) -> AdapterInfo:
            dtypes = frozenset({"f32", *(f"d{i}" for i in range(300_000))})
            return AdapterInfo(
                "x", "1", "python", frozenset({"hash"}), None, frozenset(), dtypes=dtypes
            )

    with pytest.raises(ValueError, match="300001 entries"):
        InProcessDriver(Many())  # type: ignore[arg-type]


def test_a_report_read_back_is_held_to_the_entry_limit(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"results": [{}] * (limits.MAX_REPORT_ENTRIES + 1)}))
    with pytest.raises(yamlsource.SourceError, match="more than the 20000"):
        record.read(path)


def test_after_sigterm_the_adapters_group_is_killed_at_once(tmp_path: Path) -> None:
    # The adapter hangs on its first cache_append: it will answer no shutdown. The old
    # grace (2 s for the answer, 2 s for the exit) kept it running 4 s after the signal.
    marker = tmp_path / "hanging"
    adapter = " ".join([*STDIO, "hang", str(marker)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "kvconform", "run", "--adapter-cmd", adapter, "--quiet",
         "--timeout", "60", "--area", "alloc", "--json", str(tmp_path / "r.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert marker.exists(), proc.poll()
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == cli.EXIT_INTERRUPTED
    assert took < 3.0, took


def test_incidents_are_bounded_and_keep_the_latest() -> None:
    from kvconform.protocol.client import _Incidents

    incidents = _Incidents()
    for n in range(3 * limits.MAX_INCIDENTS):
        incidents.append(f"incident {n}")
    assert len(incidents) == limits.MAX_INCIDENTS
    assert incidents[0] == "incident 0"
    assert incidents[-1].endswith(f"incident {3 * limits.MAX_INCIDENTS - 1}")
