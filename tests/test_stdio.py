"""The stdio driver against the reference server and against misbehaving adapters.

Fake adapters live in ``tests/fixtures/misbehaving_adapter.py``: they answer
with the reference until a trigger (by default the first ``stamp`` request,
once per test thanks to a marker file), then misbehave. The time bounds below
are hang guards, not performance assertions.
"""

from __future__ import annotations

import functools
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import jsonschema
import pytest

from kvconform.adapters import DEFAULT_ADAPTER, load_adapter
from kvconform.harness import suite
from kvconform.harness.runner import CaseResult, run_cases
from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.protocol import schemas
from kvconform.protocol import steps as protocol_steps
from kvconform.protocol.client import AdapterStartError, StdioDriver
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import Broken, MixOp, Ok, Refused

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MISBEHAVING = FIXTURES / "misbehaving_adapter.py"
SERVE = [sys.executable, "-m", "kvconform.serve"]
#: Generous bound for one test's run of adapter processes: a hang guard only.
BOUND = 30.0


def misbehaving(mode: str, *args: str) -> list[str]:
    return [sys.executable, str(MISBEHAVING), mode, *args]


def in_process_results(cases: Sequence[Case]) -> list[CaseResult]:
    driver = InProcessDriver(load_adapter(DEFAULT_ADAPTER))
    # The in-process driver collects garbage after every drop; freezing the
    # harness's own long-lived objects keeps that cheap without changing verdicts.
    gc.freeze()
    try:
        return run_cases(cases, driver)
    finally:
        gc.unfreeze()


# The whole suite over stdio ---------------------------------------------------------


@dataclass(frozen=True)
class SuiteRun:
    in_process: list[CaseResult]
    over_stdio: list[CaseResult]
    traffic: list[tuple[str, bytes]]
    exit_status: int | None
    #: The protocol version the run spoke (PROTO-32): 2 when offered first, 1 when forced.
    protocol: int


@functools.cache
def _whole_suite_in_process() -> list[CaseResult]:
    """The in-process verdicts both protocol versions are held to: one run, read by both."""
    return in_process_results(suite.all_cases())


@pytest.fixture(scope="module", params=[1, 2], ids=["protocol-1", "protocol-2"])
def suite_run(request: pytest.FixtureRequest) -> SuiteRun:
    """The whole suite over stdio in each protocol version: protocol 1 offered alone, and
    the negotiation, which settles on 2 with the reference server (PROTO-32, PROTO-33)."""
    cases = suite.all_cases()
    expected = _whole_suite_in_process()
    traffic: list[tuple[str, bytes]] = []
    driver = StdioDriver(
        SERVE,
        trace=lambda direction, line: traffic.append((direction, line)),
        protocol=1 if request.param == 1 else None,
    )
    assert driver.protocol == request.param
    process = driver._proc
    try:
        results = run_cases(cases, driver)
        # Control traffic the suite does not produce: a batch and an adapter failure.
        programs = [case.program[0].program for case in cases if case.kind == "vector"][:20]
        assert all(isinstance(o, Ok) for o in driver.hash_batch(programs))
        assert isinstance(driver.call(ops.CacheLen("no-such-cache")), Broken)
    finally:
        driver.close()
    status = process.proc.returncode if process is not None else None
    return SuiteRun(expected, results, traffic, status, request.param)


@pytest.mark.covers(
    "PROTO-1", "PROTO-4", "PROTO-5", "PROTO-6", "PROTO-7", "PROTO-10", "PROTO-14",
    "PROTO-15", "PROTO-16", "PROTO-17", "PROTO-18", "PROTO-19", "PROTO-21", "PROTO-34",
)  # fmt: skip
@pytest.mark.xdist_group("stdio-suite-run")
def test_whole_suite_over_stdio_gives_the_in_process_verdicts(suite_run: SuiteRun) -> None:
    assert len(suite_run.over_stdio) == len(suite_run.in_process) == len(suite.all_cases())
    different = [
        (a.case.id, a.verdict, b.verdict, b.report())
        for a, b in zip(suite_run.in_process, suite_run.over_stdio, strict=True)
        if a.verdict != b.verdict
    ]
    assert not different, different[:3]


