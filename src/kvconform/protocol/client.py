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

The wire codec of results and of the handshake lives here too, so the harness
(this module) and the reference server (:mod:`.server`) share one definition.
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
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal

import kvconform
from kvconform.protocol import operations as ops
from kvconform.values import (
    CLASSES,
    AdapterInfo,
    Broken,
    Fault,
    MixOp,
    Ok,
    Outcome,
    Refused,
    Signature,
)

#: The protocol version this harness speaks (``hello.protocol``).
PROTOCOL_VERSION = 1
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

#: The four response forms; exactly one appears next to ``seq``.
RESPONSE_FORMS = ("ok", "error", "unsupported", "failure")

Trace = Callable[[Literal["send", "recv"], bytes], None]


class AdapterStartError(RuntimeError):
    """The adapter process could not be started or did not complete the handshake."""


# Result codec ------------------------------------------------------------------

ResultKind = Literal["null", "u64", "u64_list", "count", "bool", "signature"]

#: What the ``ok`` value of each operation is on the wire.
RESULT_KINDS: dict[type[ops.Op], ResultKind] = {
    ops.Hash: "u64_list",
    ops.ModelNew: "null",
    ops.ModelReload: "null",
    ops.ModelSetHook: "null",
    ops.ModelInstanceId: "u64",
    ops.CacheNew: "null",
    ops.CacheAppend: "null",
    ops.CacheTruncate: "null",
    ops.CacheClear: "null",
    ops.CacheReplaceLayer: "null",
    ops.CacheAllocId: "u64",
    ops.CacheLen: "count",
    ops.PlanKey: "u64",
    ops.SessionNew: "null",
    ops.SessionValid: "bool",
    ops.Drop: "null",
    ops.Measure: "signature",
    ops.Stamp: "signature",
    ops.Verify: "signature",
}


