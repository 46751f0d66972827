"""Running programs against an adapter process over the stdio protocol (spec/protocol.md).

:class:`StdioDriver` starts the adapter once, greets it (``hello``), then for
each program writes every request plus a closing ``reset`` before reading any
response (pipelining), and turns each response into an
:data:`~.values.Outcome`. Nothing the adapter does can make a run hang or
raise: a crash, a hang (per-response timeout), a line that is not JSON, a
response with the wrong ``seq`` or an overlong line (:mod:`.channel`) gives
the program in flight :class:`~.values.Broken` outcomes that say what
happened and quote the adapter's last stderr lines (read all along by a
thread into a bounded buffer); the process is killed, and started again with
the handshake replayed for the next program. After
:data:`MAX_FAILED_RESTARTS` restarts in a row fail, the adapter is not started
again and the remaining programs fail at once.

The byte streams themselves (poll or threads, line limits, the stderr tail)
are :mod:`.channel`.

The round trip is kept lean (bench/roundtrip_bench.py): an operation's request
bytes are encoded once and given each ``seq`` by splicing; the usual answer,
``{"seq": n, "ok": value}`` with a well-formed value, is decoded and judged on a
short path (:func:`.codec.quick_outcome`), and anything else goes through every
check of the general one.

The wire form of requests, results and the handshake is :mod:`.codec`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import kvconform
from kvconform import limits
from kvconform.protocol import channel, codec, steps, v2
from kvconform.protocol import operations as ops
from kvconform.rendering import one_line
from kvconform.values import (
    AdapterInfo,
    Broken,
    MixOp,
    Ok,
    Outcome,
)

#: Consecutive failed restarts after which the adapter is not started again.
MAX_FAILED_RESTARTS = 3
#: Programs in a row that time out after which the adapter is given up: an adapter
#: that hangs on everything would otherwise cost a timeout per program.
MAX_TIMEOUTS_IN_A_ROW = 3
#: The handshake gets at least this long: starting a process can be slow.
MIN_START_TIMEOUT = 10.0

Trace = Callable[[Literal["send", "recv"], bytes], None]


class AdapterStartError(RuntimeError):
    """The adapter process could not be started or did not complete the handshake."""

    #: Set when the adapter answered ``hello`` with a refusal (``failure``, ``unsupported``
    #: or ``error``): perhaps a version it does not speak (PROTO-11, PROTO-32).
    refused_hello: bool = False


# The adapter process -------------------------------------------------------------


Transport = Literal["auto", "poll", "threads"]

#: How the adapter is started on POSIX: in a process group of its own, so that killing
#: the group kills whatever it started too, and a Ctrl-C at the terminal (SIGINT to the
#: foreground group, the harness's) reaches only the harness, which then shuts the
#: adapter down. In the harness's session, not a new one (start_new_session): a new
#: session is also a new scheduling autogroup on Linux, which makes every round trip
#: slower. ``process_group`` is Python 3.11+; before it, a new session does the same.
_OWN_PROCESS_GROUP: dict[str, Any] = (
    {}
    if os.name != "posix"
    else {"process_group": 0}
    if sys.version_info >= (3, 11)
    else {"start_new_session": True}
)
#: A request line from its ``seq`` and its tail (:func:`.codec.request_line`).
_REQUEST_LINE = codec.REQUEST_LINE
#: The bytes of a ``reset`` request after its ``seq``.
_RESET_TAIL = codec.request_tail({"op": "reset"})
#: The usual spellings of the answer to ``reset``, compact or with a space after each
#: separator, read without decoding: ``_RESET_OK[i] % seq``.
_RESET_OK = (b'{"seq":%d,"ok":null}', b'{"seq": %d, "ok": null}')
#: Most operations whose request bytes a driver keeps, and the longest such request.
_TAIL_CACHE_ENTRIES = 1024
_TAIL_CACHE_BYTES = 4096
#: Operations whose fields are all names (handles, strings): two equal ones (same
#: type, equal strings) have the same request bytes, so they are kept by value as well.
_NAMED_ONLY = frozenset(
    spec.cls
    for spec in ops.TABLE
    if all(f.kind in ("handle", "released", "new_handle", "str") for f in spec.fields)
)


class _AdapterProcess:
    """One running adapter: the process, its channel, its stderr tail, its next ``seq``."""

    def __init__(
        self,
        argv: Sequence[str],
        transport: Transport,
        max_line: int,
        env: Mapping[str, str] | None,
    ) -> None:
        self.argv = list(argv)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env=None if env is None else dict(env),
                **_OWN_PROCESS_GROUP,
            )
        except OSError as exc:
            raise AdapterStartError(
                f"cannot start the adapter {shlex.join(self.argv)}: {exc}"
            ) from exc
        assert self.proc.stderr is not None
        self.stderr = channel.StderrTail(self.proc.stderr)
        use_poll = transport == "poll" or (transport == "auto" and hasattr(select, "poll"))
        self.channel: channel.PollChannel | channel.ThreadChannel = (
            channel.PollChannel(self.proc, max_line)
            if use_poll
            else channel.ThreadChannel(self.proc, max_line)
        )
        self.next_seq = 0

    def exit_text(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def stderr_text(self) -> str:
        lines = self.stderr.tail()
        if not lines:
            return "the adapter wrote nothing to stderr"
        return f"last {len(lines)} stderr line(s):\n" + "\n".join(f"  | {line}" for line in lines)

    def wait_exit(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        """Kill the process (and its process group), reap it, collect the rest of stderr."""
        if os.name == "posix":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        self.wait_exit(5.0)
        self.finish()

    def finish(self) -> None:
        self.stderr.join(1.0)
        self.channel.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass


@dataclass(frozen=True)
class _Exchange:
    """What one exchange of a program (plus its ``reset``) produced."""

    outcomes: list[Outcome]
    #: Why the adapter had to be killed, if it had to.
    fault: str | None = None
    #: The first line read was an answer to a request of an earlier program (a stray
    #: line the adapter wrote after that program ended): nothing of this one was judged.
    stale: bool = False


class _Incidents(list[str]):
    """The driver's incidents, at most :data:`~kvconform.limits.MAX_INCIDENTS` of them:
    past that the last one kept is always the latest, with a count of those dropped
    (an adapter that breaks the protocol on every program cannot grow a report)."""

    dropped = 0

    def append(self, what: str) -> None:
        if len(self) < limits.MAX_INCIDENTS:
            super().append(what)
            return
        self.dropped += 1
        self[-1] = f"({self.dropped + 1} more incidents, the last:) {what}"


def _answers_before(line: bytes, first: int) -> bool:
    """Whether ``line`` is a response to a request before ``first`` (already answered)."""
    try:
        response = codec.decode_line(line)
    except ValueError:
        return False
    got = response.get("seq") if type(response) is dict else None
    return type(got) is int and got < first


class StdioDriver(steps.StdioRestarts):
    """Runs programs against an adapter process that speaks spec/protocol.md.

    ``argv`` is the command (a list; a string is split with :func:`shlex.split`,
    never given to a shell). ``timeout`` bounds the wait for each response;
    ``start_timeout`` bounds the handshake (default ``max(timeout, 10)``).
    Raises :class:`AdapterStartError` when the first handshake cannot complete.
    """

    def __init__(
        self,
        argv: Sequence[str] | str,
        timeout: float = 10.0,
        *,
        start_timeout: float | None = None,
        max_line_bytes: int = channel.MAX_LINE_BYTES,
        max_failed_restarts: int = MAX_FAILED_RESTARTS,
        max_timeouts_in_a_row: int = MAX_TIMEOUTS_IN_A_ROW,
        env: Mapping[str, str] | None = None,
        transport: Transport = "auto",
        trace: Trace | None = None,
        shutdown_grace: float = limits.SHUTDOWN_GRACE,
        protocol: int | None = None,
    ) -> None:
        self.argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
        if not self.argv:
            raise AdapterStartError("the adapter command is empty")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}")
        self.timeout = timeout
        self.start_timeout = (
            max(timeout, MIN_START_TIMEOUT) if start_timeout is None else start_timeout
        )
        self.max_line_bytes = max_line_bytes
        self.max_failed_restarts = max_failed_restarts
        self.max_timeouts_in_a_row = max_timeouts_in_a_row
        self._timeouts_in_a_row = 0
        self.env = env
        self.transport: Transport = transport
        self.trace = trace
        #: Seconds, in all, the adapter has to answer ``shutdown`` and exit when the driver
        #: closes, before its process group is killed (0: killed at once).
        self.shutdown_grace = shutdown_grace
        #: Processes started after the first, after a failure or for a ``restart`` step.
        self.restarts = 0
        #: One line per fault the driver recovered from, oldest first.
        self.incidents: list[str] = _Incidents()
        self._failed_restarts = 0
        self._given_up: str | None = None
        self._closed = False
        #: Request bytes (after ``seq``) of the operations sent lately, by identity: an
        #: operation sent again (a scenario run twice, a benchmark) is not encoded again.
        #: Keyed by ``id`` with the operation kept alive, never by equality: equal
        #: operations may encode differently (``1 == 1.0 == True``).
        self._tails: dict[int, tuple[ops.Op, bytes]] = {}
        self._named_tails: dict[ops.Op, bytes] = {}
        self._info: AdapterInfo | None = None
        if protocol is not None and protocol not in v2.VERSIONS:
            raise ValueError(f"protocol must be one of {v2.VERSIONS}, got {protocol}")
        #: The versions ``hello`` offers, newest first, until one is settled (PROTO-32):
        #: then that one only, for every restart.
        self._offers: tuple[int, ...] = (
            (protocol,) if protocol is not None else tuple(reversed(v2.VERSIONS))
        )
        #: The protocol version spoken, settled by the first handshake.
        self.protocol: int = self._offers[0]
        self._proc: _AdapterProcess | None = self._start()
        assert self._info is not None
        self.info: AdapterInfo = self._info

    # Starting ------------------------------------------------------------------

    def _start(self) -> _AdapterProcess:
        """Start the process and complete the handshake, or raise AdapterStartError.

        ``hello`` offers the newest version first; an adapter that refuses it (PROTO-11)
        is started again and offered the next, so an adapter of protocol 1 meets exactly
        the conversation it always had (PROTO-32). Once settled, only that version is
        offered, on every restart.
        """
        for index, version in enumerate(self._offers):
            try:
                proc, spoken = self._start_offering(version)
            except AdapterStartError as exc:
                if exc.refused_hello and index + 1 < len(self._offers):
                    continue
                raise
            self.protocol = spoken
            self._offers = (spoken,)
            return proc
        raise AssertionError("no protocol version offered")  # pragma: no cover

    def _start_offering(self, version: int) -> tuple[_AdapterProcess, int]:
        """Start the process and greet it offering ``version``: the process and the
        version its answer settles on."""
        proc = _AdapterProcess(self.argv, self.transport, self.max_line_bytes, self.env)
        command = shlex.join(self.argv)
        try:
            self._send(proc, [codec.hello_request(protocol=version)])
            try:
                response = self._receive(proc, 0, "hello", self.start_timeout)
            except channel.StreamFault as fault:
                raise AdapterStartError(
                    f"the adapter {command} did not complete the handshake: "
                    f"{self._explain(proc, fault, 0, 'hello', self.start_timeout, restart=False)}"
                ) from None
            if "ok" in response and set(response) != {"seq", "ok"}:
                raise AdapterStartError(
                    f"the adapter {command} answered hello with a malformed response: "
                    f"members {sorted(response)}, expected seq and exactly one of "
                    f"{', '.join(codec.RESPONSE_FORMS)}"
                )
            if set(response) != {"seq", "ok"}:
                form = next((k for k in response if k != "seq"), "nothing")
                refused = AdapterStartError(
                    f"the adapter {command} refused the handshake "
                    f"(protocol {version}, suite {kvconform.SUITE_VERSION}): "
                    f"{form}: {one_line(codec.clip(str(response.get(form, '')), 500))}"
                )
                refused.refused_hello = form in ("failure", "unsupported", "error")
                raise refused
            try:
                info = codec.info_from_wire(response["ok"], offered=version)
            except codec.WireError as exc:
                raise AdapterStartError(
                    f"the adapter {command} answered hello with a malformed description: {exc}"
                ) from None
        except BaseException:
            proc.kill()
            raise
        if self._info is not None and info != self._info:
            proc.kill()
            raise AdapterStartError(
                f"the restarted adapter {command} describes itself differently: "
                + codec.clip(f"{info} instead of {self._info}", codec.SHOWN_LIMIT)
            )
        self._info = info
        spoken = response["ok"]["protocol"]  # checked by info_from_wire: 1 to ``version``
        return proc, spoken

    # Running -------------------------------------------------------------------

    def _run(self, program: Sequence[ops.Op]) -> list[Outcome]:
        proc = self._running()
        if isinstance(proc, Broken):
            return [proc] * len(program)
        exchange = self._exchange(proc, program)
        if exchange.stale:  # not this program's doing: sent again, once, to a new process
            self._proc = None
            proc = self._running()
            if isinstance(proc, Broken):
                return [proc] * len(program)
            exchange = self._exchange(proc, program)
        if exchange.fault is not None:
            self._proc = None
        else:
            self._timeouts_in_a_row = 0
        return exchange.outcomes

    @property
    def given_up(self) -> str | None:
        """Why the adapter is not started again, once it has been given up; else ``None``."""
        return self._given_up

    def _running(self) -> _AdapterProcess | Broken:
        """The live process, restarted if the last one failed; Broken if there is none."""
        if self._closed:
            return Broken("the driver is closed")
        if self._given_up is not None:
            return Broken(self._given_up)
        if self._proc is not None:
            extra = self._proc.channel.stray()
            if extra is None:
                return self._proc
            # written after the last exchange was read: not this program's doing
            self.incidents.append(
                f"the adapter wrote a line between two programs, where the harness awaited "
                f"nothing: {codec.clip(repr(extra), 300)}; the adapter was restarted"
            )
            self._proc.kill()
            self._proc = None
        try:
            self._proc = self._start()
        except AdapterStartError as exc:
            self._failed_restarts += 1
            reason = f"the adapter could not be restarted: {exc}"
            if self._failed_restarts >= self.max_failed_restarts:
                self._given_up = (
                    f"the adapter is not started again after {self._failed_restarts} failed "
                    f"restarts in a row; the last one: {exc}"
                )
            return Broken(reason)
        self._failed_restarts = 0
        self.restarts += 1
        return self._proc

    def call(self, op: ops.Op) -> Outcome:
        """Send one request and read its response, with no ``reset`` after it.

        Handles made by ``call`` stay live until the next :meth:`run` ends (its
        ``reset`` drops them). A fault kills the adapter as in :meth:`run`.
        """
        proc = self._proc
        if proc is None:
            running = self._running()
            if isinstance(running, Broken):
                return running
            proc = running
        known = self._tails.get(id(op))
        tail = known[1] if known is not None and known[0] is op else self._tail(op)
        seq = proc.next_seq
        line = _REQUEST_LINE % (seq, tail)
        proc.next_seq = seq + 1
        try:
            if self.trace is None:
                answer = proc.channel.ask(line, self.timeout)
            else:
                self.trace("send", line[:-1])
                proc.channel.send(line)
                answer = proc.channel.read_line(self.timeout)
                self.trace("recv", answer)
            outcome = self._quick(op, answer, seq)
            if outcome is None:
                response = self._response(answer, seq)  # all the checks, and their faults
        except channel.StreamFault as fault:
            self._proc = None
            return Broken(self._explain(proc, fault, seq, op.name, self.timeout), fault.raw)
        self._timeouts_in_a_row = 0
        return outcome if outcome is not None else self._outcome(op, response)

    def _tail(self, op: ops.Op) -> bytes:
        """The bytes of ``op``'s request after its ``seq``: encoded once while it is sent."""
        tails = self._tails
        known = tails.get(id(op))
        if known is not None and known[0] is op:
            return known[1]
        if type(op) in _NAMED_ONLY:
            named = self._named_tails
            remembered = named.get(op)
            if remembered is not None:
                return remembered
            tail = self._encode(op)
            if len(tail) <= _TAIL_CACHE_BYTES:
                if len(named) >= _TAIL_CACHE_ENTRIES:
                    named.clear()
                named[op] = tail
            return tail
        tail = self._encode(op)
        if len(tail) <= _TAIL_CACHE_BYTES:
            if len(tails) >= _TAIL_CACHE_ENTRIES:
                tails.clear()
            tails[id(op)] = (op, tail)
        return tail

    def _encode(self, op: ops.Op) -> bytes:
        """The bytes of ``op``'s request after its ``seq``, in the protocol spoken."""
        if self.protocol == 2:
            return codec.request_tail(v2.counts_to_strings(codec.to_wire(op)))
        return codec.request_tail(op)

    def _outcome(self, op: ops.Op, response: dict[str, Any]) -> Outcome:
        """The outcome of a well-sequenced ``response`` to ``op``, in the protocol spoken."""
        if self.protocol == 2:
            try:
                response = v2.response_from_v2(op, response)
            except codec.WireError as exc:
                return Broken(f"malformed response to {op.name}: {exc}")
        return codec.outcome_of(op, response)

    def _quick(self, op: ops.Op, line: bytes, seq: int) -> Outcome | None:
        """:func:`.codec.quick_outcome` where protocol 2 reads the same: a count is a
        string there, so a count's answer is always decoded in full."""
        if self.protocol == 2 and type(op).result == "count":
            return None
        return codec.quick_outcome(op, line, seq)

    def _single(
        self,
        message: ops.Op | Mapping[str, Any],
        name: str,
        judge: Callable[[dict[str, Any]], Outcome],
    ) -> Outcome:
        proc = self._running()
        if isinstance(proc, Broken):
            return proc
        seq = proc.next_seq
        wire = codec.to_wire(message) if isinstance(message, ops.Op) else message
        self._send(proc, [v2.counts_to_strings(wire) if self.protocol == 2 else wire])
        try:
            response = self._receive(proc, seq, name, self.timeout)
        except channel.StreamFault as fault:
            self._proc = None
            return Broken(self._explain(proc, fault, seq, name, self.timeout), fault.raw)
        return judge(response)

    def hash_batch(self, programs: Sequence[Sequence[MixOp]]) -> list[Outcome]:
        """Run many hash programs in one request (``hash_batch``): one outcome per program.

        An adapter that answers ``unsupported``, or one ``failure`` for the whole batch
        (which PROTO-20 allows), is asked program by program instead.
        """
        requests = [ops.Hash(tuple(p)) for p in programs]
        wire = {"op": "hash_batch", "programs": [codec.to_wire(r)["program"] for r in requests]}

        def judge(response: dict[str, Any]) -> Outcome:
            forms = set(response) - {"seq"}
            if forms == {"unsupported"} or (
                forms == {"failure"} and isinstance(response["failure"], str)
            ):
                return Ok(None)  # no batch: each program is asked on its own
            body = response.get("ok")
            if forms != {"ok"} or not isinstance(body, list) or len(body) != len(requests):
                return Broken(
                    f"malformed response to hash_batch: expected 'ok' with {len(requests)} "
                    f"lists of decimal strings, got {codec.clip(json.dumps(response))}"
                )
            return Ok(
                tuple(
                    codec.outcome_of(r, {"ok": raw}) for r, raw in zip(requests, body, strict=True)
                )
            )

        result = self._single(wire, "hash_batch", judge)
        if isinstance(result, Ok) and result.value is None:
            return [self.call(r) for r in requests]
        if isinstance(result, Ok):
            assert isinstance(result.value, tuple)
            return list(result.value)
        return [result] * len(requests)

    def _exchange(self, proc: _AdapterProcess, program: Sequence[ops.Op]) -> _Exchange:
        first = proc.next_seq
        tail = self._tail
        lines = [_REQUEST_LINE % (seq, tail(op)) for seq, op in enumerate(program, first)]
        lines.append(_REQUEST_LINE % (first + len(program), _RESET_TAIL))
        proc.next_seq = first + len(lines)
        if self.trace is not None:
            for line in lines:
                self.trace("send", line[:-1])
        proc.channel.send(b"".join(lines))
        outcomes: list[Outcome] = []
        read_line, quick, trace, timeout = (
            proc.channel.read_line,
            self._quick,
            self.trace,
            self.timeout,
        )
        seq = first
        try:
            for op in program:
                line = read_line(timeout)
                if trace is not None:
                    trace("recv", line)
                outcome = quick(op, line, seq)
                if outcome is None:
                    outcome = self._outcome(op, self._response(line, seq))
                outcomes.append(outcome)
                seq += 1
        except channel.StreamFault as fault:
            index = seq - first
            if index == 0 and fault.what == "seq" and _answers_before(line, first):
                proc.kill()
                what = (
                    f"the adapter wrote a line after the program before had ended: "
                    f"{codec.clip(repr(line), 300)}; it was restarted and the next program "
                    "sent again (one response per request, PROTO-6)"
                )
                self.incidents.append(what)
                return _Exchange([], what, stale=True)
            reason = self._explain(proc, fault, seq, program[index].name, self.timeout)
            outcomes += [Broken(reason, fault.raw)] * (len(program) - index)
            return _Exchange(outcomes, reason)
        reset_seq = first + len(program)
        try:
            line = proc.channel.read_line(self.timeout)
            if self.trace is not None:
                self.trace("recv", line)
            if line == _RESET_OK[1] % reset_seq or line == _RESET_OK[0] % reset_seq:
                extra = proc.channel.stray()
                if extra is None:
                    return _Exchange(outcomes)
                return self._after_reset(proc, outcomes, extra, reset_seq)
            response = self._response(line, reset_seq)
        except channel.StreamFault as fault:
            return _Exchange(outcomes, self._explain(proc, fault, reset_seq, "reset", self.timeout))
        if response != {"seq": reset_seq, "ok": None}:
            proc.kill()
            what = f"the adapter answered reset with {codec.clip(str(response))}; it was restarted"
            self.incidents.append(what)
            return _Exchange(outcomes, what)
        return _Exchange(outcomes)

    def _after_reset(
        self, proc: _AdapterProcess, outcomes: list[Outcome], extra: bytes, reset_seq: int
    ) -> _Exchange:
        """The adapter wrote more after its answer to ``reset``: an incident of this
        program's exchange (its answers were all read and stand, as after a malformed
        answer to ``reset``), never a failure of the next program's first step. Whether
        the extra line has come by now or comes later (then the next exchange finds it,
        sends its program again to a new process and notes it), the verdict is the same."""
        what = (
            f"the adapter wrote a line after its answer to request {reset_seq} (reset), "
            f"where the harness awaited nothing: {codec.clip(repr(extra), 300)} (one "
            "response per request, PROTO-6); the adapter was killed and will be restarted"
        )
        proc.kill()
        self.incidents.append(what)
        return _Exchange(outcomes, what)

    def _send(self, proc: _AdapterProcess, messages: Sequence[Mapping[str, Any]]) -> None:
        first = proc.next_seq
        lines = [codec.encode_line(seq, message) for seq, message in enumerate(messages, first)]
        proc.next_seq = first + len(lines)
        if self.trace is not None:
            for line in lines:
                self.trace("send", line[:-1])
        proc.channel.send(b"".join(lines))

    def _receive(self, proc: _AdapterProcess, seq: int, op: str, timeout: float) -> dict[str, Any]:
        """The response to request ``seq``, or a :class:`~.channel.StreamFault`."""
        line = proc.channel.read_line(timeout)
        if self.trace is not None:
            self.trace("recv", line)
        return self._response(line, seq)

    @staticmethod
    def _response(line: bytes, seq: int) -> dict[str, Any]:
        """The response ``line`` to request ``seq``, or a :class:`~.channel.StreamFault`."""
        try:
            response = codec.decode_line(line)
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            raise channel.StreamFault("garbage", str(exc), codec.clip(repr(line), 2000)) from None
        if type(response) is dict:
            got = response.get("seq")
            if got == seq and type(got) is int:
                return response  # the usual case
        if not isinstance(response, dict) or "seq" not in response:
            raise channel.StreamFault("no-seq", "", codec.clip(repr(line), 2000))
        got = response["seq"]
        if got is None and set(response) == {"seq", "failure"}:
            # An adapter that could not read a request at all answers it with seq null.
            return response
        if got != seq or type(got) is not int:  # 1.0 and true are not the integer 1
            raise channel.StreamFault(
                "seq", codec.clip(repr(got), 60), codec.clip(repr(line), 2000)
            )
        return response

    def _explain(
        self,
        proc: _AdapterProcess,
        fault: channel.StreamFault,
        seq: int,
        op: str,
        timeout: float,
        *,
        restart: bool = True,
    ) -> str:
        """Kill the process and say what happened, quoting the end of its stderr."""
        waiting = f"the response to request {seq} ({op})"
        if fault.what == "timeout":
            self._timeouts_in_a_row += 1
            if self._timeouts_in_a_row >= self.max_timeouts_in_a_row and restart:
                self._given_up = (
                    f"the adapter is unresponsive: {self._timeouts_in_a_row} programs in a row "
                    f"timed out ({timeout:g} s each); it is not started again"
                )
        if fault.what == "eof":
            proc.wait_exit(1.0)
            status = proc.exit_text()
            if status == "still running":
                what = f"the adapter closed its stdout while the harness awaited {waiting}"
            else:
                what = f"the adapter exited ({status}) while the harness awaited {waiting}"
        elif fault.what == "timeout" and (status := proc.exit_text()) != "still running":
            what = (
                f"the adapter exited ({status}) but its standard output stayed open (a process "
                f"it started holds it?) and no answer came within {timeout:g} s: the harness "
                f"awaited {waiting}"
            )
        elif fault.what == "timeout":
            what = (
                f"the adapter did not answer within {timeout:g} s: the harness awaited {waiting}"
                " (an adapter that buffers its standard output must flush it before it waits"
                " for input, PROTO-4)"
            )
        elif fault.what == "oversized":
            what = (
                f"the adapter wrote a line longer than the limit of {self.max_line_bytes} bytes "
                f"({fault.info}) where the harness awaited {waiting}"
            )
        elif fault.what == "garbage":
            what = (
                f"the adapter wrote a line that is not JSON ({fault.info}) where the harness "
                f"awaited {waiting}: {codec.clip(fault.raw, 300)}"
            )
        elif fault.what == "no-seq":
            what = (
                f"the adapter wrote a line that is not a response object with a 'seq' where "
                f"the harness awaited {waiting}: {codec.clip(fault.raw, 300)}"
            )
        else:
            what = (
                f"the adapter answered with seq {fault.info} where the harness awaited "
                f"{waiting} (responses must come one per request, in request order)"
            )
        proc.kill()
        then = "; the adapter was killed and will be restarted" if restart else ""
        self.incidents.append(what)
        return f"{what}{then}\n{proc.stderr_text()}"

    @property
    def pid(self) -> int | None:
        """The process id of the running adapter (None while none runs)."""
        return None if self._proc is None else self._proc.proc.pid

    def stderr_tail(self, n: int = channel.STDERR_TAIL_LINES) -> list[str]:
        """The last ``n`` lines the current adapter process wrote to stderr (none if stopped)."""
        return [] if self._proc is None else self._proc.stderr.tail(n)

    # Closing -------------------------------------------------------------------

    def close(self) -> None:
        """Ask the adapter to shut down; kill it if it does not exit promptly."""
        if self._closed:
            return
        self._closed = True
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if self.shutdown_grace > 0:
                self._shut_down(proc)
        finally:  # even when a second Ctrl-C ends the wait: the process group is stopped
            proc.kill()

    def _shut_down(self, proc: _AdapterProcess) -> None:
        """Ask for ``shutdown`` and wait for the exit, noting any breach of PROTO-24.

        Both waits share one deadline, :attr:`shutdown_grace` seconds from now (at most
        the timeout): after it the process group is killed, whatever it was doing."""
        grace = min(self.timeout, self.shutdown_grace)
        deadline = time.monotonic() + grace
        try:
            seq = proc.next_seq
            self._send(proc, [{"op": "shutdown"}])
            response = self._receive(proc, seq, "shutdown", grace)
            if response != {"seq": seq, "ok": None}:
                self.incidents.append(
                    f"the adapter answered shutdown with {codec.clip(str(response))}, "
                    "not ok: null (PROTO-24)"
                )
        except channel.StreamFault as fault:
            said = f"{fault.what}: {fault.info}" if fault.info else fault.what
            self.incidents.append(f"the adapter did not answer shutdown ({said}; PROTO-24)")
        if proc.proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.proc.stdin.close()
        if not proc.wait_exit(max(0.0, deadline - time.monotonic())):
            self.incidents.append(
                f"the adapter did not exit within {grace:g} s of shutdown; killed (PROTO-24)"
            )
        elif proc.proc.returncode != 0:
            self.incidents.append(
                f"the adapter exited with status {proc.proc.returncode} after shutdown, "
                "not 0 (PROTO-24)"
            )

    def __enter__(self) -> StdioDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StdioDriver({shlex.join(self.argv)!r}, timeout={self.timeout:g})"