@pytest.mark.covers("PROTO-24")
@pytest.mark.xdist_group("stdio-suite-run")
def test_the_reference_server_exits_zero_after_shutdown(suite_run: SuiteRun) -> None:
    assert suite_run.exit_status == 0
    sent = [json.loads(line) for direction, line in suite_run.traffic if direction == "send"]
    assert sent[-1]["op"] == "shutdown"


def _validator(name: str, protocol: int = 1) -> jsonschema.protocols.Validator:
    return schemas.validator(name, protocol)


def _result_validator(op: str, protocol: int = 1) -> jsonschema.protocols.Validator:
    return schemas.validator(f"ops/{op}#/$defs/result", protocol)


class _RequestValidator:
    """``request.schema.json``, validated one operation's branch at a time.

    The file is an envelope and an ``allOf`` of one branch per operation: *if* ``op``
    is that operation, *then* its ``ops/<op>.schema.json#/$defs/request`` (asserted
    below, so the file cannot take another shape unnoticed). For a message whose
    ``op`` is one of the enumerated names, every other branch's *if* fails and the
    branch holds; so the message is valid against the file exactly when it is valid
    against the envelope alone and against its own operation's request. This gives
    the file's verdict without evaluating the other branches' conditions for every
    line; a message without a known ``op`` is validated against the file whole.
    """

    def __init__(self, protocol: int) -> None:
        document = schemas.documents(protocol)["request.schema.json"]
        names = document["properties"]["op"]["enum"]
        assert document["allOf"] == [
            {
                "if": {"properties": {"op": {"const": name}}, "required": ["op"]},
                "then": {"$ref": f"ops/{name}.schema.json#/$defs/request"},
            }
            for name in names
        ]
        envelope = {key: value for key, value in document.items() if key != "allOf"}
        self._whole = _validator("request", protocol)
        self._envelope = schemas.validator_of(envelope, protocol)
        self._branches = {
            name: _validator(f"ops/{name}#/$defs/request", protocol) for name in names
        }

    def iter_errors(self, message: object) -> list[jsonschema.ValidationError]:
        op = message.get("op") if isinstance(message, dict) else None
        branch = self._branches.get(op) if isinstance(op, str) else None
        if branch is None:
            return list(self._whole.iter_errors(message))
        return [*self._envelope.iter_errors(message), *branch.iter_errors(message)]


@pytest.mark.parametrize("protocol", [1, 2], ids=["protocol-1", "protocol-2"])
def test_the_request_schema_branch_by_branch_agrees_with_the_whole_file(protocol: int) -> None:
    whole, by_branch = _validator("request", protocol), _RequestValidator(protocol)
    names = schemas.documents(protocol)["request.schema.json"]["properties"]["op"]["enum"]
    messages: list[object] = [[1], "reset", {"op": "reset"}, {"seq": 1, "op": "nope"}]
    for name in names:  # bare, with a stray member, with a wrongly typed seq
        messages += [{"seq": 1, "op": name}, {"seq": 1, "op": name, "stray": 1}]
        messages.append({"seq": -1, "op": name})
    messages += [
        {"seq": 1, "op": "hash", "bytes": "AA=="},
        {"seq": 1, "op": "hash", "bytes": 5},
        {"seq": 1, "op": "cache_len", "cache": "c"},
        {"seq": 1, "op": "cache_len", "cache": 3},
        {"seq": 1, "op": "drop", "handle": "h"},
        {"seq": 1, "op": "reset"},
    ]
    verdicts = [(not list(whole.iter_errors(m)), not by_branch.iter_errors(m)) for m in messages]
    disagree = [m for m, (a, b) in zip(messages, verdicts, strict=True) if a != b]
    assert not disagree, disagree
    assert any(a for a, _ in verdicts) and not all(a for a, _ in verdicts)


