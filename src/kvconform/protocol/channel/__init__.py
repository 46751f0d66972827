"""The byte streams to and from an adapter process (spec/protocol.md, "When an adapter misbehaves").

A channel writes request lines to the adapter's stdin and reads response lines
from its stdout, never blocking past a deadline and never holding a line longer
than :data:`MAX_LINE_BYTES`; anything it cannot trust ends in a
:class:`StreamFault` that says what happened. On POSIX, :class:`PollChannel`
interleaves writing and reading with ``poll`` on the calling thread (so no pipe
can fill up and deadlock), and on Linux awaits a single response with a blocking
read that a watchdog thread ends at its deadline; elsewhere :class:`ThreadChannel`
does the same with a reader and a writer thread. :class:`StderrTail` keeps the adapter's last stderr
lines, read all along into a bounded buffer, for failures to quote.

The parts: :mod:`.streams` (the limits and :class:`StreamFault`), :mod:`.stderr`,
:mod:`.poll` (with its watchdog) and :mod:`.threads`; everything public is importable
from here.
"""

from __future__ import annotations

from kvconform.protocol.channel.poll import WATCH_PERIOD, PollChannel
from kvconform.protocol.channel.stderr import StderrTail
from kvconform.protocol.channel.streams import (
    MAX_LINE_BYTES,
    STDERR_LINE_BYTES,
    STDERR_TAIL_LINES,
    StreamFault,
)
from kvconform.protocol.channel.threads import ThreadChannel

__all__ = [
    "MAX_LINE_BYTES",
    "STDERR_LINE_BYTES",
    "STDERR_TAIL_LINES",
    "WATCH_PERIOD",
    "PollChannel",
    "StderrTail",
    "StreamFault",
    "ThreadChannel",
]
