"""A Ctrl-C as a terminal delivers it, whatever the shell that started the tests."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


@contextlib.contextmanager
def ctrl_c_live() -> Iterator[None]:
    """SIGINT at its default in the processes started inside, as at a terminal.

    A shell starts a background job (``python -m pytest &``, ``nohup``) with SIGINT
    ignored, and a process started with a signal ignored keeps it ignored: Python then
    raises no KeyboardInterrupt, and the command under test rightly ignores a Ctrl-C,
    as a background job should. The tests that send a Ctrl-C stand for a command run
    at a terminal, so what they start must begin with SIGINT at its default. A signal
    this process handles is at its default in a program it starts, so SIGINT is handled
    here while they start; a disposition that is not "ignored" is left alone.
    """
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def ignoring(signum: int) -> Iterator[None]:
    """``signum`` ignored in this process inside, and so in every process started inside,
    as ``nohup`` leaves SIGHUP for the command it starts."""
    previous = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signum, previous)