def _errors_apart_from_seq(
    validator: jsonschema.protocols.Validator | _RequestValidator,
    seq: jsonschema.protocols.Validator,
    message: dict[str, object],
    seen: set[str],
) -> list[str]:
    """``validator``'s errors for ``message``, each distinct message validated once.

    In both envelopes (and in every operation's request) ``seq`` is a property of its
    own, checked against ``common.schema.json#/$defs/seq`` whatever the rest holds; so a
    message whose ``seq`` is a valid one validates exactly as the same message with
    ``seq`` 0 does. Most lines repeat another but for their ``seq`` (every ``reset``,
    most ``request_new``): each such shape is validated once, and each ``seq`` alone.
    """
    if "seq" not in message or not seq.is_valid(message["seq"]):
        return [e.message for e in validator.iter_errors(message)]
    shape = json.dumps({**message, "seq": 0}, sort_keys=True)
    if shape in seen:
        return []
    errors = [e.message for e in validator.iter_errors({**message, "seq": 0})]
    if not errors:
        seen.add(shape)
    return errors


@pytest.mark.covers("PROTO-8", "PROTO-10", "PROTO-17", "PROTO-18", "PROTO-19", "PROTO-21")
@pytest.mark.xdist_group("stdio-suite-run")
def test_every_line_of_the_traffic_validates_against_the_schemas(suite_run: SuiteRun) -> None:
    protocol = suite_run.protocol
    requests, responses = _RequestValidator(protocol), _validator("response", protocol)
    seq = _validator("common#/$defs/seq", protocol)
    results: dict[str, jsonschema.protocols.Validator] = {}
    valid_requests: set[str] = set()
    valid_responses: set[str] = set()
    valid_results: set[tuple[str, str]] = set()
    pending: dict[int, str] = {}
    forms: set[str] = set()
    ops_seen: set[str] = set()
    for direction, line in suite_run.traffic:
        message = json.loads(line)
        if direction == "send":
            errors = _errors_apart_from_seq(requests, seq, message, valid_requests)
            assert not errors, (line[:300], errors[:3])
            pending[message["seq"]] = message["op"]
            ops_seen.add(message["op"])
            continue
        errors = _errors_apart_from_seq(responses, seq, message, valid_responses)
        assert not errors, (line[:300], errors[:3])
        op = pending.pop(message["seq"])
        (form,) = set(message) - {"seq"}
        forms.add(form)
        value = (op, json.dumps(message.get("ok"), sort_keys=True))
        if form == "ok" and value not in valid_results:
            check = results.setdefault(op, _result_validator(op, protocol))
            errors = [e.message for e in check.iter_errors(message["ok"])]
            assert not errors, (op, line[:300], errors[:3])
            valid_results.add(value)
    assert not pending, f"requests without a response: {sorted(pending)[:5]}"
    assert forms == {"ok", "error", "failure"}
    never_sent = {step.name for step in protocol_steps.HARNESS_STEPS}  # PROTO-37
    used = {op.name for case in suite.all_cases() for op in case.program} - never_sent
    assert used | {"hello", "reset", "hash_batch", "shutdown"} <= ops_seen


@pytest.mark.covers("PROTO-20")
def test_hash_batch_answers_what_hash_answers() -> None:
    vectors = [case for case in suite.all_cases() if case.kind == "vector"][:60]
    programs = [case.program[0].program for case in vectors]
    with StdioDriver(SERVE) as driver:
        batch = driver.hash_batch(programs)
        single = [driver.call(case.program[0]) for case in vectors]
    assert batch == single
    assert all(isinstance(outcome, Ok) and outcome.value for outcome in batch)


@pytest.mark.covers("PROTO-7")
@pytest.mark.parametrize("transport", ["poll", "threads"])
def test_a_program_larger_than_both_pipe_buffers_does_not_deadlock(transport: str) -> None:
    # ~2 MB of requests and ~3 MB of responses, all written before any is read.
    program = [
        ops.Hash((MixOp("str", f"request {i}"), *[MixOp("finish")] * 60)) for i in range(2500)
    ]
    start = time.monotonic()
    with StdioDriver(SERVE, transport=transport) as driver:  # type: ignore[arg-type]
        outcomes = driver.run(program)
    assert time.monotonic() - start < BOUND
    reference = InProcessDriver(load_adapter(DEFAULT_ADAPTER)).run(program)
    assert outcomes == reference


