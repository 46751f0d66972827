"""Running programs against an adapter process over the stdio protocol (spec/protocol.md).

:class:`StdioDriver` starts the adapter once, greets it (``hello``), then for
each program writes every request plus a closing ``reset`` before reading any
response (pipelining), and turns each response into an
:data:`~.values.Outcome`. Nothing the adapter does can make a run hang or
raise: a crash, a hang (per-response timeout), a line that is not JSON, a
response with the wrong ``seq`` or a line longer than :data:`MAX_LINE_BYTES`
gives the program in flight :class:`~.values.Broken` outcomes that say what
happened and quote the adapter's last stderr lines (read all along by a
thread into a bounded buffer); the process is killed, and started again with
the handshake replayed for the next program. After
:data:`MAX_FAILED_RESTARTS` restarts in a row fail, the adapter is not started
again and the remaining programs fail at once.

On POSIX, requests and responses go through non-blocking pipes and ``poll``
on the calling thread (writing and reading interleave, so no pipe can fill up
and deadlock); elsewhere a reader and a writer thread do the same.

The round trip is kept lean (bench/roundtrip_bench.py): an operation's request
bytes are encoded once and given each ``seq`` by splicing; the usual answer,
``{"seq": n, "ok": value}`` with a well-formed value, is decoded and judged on a
short path (:func:`.codec.quick_outcome`), and anything else goes through every
check of the general one.

The wire form of requests, results and the handshake is :mod:`.codec`.
"""

from __future__ import annotations

import collections
import contextlib
import io
import json
import os
import queue
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal

import kvconform
from kvconform.protocol import codec
from kvconform.protocol import operations as ops
from kvconform.values import (
    AdapterInfo,
    Broken,
    MixOp,
    Ok,
    Outcome,
)

#: The longest line the harness accepts from an adapter, newline excluded.
#: A longer line is a protocol fault ("oversized"), and is never held whole.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: How many of the adapter's last stderr lines a failure quotes.
STDERR_TAIL_LINES = 20
#: Longest stderr line kept (bytes); the rest of a longer line is dropped.
STDERR_LINE_BYTES = 2000
#: Consecutive failed restarts after which the adapter is not started again.
MAX_FAILED_RESTARTS = 3
#: The handshake gets at least this long: starting a process can be slow.
MIN_START_TIMEOUT = 10.0

Trace = Callable[[Literal["send", "recv"], bytes], None]


class AdapterStartError(RuntimeError):
    """The adapter process could not be started or did not complete the handshake."""


# The adapter process -------------------------------------------------------------


class _Fault(Exception):
    """The byte stream from the adapter can no longer be trusted.

    ``what`` is one of ``eof``, ``timeout``, ``oversized``, ``garbage``,
    ``no-seq`` and ``seq``; ``info`` completes the description; ``raw`` is the
    offending line (clipped), when there is one.
    """

    def __init__(self, what: str, info: str = "", raw: str = "") -> None:
        super().__init__(what)
        self.what = what
        self.info = info
        self.raw = raw


