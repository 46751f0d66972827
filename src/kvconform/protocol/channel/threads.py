"""Line I/O through a reader thread and a writer thread, for platforms without ``poll``
on pipes."""

from __future__ import annotations

import io
import queue
import subprocess
import threading

from kvconform.protocol.channel.streams import StreamFault, _keep_signals_for_the_main_thread

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
        _keep_signals_for_the_main_thread()
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
        _keep_signals_for_the_main_thread()
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

    def stray(self) -> bytes | None:
        """A line the adapter has written beyond the answers awaited, if one has come."""
        try:
            item = self._lines.get_nowait()
        except queue.Empty:
            return None
        if isinstance(item, bytes):
            return item
        self._lines.put(item)  # its end or a fault, the last thing queued: left for a read
        return None

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