@pytest.mark.covers("PROTO-23")
def test_a_python_adapter_served_with_adapter_option_keeps_its_classes() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), *sys.path])}
    cases = [c for c in suite.all_cases() if c.area in ("vectors/encoding", "alloc")]
    with StdioDriver([*SERVE, "--adapter", "hash_only_adapter:HashOnly"], env=env) as driver:
        assert driver.info.name == "hash-only"
        assert driver.info.classes == frozenset({"hash"})
        results = run_cases(cases, driver)
        unsupported = driver.call(ops.CacheLen("c"))
    verdicts = {r.verdict for r in results}
    assert verdicts == {"passed", "not_applicable"}
    assert all(r.verdict == "passed" for r in results if r.case.cls == "hash")
    assert isinstance(unsupported, Broken)
    assert "unsupported" in unsupported.reason and "identity" in unsupported.reason


@pytest.mark.covers("PROTO-1", "PROTO-2")
def test_the_server_keeps_stdout_for_the_protocol_when_an_adapter_prints() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FIXTURES), *sys.path])}
    cases = [c for c in suite.all_cases() if c.area == "vectors/encoding"]
    with StdioDriver([*SERVE, "--adapter", "noisy_adapter:Noisy"], env=env) as driver:
        results = run_cases(cases, driver)
        # stderr is read by a thread of its own, at its own pace: wait for it to catch up
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            tail = driver.stderr_tail()
            if any("file descriptor 1" in line for line in tail):
                break
            time.sleep(0.05)
    assert {r.verdict for r in results} == {"passed"}
    assert "debug: a write to file descriptor 1" in tail
    assert any(line.startswith("debug: hashing") for line in tail)


# Misbehaving adapters -------------------------------------------------------------------


@pytest.fixture(scope="module")
def block_cases() -> tuple[Case, ...]:
    """Signature and verify scenarios for profile v1: several contain ``stamp``, several not."""
    return tuple(
        c
        for c in suite.all_cases()
        if c.area in ("signature", "verify")
        and c.format_writes is None
        and c.format_reads is None
        and not c.format_reads_include
    )


def first_with(cases: Sequence[Case], op_name: str) -> int:
    return next(i for i, c in enumerate(cases) if any(op.name == op_name for op in c.program))


@dataclass(frozen=True)
class FaultRun:
    results: list[CaseResult]
    driver: StdioDriver
    seconds: float


def run_fault(cases: Sequence[Case], argv: list[str], **driver_options: object) -> FaultRun:
    start = time.monotonic()
    driver = StdioDriver(argv, start_timeout=30.0, **driver_options)  # type: ignore[arg-type]
    try:
        results = run_cases(cases, driver)
    finally:
        driver.close()
    return FaultRun(results, driver, time.monotonic() - start)


def assert_one_failed_case(run: FaultRun, index: int, *fragments: str) -> str:
    """Every case passed but the one at ``index``, whose report holds every fragment."""
    for result in run.results[:index]:
        assert result.verdict == "passed", result.report()
    failed = run.results[index]
    assert failed.verdict == "failed"
    report = failed.report()
    for fragment in fragments:
        assert fragment in report, report
    for result in run.results[index + 1 :]:
        assert result.verdict == "passed", result.report()
    assert run.seconds < BOUND
    return report


@pytest.mark.covers("PROTO-26", "PROTO-27")
@pytest.mark.parametrize("transport", ["poll", "threads"])
def test_a_crash_fails_the_case_in_flight_and_the_adapter_is_restarted(
    block_cases: tuple[Case, ...], tmp_path: Path, transport: str
) -> None:
    index = first_with(block_cases, "stamp")
    argv = misbehaving("crash", "--op", "stamp", "--once", str(tmp_path / "m"))
    run = run_fault(block_cases, argv, transport=transport)
    report = assert_one_failed_case(
        run,
        index,
        "the adapter exited (exit status 3)",
        "(stamp)",
        "will be restarted",
        "fixture[crash]: crashing on purpose",  # its stderr, quoted
    )
    assert "adapter failure" in report
    assert run.driver.restarts == 1


