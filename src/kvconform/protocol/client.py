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
are :mod:`.channel`; the process, :mod:`.process`; one program's pipelined
exchange and the wording of its faults, :mod:`.exchange`.

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
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import kvconform
from kvconform import limits
from kvconform.protocol import channel, codec, steps, v2
from kvconform.protocol import operations as ops
from kvconform.protocol.exchange import _REQUEST_LINE, Trace, _Exchanging
from kvconform.protocol.process import AdapterStartError, Transport, _AdapterProcess
from kvconform.rendering import one_line
from kvconform.values import AdapterInfo, Broken, MixOp, Ok, Outcome

__all__ = [
    "MAX_FAILED_RESTARTS",
    "MAX_TIMEOUTS_IN_A_ROW",
    "MIN_START_TIMEOUT",
    "AdapterStartError",
    "StdioDriver",
    "Trace",
    "Transport",
]

#: Consecutive failed restarts after which the adapter is not started again.
MAX_FAILED_RESTARTS = 3
#: Programs in a row that time out after which the adapter is given up: an adapter
#: that hangs on everything would otherwise cost a timeout per program.
MAX_TIMEOUTS_IN_A_ROW = 3
#: The handshake gets at least this long: starting a process can be slow.
MIN_START_TIMEOUT = 10.0


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


class StdioDriver(_Exchanging):
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

    def run(self, program: Sequence[ops.Op]) -> list[Outcome]:
        """One outcome per operation of ``program``; each ``restart`` step ends the
        process and starts the adapter again (PROTO-37), each tier ``storage`` name
        being one directory for the whole program (PROTO-36)."""
        return steps.run_in_parts(program, self._run, self._restart)

    def _restart(self) -> Outcome:
        """End the process as the end of a run does (``shutdown``, then the grace before
        it is killed) and start the adapter again, with the same handshake and the same
        description (PROTO-13); the part before ended with ``reset``, as programs do."""
        if self._closed:
            return Broken("the driver is closed")
        if self.given_up is not None:
            return Broken(self.given_up)
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                if self.shutdown_grace > 0:
                    self._shut_down(proc)
            finally:
                proc.kill()
        try:
            self._proc = self._start()
        except AdapterStartError as exc:
            return Broken(f"the adapter could not be started again for a restart step: {exc}")
        self.restarts += 1
        return Ok(None)

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
                f"nothing: {codec.clip(repr(extra), 300)} (one response per request, "
                "PROTO-6); the adapter was restarted"
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
