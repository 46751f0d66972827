"""The command under bad arguments, signals and its own bugs (issue 11; spec/security.md).

Each ends in one clear line and its documented exit status, never a traceback;
a run that stops early writes the reports so far, marked incomplete, and never
reports a verdict it did not reach.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import signal
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from kvconform import cli, plugin
from kvconform.cli import run as cli_run
from kvconform.harness import runner, suite
from tests.interrupts import ignoring, stop_signals_live

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--timeout", "nan"], "--timeout"),
        (["run", "--timeout", "inf"], "--timeout"),
        (["run", "--timeout", "1e308"], "at most 3600"),
        (["run", "--timeout", "0"], "above 0"),
        (["run", "--timeout", "\u0663"], "not a number"),  # an Arabic-Indic 3: float takes it
        (["run", "--timeout", " 3"], "not a number"),
        (["run", "--timeout", "1_0"], "not a number"),
        (["run", "--shutdown-grace", "\uff11"], "not a number"),  # a fullwidth 1
        (["run", "--shutdown-grace", "-1"], "from 0 to 60"),
        (["run", "--max-failures-shown", "-3"], "expected a whole number"),
        (["run", "--max-failures-shown", " 3"], "expected a whole number"),
        (["run", "--generated", "\u0663"], "expected a whole number"),  # an Arabic-Indic 3
        (["run", "--generated", "1_000"], "expected a whole number"),
        (["run", "--generated", "0"], "expected 1 .. 1000000"),
        (["run", "--generated", "1" + "0" * 40], "expected a whole number"),
        (["run", "--generated", "1", "--seed", " 5"], "'random'"),
        (["new-adapter", "--lang", "python", ""], "empty"),
        # an option the command does not have is named, not only the argument it lacks
        (["explain", "-x"], "unrecognized arguments: -x (see 'kvconform explain --help')"),
        (["new-adapter", "--langs", "python"], "unrecognized arguments: --langs"),
        (["explain"], "the following arguments are required: id"),
        (["new-adapter", "--lang", "python"], "the following arguments are required: DIR"),
        (["run", "--adapter-cmd", "'unbalanced"], "No closing quotation"),
        (["run", "--adapter-cmd", ""], "empty"),
        (["run", "--generated", "1", "--export-counterexamples", __file__], "not a directory"),
        (["run", "--report-dir", __file__], "not a directory"),
        (["run", "--json", str(FIXTURES)], "is a directory"),
        (["run", "--json", "/nonexistent-folder/r.json"], "does not exist"),
    ],
)
def test_a_bad_argument_is_one_line_and_exit_2_before_anything_runs(
    argv: list[str], fragment: str
) -> None:
    status, out, err = run(*argv)
    assert status == cli.EXIT_USAGE, err
    assert fragment in err and err.count("\n") == 1 and "Traceback" not in err
    assert out == ""


def test_write_expectations_refuses_to_overwrite_the_expectations_it_reads(
    tmp_path: Path,
) -> None:
    known = tmp_path / "known.yaml"
    known.write_text("kvconform: expectations/1\nknown_failures: []\n", encoding="utf-8")
    before = known.read_text(encoding="utf-8")
    status, _, err = run(
        "run", "--expectations", str(known), "--write-expectations", str(known), "--quiet"
    )
    assert status == cli.EXIT_USAGE and "would overwrite" in err
    assert known.read_text(encoding="utf-8") == before


def test_compare_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    report = tmp_path / "a.json"
    assert run("run", "--area", "hash", "--json", str(report), "--quiet")[0] == 0
    before = report.read_bytes()
    status, _, err = run("compare", "-o", str(report), str(report))
    assert status == cli.EXIT_USAGE and "would overwrite" in err
    assert report.read_bytes() == before


def test_compare_checks_where_its_page_goes_as_run_checks_its_outputs(tmp_path: Path) -> None:
    """A missing folder or a folder named as the page is one line naming -o, said
    before any report is read, in run's words (not an OSError's)."""
    report = tmp_path / "a.json"
    assert run("run", "--area", "hash", "--json", str(report), "--quiet")[0] == 0
    for target, said in [
        (tmp_path / "missing" / "m.html", f"-o: the folder {tmp_path / 'missing'} does not exist"),
        (tmp_path, f"-o: {tmp_path} is a directory"),
    ]:
        status, _, err = run("compare", "-o", str(target), str(report), str(tmp_path / "absent"))
        assert status == cli.EXIT_USAGE and err == f"kvconform: error: {said}\n", err
    assert not (tmp_path / "missing").exists()


def test_an_internal_error_is_exit_4_with_the_reports_so_far_marked_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = runner.run_case
    calls = 0

    def breaks_on_the_fifth(
        case: object, driver: object, trace: bool = False, strict_messages: bool = False
    ) -> runner.CaseResult:
        nonlocal calls
        calls += 1
        if calls == 5:
            raise ZeroDivisionError("a bug in the harness")
        return real(case, driver, trace=trace, strict_messages=strict_messages)  # type: ignore[arg-type]

    monkeypatch.setattr(cli_run, "run_case", breaks_on_the_fifth)
    status, out, err = run("run", "--area", "hash", "--report-dir", str(tmp_path), "--quiet")
    assert status == cli.EXIT_INTERNAL
    assert "internal error after 4 of" in err and "ZeroDivisionError" in err
    assert "Traceback" not in err and "NO VERDICT" in out and "CONFORMANT" not in out
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    summary_counts = report["summary"]
    assert summary_counts["passed"] + summary_counts["failed"] == 4
    assert summary_counts["not_run"] == summary_counts["total"] - 4 > 0  # the whole selection
    assert "internal error" in report["incomplete"]
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert "not judged" in summary.splitlines()[0] and "INCOMPLETE RUN" in summary


def test_list_checks_the_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvconform.harness import manifest

    class Altered:
        intact = False
        digest = manifest.check().digest  # the files' own: the cache's entry serves the list

        def problems(self) -> str:
            return "altered: scenarios/plan/keys.yaml"

    monkeypatch.setattr(manifest, "check", lambda: Altered())
    status, _, err = run("list")
    assert status == cli.EXIT_USAGE and "differs from its manifest" in err
    status, out, err = run("list", "--allow-modified", "--area", "hash")
    assert status == cli.EXIT_OK and "MODIFIED SUITE" in err and "case(s)" in out


def test_a_modified_suite_is_shown_on_every_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kvconform.harness import manifest

    real = manifest.check()

    class Altered:
        intact = False
        digest = real.digest

        def problems(self) -> str:
            return "altered: scenarios/hash/fold.yaml"

    monkeypatch.setattr(manifest, "check", lambda: Altered())
    status, out, _ = run(
        "run", "--area", "hash", "--allow-modified", "--report-dir", str(tmp_path), "--quiet"
    )
    assert status == cli.EXIT_OK and "MODIFIED SUITE" in out
    for name in ("report.json", "report.xml", "summary.md", "report.html"):
        assert "MODIFIED SUITE" in (tmp_path / name).read_text(encoding="utf-8") or (
            name == "report.json"
            and "scenarios/hash/fold.yaml"
            in json.loads((tmp_path / name).read_text(encoding="utf-8"))["suite"]["modified"]
        ), name
    status, _, _ = run("compare", "-o", str(tmp_path / "c.html"), str(tmp_path / "report.json"))
    assert status == 0 and "MODIFIED SUITE" in (tmp_path / "c.html").read_text(encoding="utf-8")


def test_list_into_a_closed_pipe_is_quiet() -> None:
    done = subprocess.run(
        f"{sys.executable} -m kvconform list | head -1",
        shell=True,  # the pipe under test
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.stdout.count("\n") == 1
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def _a_run_waiting_on_a_hanging_adapter(
    tmp_path: Path, *, nohup: bool = False
) -> tuple[subprocess.Popen[str], list[int]]:
    """``kvconform run`` started as at a terminal (under ``nohup``: with SIGHUP ignored,
    as nohup starts its command), once it waits on an adapter that hangs on its third
    cache_len; and the adapter's processes."""
    adapter = f"{sys.executable} {FIXTURES / 'misbehaving_adapter.py'} hang --op cache_len --at 3"
    # as at a terminal, even when the tests were started in the background or under nohup
    with stop_signals_live(), ignoring(signal.SIGHUP) if nohup else contextlib.nullcontext():
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kvconform",
                "run",
                "--adapter-cmd",
                adapter,
                "--quiet",
                "--timeout",
                "60",
                "--report-dir",
                str(tmp_path),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    deadline = time.monotonic() + 60
    children: list[int] = []
    while not children and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        children = _children(proc.pid)
    assert children, f"the adapter is running ({proc.poll()=})"
    time.sleep(1)  # past the handshake, into the hang
    return proc, children


