"""The byte streams to and from an adapter process (spec/protocol.md, "When an adapter misbehaves").

A channel writes request lines to the adapter's stdin and reads response lines
from its stdout, never blocking past a deadline and never holding a line longer
than :data:`MAX_LINE_BYTES`; anything it cannot trust ends in a
:class:`StreamFault` that says what happened. On POSIX, :class:`PollChannel`
interleaves writing and reading with ``poll`` on the calling thread (so no pipe
can fill up and deadlock); elsewhere :class:`ThreadChannel` does the same with a
reader and a writer thread. :class:`StderrTail` keeps the adapter's last stderr
lines, read all along into a bounded buffer, for failures to quote.
"""

from __future__ import annotations

import collections
import io
import os
import queue
import select
import subprocess
import threading
import time
from typing import IO

#: The longest line the harness accepts from an adapter, newline excluded.
#: A longer line is a protocol fault ("oversized"), and is never held whole.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: How many of the adapter's last stderr lines a failure quotes.
STDERR_TAIL_LINES = 20
#: Longest stderr line kept (bytes); the rest of a longer line is dropped.
STDERR_LINE_BYTES = 2000


class StreamFault(Exception):
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


class StderrTail:
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


class PollChannel:
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
        #: Lines read ahead of their turn, whole (newline stripped); a StreamFault last when the
        #: stream broke after them (the lines before a fault are still answers).
        self._ready: collections.deque[bytes | StreamFault] = collections.deque()
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
                raise StreamFault("eof", str(exc)) from None
            else:
                size = len(chunk)
                if chunk.find(b"\n") == size - 1 and 0 < size <= self._max:
                    return chunk[:-1]
                if not size:
                    raise StreamFault("eof")
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
                if isinstance(line, StreamFault):
                    raise line  # and it stays: the stream is broken from here on
                ready.popleft()
                return line
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StreamFault("timeout")
            for fd, _ in self._poll.poll(remaining * 1000.0):
                if fd == self._in:
                    self._flush()
                    continue
                try:
                    chunk = os.read(self._out, _READ_SIZE)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise StreamFault("eof", str(exc)) from None
                size = len(chunk)
                if not self._buf and chunk.find(b"\n") == size - 1 and 0 < size <= self._max:
                    return chunk[:-1]  # the usual case: exactly one whole line
                if not size:
                    raise StreamFault("eof")
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
                        StreamFault("oversized", f"more than {len(buf)} bytes without a newline")
                    )
                return
            if len(buf) + newline > limit:
                ready.append(StreamFault("oversized", f"{len(buf) + newline} bytes"))
                return
            buf += memoryview(chunk)[:newline]
            ready.append(bytes(buf))
            buf.clear()
            start = newline + 1
        lines = (chunk[start:] if start else chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if len(line) > limit:
                ready.append(StreamFault("oversized", f"{len(line)} bytes"))
                return
            ready.append(line)
        if len(rest) > limit:
            ready.append(StreamFault("oversized", f"more than {len(rest)} bytes without a newline"))
            return
        buf += rest

    def close(self) -> None:
        self._poll = select.poll()


_EOF = object()


class ThreadChannel:
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
                    self._lines.put(StreamFault("oversized", f"more than {self._max} bytes"))
                    return
                break  # end of output in the middle of a line: the line is lost
            if len(line) - 1 > self._max:
                self._lines.put(StreamFault("oversized", f"{len(line) - 1} bytes"))
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
            raise StreamFault("timeout") from None
        if item is _EOF:
            self._lines.put(_EOF)
            raise StreamFault("eof")
        if isinstance(item, StreamFault):
            raise item
        assert isinstance(item, bytes)
        return item

    def close(self) -> None:
        self._writes.put(None)
