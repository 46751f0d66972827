"""``--trace``: every request and response of a run, beside the step that sent it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from kvconform import cli


def test_a_traced_run_writes_the_exchange_and_attaches_it_to_failures(tmp_path: Path) -> None:
    trace, report, html = tmp_path / "trace.txt", tmp_path / "r.json", tmp_path / "r.html"
    status = cli.main(
        [
            "run", "--quiet", "--id", "plan.rebind.all-or-nothing",
            "--adapter", "tests.mutants.plan_validity:RebindCommitsSlotBySlot",
            "--trace", str(trace), "--json", str(report), "--html", str(html),
        ]
    )  # fmt: skip
    assert status == cli.EXIT_FAILED
    text = trace.read_text(encoding="utf-8")
    assert "scenario plan.rebind.all-or-nothing: failed" in text
    assert '> {"op": "session_rebind", "session": "plan", "cache": "half"}' in text
    assert '< {"error": {"kind": "storage_differs"' in text
    assert "step 5 (session_rebind)" in text  # numbered beside the step that sent it
    failure = json.loads(report.read_text(encoding="utf-8"))["results"][0]["failure"]["text"]
    assert "trace (> sent, < received):" in failure and '< {"ok": "allocation_changed"}' in failure
    assert "trace (&gt; sent, &lt; received):" in html.read_text(encoding="utf-8")


def test_an_untraced_run_carries_no_trace(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    status = cli.main(
        [
            "run", "--quiet", "--id", "plan.rebind.all-or-nothing",
            "--adapter", "tests.mutants.plan_validity:RebindCommitsSlotBySlot",
            "--json", str(report),
        ]
    )  # fmt: skip
    assert status == cli.EXIT_FAILED
    assert (
        "trace"
        not in json.loads(report.read_text(encoding="utf-8"))["results"][0]["failure"]["text"]
    )


def test_an_adapter_module_in_the_current_directory_loads_without_pythonpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--adapter my_adapter:make`` beside the user, as ``python -m`` would find it."""
    module = tmp_path / "kvconform_cwd_adapter.py"
    module.write_text(
        "from kvconform.adapters.reference import ReferenceAdapter\n"
        "def make():\n    return ReferenceAdapter()\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    status = cli.main(
        ["run", "--quiet", "--class", "hash", "--adapter", "kvconform_cwd_adapter:make"]
    )
    assert status == cli.EXIT_OK


def test_over_stdio_the_trace_is_the_lines_on_the_wire(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    serve = f"{sys.executable} -m kvconform.serve --adapter kvconform.adapters.reference:v2"
    status = cli.main(
        [
            "run",
            "--quiet",
            "--id",
            "verify.v2.unmarked",
            "--adapter-cmd",
            serve,
            "--trace",
            str(trace),
        ]
    )
    assert status == cli.EXIT_OK
    text = trace.read_text(encoding="utf-8")
    assert '> {"seq":' in text and '"op":"verify","recorded":null' in text  # as sent, seq and all
    assert '"kind":"unmarked"' in text  # as the adapter wrote it
    assert '> {"seq":' in text and '"op":"reset"}' in text  # the end of the program
    # the handshake, which no case owns, and the shutdown that ends the run (--help says so)
    sections = text.split("\n\n")
    opening = next(part for part in sections if part.startswith("the handshake"))
    assert '"op":"hello","protocol":2' in opening and '"name":"kvconform-reference"' in opening
    assert sections.index(opening) < next(
        i for i, part in enumerate(sections) if part.startswith("scenario verify.v2.unmarked")
    )
    closing = next(part for part in sections if part.startswith("the end of the run"))
    assert '"op":"shutdown"' in closing and '< {"seq":' in closing
    assert text.count('"op":"hello"') == 1 and text.count('"op":"shutdown"') == 1


def test_the_trace_of_an_adapter_that_refused_every_offer_holds_each_offer(
    tmp_path: Path,
) -> None:
    """A run whose adapter never started writes its trace: the handshake that failed is
    what its author needs to see (and an earlier run's trace is not left at the path)."""
    trace = tmp_path / "trace.txt"
    trace.write_text("an earlier run's trace\n", encoding="utf-8")
    fixture = Path(__file__).parent / "fixtures" / "misbehaving_adapter.py"
    status = cli.main(
        ["run", "--quiet", "--id", "hash.stories.*", "--trace", str(trace),
         "--adapter-cmd", f"{sys.executable} {fixture} hello-refuse"]
    )  # fmt: skip
    assert status == cli.EXIT_ADAPTER
    text = trace.read_text(encoding="utf-8")
    assert "earlier run" not in text and "settled no protocol" in text.splitlines()[0]
    offers = [json.loads(line.split("> ", 1)[1]) for line in text.splitlines() if "> {" in line]
    assert [offer["protocol"] for offer in offers] == [2, 1], offers  # every offer, refused
    assert text.count("< {") == 2 and "scenario " not in text
    missing = ["run", "--quiet", "--id", "hash.stories.*", "--trace", str(trace),
               "--adapter-cmd", str(tmp_path / "no-such-adapter")]  # fmt: skip
    assert cli.main(missing) == cli.EXIT_ADAPTER
    assert "nothing was exchanged" in trace.read_text(encoding="utf-8")


def _traced_labels(trace: Path, case_id: str) -> list[tuple[str, str]]:
    """Each request of one case in the trace: the label beside it and its ``op``."""
    lines = trace.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"scenario {case_id}: "))
    out: list[tuple[str, str]] = []
    label = None
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        text = line.strip()
        if text.startswith("> "):
            assert label is not None
            out.append((label, json.loads(text[2:])["op"]))
        elif not text.startswith("< "):
            label = text.split(" ", 1)[1] if " " in text else ""
    return out