@pytest.mark.xdist_group("waits")  # mostly waiting: one worker waits for all of these
@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_adapter_group_and_leaves_reports_marked_interrupted(
    tmp_path: Path, signum: int
) -> None:
    stale = tmp_path / "report.json"
    stale.write_text('{"stale": "from the previous run"}', encoding="utf-8")
    proc, children = _a_run_waiting_on_a_hanging_adapter(tmp_path)
    try:
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)
    finally:
        _left_nothing_running(proc, children)
    assert proc.returncode == cli.EXIT_INTERRUPTED, err
    assert "interrupted" in err and "Traceback" not in err
    report = json.loads(stale.read_text(encoding="utf-8"))
    assert "interrupted" in report["incomplete"] and report["stopped_by"] == "interrupted"
    summary = report["summary"]  # the whole selection is counted, the cases never run as such
    assert summary["total"] == len(report["results"]) > summary["passed"] + summary["failed"]
    assert summary["not_run"] > 0
    time.sleep(0.5)
    assert not [pid for pid in children if _alive(pid)], "the adapter's group was stopped"


@pytest.mark.xdist_group("waits")  # mostly waiting: one worker waits for all of these
@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
def test_a_run_under_nohup_outlives_its_terminal(tmp_path: Path) -> None:
    """``nohup kvconform run ...``: the SIGHUP of a closed terminal is ignored as nohup
    asked; a SIGTERM still stops the run (the other half of the test above)."""
    proc, children = _a_run_waiting_on_a_hanging_adapter(tmp_path, nohup=True)
    try:
        proc.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        _left_nothing_running(proc, children)
    assert proc.returncode == cli.EXIT_INTERRUPTED, err
    assert "interrupted by signal SIGTERM" in err, err
    time.sleep(0.5)
    assert not [pid for pid in children if _alive(pid)], "the adapter's group was stopped"


