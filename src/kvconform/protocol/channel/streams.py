"""What every stream to and from an adapter shares: its limits, the fault that ends it
(:class:`StreamFault`), and helper threads that leave a person's signals to the main
thread."""

from __future__ import annotations

import signal

from kvconform import limits

#: The longest line the harness accepts from an adapter, newline excluded.
#: A longer line is a protocol fault ("oversized"), and is never held whole.
MAX_LINE_BYTES = limits.MAX_LINE_BYTES
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


def _keep_signals_for_the_main_thread() -> None:
    """Block, in the calling helper thread, the signals a person sends to stop a run.

    Python runs signal handlers on the main thread only; a signal the kernel gives a
    helper thread instead would not wake a main thread that waits in a system call.
    """
    if hasattr(signal, "pthread_sigmask"):
        wanted = {signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", signal.SIGINT)}
        signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