class _StderrTail:
    """Reads the adapter's stderr on a thread and keeps only its last lines.

    Memory stays bounded whatever the adapter writes: at most ``keep`` lines of
    at most :data:`STDERR_LINE_BYTES` bytes each. The pipe is always drained,
    so an adapter that floods stderr never blocks on it.
    """

    def __init__(self, stream: IO[bytes], keep: int = 4 * STDERR_TAIL_LINES) -> None:
        self._fd = stream.fileno()
        self._lines: collections.deque[bytes] = collections.deque(maxlen=keep)
        self._partial = bytearray()
        self._lock = threading.Lock()
        self.total_bytes = 0
        self._thread = threading.Thread(target=self._pump, name="kvconform-stderr", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        keep = self._lines.maxlen or 1
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except OSError:
                break
            if not chunk:
                break
            parts = chunk.split(b"\n")
            with self._lock:
                self.total_bytes += len(chunk)
                if len(parts) == 1:
                    self._extend_partial(parts[0])
                    continue
                self._extend_partial(parts[0])
                self._lines.append(bytes(self._partial))
                middle = parts[1:-1]
                self._lines.extend(p[:STDERR_LINE_BYTES] for p in middle[-keep:])
                self._partial = bytearray()
                self._extend_partial(parts[-1])
        with self._lock:
            if self._partial:
                self._lines.append(bytes(self._partial))
                self._partial = bytearray()

    def _extend_partial(self, data: bytes) -> None:
        room = STDERR_LINE_BYTES - len(self._partial)
        if room > 0:
            self._partial += data[:room]

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def tail(self, n: int = STDERR_TAIL_LINES) -> list[str]:
        with self._lock:
            lines = list(self._lines)[-n:]
            if self._partial:
                lines = [*lines, bytes(self._partial)][-n:]
        return [line.decode("utf-8", errors="replace").rstrip("\r") for line in lines]


#: Bytes asked for per read of the adapter's stdout (small reads avoid large allocations).
_READ_SIZE = 1 << 16
_POLL_IN = getattr(select, "POLLIN", 0) | getattr(select, "POLLPRI", 0)
_POLL_OUT = getattr(select, "POLLOUT", 0)


class _PollChannel:
    """Line I/O with the adapter on the calling thread: non-blocking pipes and ``poll`` (POSIX).

    Writing and reading are interleaved, so a program larger than the pipe
    buffers cannot deadlock: while a write would block, responses are read.
    A line is never held beyond ``max_line`` bytes.
    """

    def __init__(self, proc: subprocess.Popen[bytes], max_line: int) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._in = proc.stdin.fileno()
        self._out = proc.stdout.fileno()
        os.set_blocking(self._in, False)
        os.set_blocking(self._out, False)
        self._max = max_line
        self._poll = select.poll()
        self._poll.register(self._out, _POLL_IN)
        self._writing = False
        self._pending = memoryview(b"")
        self._stdin_closed = False
        #: Lines read ahead of their turn, whole (newline stripped); a _Fault last when the
        #: stream broke after them (the lines before a fault are still answers).
        self._ready: collections.deque[bytes | _Fault] = collections.deque()
        #: The start of a line whose newline has not come yet (at most ``max_line`` bytes).
        self._buf = bytearray()

    def send(self, data: bytes) -> None:
        if self._stdin_closed:
            return
        if self._pending:
            self._pending = memoryview(bytes(self._pending) + data)
            self._flush()
            return
        # The usual case: the pipe has room for all of it, and nothing waits for poll.
        try:
            written = os.write(self._in, data)
        except BlockingIOError:
            written = 0
        except OSError:  # the adapter closed stdin or died: its stdout will tell
            self._stdin_closed = True
            return
        if written < len(data):
            self._pending = memoryview(data)[written:]
            self._flush()

    def ask(self, data: bytes, timeout: float) -> bytes:
        """:meth:`send` ``data``, then :meth:`read_line`: one request, one response."""
        if self._pending or self._stdin_closed or self._ready or self._buf:
            self.send(data)
            return self.read_line(timeout)
        # The usual case, on a path of its own: the request fits in the pipe, and the
        # one event poll can give is stdout's, most often with the whole line awaited.
        try:
            written = os.write(self._in, data)
        except OSError:
            written = 0
        if written != len(data):
            self.send(data[written:])
            return self.read_line(timeout)
        deadline = time.monotonic() + timeout
        if self._poll.poll(timeout * 1000.0):
            try:
                chunk = os.read(self._out, _READ_SIZE)
            except BlockingIOError:
                pass  # nothing after all
            except OSError as exc:
                raise _Fault("eof", str(exc)) from None
            else:
                size = len(chunk)
                if chunk.find(b"\n") == size - 1 and 0 < size <= self._max:
                    return chunk[:-1]
                if not size:
                    raise _Fault("eof")
                self._take(chunk)
        return self._read_line(deadline)

    def _flush(self) -> None:
        while self._pending:
            try:
                written = os.write(self._in, self._pending)
            except BlockingIOError:
                break
            except OSError:  # the adapter closed stdin or died: its stdout will tell
                self._stdin_closed = True
                self._pending = memoryview(b"")
                break
            self._pending = self._pending[written:]
        want = bool(self._pending)
        if want != self._writing:
            if want:
                self._poll.register(self._in, _POLL_OUT)
            else:
                self._poll.unregister(self._in)
            self._writing = want

    def read_line(self, timeout: float) -> bytes:
        return self._read_line(time.monotonic() + timeout)

    def _read_line(self, deadline: float) -> bytes:
        ready = self._ready
        while True:
            if ready:
                line = ready[0]
                if isinstance(line, _Fault):
                    raise line  # and it stays: the stream is broken from here on
                ready.popleft()
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Fault("timeout")
            for fd, _ in self._poll.poll(remaining * 1000.0):
                if fd == self._in:
                    self._flush()
                    continue
                try:
                    chunk = os.read(self._out, _READ_SIZE)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise _Fault("eof", str(exc)) from None
                size = len(chunk)
                if not self._buf and chunk.find(b"\n") == size - 1 and 0 < size <= self._max:
                    return chunk[:-1]  # the usual case: exactly one whole line
                if not size:
                    raise _Fault("eof")
                self._take(chunk)

    def _take(self, chunk: bytes) -> None:
        """Queue the whole lines of ``chunk``; keep the start of an unfinished one."""
        ready, buf, limit = self._ready, self._buf, self._max
        start = 0
        if buf:
            newline = chunk.find(b"\n")
            if newline < 0:
                buf += chunk
                if len(buf) > limit:
                    ready.append(
                        _Fault("oversized", f"more than {len(buf)} bytes without a newline")
                    )
                return
            if len(buf) + newline > limit:
                ready.append(_Fault("oversized", f"{len(buf) + newline} bytes"))
                return
            buf += memoryview(chunk)[:newline]
            ready.append(bytes(buf))
            buf.clear()
            start = newline + 1
        lines = (chunk[start:] if start else chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if len(line) > limit:
                ready.append(_Fault("oversized", f"{len(line)} bytes"))
                return
            ready.append(line)
        if len(rest) > limit:
            ready.append(_Fault("oversized", f"more than {len(rest)} bytes without a newline"))
            return
        buf += rest

    def close(self) -> None:
        self._poll = select.poll()


_EOF = object()


class _ThreadChannel:
    """Line I/O through a reader thread and a writer thread (for platforms without
    ``select`` on pipes). Neither pipe can fill up while the harness waits."""

    def __init__(self, proc: subprocess.Popen[bytes], max_line: int) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._stdin = proc.stdin
        # The pipe is unbuffered (bufsize=0); read it through a buffer, not byte by byte.
        self._stdout = io.BufferedReader(proc.stdout, 1 << 16)  # type: ignore[type-var]
        self._max = max_line
        self._lines: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._writes: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read, name="kvconform-stdout", daemon=True)
        self._writer = threading.Thread(target=self._write, name="kvconform-stdin", daemon=True)
        self._reader.start()
        self._writer.start()

    def _read(self) -> None:
        reader = self._stdout
        while True:
            try:
                line = reader.readline(self._max + 2)
            except (OSError, ValueError):
                break
            if not line:
                break
            if not line.endswith(b"\n"):
                if len(line) > self._max:
                    self._lines.put(_Fault("oversized", f"more than {self._max} bytes"))
                    return
                break  # end of output in the middle of a line: the line is lost
            if len(line) - 1 > self._max:
                self._lines.put(_Fault("oversized", f"{len(line) - 1} bytes"))
                return
            self._lines.put(line[:-1])
        self._lines.put(_EOF)

    def _write(self) -> None:
        while True:
            data = self._writes.get()
            if data is None:
                return
            view = memoryview(data)
            try:
                while view:
                    written = self._stdin.write(view)
                    view = view[written or 0 :]
                self._stdin.flush()
            except (OSError, ValueError):
                return

    def send(self, data: bytes) -> None:
        self._writes.put(data)

    def ask(self, data: bytes, timeout: float) -> bytes:
        self.send(data)
        return self.read_line(timeout)

    def read_line(self, timeout: float) -> bytes:
        try:
            item = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise _Fault("timeout") from None
        if item is _EOF:
            self._lines.put(_EOF)
            raise _Fault("eof")
        if isinstance(item, _Fault):
            raise item
        assert isinstance(item, bytes)
        return item

    def close(self) -> None:
        self._writes.put(None)


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
#: Most operations whose request bytes a driver keeps, and the longest such request.
_TAIL_CACHE_ENTRIES = 1024
_TAIL_CACHE_BYTES = 4096


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
        self.stderr = _StderrTail(self.proc.stderr)
        use_poll = transport == "poll" or (transport == "auto" and hasattr(select, "poll"))
        self.channel: _PollChannel | _ThreadChannel = (
            _PollChannel(self.proc, max_line) if use_poll else _ThreadChannel(self.proc, max_line)
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


class StdioDriver:
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
        max_line_bytes: int = MAX_LINE_BYTES,
        max_failed_restarts: int = MAX_FAILED_RESTARTS,
        env: Mapping[str, str] | None = None,
        transport: Transport = "auto",
        trace: Trace | None = None,
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
        self.env = env
        self.transport: Transport = transport
        self.trace = trace
        #: Processes started after a failure (the first start is not counted).
        self.restarts = 0
        #: One line per fault the driver recovered from, oldest first.
        self.incidents: list[str] = []
        self._failed_restarts = 0
        self._given_up: str | None = None
        self._closed = False
        #: Request bytes (after ``seq``) of the operations sent lately, by identity: an
        #: operation sent again (a scenario run twice, a benchmark) is not encoded again.
        #: Keyed by ``id`` with the operation kept alive, never by equality: equal
        #: operations may encode differently (``1 == 1.0 == True``).
        self._tails: dict[int, tuple[ops.Op, bytes]] = {}
        self._info: AdapterInfo | None = None
        self._proc: _AdapterProcess | None = self._start()
        assert self._info is not None
        self.info: AdapterInfo = self._info

    # Starting ------------------------------------------------------------------

    def _start(self) -> _AdapterProcess:
        """Start the process and complete the handshake, or raise AdapterStartError."""
        proc = _AdapterProcess(self.argv, self.transport, self.max_line_bytes, self.env)
        command = shlex.join(self.argv)
        try:
            self._send(proc, [codec.hello_request()])
            try:
                response = self._receive(proc, 0, "hello", self.start_timeout)
            except _Fault as fault:
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
                raise AdapterStartError(
                    f"the adapter {command} refused the handshake "
                    f"(protocol {codec.PROTOCOL_VERSION}, suite {kvconform.SUITE_VERSION}): "
                    f"{form}: {codec.clip(str(response.get(form, '')), 500)}"
                )
            try:
                info = codec.info_from_wire(response["ok"])
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
                f"{info} instead of {self._info}"
            )
        self._info = info
        return proc

    # Running -------------------------------------------------------------------

    def run(self, program: Sequence[ops.Op]) -> list[Outcome]:
        proc = self._running()
        if isinstance(proc, Broken):
            return [proc] * len(program)
        exchange = self._exchange(proc, program)
        if exchange.fault is not None:
            self._proc = None
        return exchange.outcomes

    def _running(self) -> _AdapterProcess | Broken:
        """The live process, restarted if the last one failed; Broken if there is none."""
        if self._closed:
            return Broken("the driver is closed")
        if self._given_up is not None:
            return Broken(self._given_up)
        if self._proc is not None:
            return self._proc
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
            outcome = codec.quick_outcome(op, answer, seq)
            if outcome is not None:
                return outcome
            response = self._response(answer, seq)  # all the checks, and their faults
        except _Fault as fault:
            self._proc = None
            return Broken(self._explain(proc, fault, seq, op.name, self.timeout), fault.raw)
        return codec.outcome_of(op, response)

    def _tail(self, op: ops.Op) -> bytes:
        """The bytes of ``op``'s request after its ``seq``: encoded once while it is sent."""
        tails = self._tails
        known = tails.get(id(op))
        if known is not None and known[0] is op:
            return known[1]
        tail = codec.request_tail(op)
        if len(tail) <= _TAIL_CACHE_BYTES:
            if len(tails) >= _TAIL_CACHE_ENTRIES:
                tails.clear()
            tails[id(op)] = (op, tail)
        return tail

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
        self._send(proc, [codec.to_wire(message) if isinstance(message, ops.Op) else message])
        try:
            response = self._receive(proc, seq, name, self.timeout)
        except _Fault as fault:
            self._proc = None
            return Broken(self._explain(proc, fault, seq, name, self.timeout), fault.raw)
        return judge(response)

    def hash_batch(self, programs: Sequence[Sequence[MixOp]]) -> list[Outcome]:
        """Run many hash programs in one request (``hash_batch``): one outcome per program.

        An adapter that answers ``unsupported`` is asked program by program instead.
        """
        requests = [ops.Hash(tuple(p)) for p in programs]
        wire = {"op": "hash_batch", "programs": [codec.to_wire(r)["program"] for r in requests]}

        def judge(response: dict[str, Any]) -> Outcome:
            forms = set(response) - {"seq"}
            if forms == {"unsupported"}:
                return Ok(None)
            if forms == {"failure"} and isinstance(response["failure"], str):
                return Broken(response["failure"] or "the adapter answered failure to hash_batch")
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
        read_outcome, timeout = self._read_outcome, self.timeout
        for index, op in enumerate(program):
            try:
                outcomes.append(read_outcome(proc, op, first + index, timeout))
            except _Fault as fault:
                reason = self._explain(proc, fault, first + index, op.name, self.timeout)
                outcomes += [Broken(reason, fault.raw)] * (len(program) - index)
                return _Exchange(outcomes, reason)
        try:
            response = self._receive(proc, first + len(program), "reset", self.timeout)
        except _Fault as fault:
            reset_seq = first + len(program)
            return _Exchange(outcomes, self._explain(proc, fault, reset_seq, "reset", self.timeout))
        if response != {"seq": first + len(program), "ok": None}:
            proc.kill()
            what = f"the adapter answered reset with {codec.clip(str(response))}; it was restarted"
            self.incidents.append(what)
            return _Exchange(outcomes, what)
        return _Exchange(outcomes)

    def _send(self, proc: _AdapterProcess, messages: Sequence[Mapping[str, Any]]) -> None:
        first = proc.next_seq
        lines = [codec.encode_line(seq, message) for seq, message in enumerate(messages, first)]
        proc.next_seq = first + len(lines)
        if self.trace is not None:
            for line in lines:
                self.trace("send", line[:-1])
        proc.channel.send(b"".join(lines))

    def _read_outcome(self, proc: _AdapterProcess, op: ops.Op, seq: int, timeout: float) -> Outcome:
        """The outcome of the response to request ``seq``, or :class:`_Fault`."""
        line = proc.channel.read_line(timeout)
        if self.trace is not None:
            self.trace("recv", line)
        outcome = codec.quick_outcome(op, line, seq)
        return codec.outcome_of(op, self._response(line, seq)) if outcome is None else outcome

    def _receive(self, proc: _AdapterProcess, seq: int, op: str, timeout: float) -> dict[str, Any]:
        """The response to request ``seq``, or :class:`_Fault` if the stream is unusable."""
        line = proc.channel.read_line(timeout)
        if self.trace is not None:
            self.trace("recv", line)
        return self._response(line, seq)

    @staticmethod
    def _response(line: bytes, seq: int) -> dict[str, Any]:
        """The response ``line`` to request ``seq``, or :class:`_Fault` if it is not one."""
        try:
            response = codec.decode_line(line)
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            raise _Fault("garbage", str(exc), codec.clip(repr(line), 2000)) from None
        if type(response) is dict:
            got = response.get("seq")
            if got == seq and type(got) is int:
                return response  # the usual case
        if not isinstance(response, dict) or "seq" not in response:
            raise _Fault("no-seq", "", codec.clip(repr(line), 2000))
        got = response["seq"]
        if got is None and set(response) == {"seq", "failure"}:
            # An adapter that could not read a request at all answers it with seq null.
            return response
        if got != seq or isinstance(got, bool):
            raise _Fault("seq", repr(got), codec.clip(repr(line), 2000))
        return response

    def _explain(
        self,
        proc: _AdapterProcess,
        fault: _Fault,
        seq: int,
        op: str,
        timeout: float,
        *,
        restart: bool = True,
    ) -> str:
        """Kill the process and say what happened, quoting the end of its stderr."""
        waiting = f"the response to request {seq} ({op})"
        if fault.what == "eof":
            proc.wait_exit(1.0)
            status = proc.exit_text()
            if status == "still running":
                what = f"the adapter closed its stdout while the harness awaited {waiting}"
            else:
                what = f"the adapter exited ({status}) while the harness awaited {waiting}"
        elif fault.what == "timeout":
            what = f"the adapter did not answer within {timeout:g} s: the harness awaited {waiting}"
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

    def stderr_tail(self, n: int = STDERR_TAIL_LINES) -> list[str]:
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
        grace = min(self.timeout, 2.0)
        try:
            seq = proc.next_seq
            self._send(proc, [{"op": "shutdown"}])
            self._receive(proc, seq, "shutdown", grace)
        except _Fault:
            pass
        if proc.proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.proc.stdin.close()
        if not proc.wait_exit(grace):
            self.incidents.append("the adapter did not exit after shutdown; killed")
        proc.kill()

    def __enter__(self) -> StdioDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StdioDriver({shlex.join(self.argv)!r}, timeout={self.timeout:g})"
