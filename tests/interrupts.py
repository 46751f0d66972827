"""The signals a terminal delivers, whatever the shell or ``nohup`` that started the tests."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


def _note_nothing(signum: int, frame: object) -> None:
    """A handler that does nothing: the signal is as good as ignored in this process."""


#: The signals a person sends to stop a command, and what this process handles each with
#: while a program starts (a signal handled here is at its default in a program started).
_STOP_SIGNALS = (
    ("SIGINT", signal.default_int_handler),
    ("SIGTERM", _note_nothing),
    ("SIGHUP", _note_nothing),
)


@contextlib.contextmanager
def stop_signals_live() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP at their default in the processes started inside, as at
    a terminal.

    A shell starts a background job (``python -m pytest &``) with SIGINT ignored, and
    ``nohup`` starts its command with SIGHUP ignored (a person or a CI runner may start
    the tests either way); a process started with a signal ignored keeps it ignored, and
    the command under test rightly keeps ignoring it, as it should under ``nohup``. The
    tests that send these signals stand for a command run at a terminal, so what they
    start must begin with each at its default: each one ignored here is handled here
    while they start (SIGINT as Python handles it, the others by doing nothing), and one
    that is not ignored is left alone. Under ``nohup``, the SIGHUP test once waited 60 s
    for a command that rightly ignored it, and failed.
    """
    previous = {}
    for name, handler in _STOP_SIGNALS:
        number = getattr(signal, name, None)
        if number is not None and signal.getsignal(number) is signal.SIG_IGN:
            previous[number] = signal.signal(number, handler)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def ignoring(signum: int) -> Iterator[None]:
    """``signum`` ignored in this process inside, and so in every process started inside,
    as ``nohup`` leaves SIGHUP for the command it starts."""
    previous = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signum, previous)