def _is_u64(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64


def result_to_wire(op: ops.Op, value: object) -> dict[str, Any]:
    """The response body (without ``seq``) for an adapter method's return value.

    A :class:`~.values.Fault` becomes ``error``; any other value must have the
    type the operation returns, or :class:`TypeError` names the mismatch.
    """
    if isinstance(value, Fault):
        return {"error": ops.fault_to_wire(value)}
    kind = RESULT_KINDS[type(op)]
    if kind == "null":
        return {"ok": None}
    if kind == "u64":
        if not _is_u64(value):
            raise TypeError(f"{op.name} returned {value!r}, expected an unsigned 64-bit integer")
        return {"ok": ops.u64_to_wire(value)}  # type: ignore[arg-type]
    if kind == "u64_list":
        if not isinstance(value, Sequence) or not all(_is_u64(v) for v in value):
            raise TypeError(f"{op.name} returned {value!r}, expected unsigned 64-bit integers")
        return {"ok": [ops.u64_to_wire(v) for v in value]}
    if kind == "count":
        if not _is_u64(value):
            raise TypeError(f"{op.name} returned {value!r}, expected a non-negative integer")
        return {"ok": value}
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{op.name} returned {value!r}, expected true or false")
        return {"ok": value}
    if not isinstance(value, Signature):
        raise TypeError(f"{op.name} returned {value!r}, expected a signature or a fault")
    return {"ok": ops.signature_to_wire(value)}


def result_from_wire(op: ops.Op, raw: object) -> object:
    """The Python value of an ``ok`` response to ``op``; :class:`~.ops.WireError` if malformed."""
    kind = RESULT_KINDS[type(op)]
    where = f"{op.name} result"
    if kind == "null":
        if raw is not None:
            raise ops.WireError(f"{where}: expected null, got {_clip(repr(raw))}")
        return None
    if kind == "u64":
        return ops.u64_from_wire(raw, where)
    if kind == "u64_list":
        if not isinstance(raw, list):
            raise ops.WireError(
                f"{where}: expected a list of decimal strings, got {_clip(repr(raw))}"
            )
        return tuple(ops.u64_from_wire(v, f"{where}[{i}]") for i, v in enumerate(raw))
    if kind == "count":
        if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
            raise ops.WireError(f"{where}: expected a non-negative integer, got {_clip(repr(raw))}")
        return raw
    if kind == "bool":
        if not isinstance(raw, bool):
            raise ops.WireError(f"{where}: expected true or false, got {_clip(repr(raw))}")
        return raw
    return ops.signature_from_wire(raw, where)


def outcome_of(op: ops.Op, response: Mapping[str, Any]) -> Outcome:
    """The outcome a well-sequenced response gives ``op`` (a malformed body is Broken)."""
    forms = [key for key in response if key != "seq"]
    if len(forms) != 1 or forms[0] not in RESPONSE_FORMS:
        return Broken(
            f"malformed response to {op.name}: expected 'seq' and exactly one of "
            f"{', '.join(RESPONSE_FORMS)}; got members {sorted(response)}"
        )
    form = forms[0]
    body = response[form]
    try:
        if form == "ok":
            value = result_from_wire(op, body)
            return Ok(value)
        if form == "error":
            return Refused(ops.fault_from_wire(body, "error"))
    except ops.WireError as exc:
        return Broken(f"malformed response to {op.name}: {exc}")
    text = body if isinstance(body, str) else json.dumps(body)
    if form == "unsupported":
        return Broken(f"the adapter answered unsupported to {op.name}: {text}")
    return Broken(text if text else f"the adapter answered failure to {op.name} (no message)")


# Handshake codec ---------------------------------------------------------------


def hello_request(suite: str = kvconform.SUITE_VERSION) -> dict[str, Any]:
    return {"op": "hello", "protocol": PROTOCOL_VERSION, "suite": suite}


def info_to_wire(info: AdapterInfo) -> dict[str, Any]:
    """The ``ok`` value of a ``hello`` response."""
    return {
        "name": info.name,
        "version": info.version,
        "language": info.language,
        "protocol": PROTOCOL_VERSION,
        "classes": sorted(info.classes),
        "format": {"writes": info.format_writes, "reads": sorted(info.format_reads)},
        # Declarations are optional on the wire (PROTO-30): what is left out is the default.
        **({"options": dict(info.options)} if info.options else {}),
        **({"capabilities": caps} if (caps := info.declared_capabilities()) else {}),
    }


def info_from_wire(raw: object) -> AdapterInfo:
    """An adapter's self-description from its ``hello`` answer; :class:`~.ops.WireError` if bad."""
    if not isinstance(raw, Mapping):
        raise ops.WireError(f"hello result: expected an object, got {_clip(repr(raw))}")
    for name in ("name", "version", "language"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise ops.WireError(f"hello result.{name}: expected a non-empty string")
    if raw.get("protocol") != PROTOCOL_VERSION:
        raise ops.WireError(
            f"hello result.protocol: the harness speaks protocol {PROTOCOL_VERSION}, "
            f"the adapter answered {raw.get('protocol')!r}"
        )
    classes = raw.get("classes")
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise ops.WireError("hello result.classes: expected a list of class names")
    unknown = sorted(set(classes) - set(CLASSES))
    if unknown:
        raise ops.WireError(
            f"hello result.classes: unknown class {', '.join(unknown)} "
            f"(the classes are {', '.join(CLASSES)})"
        )
    fmt = raw.get("format")
    if not isinstance(fmt, Mapping):
        raise ops.WireError("hello result.format: expected {writes, reads}")
    writes = fmt.get("writes")
    reads = fmt.get("reads")
    if writes is not None and (not isinstance(writes, int) or isinstance(writes, bool)):
        raise ops.WireError("hello result.format.writes: expected an integer or null")
    if not isinstance(reads, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in reads
    ):
        raise ops.WireError("hello result.format.reads: expected a list of integers")
    options = raw.get("options", {})
    if not isinstance(options, Mapping) or not all(isinstance(v, str) for v in options.values()):
        raise ops.WireError("hello result.options: expected an object of option names to strings")
    caps = raw.get("capabilities", {})
    if not isinstance(caps, Mapping):
        raise ops.WireError("hello result.capabilities: expected an object")
    unknown_caps = sorted(set(caps) - {"raw_fold", "dtypes", "key_schema", "uint_bits"})
    if unknown_caps:
        raise ops.WireError(
            f"hello result.capabilities: unknown capability {', '.join(unknown_caps)} "
            "(the capabilities are raw_fold, dtypes, key_schema, uint_bits)"
        )
    uint_bits = caps.get("uint_bits", 64)
    if uint_bits not in (32, 64) or isinstance(uint_bits, bool):
        raise ops.WireError("hello result.capabilities.uint_bits: expected 32 or 64")
    raw_fold = caps.get("raw_fold", True)
    if not isinstance(raw_fold, bool):
        raise ops.WireError("hello result.capabilities.raw_fold: expected true or false")
    dtypes = caps.get("dtypes")
    if dtypes is not None and (
        not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes)
    ):
        raise ops.WireError("hello result.capabilities.dtypes: expected a list of dtype names")
    schema = caps.get("key_schema")
    if schema is not None and (
        not isinstance(schema, Mapping)
        or not all(
            isinstance(p, Mapping) and all(isinstance(t, str) for t in p.values())
            for p in schema.values()
        )
    ):
        raise ops.WireError(
            "hello result.capabilities.key_schema: expected {family: {parameter: type}}"
        )
    info = AdapterInfo(
        name=raw["name"],
        version=raw["version"],
        language=raw["language"],
        classes=frozenset(classes),
        format_writes=writes,
        format_reads=frozenset(reads),
        options=dict(options),
        raw_fold=raw_fold,
        dtypes=None if dtypes is None else frozenset(dtypes),
        key_schema=None if schema is None else {f: dict(p) for f, p in schema.items()},
        uint_bits=uint_bits,
    )
    problems = info.problems()
    if problems:
        raise ops.WireError(f"hello result.{problems[0]}")
    return info


def _clip(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


_ENCODER = json.JSONEncoder(separators=(",", ":"))
_DECODE = json.JSONDecoder().decode


def encode_line(seq: int | None, message: Mapping[str, Any]) -> bytes:
    """One request or response line: ``seq`` first, compact JSON, ASCII only, newline.

    ASCII only (``\\u`` escapes) so that any string, even one holding an unpaired
    surrogate (HASH-13), can be written; :class:`TypeError` or :class:`ValueError`
    if ``message`` holds something JSON cannot carry.
    """
    return (_ENCODER.encode({"seq": seq, **message}) + "\n").encode("ascii")


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
        self._buf = bytearray()
        self._scan = 0

    def send(self, data: bytes) -> None:
        if self._stdin_closed:
            return
        self._pending = (
            memoryview(bytes(self._pending) + data) if self._pending else memoryview(data)
        )
        self._flush()

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
        deadline = 0.0
        while True:
            if self._buf:
                newline = self._buf.find(b"\n", self._scan)
                if newline >= 0:
                    if newline > self._max:
                        raise _Fault("oversized", f"{newline} bytes")
                    line = bytes(self._buf[:newline])
                    del self._buf[: newline + 1]
                    self._scan = 0
                    return line
                self._scan = len(self._buf)
                if self._scan > self._max:
                    raise _Fault("oversized", f"more than {self._scan} bytes without a newline")
            if not deadline:
                deadline = time.monotonic() + timeout
                remaining = timeout
            else:
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
                if not chunk:
                    raise _Fault("eof")
                if not self._buf and chunk.find(b"\n") == len(chunk) - 1 < self._max:
                    return chunk[:-1]  # the usual case: exactly one whole line
                self._buf += chunk

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
        self._stdout = io.BufferedReader(proc.stdout, 1 << 16)  # type: ignore[arg-type]
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
        posix = os.name == "posix"
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env=None if env is None else dict(env),
                # its own process group, so killing it kills what it started too
                start_new_session=posix,
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
            self._send(proc, [hello_request()])
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
                    f"{', '.join(RESPONSE_FORMS)}"
                )
            if set(response) != {"seq", "ok"}:
                form = next((k for k in response if k != "seq"), "nothing")
                raise AdapterStartError(
                    f"the adapter {command} refused the handshake "
                    f"(protocol {PROTOCOL_VERSION}, suite {kvconform.SUITE_VERSION}): "
                    f"{form}: {_clip(str(response.get(form, '')), 500)}"
                )
            try:
                info = info_from_wire(response["ok"])
            except ops.WireError as exc:
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
        return self._single(op, op.name, lambda response: outcome_of(op, response))

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
        self._send(proc, [ops.to_wire(message) if isinstance(message, ops.Op) else message])
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
        wire = {"op": "hash_batch", "programs": [ops.to_wire(r)["program"] for r in requests]}

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
                    f"lists of decimal strings, got {_clip(json.dumps(response))}"
                )
            return Ok(
                tuple(outcome_of(r, {"ok": raw}) for r, raw in zip(requests, body, strict=True))
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
        self._send(proc, [*(ops.to_wire(op) for op in program), {"op": "reset"}])
        outcomes: list[Outcome] = []
        for index, op in enumerate(program):
            try:
                response = self._receive(proc, first + index, op.name, self.timeout)
            except _Fault as fault:
                reason = self._explain(proc, fault, first + index, op.name, self.timeout)
                outcomes += [Broken(reason, fault.raw)] * (len(program) - index)
                return _Exchange(outcomes, reason)
            outcomes.append(outcome_of(op, response))
        try:
            response = self._receive(proc, first + len(program), "reset", self.timeout)
        except _Fault as fault:
            reset_seq = first + len(program)
            return _Exchange(outcomes, self._explain(proc, fault, reset_seq, "reset", self.timeout))
        if response != {"seq": first + len(program), "ok": None}:
            proc.kill()
            what = f"the adapter answered reset with {_clip(str(response))}; it was restarted"
            self.incidents.append(what)
            return _Exchange(outcomes, what)
        return _Exchange(outcomes)

    def _send(self, proc: _AdapterProcess, messages: Sequence[Mapping[str, Any]]) -> None:
        lines = []
        for message in messages:
            lines.append(encode_line(proc.next_seq, message))
            proc.next_seq += 1
        if self.trace is not None:
            for line in lines:
                self.trace("send", line[:-1])
        proc.channel.send(b"".join(lines))

    def _receive(self, proc: _AdapterProcess, seq: int, op: str, timeout: float) -> dict[str, Any]:
        """The response to request ``seq``, or :class:`_Fault` if the stream is unusable."""
        line = proc.channel.read_line(timeout)
        if self.trace is not None:
            self.trace("recv", line)
        try:
            response = _DECODE(line.decode("utf-8"))
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            raise _Fault("garbage", str(exc), _clip(repr(line), 2000)) from None
        if not isinstance(response, dict) or "seq" not in response:
            raise _Fault("no-seq", "", _clip(repr(line), 2000))
        got = response["seq"]
        if got is None and set(response) == {"seq", "failure"}:
            # An adapter that could not read a request at all answers it with seq null.
            return response
        if got != seq or isinstance(got, bool):
            raise _Fault("seq", repr(got), _clip(repr(line), 2000))
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
                f"awaited {waiting}: {_clip(fault.raw, 300)}"
            )
        elif fault.what == "no-seq":
            what = (
                f"the adapter wrote a line that is not a response object with a 'seq' where "
                f"the harness awaited {waiting}: {_clip(fault.raw, 300)}"
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
