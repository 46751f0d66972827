"""What every command shares: exit statuses, the errors that end a command, and how
an adapter's or a user's text is shown."""

from __future__ import annotations

import argparse
import contextlib
import errno
import io
import os
import shlex
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kvconform.files import refuse_replacing
from kvconform.harness import manifest
from kvconform.rendering import clip_middle
from kvconform.reports.untrusted import one_line, visible

# Imported where they are used, so that a command pays only for what it needs:
# kvconform.reports (reports; compare), kvconform.harness.expectations (and with
# it PyYAML; --expectations), kvconform.differential and Hypothesis (--generated),
# numpy (the reference adapter, in process only), jsonschema and PyYAML (only
# when the suite is loaded rather than read from the cache).

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ADAPTER, EXIT_INTERNAL = 0, 1, 2, 3, 4


EXIT_NOTHING_JUDGED = 5


EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """A bad argument or an unusable suite file: exit status 2, one clear line."""


class AdapterStartFailed(Exception):
    """The adapter could not be started: exit status 3."""


@dataclass(frozen=True)
class ConsoleLost:
    """Standard output or standard error took no more text (a full disk, ``/dev/full``,
    an I/O error). The command goes on, every other output is written, and it ends with
    exit status 2, as when a report cannot be written after the run. A stream closed
    when the command started (``>&-``) is no such loss: it takes nothing, as ``print``
    takes nothing then; nor is a reader that went away (``| head``), which ends the
    command quietly."""

    stream: str  # "standard output" or "standard error"
    reason: str  # the system's words for the failure

    @classmethod
    def of(cls, stream: str, exc: OSError) -> ConsoleLost:
        return cls(stream, os.strerror(exc.errno) if exc.errno else str(exc))

    def message(self) -> str:
        return f"{self.stream}: cannot be written ({self.reason})"


class Unresponsive(Exception):
    """The adapter was given up (it timed out program after program): exit status 3."""


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP: stop as SIGINT does (a KeyboardInterrupt, so that everything
    that lets an interrupt through, the in-process driver included, lets it through)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _integrity(args: argparse.Namespace, err: TextIO) -> manifest.Integrity:
    """The manifest check every command that reads the suite runs first."""
    integrity = manifest.check()
    if not integrity.intact:
        if not args.allow_modified:
            raise UsageError(
                f"the installed suite differs from its manifest ({integrity.problems()}); "
                "reinstall kvconform, or pass --allow-modified to use it anyway"
            )
        err.write(f"kvconform: warning: MODIFIED SUITE ({integrity.problems()})\n")
    return integrity


def _adapter_argv(command: str) -> list[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"--adapter-cmd cannot be split like a shell would: {exc}") from None
    if not argv:
        raise UsageError("--adapter-cmd is empty")
    return argv


def _probe(check: Callable[[], bool], what: str, path: Path) -> bool:
    """``check()`` on ``path``; a path the system cannot even look up (a name too long
    for the file system, a loop of links) is a usage error naming the option."""
    try:
        return check()
    except OSError as exc:
        raise UsageError(f"{what}: {path}: {exc.strerror or exc}") from None


#: The folders this command has created for its outputs, outermost first: a command
#: refused as a usage error removes those still empty (:func:`remove_made_folders`), so
#: that a refusal leaves nothing behind, however late it comes.
_MADE: list[Path] = []


def _writable_dir(path: Path, what: str, *, create: bool = True) -> None:
    if _probe(path.exists, what, path) and not _probe(path.is_dir, what, path):
        raise UsageError(f"{what}: {path} exists and is not a directory")
    if create:
        missing = [p for p in (path, *path.parents) if not os.path.lexists(p)]
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{what}: cannot create {path}: {exc.strerror}") from None
        finally:  # the outer folders made before a failure go too
            _MADE.extend(p for p in reversed(missing) if os.path.isdir(p))
    if not _probe(path.is_dir, what, path):
        raise UsageError(f"{what}: the folder {path} does not exist")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{what}: the folder {path} is not writable")


