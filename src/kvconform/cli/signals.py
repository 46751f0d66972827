"""Signals: a run stops cleanly on SIGINT, SIGTERM or SIGHUP, and waits while its
outputs are written."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from kvconform.cli.common import Stopped


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP wait while the outputs are written: a signal then
    stops the command after them, never between two reports of one run.

    The handlers only note the signal (Python runs every handler in the main thread,
    whichever thread the system gave the signal to, so masking it here would not do).
    """
    pending: list[int] = []

    def note(signum: int, frame: object) -> None:
        pending.append(signum)

    previous = _handle(("SIGINT", "SIGTERM", "SIGHUP"), note)
    try:
        yield
    finally:
        _handle(previous)
    if pending:
        if pending[0] == signal.SIGINT:
            raise KeyboardInterrupt
        raise Stopped(pending[0])


def _handle(
    signals: Sequence[str] | Mapping[int, Any], handler: Callable[[int, Any], None] | None = None
) -> dict[int, Any]:
    """Give the named signals ``handler`` (or give each number of a mapping its handler
    back); the handlers they had. Signals this system lacks are skipped; outside the main
    thread nothing is changed.

    A named signal that is ignored is left ignored: whoever started the command asked for
    that (``nohup`` ignores SIGHUP so that a run outlives its terminal; a shell starts a
    background job with SIGINT ignored), as Python itself leaves an ignored SIGINT alone.
    """
    pairs = (
        list(signals.items())
        if isinstance(signals, Mapping)
        else [
            (n, handler)
            for n in (getattr(signal, name, None) for name in signals)
            if n and signal.getsignal(n) is not signal.SIG_IGN
        ]
    )
    previous: dict[int, Any] = {}
    for number, given in pairs:
        try:
            previous[number] = signal.signal(number, given)
        except ValueError:  # not the main thread: leave the signals alone
            break
    return previous


def _stop_on_signals() -> Callable[[], None]:
    """Make SIGTERM and SIGHUP stop a run as SIGINT does; the returned function undoes it."""

    closing = False

    def stop(signum: int, frame: object) -> None:
        if not closing:  # once the command is done, a late signal changes nothing
            raise Stopped(signum)

    previous = _handle(("SIGTERM", "SIGHUP"), stop)

    def restore() -> None:
        nonlocal closing
        closing = True
        _handle(previous)

    return restore