@pytest.mark.covers("PROTO-27")
def test_outcomes_received_before_a_fault_are_kept(
    block_cases: tuple[Case, ...], tmp_path: Path
) -> None:
    case = block_cases[first_with(block_cases, "stamp")]
    at = next(i for i, op in enumerate(case.program) if op.name == "stamp")
    argv = misbehaving("crash", "--op", "stamp", "--once", str(tmp_path / "m"))
    with StdioDriver(argv, start_timeout=30.0) as driver:
        outcomes = driver.run(case.program)
        again = driver.run(case.program)
    assert all(isinstance(o, Ok | Refused) for o in outcomes[:at])
    assert all(isinstance(o, Broken) for o in outcomes[at:])
    assert "exited" in outcomes[at].reason  # type: ignore[union-attr]
    assert not any(isinstance(o, Broken) for o in again)


@pytest.mark.xdist_group("waits")  # mostly waiting: one worker waits for all of these
@pytest.mark.covers("PROTO-25", "PROTO-27")
@pytest.mark.parametrize("transport", ["poll", "threads"])
def test_a_hang_times_out_and_the_run_goes_on(
    block_cases: tuple[Case, ...], tmp_path: Path, transport: str
) -> None:
    index = first_with(block_cases, "stamp")
    argv = misbehaving("hang", "--op", "stamp", "--once", str(tmp_path / "m"))
    run = run_fault(block_cases, argv, timeout=1.0, transport=transport)
    assert_one_failed_case(
        run,
        index,
        "did not answer within 1 s",
        "(stamp)",
        "fixture[hang]: misbehaving on request",
    )


@pytest.mark.covers("PROTO-26", "PROTO-27")
def test_a_line_that_is_not_json_fails_the_case_and_is_quoted(
    block_cases: tuple[Case, ...], tmp_path: Path
) -> None:
    index = first_with(block_cases, "stamp")
    argv = misbehaving("garbage", "--op", "stamp", "--once", str(tmp_path / "m"))
    run = run_fault(block_cases, argv)
    assert_one_failed_case(run, index, "a line that is not JSON", "this is not JSON at all")
    assert run.driver.restarts == 1


@pytest.mark.covers("PROTO-6", "PROTO-26", "PROTO-27")
@pytest.mark.parametrize(("mode", "fragment"), [("wrong-seq", "seq 10"), ("swap", "seq")])
def test_a_response_out_of_order_fails_the_case(
    block_cases: tuple[Case, ...], tmp_path: Path, mode: str, fragment: str
) -> None:
    index = first_with(block_cases, "stamp")
    argv = misbehaving(mode, "--op", "stamp", "--once", str(tmp_path / "m"))
    run = run_fault(block_cases, argv)
    assert_one_failed_case(run, index, "answered with " + fragment, "in request order")
    assert run.driver.restarts == 1


@pytest.mark.covers("PROTO-2")
def test_flooding_stderr_neither_blocks_the_adapter_nor_grows_memory(
    block_cases: tuple[Case, ...],
) -> None:
    size = 256 * 1024  # per request: tens of MB over the run
    start = time.monotonic()
    with StdioDriver(misbehaving("flood", "--size", str(size)), start_timeout=30.0) as driver:
        results = run_cases(block_cases, driver)
        tail = driver.stderr_tail()
        kept = len(driver._proc.stderr._lines) if driver._proc else 0  # type: ignore[union-attr]
        total = driver._proc.stderr.total_bytes if driver._proc else 0  # type: ignore[union-attr]
    assert {r.verdict for r in results} == {"passed"}
    assert total > 10 * 1024 * 1024
    assert len(tail) == 20 and all(line == "x" * 99 for line in tail[:-1])
    assert kept <= 80
    assert time.monotonic() - start < BOUND


@pytest.mark.covers("PROTO-3")
@pytest.mark.parametrize("transport", ["poll", "threads"])
def test_a_line_of_several_megabytes_within_the_limit_is_accepted(
    block_cases: tuple[Case, ...], tmp_path: Path, transport: str
) -> None:
    argv = misbehaving(
        "big-line", "--op", "stamp", "--size", str(6 * 1024 * 1024), "--once", str(tmp_path / "m")
    )
    run = run_fault(block_cases, argv, transport=transport)
    assert {r.verdict for r in run.results} == {"passed"}
    assert (tmp_path / "m").exists()  # the big line was really sent
    assert run.driver.restarts == 0
    assert run.seconds < BOUND