def _left_nothing_running(proc: subprocess.Popen[str], children: list[int]) -> None:
    """A test that failed before the command stopped leaves neither it nor its adapter
    running (a run that ignored its signal would go on, a case at a time, for hours)."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in children:
        if _alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.covers("PROTO-17")
@pytest.mark.parametrize(
    "raw, ok",
    [
        ("0", True),
        ("18446744073709551615", True),
        ("18446744073709551616", False),
        ("007", False),
        ("\u00b2", False),  # a digit to str.isdigit, not to int()
        ("\u0663", False),  # ARABIC-INDIC DIGIT THREE: int() reads it as 3
        ("9" * 5000, False),  # checked by length before any conversion
        ("", False),
        ("+1", False),
        (" 1", False),
        (7, False),
    ],
)
def test_a_u64_is_read_exactly_as_the_schema_writes_it(raw: object, ok: bool) -> None:
    from kvconform.protocol import codec
    from kvconform.protocol import operations as ops

    op = ops.CacheAllocId("c")
    outcome = codec.outcome_of(op, {"seq": 1, "ok": raw})
    assert (type(outcome).__name__ == "Ok") is ok
    line = json.dumps({"seq": 1, "ok": raw}).encode()
    quick = codec.quick_outcome(op, line, 1)
    assert quick is None or quick == outcome


def test_a_folder_or_fifo_named_like_a_suite_file_is_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import kvconform
    from kvconform.harness import manifest, suite

    root = tmp_path / "data"
    for name in ("conformance", "vectors", "spec"):
        shutil.copytree(kvconform.data_root() / name, root / name)
    (root / "conformance/scenarios/hash/folder.yaml").mkdir()
    os.mkfifo(root / "conformance/scenarios/hash/fifo.yaml")
    monkeypatch.setattr(kvconform, "data_root", lambda: root)
    integrity = manifest.check()  # would hang reading the FIFO, or raise on the folder
    assert not integrity.intact and "fifo.yaml" in integrity.problems()
    assert all("fifo" not in p.name and "folder" not in p.name for p in suite.scenario_files())


@pytest.mark.xdist_group("waits")  # mostly waiting: one worker waits for all of these
def test_an_adapter_that_hangs_on_everything_is_given_up_in_bounded_time(
    tmp_path: Path,
) -> None:
    # Every process hangs on its first cache_len: without a budget, 600 cases at a
    # timeout each. After three programs in a row time out, the run ends (exit 3) with
    # the reports so far, marked incomplete; the cases never run are not judged.
    adapter = f"{sys.executable} {FIXTURES / 'misbehaving_adapter.py'} hang --op cache_len --at 1"
    started = time.monotonic()
    status, out, err = run(
        "run", "--adapter-cmd", adapter, "--timeout", "0.5", "--quiet",
        "--json", str(tmp_path / "r.json"),
    )  # fmt: skip
    assert status == cli.EXIT_ADAPTER, err
    assert time.monotonic() - started < 60
    assert "unresponsive" in err and "Traceback" not in err
    # every failure is the adapter breaking in a run given up: no answer was judged wrong,
    # so no verdict is claimed (a trial read "NOT CONFORMANT" beside "none judged")
    assert "NO VERDICT" in out and "NOT CONFORMANT" not in out
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert "not run" in report["incomplete"]
    assert report["stopped_by"] == "adapter_unresponsive"  # for CI, without reading text
    assert report["summary"]["total"] == len(suite.all_cases())
    left = [r for r in report["results"] if r["verdict"] == "not_run"]
    assert left and report["summary"]["not_run"] == len(left)
    assert all("unresponsive" in r["reason"] for r in left)
    assert report["results"][-1]["verdict"] == "not_run" and "not run" in out


def test_compare_on_a_hostile_json_file_is_one_line(tmp_path: Path) -> None:
    for name, text in (
        ("deep.json", "[" * 200_000 + "]" * 200_000),
        ("garbage.json", "\x00\xff not json"),
        ("wrong.json", '{"format": "kvconform-report/1"}'),
    ):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        status, _, err = run("compare", "-o", str(tmp_path / "c.html"), str(path))
        assert status == cli.EXIT_USAGE and err.count("\n") == 1 and "Traceback" not in err, err


def test_write_expectations_into_an_unwritable_folder_is_refused_before_the_run(
    tmp_path: Path,
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        status, out, err = run("run", "--write-expectations", str(locked / "k.yaml"))
        assert status == cli.EXIT_USAGE and "not writable" in err and out == ""
    finally:
        locked.chmod(0o700)


@pytest.mark.parametrize("timeout", ["nan", "inf", "-1", "1e308", "\u0663"])
def test_the_plugin_refuses_each_bad_timeout_as_a_usage_error(timeout: str) -> None:
    """The plugin's own reading of --kv-timeout, in this process: each bad value is one
    usage error naming the option, before anything is collected. The test below runs that
    path once in a pytest of its own, as a user meets it."""

    class Options:
        stash = pytest.Stash()

        def getoption(self, name: str) -> object:
            return timeout if name == "kv_timeout" else None

    with pytest.raises(pytest.UsageError, match=r"^--kv-timeout "):
        plugin.pytest_configure(Options())  # type: ignore[arg-type]


def test_the_plugin_refuses_a_bad_timeout(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "kvconform", "--kv-suite", "-q",
         "-p", "no:cacheprovider", "--kv-timeout", "\u0663"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 4 and "--kv-timeout" in done.stderr, done.stderr[-500:]
    assert "not a number" in done.stderr and "Traceback" not in done.stderr


def test_the_plugin_checks_the_manifest_of_the_suite_it_collects(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from kvconform.harness import manifest\n"
        "class Altered:\n"
        "    intact = False\n"
        "    digest = '0' * 64\n"
        "    def problems(self):\n"
        "        return 'altered: scenarios/hash/fold.yaml'\n"
        "manifest.check = lambda: Altered()\n",
        encoding="utf-8",
    )
    command = [sys.executable, "-m", "pytest", "-p", "kvconform", "--kv-suite", "-q",
               "-p", "no:cacheprovider"]  # fmt: skip
    refused = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False
    )
    assert refused.returncode == 4 and "differs from its manifest" in refused.stderr
    allowed = subprocess.run(  # the whole suite is collected; the cases of one file run
        [*command, "--kv-allow-modified", "-v", "-x", "-k", "alloc and capacity"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert allowed.returncode == 0, allowed.stdout[-1000:]
    assert "MODIFIED SUITE" in allowed.stdout
    assert " passed, " in allowed.stdout and " deselected" in allowed.stdout


@pytest.mark.covers("PROTO-24")
@pytest.mark.parametrize(
    "mode, said",
    [
        ("shutdown-status", "exited with status 7 after shutdown, not 0 (PROTO-24)"),
        ("shutdown-linger", "did not exit within 1 s of shutdown; killed (PROTO-24)"),
    ],
)
@pytest.mark.xdist_group("waits")  # mostly waiting: one worker waits for all of these
def test_an_adapter_that_ends_badly_is_reported_apart_from_the_verdict(
    tmp_path: Path, mode: str, said: str
) -> None:
    """PROTO-24 is the adapter's duty, not the engine's: it is shown, not counted."""
    adapter = f"{sys.executable} {FIXTURES / 'misbehaving_adapter.py'} {mode}"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvconform",
            "run",
            "--adapter-cmd",
            adapter,
            "--quiet",
            "--id",
            "alloc.rewind.*",
            "--json",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == cli.EXIT_OK, done.stderr
    assert said in done.stdout and "adapter incidents" in done.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert said in report["adapter"]["incidents"][-1]


# --- found by the hostile-input audit of 2.5.0 ---------------------------------------


@pytest.mark.parametrize("factory", ["ExitsOnAppend", "DeepFault"])
def test_an_in_process_adapter_that_exits_or_refuses_impossibly_breaks_a_step_not_the_run(
    tmp_path: Path, factory: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES))
    status, out, err = run(
        "run", "--adapter", f"inprocess_misbehaving:{factory}", "--area", "alloc", "--quiet",
        "--trace", str(tmp_path / "trace.txt"), "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert status == cli.EXIT_FAILED, (status, err)
    assert "Traceback" not in err and "NOT CONFORMANT" in out  # the adapter's own may show
    said = "raised SystemExit" if factory == "ExitsOnAppend" else "malformed refusal"
    assert said in out
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["summary"]["failed"] > 0 and "incomplete" not in report


def test_a_deeply_nested_user_file_is_one_line_not_a_crash(tmp_path: Path) -> None:
    # libyaml's composer recurses in C: 50,000 brackets (100 KB) used to end the
    # process with a segmentation fault. Run apart, so a regression cannot end pytest.
    deep = tmp_path / "deep.yaml"
    deep.write_text(
        "kvconform: expectations/1\nknown_failures: " + "[" * 50_000 + "]" * 50_000 + "\n",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "kvconform", "run", "--area", "hash", "--quiet",
         "--expectations", str(deep)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == cli.EXIT_USAGE, (done.returncode, done.stderr[-500:])
    assert done.stderr.count("\n") == 1 and ":2: nested deeper than 64 levels" in done.stderr


@pytest.mark.parametrize("kind", ["fifo", "device", "digits", "digits-json"])
def test_a_user_file_that_is_no_regular_file_or_holds_a_huge_number_is_one_line(
    tmp_path: Path, kind: str
) -> None:
    if kind == "fifo":
        path = tmp_path / "known.yaml"
        os.mkfifo(path)  # opening it would wait forever for a writer
    elif kind == "device":
        path = Path(os.devnull)  # a character device; /dev/zero would never end
    else:
        path = tmp_path / ("known.yaml" if kind == "digits" else "report.json")
        body = "9" * 5000
        path.write_text(
            f"kvconform: expectations/1\nzz: {body}\n" if kind == "digits" else f'{{"a": {body}}}',
            encoding="utf-8",
        )
    if kind == "digits-json":
        status, _, err = run("compare", "-o", str(tmp_path / "c.html"), str(path))
    else:
        status, _, err = run("run", "--area", "hash", "--quiet", "--expectations", str(path))
    assert status == cli.EXIT_USAGE and err.count("\n") == 1 and "Traceback" not in err, err
    assert ("not a regular file" if kind in ("fifo", "device") else "digits") in err


def test_a_second_interrupt_while_the_adapter_shuts_down_still_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kvconform.protocol.client import StdioDriver

    driver = StdioDriver([sys.executable, str(FIXTURES / "misbehaving_adapter.py"), "hang"])
    proc = driver._proc
    assert proc is not None

    def interrupted(_: object) -> None:
        raise KeyboardInterrupt  # the second Ctrl-C, while close() awaits the shutdown answer

    monkeypatch.setattr(driver, "_shut_down", interrupted)
    with pytest.raises(KeyboardInterrupt):
        driver.close()
    assert proc.proc.poll() is not None  # killed all the same


def test_an_adapter_that_cannot_start_leaves_no_earlier_verdict_in_its_reports(
    tmp_path: Path,
) -> None:
    (tmp_path / "report.json").write_text('{"stale": "from the previous run"}', encoding="utf-8")
    status, _, err = run(
        "run", "--adapter-cmd", str(tmp_path / "no-such-adapter"), "--area", "hash",
        "--quiet", "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert status == cli.EXIT_ADAPTER and err.startswith("kvconform: the adapter could not start")
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["incomplete"].startswith("the adapter could not start")
    assert report["stopped_by"] == "adapter_not_started"
    assert report["summary"]["not_run"] == report["summary"]["total"] > 0
    assert "INCOMPLETE RUN" in (tmp_path / "summary.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "spec",
    ["inprocess_misbehaving:exits_when_made", "inprocess_misbehaving:DescribeRaisesGeneratorExit"],
)
def test_an_in_process_adapter_that_cannot_start_is_exit_3_with_reports(
    tmp_path: Path, spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES))
    (tmp_path / "report.json").write_text('{"stale": "from the previous run"}', encoding="utf-8")
    status, _, err = run("run", "--adapter", spec, "--quiet", "--report-dir", str(tmp_path))
    assert status == cli.EXIT_ADAPTER, (status, err)
    assert err.count("\n") == 1 and "failed to start" in err, err  # the forged line is inert
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert report["summary"]["not_run"] == report["summary"]["total"] > 0


def test_an_output_that_is_no_regular_file_is_never_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    link = tmp_path / "link.md"
    link.symlink_to(tmp_path / "elsewhere.md")
    for flag, path in (("--json", fifo), ("--markdown", link)):
        status, _, err = run("run", "--area", "hash", "--quiet", flag, str(path))
        assert status == cli.EXIT_USAGE and "not a regular file" in err, err
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and link.is_symlink()
    assert not (tmp_path / "elsewhere.md").exists()


def test_an_output_that_cannot_be_written_after_the_run_leaves_the_others_and_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kvconform import files
    from kvconform.reports import junit

    def disk_full(report: object, path: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(junit, "write", disk_full)
    status, out, err = run(
        "run", "--area", "hash", "--quiet", "--report-dir", str(tmp_path),
        "--write-expectations", str(tmp_path / "known.yaml"),
    )  # fmt: skip
    assert status == cli.EXIT_USAGE, (status, err)
    assert "cannot write the junit report" in err and "CONFORMANT" in out
    assert (tmp_path / "report.json").is_file() and (tmp_path / "summary.md").is_file()
    assert (tmp_path / "known.yaml").is_file() and not (tmp_path / "report.xml").exists()
    assert files.write_atomic  # the others went through the atomic writer


def test_the_plugin_finds_an_exported_counterexample_behind_its_header(tmp_path: Path) -> None:
    from kvconform import plugin

    exported = tmp_path / "hash.generated.0123456789.yaml"
    header = "".join(
        f"# line {i} of a long header naming the adapter's command\n" for i in range(40)
    )
    exported.write_text(header + "kvconform: scenarios/2\narea: hash\n", encoding="utf-8")
    assert plugin._sniff(exported) == "scenarios"
    other = tmp_path / "config.yaml"
    other.write_text("name: x\n# kvconform: scenarios/2\n", encoding="utf-8")
    assert plugin._sniff(other) is None
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    assert plugin._sniff(fifo) is None  # never opened: it would wait for a writer
    schema = tmp_path / "vectors.schema.json"  # quotes the format, is not a vector file
    schema.write_text('{"title": "x", "const": "kvconform-vectors/1"}', encoding="utf-8")
    assert plugin._sniff(schema) is None
    vectors = tmp_path / "v.json"
    vectors.write_text('{\n  "format": "kvconform-vectors/1",\n  "vectors": []}', encoding="utf-8")
    assert plugin._sniff(vectors) == "vectors"


def test_compare_shows_a_failure_once_however_often_a_report_lists_it(tmp_path: Path) -> None:
    report_path = tmp_path / "r.json"
    run(
        "run", "--adapter", "tests.mutants.hash:HashFnv1Order", "--area", "hash", "--quiet",
        "--json", str(report_path),
    )  # fmt: skip
    report = json.loads(report_path.read_text(encoding="utf-8"))
    failed = next(r for r in report["results"] if r["verdict"] == "failed")
    failed["failure"]["text"] = "X" * 100_000
    report["requirements"] = {
        f"HASH-{i}": {"verdict": "failed", "cases": 50, "failed": [failed["id"]] * 50}
        for i in range(1, 40)
    }
    report_path.write_text(json.dumps(report), encoding="utf-8")
    status, _, err = run("compare", "-o", str(tmp_path / "c.html"), str(report_path))
    assert status == cli.EXIT_OK, err
    page = (tmp_path / "c.html").read_text(encoding="utf-8")
    assert page.count("X" * 8000) == 1 and len(page) < 1_000_000


def test_the_plugin_turns_an_adapter_that_exits_when_made_into_one_usage_error(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "kvconform", "--kv-suite", "-q",
         "-p", "no:cacheprovider", "-k", "hash", "--kv-adapter",
         "inprocess_misbehaving:exits_when_made"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 4, (done.returncode, done.stdout[-800:], done.stderr[-800:])
    assert "INTERNALERROR" not in done.stdout + done.stderr
    assert "--kv-adapter inprocess_misbehaving:exits_when_made" in done.stdout + done.stderr


def test_a_signal_while_the_outputs_are_written_waits_for_all_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal as signals

    from kvconform.reports import junit

    written = junit.write

    def signalled_midway(report: object, path: Path) -> None:
        os.kill(os.getpid(), signals.SIGTERM)  # between the JSON report and the others
        written(report, path)  # type: ignore[arg-type]

    monkeypatch.setattr(junit, "write", signalled_midway)
    for name in ("report.json", "report.xml", "summary.md", "report.html"):
        (tmp_path / name).write_text("OLD", encoding="utf-8")
    status, _, err = run("run", "--area", "hash", "--quiet", "--report-dir", str(tmp_path))
    assert status == cli.EXIT_INTERRUPTED, (status, err)
    for name in ("report.json", "report.xml", "summary.md", "report.html"):
        assert not (tmp_path / name).read_text(encoding="utf-8").startswith("OLD"), name


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
@pytest.mark.parametrize("name", ["SIGHUP", "SIGTERM", "SIGINT"])
def test_a_signal_ignored_when_the_command_starts_stays_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Whoever started the command ignores the signal (SIGHUP under nohup, SIGINT in a
    shell's background job): it stops neither a case nor the writing of the outputs."""
    from kvconform.reports import junit

    signum = getattr(signal, name)
    judged, written = cli_run.run_case, junit.write
    sent: list[str] = []

    def signalled_in_a_case(*args: Any, **kwargs: Any) -> runner.CaseResult:
        if not sent:
            os.kill(os.getpid(), signum)
            sent.append("case")
        return judged(*args, **kwargs)

    def signalled_midway(report: object, path: Path) -> None:
        os.kill(os.getpid(), signum)
        sent.append("outputs")
        written(report, path)  # type: ignore[arg-type]

    monkeypatch.setattr(cli_run, "run_case", signalled_in_a_case)
    monkeypatch.setattr(junit, "write", signalled_midway)
    with ignoring(signum):
        status, _, err = run("run", "--area", "hash", "--quiet", "--report-dir", str(tmp_path))
        assert signal.getsignal(signum) is signal.SIG_IGN
    assert sent == ["case", "outputs"]
    assert status == cli.EXIT_OK, (status, err)


