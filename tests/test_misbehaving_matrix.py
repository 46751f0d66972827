"""Every way an adapter can misbehave, through the whole command (issue 11; spec/security.md).

One row per mode of tests/fixtures/misbehaving_adapter.py, each run as a user
would run it (``kvconform run --adapter-cmd ... --report-dir``) in a process of
its own: the run ends with the documented status and one clear line at most, no
traceback, every report written and well formed, nothing raw from the adapter
on the console, and the misbehaviour named in the failure.
"""

from __future__ import annotations

import fnmatch
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvconform import cli
from kvconform.harness import suite
from kvconform.protocol.client import MAX_FAILED_RESTARTS

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "misbehaving_adapter.py"
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
FAILED, START = cli.EXIT_FAILED, cli.EXIT_ADAPTER
#: Given up after it started: the same status as not starting, with the reports so far.
GIVEN_UP = -cli.EXIT_ADAPTER

#: mode, extra fixture arguments, expected status, what the console must say.
MATRIX = [
    ("crash", ["--once", "{marker}"], FAILED, "exited"),
    ("hang", ["--once", "{marker}"], FAILED, "timed out|no response|waited"),
    ("garbage", [], FAILED, "not JSON"),
    ("wrong-seq", [], FAILED, "seq"),
    ("swap", [], FAILED, "seq"),
    ("null-seq", [], FAILED, "could not decode"),
    ("bad-body", [], FAILED, "malformed"),
    ("big-line", ["--size", str(17 * 1024 * 1024)], FAILED, "longer|oversized|bytes"),
    ("flood", ["--size", "2000000"], 0, ""),
    ("deep", [], FAILED, "malformed|nest|not JSON"),
    ("not-utf8", [], FAILED, "not JSON|UTF-8|utf-8"),
    ("hostile-text", [], FAILED, "pwned"),
    ("wide-u64", ["--op", "cache_alloc_id"], FAILED, "unsigned 64-bit"),
    ("wide-u64", ["--op", "cache_alloc_id", "--size", "1"], FAILED, "unsigned 64-bit"),
    ("wide-u64", ["--op", "cache_alloc_id", "--size", "2"], FAILED, "unsigned 64-bit"),
    ("nan", [], FAILED, "malformed|NaN|expected null"),
    ("hostile-hello", [], 0, ""),
    ("hello-exit", [], START, "could not start"),
    ("hello-refuse", [], START, "could not start"),
    ("restart-dies", ["--once", "{marker}"], GIVEN_UP, "not started again"),
    ("deep-error", [], FAILED, "malformed"),
    ("big-failure", ["--size", "5000000"], FAILED, "5000001 characters"),
    ("forged-hello", [], START, "unknown class"),
    ("float-protocol", [], START, "protocol"),
    ("float-seq", [], FAILED, "seq"),
    ("forged-refusal", [], START, "refused the handshake"),
    ("forged-name", [], 0, ""),
    (
        "exit-child-holds",
        ["--once", "{marker}"],
        FAILED,
        r"exited \(exit status 9\) but its standard output stayed open",
    ),
]

#: The cases each row runs: three, all reading allocation ids (the ``wide-u64`` rows'
#: trigger). A mode that breaks every answer restarts the adapter once per case, and the
#: rows are about the command's handling of one misbehaviour, not about the cases: the
#: first case meets it, the next ones show the run going on after a restart. More cases
#: would only start the same adapter again: each start is about 0.2 s of CPU, in most of
#: the 28 rows.
CASES = (
    "identity.alloc.increasing-across-constructions",
    "identity.alloc.never-reissued-after-drop",
    "identity.alloc.drop-order-does-not-recycle",
)
#: A row whose adapter is given up (``restart-dies``) runs all five: the first failure,
#: one case for each failed restart before the adapter is given up, and one left not run.
GIVEN_UP_CASES = ("identity.alloc.*",)

#: The most bytes a report may take, whatever the adapter said: its own text is clipped.
REPORT_BYTES = 4 * 1024 * 1024