@pytest.mark.covers("PROTO-3", "PROTO-26", "PROTO-27")
@pytest.mark.parametrize("transport", ["poll", "threads"])
def test_a_line_over_the_limit_is_refused_without_reading_it_whole(
    block_cases: tuple[Case, ...], tmp_path: Path, transport: str
) -> None:
    index = first_with(block_cases, "stamp")
    argv = misbehaving(
        "big-line", "--op", "stamp", "--size", str(4 * 1024 * 1024), "--once", str(tmp_path / "m")
    )
    run = run_fault(block_cases, argv, max_line_bytes=1024 * 1024, transport=transport)
    assert_one_failed_case(run, index, "longer than the limit of 1048576 bytes", "(stamp)")


@pytest.mark.covers("PROTO-9", "PROTO-28")
@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("null-seq", "fixture could not decode this request"),
        ("bad-body", "malformed response to stamp"),
    ],
)
def test_a_bad_answer_in_step_fails_one_operation_without_a_restart(
    block_cases: tuple[Case, ...], tmp_path: Path, mode: str, fragment: str
) -> None:
    index = first_with(block_cases, "stamp")
    argv = misbehaving(mode, "--op", "stamp", "--once", str(tmp_path / "m"))
    run = run_fault(block_cases, argv)
    report = assert_one_failed_case(run, index, fragment)
    assert "restarted" not in report
    assert run.driver.restarts == 0


@pytest.mark.covers("PROTO-13")
@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (
            misbehaving("hello-exit"),
            ["did not complete the handshake", "exit status 2", "refusing to start"],
        ),
        (misbehaving("hello-refuse"), ["refused the handshake", "speaks 99"]),
        ([sys.executable, "-c", "pass"], ["did not complete the handshake", "exit status 0"]),
        (["/nonexistent/kvconform-adapter"], ["cannot start the adapter", "No such file"]),
        ([sys.executable, "-c", "print('hello there')"], ["not JSON", "hello there"]),
    ],
)
def test_an_adapter_that_cannot_start_raises_adapter_start_error(
    argv: list[str], fragments: list[str]
) -> None:
    start = time.monotonic()
    with pytest.raises(AdapterStartError) as caught:
        StdioDriver(argv, start_timeout=30.0)
    for fragment in fragments:
        assert fragment in str(caught.value)
    assert time.monotonic() - start < BOUND


@pytest.mark.xdist_group("waits")  # mostly waiting: one worker waits for all of these
@pytest.mark.covers("PROTO-13", "PROTO-25")
def test_a_handshake_that_never_comes_times_out() -> None:
    start = time.monotonic()
    with pytest.raises(AdapterStartError, match=r"did not answer within 1 s.*\(hello\)"):
        StdioDriver(misbehaving("hello-hang"), start_timeout=1.0)
    assert time.monotonic() - start < BOUND


@pytest.mark.covers("PROTO-11")
def test_the_reference_server_refuses_another_protocol_version() -> None:
    process = subprocess.run(
        SERVE,
        input=b'{"seq":0,"op":"hello","protocol":3,"suite":"1.0.0"}\n',
        capture_output=True,
        timeout=60,
        check=True,
    )
    response = json.loads(process.stdout)
    assert response["seq"] == 0
    assert "protocol 1 and 2" in response["failure"] and "3" in response["failure"]


@pytest.mark.covers("PROTO-32")
def test_an_adapter_of_protocol_1_only_is_offered_1_after_refusing_2() -> None:
    """The harness offers 2; an adapter that speaks only 1 refuses it (PROTO-11), is
    started again and offered 1, and then meets exactly protocol 1: counts as JSON
    integers, the same verdicts."""
    traffic: list[tuple[str, bytes]] = []
    cases = [c for c in suite.all_cases() if c.area in ("signature", "alloc")][:40]
    with StdioDriver(
        [*SERVE, "--protocol", "1"], trace=lambda d, line: traffic.append((d, line))
    ) as driver:
        assert driver.protocol == 1
        results = run_cases(cases, driver)
    assert [r.verdict for r in results] == [r.verdict for r in in_process_results(cases)]
    hellos = [json.loads(line) for d, line in traffic if d == "send" and b'"hello"' in line]
    assert [h["protocol"] for h in hellos] == [2, 1]  # 2 refused, then 1 to a new process
    sent = [json.loads(line) for d, line in traffic if d == "send"]
    assert any(type(m.get("tokens")) is int for m in sent) or any(
        type(layer.get("k_len")) is int for m in sent for layer in m.get("payload", [])
    )


