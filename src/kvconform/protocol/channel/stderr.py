"""The adapter's stderr, read all along on a thread into a bounded buffer of its last
lines, for failures to quote."""

from __future__ import annotations

import collections
import os
import threading
from typing import IO

from kvconform.protocol.channel.streams import (
    STDERR_LINE_BYTES,
    STDERR_TAIL_LINES,
    _keep_signals_for_the_main_thread,
)


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
        _keep_signals_for_the_main_thread()
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