def _writable_file(path: Path, what: str) -> None:
    """``path`` can take an output: not a directory, nothing there it must not replace,
    in a folder that exists and can be written (checked before any case runs)."""
    if _probe(path.is_dir, what, path):
        raise UsageError(f"{what}: {path} is a directory")
    try:
        refuse_replacing(path)
    except OSError as exc:
        raise UsageError(f"{what}: {exc}") from None
    _writable_dir(path.parent, what, create=False)


def remove_made_folders() -> None:
    """Remove the folders this command created that are still empty, innermost first."""
    for path in reversed(_MADE):
        with contextlib.suppress(OSError):
            path.rmdir()  # only an empty folder: anything written into it stays
    _MADE.clear()


def keep_made_folders() -> None:
    """The command is over: the folders it created are the user's now."""
    _MADE.clear()


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except (OSError, RuntimeError):  # a link loop (RuntimeError before Python 3.13) is no
        return False  # file at all: reading or writing it will say so


def _unexpected(exc: BaseException, ran: str = "") -> str:
    """An exception nothing else handled, in words: a limit of the machine (out of memory,
    no file descriptor left), which is no bug, or an internal error of kvconform, to be
    reported; either way exit status 4. ``ran``: how far the run got, when one did."""
    frames = traceback.extract_tb(exc.__traceback__)
    at = f"at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "at start"
    what = f"{type(exc).__name__}: {exc}"
    limits = (errno.ENOMEM, errno.EMFILE, errno.ENFILE)
    if isinstance(exc, MemoryError) or (isinstance(exc, OSError) and exc.errno in limits):
        return f"stopped by a limit of the machine{' ' + ran if ran else ''}: {what} ({at})"
    return f"internal error{' ' + ran if ran else ''}: {what} ({at}; please report it)"


def _said(what: object) -> str:
    """An error's text as one console line: it may quote a file, a path or an adapter
    (untrusted, of any size), so it is clipped in its middle (what is wrong is said at
    its end) and its line breaks escaped."""
    return one_line(clip_middle(str(what), 2000))


class _Visible(io.TextIOBase):
    """A console stream on which an adapter's words cannot act (spec/security.md).

    Everything written is made visible (:func:`kvconform.reports.untrusted.visible`):
    control sequences and lone surrogates appear as escapes. The one control
    character the command itself uses, a carriage return that starts a progress
    update, is kept.
    """

    def __init__(self, stream: TextIO | None, name: str) -> None:
        self._stream = stream  # None: closed when the command started, takes nothing
        self.name = name  # "standard output" or "standard error"
        self.lost: ConsoleLost | None = None  # the first failure; nothing is written after

    def write(self, text: str) -> int:
        shown = "\r" + visible(text[1:]) if text.startswith("\r") else visible(text)
        self._attempt(lambda stream: stream.write(shown))
        return len(text)

    def flush(self) -> None:
        self._attempt(lambda stream: stream.flush())

    def _attempt(self, action: Callable[[TextIO], object]) -> None:
        """``action`` on the stream, unless it is closed or lost; a failure is kept as the
        loss, and nothing is written after it. A reader that went away is not a loss."""
        if self._stream is None or self.lost:
            return
        try:
            action(self._stream)
        except BrokenPipeError:
            raise  # the reader went away: the command ends quietly (kvconform.cli.main)
        except OSError as exc:
            self.lost = ConsoleLost.of(self.name, exc)

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    def writable(self) -> bool:
        return True


def _silence(stream: TextIO) -> None:
    """Point stdout at /dev/null so that flushing it at exit cannot raise again."""
    if stream is not sys.stdout and not isinstance(stream, _Visible):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


#: Set by :func:`console`: this process runs one command and exits, so what it loads
#: can be frozen out of the cycle collector's sight (not when ``main`` is called in a
#: longer-lived process, such as a test session).
_ONE_SHOT = False


def one_shot() -> bool:
    """Whether this process runs one command and exits (:func:`kvconform.cli.console`)."""
    return _ONE_SHOT


def run_one_shot() -> None:
    """Say that this process runs one command and exits."""
    global _ONE_SHOT
    _ONE_SHOT = True