@pytest.mark.parametrize(
    "case_id", ["identity.alloc.never-reissued-after-drop", "prefix.tier.restarted-process-reuses"]
)
def test_a_restarted_adapter_does_not_shift_the_steps_beside_the_wire(
    case_id: str, tmp_path: Path
) -> None:
    """The handshake of an adapter started again before a case is named for what it is:
    every request of the case stays beside the step that sent it, as in a run where
    the adapter never stopped (a restart step inside the case, too)."""
    fixture = Path(__file__).resolve().parent / "fixtures" / "misbehaving_adapter.py"
    served = f"{sys.executable} -m kvconform.serve"
    crashing_first = f"{sys.executable} {fixture} crash --once {tmp_path / 'crashed'}"
    first = "identity.alloc.increasing-across-constructions"  # before both cases in the suite
    labels = {}
    for name, command in (("steady", served), ("restarted", crashing_first)):
        trace = tmp_path / f"{name}.txt"
        cli.main(
            ["run", "--quiet", "--id", first, "--id", case_id, "--adapter-cmd", command,
             "--trace", str(trace)]
        )  # fmt: skip
        labels[name] = _traced_labels(trace, case_id) if trace.is_file() else []
    steady, restarted = labels["steady"], labels["restarted"]
    assert steady and all(op != "hello" for _, op in steady[:1])
    assert restarted[0][1] == "hello" and "handshake" in restarted[0][0]
    assert restarted[1:] == steady
    for label, op in steady:  # the harness's own requests are never a program step's
        if label.endswith("(restart)"):
            assert op in ("shutdown", "hello"), (label, op)
        else:
            assert label.startswith("step ") == (op not in ("hello", "shutdown", "reset"))
    assert steady[-1] == ("(end of program)", "reset")


def test_a_restart_step_is_not_shown_as_a_request(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``restart`` is done by the harness and never sent (PROTO-37): neither the
    in-process trace nor ``explain``, which show each operation in its wire form, may
    show it as a request an adapter would have to answer."""
    trace = tmp_path / "trace.txt"
    case_id = "prefix.tier.restarted-process-reuses"
    assert cli.main(["run", "--quiet", "--id", case_id, "--trace", str(trace)]) == cli.EXIT_OK
    text = trace.read_text(encoding="utf-8")
    assert '"op": "restart"' not in text
    assert "(restart)\n      > (restart: done by the harness" in text
    assert "      < (done)" in text
    capsys.readouterr()
    assert cli.main(["explain", case_id]) == cli.EXIT_OK
    explained = capsys.readouterr().out
    assert '"op": "restart"' not in explained and "(restart: done by the harness" in explained