@pytest.mark.parametrize(
    "mode, extra, status, said", MATRIX, ids=[f"{m[0]}-{i}" for i, m in enumerate(MATRIX)]
)
def test_a_misbehaving_adapter_through_the_whole_command(
    tmp_path: Path, mode: str, extra: list[str], status: int, said: str
) -> None:
    arguments = [a.replace("{marker}", str(tmp_path / "marker")) for a in extra]
    adapter = " ".join([sys.executable, str(FIXTURE), mode, *arguments])
    reports = tmp_path / "reports"
    done = subprocess.run(
        [sys.executable, "-m", "kvconform", "run", "--adapter-cmd", adapter,
         *(part for case in (GIVEN_UP_CASES if status == GIVEN_UP else CASES)
           for part in ("--id", case)),
         "--timeout", "2", "--quiet", "--report-dir", str(reports),
         "--trace", str(reports / "trace.txt")],
        capture_output=True, timeout=300, check=False,
    )  # fmt: skip
    out, err = done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    assert done.returncode == abs(status), (done.returncode, err[-2000:], out[-2000:])
    assert "Traceback" not in out + err
    assert not RAW_CONTROL.search(out + err), RAW_CONTROL.search(out + err)
    if said:
        assert re.search(said, out + err, re.IGNORECASE), (said, out[-3000:], err[-1000:])
    assert "\u202e" not in out + err and "CONFORMANT\n" not in err
    forged = [line for line in (out + err).splitlines() if line.startswith("kvconform: 696")]
    assert not forged and "\nkvconform: forged" not in out + err, forged
    assert len(out) + len(err) < REPORT_BYTES
    if status == START:  # one line, then the adapter's last stderr lines, quoted
        first, *quoted = err.strip().splitlines()
        assert first.startswith("kvconform: the adapter could not start")
        assert len(first) < 1000, len(first)
        assert all(line.startswith(("  | ", "last ")) for line in quoted), err
        if "did not complete the handshake" in first:  # it exited: its stderr is quoted,
            # a line each (every fixture writes a line there when it starts)
            assert quoted and quoted[0].startswith("last ") and len(quoted) > 1, err
        report = json.loads((reports / "report.json").read_text(encoding="ascii"))
        assert report["incomplete"].startswith("the adapter could not start")
        assert report["summary"]["not_run"] == report["summary"]["total"] > 0
        return
    for written in reports.iterdir():
        assert written.stat().st_size < REPORT_BYTES, (written.name, written.stat().st_size)
    report = json.loads((reports / "report.json").read_text(encoding="ascii"))
    assert report["summary"]["total"] > 0
    ET.parse(reports / "report.xml")
    summary = (reports / "summary.md").read_text(encoding="utf-8")
    assert summary.splitlines()[0].startswith("## kvconform ")
    s = report["summary"]
    only_broken = s["failed"] == s["failed_by_cause"]["adapter"] > 0
    if status == GIVEN_UP:
        assert "not run" in report["incomplete"] and s["not_run"] > 0
    # a run given up whose every failure is the adapter breaking judged no answer wrong
    no_verdict = status == GIVEN_UP and only_broken
    assert ("not judged" in summary.splitlines()[0]) is no_verdict
    assert ("NOT conformant" in summary.splitlines()[0]) is (status != 0 and not no_verdict)
    assert ("NO VERDICT" in out) is no_verdict
    assert "<!--" not in summary and not RAW_CONTROL.search(summary)
    assert "<!--" not in (reports / "report.html").read_text(encoding="utf-8")


def test_the_rows_cases_exist_and_a_given_up_row_has_enough_of_them() -> None:
    """The cases the rows name are in the suite; a row whose adapter is given up names a
    case for the first failure, one per failed restart and one left not run."""
    ids = [case.id for case in suite.all_cases()]
    assert all(case in ids for case in CASES), CASES
    given_up = [i for i in ids for pattern in GIVEN_UP_CASES if fnmatch.fnmatchcase(i, pattern)]
    assert len(given_up) >= 1 + MAX_FAILED_RESTARTS + 1, given_up