@pytest.mark.covers("PROTO-32", "PROTO-33")
def test_protocol_2_carries_every_count_as_a_string() -> None:
    """Offered 2, the reference server speaks 2: no JSON integer in any body, either way,
    and a count beyond 2^53 comes back exact (plan.key-refusals.high-bits-key-apart)."""
    traffic: list[tuple[str, bytes]] = []
    cases = [
        c for c in suite.all_cases() if c.id.startswith(("plan.key-refusals", "signature.width"))
    ]
    with StdioDriver(SERVE, trace=lambda d, line: traffic.append((d, line))) as driver:
        assert driver.protocol == 2
        results = run_cases(cases, driver)
    assert all(r.verdict == "passed" for r in results), [r.report() for r in results][:2]

    def integers(value: object, key: str = "") -> list[object]:
        if type(value) is int:
            return [key]
        if isinstance(value, dict):
            return [i for k, v in value.items() if k != "rope" for i in integers(v, k)]
        if isinstance(value, list):
            return [i for v in value for i in integers(v, key)]
        return []

    for _direction, line in traffic[2:]:  # after the hello exchange
        message = json.loads(line)
        message.pop("seq")
        assert not integers(message), line[:200]


@pytest.mark.covers("PROTO-29")
def test_an_adapter_that_keeps_dying_is_given_up_without_hanging(
    block_cases: tuple[Case, ...], tmp_path: Path
) -> None:
    index = first_with(block_cases, "stamp")
    argv = misbehaving("restart-dies", "--op", "stamp", "--once", str(tmp_path / "m"))
    run = run_fault(block_cases, argv)
    assert all(r.verdict == "passed" for r in run.results[:index])
    after = run.results[index:]
    assert all(r.verdict == "failed" for r in after)
    reports = [r.report() for r in after]
    assert "exited (exit status 3)" in reports[0]
    assert all("could not be restarted" in text for text in reports[1:4])
    assert "refusing to start" in reports[1]  # the failed restart quotes its stderr
    assert all("not started again after 3 failed restarts" in text for text in reports[4:])
    assert len(reports) > 5
    assert max(r.seconds for r in run.results[index + 4 :]) < 0.1
    assert run.seconds < BOUND


@pytest.mark.covers("PROTO-24")
def test_closing_the_driver_stops_the_adapter(tmp_path: Path) -> None:
    driver = StdioDriver(SERVE)
    process = driver._proc
    assert process is not None
    driver.close()
    assert process.proc.returncode == 0
    assert driver.run([ops.CacheLen("c")]) == [Broken("the driver is closed")]


@pytest.mark.covers("PROTO-24")
def test_the_reference_server_exits_at_end_of_input() -> None:
    process = subprocess.run(
        SERVE,
        input=b'{"seq":0,"op":"hello","protocol":1,"suite":"1.0.0"}\n',
        capture_output=True,
        timeout=60,
    )
    assert process.returncode == 0
    assert json.loads(process.stdout)["ok"]["name"] == "kvconform-reference"


# The pytest plugin ------------------------------------------------------------------------


def run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        # -n 0: in one process, as a user of the plugin runs it (the suite's files are in
        # this checkout, so the project's own addopts, -n auto, would apply too)
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def scenario_file(area: str) -> str:
    return str(sorted((suite.scenarios_dir() / area).glob("*.yaml"))[0])


def test_plugin_runs_cases_through_an_adapter_process(tmp_path: Path) -> None:
    command = f"{sys.executable} -m kvconform.serve"
    done = run_pytest(tmp_path, scenario_file("signature"), "--kv-adapter-cmd", command)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " passed" in done.stdout


