"""The stdio driver's lean path gives exactly what the general path gives.

The request bytes are encoded once per operation and get only their ``seq``
spliced in; responses are decoded with the standard library's scanner and the
usual ``ok`` answer is judged by its type alone; the poll channel splits chunks
into lines itself; the adapter runs in a process group of its own. Each of these
is checked here against the plain standard-library or general-path result, and
on the misbehaviour it must still survive. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import typing
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from kvconform.harness import suite
from kvconform.protocol import codec
from kvconform.protocol import operations as ops
from kvconform.protocol.channel import PollChannel, StreamFault
from kvconform.protocol.client import StdioDriver
from kvconform.values import Broken, MixOp, ModelSpec, Ok, Outcome, StepInputs
from tests.interrupts import stop_signals_live

SERVE = [sys.executable, "-m", "kvconform.serve"]
STDLIB_ENCODER = json.JSONEncoder(separators=(",", ":"))
POSIX = pytest.mark.skipif(os.name != "posix", reason="POSIX process groups")

# The codec ------------------------------------------------------------------------------

AWKWARD: list[Any] = [
    {"a": (1 << 64) + 1, "b": -(1 << 80), "s": '\ud800 \udfff \u00e9 \U0001f600 \x00 "\\'},
    {"f": [float("nan"), float("inf"), -float("inf"), 1.5, -0.0, 1e300]},
    {"nested": {"x": [None, True, False, [], {}]}, "": ""},
    [],
    {},
    "\ud800",
    7,
]


@pytest.mark.parametrize("value", AWKWARD)
def test_the_encoder_gives_the_standard_librarys_text(value: Any) -> None:
    assert codec.encode_json(value) == STDLIB_ENCODER.encode(value)
    assert codec.encode_json(value).isascii()


def test_the_encoder_raises_what_the_standard_library_raises() -> None:
    circular: list[Any] = []
    circular.append(circular)
    for bad in (circular, {"x": object()}, {(1,): 2}, {"x": {1j}}):
        with pytest.raises((TypeError, ValueError)) as ours:
            codec.encode_json(bad)
        with pytest.raises((TypeError, ValueError)) as theirs:
            STDLIB_ENCODER.encode(bad)
        assert type(ours.value) is type(theirs.value)
        assert str(ours.value) == str(theirs.value)


def test_every_request_of_the_suite_is_byte_for_byte_the_general_encoding() -> None:
    seen = 0
    for case in suite.all_cases():
        for seq, op in enumerate(case.program, start=(1 << 40) - 3):
            wire = codec.to_wire(op)
            assert codec.request_line(seq, codec.request_tail(op)) == codec.encode_line(seq, wire)
            seen += 1
    assert seen > 1000
    reset = codec.request_tail({"op": "reset"})
    assert codec.request_line(5, reset) == codec.encode_line(5, {"op": "reset"})


@pytest.mark.parametrize(
    "line",
    [
        b'{"seq": 3, "ok": ["18446744073709551615"]}',
        b'{"seq":3,"ok":123456789012345678901234567890}',
        b'{"seq": 3, "ok": "\\ud800"}',
        b'{"seq": 3, "ok": NaN}',
        b'  {"seq": 3, "ok": null}  \t',
        b'{"seq": 3, "ok": "caf\xc3\xa9"}',
        b"[1, 2]",
        b'"text"',
    ],
)
def test_the_decoder_gives_the_standard_librarys_value(line: bytes) -> None:
    ours = codec.decode_line(line)
    theirs = json.loads(line.decode("utf-8"))
    assert repr(ours) == repr(theirs)  # repr: NaN is not equal to itself
    assert type(ours) is type(theirs)


@pytest.mark.parametrize(
    "line",
    [b"", b"not json", b'{"seq": 1} x', b'{"seq": 1}{"seq": 2}', b"\xff\xfe", b"[" * 100_000],
)
def test_the_decoder_refuses_with_value_error(line: bytes) -> None:
    with pytest.raises(ValueError):
        codec.decode_line(line)


def _general(op: ops.Op, raw: object) -> Outcome:
    """What the general path of outcome_of makes of ``{"seq": ..., "ok": raw}``."""
    try:
        return Ok(codec.result_from_wire(op, raw))
    except codec.WireError as exc:  # still an answer of success (CONF-9)
        return Broken(f"malformed response to {op.name}: {exc}", claims_success=True)


OKS: list[Any] = [
    None, True, False, 0, 1, -1, 1.0, 2**64, 2**64 - 1, "0", "7", "007", "-1", " 7", "+7",
    "1_0", "", "18446744073709551615", "18446744073709551616", "\u00b2", "\u0661", "٣٤",
    [], ["1"], ["1", "2"], ["1", 2], ["1", "x"], [True], ["\u00b2"], ["18446744073709551616"],
    {"format_version": 1}, [["1"]],
]  # fmt: skip
#: One operation of each result kind.
OPS: list[ops.Op] = [
    ops.Drop("h"),
    ops.CacheLen("c"),
    ops.SessionValid("s", "m", "c", StepInputs()),
    ops.CacheAllocId("c"),
    ops.Hash((MixOp("finish"),)),
    ops.Measure("m", ()),
    ops.SessionValidity("s", "m", "c", StepInputs()),
]


def test_there_is_an_operation_of_each_result_kind() -> None:
    assert {type(op).result for op in OPS} == set(typing.get_args(ops.ResultKind))


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_judging_the_usual_answer_fast_changes_no_outcome(op: ops.Op) -> None:
    for raw in OKS:
        response = {"seq": 9, "ok": raw}
        expected = _general(op, raw)
        assert codec.outcome_of(op, response) == expected, raw
        for separators in ((", ", ": "), (",", ":")):
            line = json.dumps(response, separators=separators).encode()
            quick = codec.quick_outcome(op, line, 9)
            assert quick is None or quick == expected, raw
            again = codec.quick_outcome(op, line, 9)  # the second time, from the memo
            assert again is None or again == expected, raw
        # Anything but the usual answer to this request is left to the general path.
        for other in (
            {"seq": 8, "ok": raw},
            {"seq": True, "ok": raw},
            {"seq": 9.0, "ok": raw},
            {"seq": 9, "ok": raw, "x": 1},
            {"ok": raw, "seq": 9, "error": {}},
        ):
            assert codec.quick_outcome(op, json.dumps(other).encode(), 9) is None


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_the_usual_spellings_are_read_from_the_bytes_and_remembered_safely(op: ops.Op) -> None:
    usual = {
        "null": None, "count": 3, "bool": True, "u64": "7",
        "u64_list": ["1", "18446744073709551615"],
    }  # fmt: skip
    kind = type(op).result
    if kind not in usual:
        return
    raw = usual[kind]
    expected = _general(op, raw)
    for separators in ((", ", ": "), (",", ":")):
        line = json.dumps({"seq": 12, "ok": raw}, separators=separators).encode()
        assert codec.quick_outcome(op, line, 12) == expected
        # The same answer to another request: remembered, and still the seq is checked.
        assert codec.quick_outcome(op, line.replace(b"12", b"13", 1), 13) == expected
        assert codec.quick_outcome(op, line, 13) is None
    # A later member named seq would win in JSON: never judged by the first one.
    sneaky = b'{"seq":5,"seq":9,"ok":%s}' % json.dumps(raw, separators=(",", ":")).encode()
    assert codec.quick_outcome(op, sneaky, 5) is None
    if kind == "u64_list":
        for wrong in (b'["01"]', b'["18446744073709551616"]', b'["\\u0031"]', b"[1]", b'["1",]'):
            line = b'{"seq":4,"ok":%s}' % wrong
            quick = codec.quick_outcome(op, line, 4)
            assert quick is None or quick == _general(op, json.loads(line)["ok"]), wrong


def test_a_digit_int_cannot_read_is_a_malformed_answer_not_an_exception() -> None:
    outcome = codec.outcome_of(ops.Hash((MixOp("finish"),)), {"seq": 1, "ok": ["\u00b2"]})
    assert isinstance(outcome, Broken) and "malformed response to hash" in outcome.reason


# The poll channel -----------------------------------------------------------------------


class _Pipes:
    """A poll channel on two pipes the test writes and reads in place of an adapter."""

    def __init__(self, max_line: int = 64) -> None:
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        self.fds = [stdin_r, stdin_w, stdout_r, stdout_w]
        self.adapter_in, self.adapter_out = stdin_r, stdout_w
        fake = SimpleNamespace(
            stdin=os.fdopen(stdin_w, "wb", buffering=0, closefd=False),
            stdout=os.fdopen(stdout_r, "rb", buffering=0, closefd=False),
        )
        self.channel = PollChannel(fake, max_line)  # type: ignore[arg-type]

    def write(self, data: bytes) -> None:
        os.write(self.adapter_out, data)

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)


@pytest.fixture
def pipes() -> Any:
    made = _Pipes()
    yield made
    made.close()


@POSIX
def test_lines_come_whole_however_the_chunks_cut_them(pipes: _Pipes) -> None:
    pipes.write(b'{"a":1}\n{"b"')
    assert pipes.channel.read_line(5.0) == b'{"a":1}'
    pipes.write(b":2}\n\n{}\n")
    assert pipes.channel.read_line(5.0) == b'{"b":2}'
    assert pipes.channel.read_line(5.0) == b""
    assert pipes.channel.read_line(5.0) == b"{}"
    pipes.write(b"answer\n")
    assert pipes.channel.ask(b"request\n", 5.0) == b"answer"
    assert os.read(pipes.adapter_in, 100) == b"request\n"


@POSIX
def test_the_lines_before_an_oversized_one_are_answers_then_it_is_a_fault(pipes: _Pipes) -> None:
    pipes.write(b"one\ntwo\n" + b"x" * 65 + b"\nthree\n")
    assert pipes.channel.read_line(5.0) == b"one"
    assert pipes.channel.read_line(5.0) == b"two"
    for _ in range(2):  # the stream stays broken
        with pytest.raises(StreamFault) as caught:
            pipes.channel.read_line(5.0)
        assert caught.value.what == "oversized"


@POSIX
def test_a_line_growing_past_the_limit_over_chunks_is_a_fault(pipes: _Pipes) -> None:
    pipes.write(b"y" * 40)
    with pytest.raises(StreamFault, match="timeout"):
        pipes.channel.read_line(0.05)
    pipes.write(b"y" * 40)
    with pytest.raises(StreamFault) as caught:
        pipes.channel.read_line(5.0)
    assert caught.value.what == "oversized" and "without a newline" in caught.value.info


@POSIX
def test_the_end_of_output_comes_after_the_lines_before_it(pipes: _Pipes) -> None:
    pipes.write(b"last\npartial")
    os.close(pipes.adapter_out)
    pipes.fds.remove(pipes.adapter_out)
    assert pipes.channel.read_line(5.0) == b"last"
    with pytest.raises(StreamFault) as caught:
        pipes.channel.read_line(5.0)
    assert caught.value.what == "eof"


@POSIX
def test_ask_times_out_and_then_reads_a_late_answer_as_the_next_line(pipes: _Pipes) -> None:
    with pytest.raises(StreamFault) as caught:
        pipes.channel.ask(b"q\n", 0.05)
    assert caught.value.what == "timeout"
    pipes.write(b"late\n")
    assert pipes.channel.read_line(5.0) == b"late"


@POSIX
def test_the_usual_read_blocks_and_the_watchdog_ends_it_at_its_deadline(pipes: _Pipes) -> None:
    # On Linux the response to a request is read with one blocking read (no poll per
    # round trip); the watchdog gives it up at its deadline, within WATCH_PERIOD.
    from kvconform.protocol.channel import poll as channel_module

    if not sys.platform.startswith("linux"):
        pytest.skip("the blocking path needs /proc/self/fd (Linux)")
    assert os.get_blocking(pipes.channel._out)  # the blocking path is the one taken
    start = time.monotonic()
    with pytest.raises(StreamFault) as caught:
        pipes.channel.ask(b"q\n", 0.2)
    waited = time.monotonic() - start
    assert caught.value.what == "timeout"
    assert 0.2 <= waited < 0.2 + channel_module.WATCH_PERIOD + 2.0  # generous: a loaded CI
    # An answer in time is read whole, and the watchdog leaves the read alone.
    pipes.write(b"")  # nothing pending in the pipe
    threading.Timer(0.05, pipes.write, (b"answer\n",)).start()
    assert pipes.channel.ask(b"q\n", 5.0) == b"answer"
    time.sleep(2 * channel_module.WATCH_PERIOD)
    threading.Timer(0.01, pipes.write, (b"next\n",)).start()
    assert pipes.channel.ask(b"q\n", 5.0) == b"next"


@POSIX
def test_the_watchdog_thread_ends_when_no_channel_is_left(pipes: _Pipes) -> None:
    from kvconform.protocol.channel import poll as channel_module

    watchdog = channel_module._Watchdog()
    watchdog.watch(pipes.channel)
    thread = watchdog._thread
    assert thread is not None and thread.is_alive()
    watchdog.forget(pipes.channel)
    thread.join(5.0)
    assert not thread.is_alive() and watchdog._thread is None


# The driver -----------------------------------------------------------------------------


def _scripted(body: str) -> list[str]:
    """An adapter that answers hello as the reference would, then runs ``body``."""
    script = """
        import sys
        from kvconform.adapters.reference import ReferenceAdapter
        from kvconform.protocol.server import Server
        server = Server(ReferenceAdapter())
        def serve():
            for line in sys.stdin.buffer:
                sys.stdout.buffer.write(server.handle_line(line))
                sys.stdout.buffer.flush()
                if server.finished:
                    break
        sys.stdout.buffer.write(server.handle_line(sys.stdin.buffer.readline()))
        sys.stdout.buffer.flush()
    """
    return [sys.executable, "-c", textwrap.dedent(script) + textwrap.dedent(body)]


@pytest.mark.covers("PROTO-26")
@pytest.mark.parametrize(
    ("answer", "fragment"),
    [
        ('b"[" * 200_000', "nested too deeply"),
        ("""b'{"seq": 1, "ok": ["\\\\u00b2"]}'""", "malformed response to hash"),
        ("""b'{"seq": 1, "ok": NaN}'""", "malformed response to hash"),
        ("""b'{"seq": 1, "ok": ["1"]} trailing'""", "not JSON"),
    ],
    ids=["deep", "superscript-two", "nan", "trailing"],
)
def test_answers_that_broke_the_old_path_or_could_fool_the_fast_one_are_faults(
    answer: str, fragment: str
) -> None:
    argv = _scripted(
        f"""
        sys.stdin.buffer.readline()
        sys.stdout.buffer.write({answer} + b"\\n")
        sys.stdout.buffer.flush()
        serve()
        """
    )
    with StdioDriver(argv, timeout=30.0) as driver:
        outcome = driver.call(ops.Hash((MixOp("finish"),)))
    assert isinstance(outcome, Broken), outcome
    assert fragment in outcome.reason, outcome.reason


@pytest.mark.parametrize(
    ("spelling", "accepted"),
    [
        ('{"seq":%d,"ok":null}', True),
        ('{"seq": %d, "ok": null}', True),
        ('{ "ok" : null , "seq" : %d }', True),
        ('{"seq":%d,"ok":0}', False),
        ('{"seq":%d,"ok":null,"x":1}', False),
        ('{"seq":%d,"ok":null} ', True),
    ],
    ids=["compact", "spaced", "other-json", "zero", "extra-member", "trailing-space"],
)
def test_the_answer_to_reset_is_read_fast_only_in_its_usual_spellings(
    spelling: str, accepted: bool
) -> None:
    argv = _scripted(
        f"""
        import json
        for line in sys.stdin.buffer:
            request = json.loads(line)
            if request["op"] == "reset":
                out = ({spelling!r} % request["seq"]).encode() + b"\\n"
            else:
                out = server.handle_line(line)
            sys.stdout.buffer.write(out)
            sys.stdout.buffer.flush()
        """
    )
    with StdioDriver(argv, timeout=30.0) as driver:
        outcomes = driver.run([ops.Hash((MixOp("finish"),))])
        assert isinstance(outcomes[0], Ok), outcomes
        assert (driver.incidents == []) is accepted, driver.incidents
        if not accepted:
            assert "answered reset with" in driver.incidents[0]


def test_equal_operations_that_encode_differently_are_not_confused() -> None:
    # 1 == 1.0 == True, and hash(1) == hash(1.0): a cache keyed by equality would send one
    # operation's bytes for the other. The driver keys by identity.
    sent: list[bytes] = []
    as_int = ops.ModelNew("m", ModelSpec("llama", (("layers", 1),)))
    as_float = ops.ModelNew("m", ModelSpec("llama", (("layers", 1.0),)))
    assert as_int == as_float and hash(as_int) == hash(as_float)
    with StdioDriver(
        SERVE, trace=lambda way, line: sent.append(line) if way == "send" else None
    ) as d:
        d.call(as_int)
        d.call(as_float)
        d.call(as_int)
    requests = [json.loads(line) for line in sent if b'"model_new"' in line]
    assert [r["spec"]["params"]["layers"] for r in requests] == [
        {"u64": "1"},
        {"f64": "0x3ff0000000000000"},
        {"u64": "1"},
    ]


@pytest.mark.parametrize("transport", ["poll", "threads"])
def test_call_and_run_agree_on_both_transports(transport: str) -> None:
    program = [ops.Hash((MixOp("u64", 7), MixOp("finish"))), ops.CacheLen("nothing")]
    with StdioDriver(SERVE, transport=transport) as driver:  # type: ignore[arg-type]
        calls = [driver.call(op) for op in program]
        runs = driver.run(program)
    assert isinstance(calls[0], Ok) and calls[0] == runs[0]
    assert type(calls[1]) is type(runs[1])


# The adapter's process group ------------------------------------------------------------


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@POSIX
def test_the_adapter_leads_its_own_group_in_the_harness_session() -> None:
    with StdioDriver(SERVE) as driver:
        pid = driver.pid
        assert pid is not None
        assert os.getpgid(pid) == pid != os.getpgrp()
        if sys.version_info >= (3, 11):  # before, the adapter gets a session of its own
            assert os.getsid(pid) == os.getsid(0)


@POSIX
def test_closing_the_driver_stops_what_the_adapter_started() -> None:
    argv = _scripted(
        """
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        sys.stderr.write(f"grandchild {child.pid}\\n")
        sys.stderr.flush()
        serve()
        """
    )
    driver = StdioDriver(argv, timeout=30.0)
    deadline = time.monotonic() + 30
    while not any(line.startswith("grandchild") for line in driver.stderr_tail()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (line,) = [line for line in driver.stderr_tail() if line.startswith("grandchild")]
    grandchild = int(line.split()[1])
    assert _alive(grandchild)
    driver.close()
    deadline = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild)


@POSIX
def test_a_ctrl_c_reaches_the_harness_only_which_then_shuts_the_adapter_down() -> None:
    # Ctrl-C at a terminal is SIGINT to the foreground process group: the harness's.
    harness = textwrap.dedent(
        f"""
        import sys, time
        from kvconform.protocol.client import StdioDriver
        driver = StdioDriver({SERVE!r})
        process = driver._proc.proc
        try:
            print("ready", flush=True)  # inside: the signal may come before the sleep
            time.sleep(60)
        except KeyboardInterrupt:
            print("adapter alive after SIGINT:", process.poll() is None, flush=True)
        driver.close()
        print("adapter exit status:", process.returncode, flush=True)
        """
    )
    with stop_signals_live():  # as at a terminal, even under a shell that ignores it
        proc = subprocess.Popen(
            [sys.executable, "-c", harness],
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,  # a group of its own to signal, standing for the terminal's
        )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "adapter alive after SIGINT: True" in out, out
    assert "adapter exit status: 0" in out, out
