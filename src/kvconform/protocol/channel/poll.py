"""Line I/O on the calling thread with non-blocking pipes and ``poll`` (POSIX), and on
Linux a single blocking read for an awaited response that a watchdog thread ends at
its deadline."""

from __future__ import annotations

import collections
import contextlib
import os
import select
import subprocess
import threading
import time
import weakref

from kvconform.protocol.channel.streams import StreamFault, _keep_signals_for_the_main_thread

#: Bytes asked for per read of the adapter's stdout (small reads avoid large allocations).
_READ_SIZE = 1 << 16
_POLL_IN = getattr(select, "POLLIN", 0) | getattr(select, "POLLPRI", 0)
_POLL_OUT = getattr(select, "POLLOUT", 0)
#: How often the watchdog looks at the deadlines of blocking reads (seconds): a
#: response that has not come is given up at most this long after its deadline.
WATCH_PERIOD = 0.02


def _wake_path(fd: int) -> str | None:
    """A path through which a blocked read of pipe ``fd`` can be ended by writing to it.

    On Linux, ``/proc/self/fd/N`` of a pipe's read end opens (for writing) the same
    pipe. Checked once per channel by opening it; ``None`` elsewhere, or if it fails.
    """
    path = f"/proc/self/fd/{fd}"
    try:
        wake = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return None
    os.close(wake)
    return path


class _Watchdog:
    """One daemon thread that ends the blocking reads which outlive their deadlines.

    A :class:`PollChannel` whose pipe can be woken (:func:`_wake_path`) reads the
    usual response with a plain blocking ``read``: no ``poll`` and no timer per round
    trip (each costs about as much as the rest of the harness's own work). It states
    the deadline before reading; every :data:`WATCH_PERIOD` this thread gives up the
    reads past theirs (:meth:`PollChannel._expire`), and stops when no channel is left.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._channels: weakref.WeakSet[PollChannel] = weakref.WeakSet()
        self._thread: threading.Thread | None = None

    def watch(self, channel: PollChannel) -> None:
        with self._lock:
            self._channels.add(channel)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="kvconform-watchdog", daemon=True
                )
                self._thread.start()

    def forget(self, channel: PollChannel) -> None:
        with self._lock:
            self._channels.discard(channel)

    def _run(self) -> None:
        _keep_signals_for_the_main_thread()
        while True:
            time.sleep(WATCH_PERIOD)
            with self._lock:
                channels = list(self._channels)
                if not channels:
                    self._thread = None
                    return
            now = time.monotonic()
            for channel in channels:
                channel._expire(now)


_WATCHDOG = _Watchdog()


class PollChannel:
    """Line I/O with the adapter on the calling thread: non-blocking pipes and ``poll`` (POSIX).

    Writing and reading are interleaved, so a program larger than the pipe
    buffers cannot deadlock: while a write would block, responses are read.
    A line is never held beyond ``max_line`` bytes. On Linux the response to a
    request that fits in the pipe is awaited with one blocking read, which
    :class:`_Watchdog` ends at its deadline; anything else waits in ``poll``. After a
    timeout the stream is not trusted again (the client kills the adapter).
    """

    def __init__(self, proc: subprocess.Popen[bytes], max_line: int) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self._proc = proc
        self._in = proc.stdin.fileno()
        self._out = proc.stdout.fileno()
        os.set_blocking(self._in, False)
        #: Where a blocked read is woken (see :class:`_Watchdog`); without it (not Linux,
        #: no /proc) every read waits in ``poll`` with the deadline as its timeout.
        self._wake = _wake_path(self._out)
        # A read of a blocking pipe follows only poll's word that it is readable (it
        # cannot block) or, on the usual path, a deadline the watchdog enforces.
        os.set_blocking(self._out, self._wake is not None)
        #: The deadline of the blocking read in progress (None: none), and whether the
        #: watchdog gave it up; both only change under ``_guard``.
        self._armed: float | None = None
        self._expired = False
        self._closed = False
        self._guard = threading.Lock()
        if self._wake is not None:
            _WATCHDOG.watch(self)
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
        if self._wake is not None:
            return self._blocking_read(deadline)
        if self._poll.poll(timeout * 1000.0):
            try:
                chunk = os.read(self._out, _READ_SIZE)
            except BlockingIOError:
                pass  # nothing after all
            except OSError as exc:
                raise StreamFault("eof", str(exc)) from None
            else:
                return self._answer(chunk, deadline)
        return self._read_line(deadline)

    def _answer(self, chunk: bytes, deadline: float) -> bytes:
        """The response line that starts with the first ``chunk`` read for it."""
        size = len(chunk)
        if chunk.find(b"\n") == size - 1 and 0 < size <= self._max:
            return chunk[:-1]  # the usual case: exactly one whole line
        if not size:
            raise StreamFault("eof")
        self._take(chunk)
        return self._read_line(deadline)

    def _blocking_read(self, deadline: float) -> bytes:
        """The response to the request just sent: one blocking read, watched by the
        watchdog, which ends it at ``deadline`` (a timeout)."""
        self._expired = False  # no claim can be pending: nothing was armed
        self._armed = deadline
        chunk: bytes | OSError
        try:
            chunk = os.read(self._out, _READ_SIZE)
        except OSError as exc:
            chunk = exc
        finally:
            with self._guard:
                expired = self._expired
                self._armed = None
        if expired:
            raise StreamFault("timeout")
        if isinstance(chunk, OSError):
            raise StreamFault("eof", str(chunk)) from None
        return self._answer(chunk, deadline)

    def _expire(self, now: float) -> None:
        """On the watchdog's thread: give up a blocking read past its deadline, and end it
        by writing a newline into the pipe (the channel is not used after a timeout).
        Under ``_guard``, so the descriptor is still this channel's and the reader learns
        of it exactly once."""
        with self._guard:
            if self._armed is None or now < self._armed or self._closed or self._wake is None:
                return
            self._armed = None
            self._expired = True
            try:
                wake = os.open(self._wake, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                wake = -1
            if wake >= 0:
                try:
                    os.write(wake, b"\n")
                except OSError:
                    pass
                finally:
                    os.close(wake)
            else:  # no way into the pipe: end the writer, so the read sees its end
                with contextlib.suppress(OSError):
                    self._proc.kill()

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
            if self._wake is not None and not self._pending and not self._buf:
                # Nothing to write and no line begun: wait as ask() does, in one
                # blocking read that the watchdog ends at the deadline.
                return self._blocking_read(deadline)
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

    def stray(self) -> bytes | None:
        """Output the adapter has written beyond the answers awaited (a whole line, or
        the start of one), taken from the stream, if any has come by now; never waits."""
        ready = self._ready
        if not ready and not self._buf:
            try:
                events = self._poll.poll(0)
            except OSError:
                events = []
            if any(fd == self._out for fd, _ in events):
                try:
                    chunk = os.read(self._out, _READ_SIZE)  # readable: this cannot block
                except OSError:
                    chunk = None
                if chunk:
                    self._take(chunk)
                elif chunk is not None:  # its end: for the next read to find
                    ready.append(StreamFault("eof"))
        if ready and isinstance(first := ready[0], bytes):
            ready.popleft()
            return first
        if self._buf:
            started = bytes(self._buf)
            self._buf.clear()
            return started
        return None

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
        with self._guard:
            self._closed = True
            self._armed = None
        _WATCHDOG.forget(self)
        self._poll = select.poll()