@pytest.mark.covers("PROTO-13")
def test_plugin_reports_an_adapter_that_cannot_start_once(tmp_path: Path) -> None:
    command = f"{sys.executable} {MISBEHAVING} hello-exit"
    done = run_pytest(
        tmp_path, scenario_file("signature"), "--kv-adapter-cmd", command, "--kv-timeout", "5"
    )
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, output
    assert output.count("the adapter could not start") == 1, output
    assert "refusing to start" in output
    assert "Traceback" not in output


def test_plugin_refuses_both_adapter_options(tmp_path: Path) -> None:
    done = run_pytest(
        tmp_path,
        scenario_file("signature"),
        "--kv-adapter",
        DEFAULT_ADAPTER,
        "--kv-adapter-cmd",
        "anything",
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert "mutually exclusive" in done.stderr


@pytest.mark.covers("PROTO-33", "PROTO-28")
@pytest.mark.parametrize("op", ["cache_len", "measure"])
def test_a_protocol_2_count_written_as_a_json_number_fails_its_step(
    op: str, tmp_path: Path
) -> None:
    """The mutant of protocol 2: an adapter that speaks 2 but writes a count as a JSON
    number (a cache length, a measured signature's counts) has that step fail as a
    malformed answer (PROTO-28), the rest of the run unharmed; the reference server
    speaking 2 passes the same cases (test_whole_suite_over_stdio...[protocol-2])."""
    from kvconform.harness.checks import OutcomeCheck, SignatureIs, ValueIs

    def answers_a_count(case: Case) -> bool:  # its first such op answers counts
        first = next(i for i, o in enumerate(case.program) if o.name == op)
        return any(
            isinstance(c, OutcomeCheck)
            and c.op_index == first
            and isinstance(c.expect, SignatureIs | ValueIs)
            for c in case.checks
        )

    cases = [
        c for c in suite.all_cases() if any(o.name == op for o in c.program) and answers_a_count(c)
    ][:3]
    argv = misbehaving("v2-count-as-number", "--op", op, "--once", str(tmp_path / "m"))
    with StdioDriver(argv) as driver:
        assert driver.protocol == 2
        results = run_cases(cases, driver)
    assert results[0].verdict == "failed"
    assert "protocol 2 carries a count as a string" in results[0].report()
    assert all(r.verdict == "passed" for r in results[1:]), [r.report() for r in results[1:]]
    # Malformed, and an answer of success all the same: a must-not-succeed probe would
    # fail it, as under protocol 1 (CONF-9); a garbled line would not claim it.
    argv = misbehaving("v2-count-as-number", "--op", op, "--once", str(tmp_path / "again"))
    with StdioDriver(argv) as driver:
        outcomes = driver.run(cases[0].program)
    first = next(i for i, o in enumerate(cases[0].program) if o.name == op)
    assert isinstance(outcomes[first], Broken) and outcomes[first].claims_success


# The fixture adapters' reference ----------------------------------------------------


def test_a_fixture_answers_alike_from_the_test_process_reference_and_its_own() -> None:
    """A fixture adapter reaches the reference through the test process's service, or,
    without it (run by hand), makes its own (tests/fixtures/reference_link.py): the
    same cases give the same verdicts either way, so the service changes nothing a
    test of the harness sees. Fails a link that drops or reorders lines, or one whose
    own reference cannot be made."""
    from tests import reference_service
    from tests.fixtures.reference_link import ENV

    assert ENV in os.environ, "this test process offers no reference service"
    cases = [c for c in suite.all_cases() if c.id.startswith("identity.alloc.")]
    verdicts = {}
    for offered in (True, False):
        env = {k: v for k, v in os.environ.items() if offered or k != ENV}
        before = reference_service.served
        with StdioDriver(misbehaving("flood", "--size", "0"), env=env) as driver:
            verdicts[offered] = [(r.case.id, r.verdict) for r in run_cases(cases, driver)]
        assert (reference_service.served > before) is offered
    assert verdicts[True] == verdicts[False]
    assert {verdict for _, verdict in verdicts[True]} == {"passed"}