class _Full(io.StringIO):
    """A console on a full disk: every write and flush fails as /dev/full's do."""

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize(
    "argv, verdict",
    [
        (["run", "--id", "hash.stories.*"], cli.EXIT_OK),
        (
            ["run", "--id", "alloc.rewind.rewind-then-append-reuses-positions",
             "--adapter", "tests.fixtures.inprocess_misbehaving:WrongThenCrash"],
            cli.EXIT_FAILED,
        ),
        (["list", "--area", "hash"], cli.EXIT_OK),
    ],
    ids=["conformant", "failing", "list"],
)  # fmt: skip
def test_a_console_that_takes_no_more_text_ends_the_command_with_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], verdict: int
) -> None:
    """Standard output on a full disk: the verdict never reached its reader, so no
    verdict status; one line on standard error says why, and the other outputs are
    written. A closed one (``>&-``) takes nothing, as print's does: the verdict stands.
    A full standard error cannot be told, and changes nothing."""
    report = tmp_path / "r.json"
    extra = ["--json", str(report)] if argv[0] == "run" else []
    err = io.StringIO()
    assert cli.main([*argv, *extra], _Full(), err) == cli.EXIT_USAGE
    said = err.getvalue().splitlines()
    assert (
        said[-1] == "kvconform: error: standard output: cannot be written (No space left on device)"
    )
    assert "Traceback" not in err.getvalue() and "internal error" not in err.getvalue()
    if extra:
        assert json.loads(report.read_text(encoding="utf-8"))["summary"]["total"] > 0
    monkeypatch.setattr(sys, "stdout", None)  # what Python makes of a closed descriptor 1
    assert cli.main(argv, None, io.StringIO()) == verdict
    monkeypatch.undo()
    assert cli.main(argv, io.StringIO(), _Full()) == verdict


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_the_command_on_a_full_or_closed_descriptor_or_in_a_removed_folder(
    tmp_path: Path,
) -> None:
    """As a shell starts it: ``>/dev/full`` (what is left in the buffer fails only at the
    last flush), ``>&-``, and a current folder removed after the shell entered it."""
    command = [sys.executable, "-m", "kvconform", "run", "--id", "hash.stories.*"]
    with open("/dev/full", "w", encoding="utf-8") as full:
        done = subprocess.run(command, stdout=full, stderr=subprocess.PIPE, text=True, check=False)
    assert done.returncode == cli.EXIT_USAGE, done.stderr
    assert done.stderr.endswith("standard output: cannot be written (No space left on device)\n")
    closed = subprocess.run(
        ["sh", "-c", 'exec "$@" >&-', "sh", *command], capture_output=True, text=True, check=False
    )
    assert closed.returncode == cli.EXIT_OK, closed.stderr
    assert "Traceback" not in closed.stderr and "internal error" not in closed.stderr
    gone = tmp_path / "gone"
    gone.mkdir()
    # In a removed folder, Python itself stops at a relative PYTHONPATH entry (it cannot
    # make it absolute) before kvconform runs: this process's are given absolute.
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    absolute = os.pathsep.join(os.path.abspath(p) for p in paths if p)
    removed = subprocess.run(
        ["sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(gone), *command],
        capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": absolute},
    )  # fmt: skip
    assert removed.returncode == cli.EXIT_USAGE, removed.stderr
    assert removed.stderr == (
        "kvconform: error: the current folder no longer exists (removed after this shell "
        "entered it): run kvconform from a folder that does\n"
    )


@pytest.mark.parametrize(
    "argv, said",
    [
        (["run", "--adapter", ""], "adapter '': expected 'module:factory'"),
        (["run", "--report-dir", ""], "argument --report-dir: an empty path"),
        (["run", "--json", ""], "argument --json: an empty path"),
        (["compare", "-o", "", "r.json"], "argument -o/--output: an empty path"),
    ],
    ids=["adapter", "report-dir", "json", "compare-output"],
)
def test_an_empty_argument_is_refused_not_read_as_its_default(argv: list[str], said: str) -> None:
    """``--adapter "$ADAPTER"`` with the variable unset ran the built-in reference and
    said CONFORMANT; ``--report-dir ""`` wrote the reports into the current folder."""
    status, out, err = run(*argv)
    assert status == cli.EXIT_USAGE, (status, out, err)
    assert said in err and "CONFORMANT" not in out


def test_a_standard_module_s_name_beside_the_adapter_does_not_stand_in_for_it(
    tmp_path: Path,
) -> None:
    """The adapter module is imported with the current folder first on the path; after
    that the folder stays on it, last: a user's ``html.py`` beside the adapter turned a
    conformant run into an internal error when the HTML report imported ``html``."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "good.py").write_text(
        "from kvconform.adapters.reference import ReferenceAdapter\n"
        "def make():\n    return ReferenceAdapter()\n",
        encoding="utf-8",
    )
    (mods / "html.py").write_text('TITLE = "my page helper"\n', encoding="utf-8")
    launcher = tmp_path / "bin" / "kvconform_command.py"  # as the installed script: the
    launcher.parent.mkdir()  # current folder is not on the path until the adapter's import
    launcher.write_text("from kvconform.cli import console\nconsole()\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(launcher), "run", "--quiet", "--adapter", "good:make",
         "--id", "hash.stories.*", "--html", str(tmp_path / "run.html")],
        cwd=mods, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == cli.EXIT_OK, done.stderr
    assert "internal error" not in done.stderr
    assert (tmp_path / "run.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_a_symbolic_link_loop_is_a_path_that_cannot_be_used_not_an_internal_error(
    tmp_path: Path,
) -> None:
    """Before Python 3.13, resolving a link loop raises RuntimeError: compare and
    new-adapter reported it as an internal error of kvconform (run already said why)."""
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    loop = tmp_path / "a"
    report = tmp_path / "r.json"
    assert run("run", "--quiet", "--id", "hash.stories.*", "--json", str(report))[0] == 0
    for argv, said in [
        (["compare", "-o", str(loop / "x.html"), str(report)], "Too many levels of symbolic links"),
        (["compare", "-o", str(tmp_path / "x.html"), str(loop)], "Too many levels of symbolic"),
        (["new-adapter", "--lang", "python", str(loop)], "exists and is not a directory"),
        (["new-adapter", "--lang", "python", str(loop / "sub")], "Too many levels of symbolic"),
    ]:
        status, _, err = run(*argv)
        assert status == cli.EXIT_USAGE and said in err, (argv, status, err)
        assert "internal error" not in err


def test_an_error_quoting_a_long_value_still_says_what_is_wrong_with_it(tmp_path: Path) -> None:
    """An error line is clipped in its middle: cut at its end, a long path or value left
    only itself, never the reason (``File name too long``, ``no such requirement``)."""
    status, _, err = run("run", "--requirement", "X" * 5000)
    assert status == cli.EXIT_USAGE and len(err) < 2200, err
    assert err.rstrip().endswith("no such requirement or group in spec/"), err[-300:]
    assert "(5055 characters)" in err  # the whole line's length, said in its middle
    deep = tmp_path.joinpath(*["b" * 200] * 25) / "r.json"
    status, _, err = run("run", "--quiet", "--json", str(deep))
    assert status == cli.EXIT_USAGE and len(err) < 2200, err
    assert err.rstrip().endswith(("File name too long", "does not exist")), err[-300:]


@pytest.mark.parametrize(
    "raised, said",
    [
        (MemoryError(), "stopped by a limit of the machine after 0 of "),
        (OSError(errno.EMFILE, "Too many open files"), "stopped by a limit of the machine"),
        (RuntimeError("a bug"), "internal error after 0 of "),
    ],
    ids=["memory", "descriptors", "bug"],
)
def test_the_machine_s_limits_are_not_called_a_bug(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception, said: str
) -> None:
    """Out of memory or of file descriptors, a run stops with status 4 and its reports
    marked incomplete, as for a bug, but the line says what stopped it and asks for no
    bug report (``ulimit -v``, ``ulimit -n`` in an audit)."""

    def stopped(*args: Any, **kwargs: Any) -> runner.CaseResult:
        raise raised

    monkeypatch.setattr(cli_run, "run_case", stopped)
    report = tmp_path / "r.json"
    status, _, err = run("run", "--quiet", "--id", "hash.stories.*", "--json", str(report))
    assert status == cli.EXIT_INTERNAL, err
    assert said in err and ("please report it" in err) is isinstance(raised, RuntimeError), err
    assert said in json.loads(report.read_text(encoding="utf-8"))["incomplete"]


def test_a_skeleton_that_cannot_be_written_whole_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a full disk new-adapter wrote README.md and stopped; its retry, disk freed, was
    refused: 'the directory exists and is not empty'. What was begun is taken away."""
    written = Path.write_text
    target = tmp_path / "deep" / "my-adapter"

    def disk_full_after_the_readme(path: Path, *args: Any, **kwargs: Any) -> int:
        if path.name != "README.md":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return written(path, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", disk_full_after_the_readme)
    status, _, err = run("new-adapter", "--lang", "rust", str(target))
    assert status == cli.EXIT_USAGE and "No space left on device" in err, err
    assert not (tmp_path / "deep").exists()
    monkeypatch.undo()
    status, _, err = run("new-adapter", "--lang", "rust", str(target))
    assert status == cli.EXIT_OK, err
    assert (target / "README.md").exists() and (target / "Cargo.toml").exists()


# --- found by the hostile-input audit of 2.6.0 ---------------------------------------


def test_a_wrong_answer_judged_before_the_adapter_broke_stays_the_failure() -> None:
    """The adapter broke after a judged wrong answer: the case fails on that answer (cause
    answer), never 'no answer was judged' (the audit saw NO VERDICT over real wrong answers)."""
    status, out, _ = run(
        "run", "--quiet", "--id", "alloc.rewind.rewind-then-append-reuses-positions",
        "--adapter", "tests.fixtures.inprocess_misbehaving:WrongThenCrash",
    )  # fmt: skip
    assert status == cli.EXIT_FAILED, out
    assert "failed at step 6 (cache_append)" in out and "requested=109" in out
    assert "later check(s) not judged: the adapter broke" in out
    assert "none judged an answer" not in out and "NOT CONFORMANT" in out


def test_a_result_of_a_subclass_breaks_the_step_not_the_run() -> None:
    """An int subclass whose == raises is not a wire value: the step breaks, the run ends
    with a verdict (it used to end as an internal error after the first case)."""
    status, out, err = run(
        "run", "--quiet", "--area", "alloc",
        "--adapter", "tests.fixtures.inprocess_misbehaving:IdOfASubclass",
    )  # fmt: skip
    assert status == cli.EXIT_FAILED, err
    assert "internal error" not in err and "expected an unsigned 64-bit integer" in out


def test_a_generated_check_where_the_adapter_broke_has_the_adapters_cause(
    tmp_path: Path,
) -> None:
    """A generated program on which the adapter raised is a failure by the adapter breaking
    (the gate knows it by that cause), not a wrong answer."""
    report = tmp_path / "r.json"
    status, _, err = run(
        "run", "--quiet", "--id", "generated.key-state-machine", "--generated", "20",
        "--adapter", "tests.fixtures.inprocess_misbehaving:RaisesOnTruncate",
        "--json", str(report),
    )  # fmt: skip
    assert status == cli.EXIT_FAILED, err
    (result,) = json.loads(report.read_text())["results"]
    assert result["failure"]["cause"] == "adapter"


@pytest.mark.xdist_group("waits")  # mostly waiting: one worker waits for all of these
def test_a_gate_is_not_reached_by_a_run_that_stopped_early(tmp_path: Path) -> None:
    """Cases not run: the gate passes nowhere (console, HTML, JUnit), the exit is 3."""
    adapter = f"{sys.executable} {FIXTURES / 'misbehaving_adapter.py'} hang --op cache_truncate"
    listed = tmp_path / "e.yaml"
    listed.write_text("kvconform: expectations/1\nknown_failures:\n")
    status, out, _ = run(
        "run", "--quiet", "--area", "alloc", "--timeout", "0.3", "--adapter-cmd", adapter,
        "--expectations", str(listed), "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert status == cli.EXIT_ADAPTER
    assert "gate not reached" in out and "gate passed" not in out
    assert "gate <strong>not reached" in (tmp_path / "report.html").read_text()
    root = ET.parse(tmp_path / "report.xml").getroot()
    assert root.get("errors") == "1" and root.find(".//error") is not None


def test_compare_refuses_one_report_twice_and_clips_what_a_report_says(tmp_path: Path) -> None:
    status, _, _ = run("run", "--quiet", "--area", "hash", "--json", str(tmp_path / "a.json"))
    assert status == cli.EXIT_OK
    status, _, err = run(
        "compare", str(tmp_path / "a.json"), str(tmp_path / "." / "a.json"),
        "-o", str(tmp_path / "m.html"),
    )  # fmt: skip
    assert status == cli.EXIT_USAGE and "is given twice" in err
    data = json.loads((tmp_path / "a.json").read_text())
    data["adapter"]["name"] = "N" * 1_000_000
    data["suite"]["version"] = "9.9\nkvconform: CONFORMANT" + "V" * 100_000
    (tmp_path / "b.json").write_text(json.dumps(data))
    status, _, err = run(
        "compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
        "-o", str(tmp_path / "m.html"),
    )  # fmt: skip
    assert status == cli.EXIT_OK, err
    assert err.count("\n") == 2 and "\nkvconform: CONFORMANT" not in err  # one line each
    assert (tmp_path / "m.html").stat().st_size < 4 << 20


@pytest.mark.parametrize(
    "entry",
    ["{id: a.b%s, reason: r}", "{id: alloc.rewind.empty-cache-noop, reason: r, cause: x%s}"],
    ids=["long-id", "long-cause"],  # no case id in a test id: pytest -k picks cases by id
)
def test_an_expectations_error_quoting_a_huge_value_is_one_short_line(
    tmp_path: Path, entry: str
) -> None:
    listed = tmp_path / "e.yaml"
    listed.write_text(
        "kvconform: expectations/1\nknown_failures:\n  - " + entry % ("b" * 1_000_000) + "\n"
    )
    status, _, err = run("run", "--quiet", "--expectations", str(listed))
    assert status == cli.EXIT_USAGE and err.count("\n") == 1 and len(err) < 3000, len(err)


def test_a_run_whose_adapter_never_starts_reports_its_gate_not_reached(tmp_path: Path) -> None:
    """With --expectations, the reports of a run that never started hold the gate, every
    listed case unchecked (not null, as if no expectations file had been given)."""
    listed = tmp_path / "e.yaml"
    listed.write_text(
        "kvconform: expectations/1\nknown_failures:\n"
        "  - {id: alloc.rewind.empty-cache-noop, reason: tracked elsewhere}\n"
    )
    status, _, _ = run(
        "run", "--adapter", "no_such_module:make", "--expectations", str(listed),
        "--report-dir", str(tmp_path),
    )  # fmt: skip
    assert status == cli.EXIT_ADAPTER
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["gate"]["unchecked"] == ["alloc.rewind.empty-cache-noop"]
    assert report["gate"]["reasons"] == {"alloc.rewind.empty-cache-noop": "tracked elsewhere"}
    assert "gate **not reached**" in (tmp_path / "summary.md").read_text()


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
def test_the_reference_loads_numpy_with_one_blas_thread_unless_the_environment_chose() -> None:
    """OpenBLAS starts a thread per core when numpy loads, and where it cannot (a tight
    ``ulimit -v``: 190 MB here) sends its process SIGINT, which the command reported as
    "interrupted" (130). Loading the reference starts none; a number the user set is
    kept, and the environment an adapter process would inherit is the user's."""
    probe = (
        "import os\n"
        "from kvconform.adapters import DEFAULT_ADAPTER, load_adapter\n"
        "load_adapter(DEFAULT_ADAPTER)\n"
        "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    chosen = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    env = {k: v for k, v in os.environ.items() if k not in chosen}
    for setting, said in [({}, ["1", "None"]), ({"OPENBLAS_NUM_THREADS": "2"}, ["2"])]:
        done = subprocess.run([sys.executable, "-c", probe], env={**env, **setting},
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.split()[-len(said) :] == said, (setting, done.stdout)
