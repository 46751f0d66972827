"""The ``kvconform`` command.

    kvconform run                      # the whole suite against the built-in reference
    kvconform run --adapter-cmd "./my-adapter --stdio" --json report.json
    kvconform compare a.json b.json -o matrix.html
    kvconform list --requirement PLAN-6

The compiled suite is cached in ``$XDG_CACHE_HOME/kvconform`` (``~/.cache/kvconform``),
keyed by the digest of the suite's files and the code, the 8 entries used last kept
(kvconform.harness.cache);
``--no-cache`` or ``KVCONFORM_NO_CACHE=1`` loads every file afresh.

Exit statuses (spec/security.md): 0 conformant for the declared classes (or,
with an expectations file, no unexpected failure and no stale entry); 1 failures;
2 a usage or suite error (a bad argument, an unwritable output, standard output
included, a malformed or modified suite file, a current folder that no longer exists;
a folder made for the outputs is removed again if still empty);
3 the adapter could not start, or stopped answering (the cases it never ran are
listed "not run"); 4 an internal error of kvconform
(a bug), or a limit of the machine (out of memory, no file descriptor left): the
reports so far are written, marked incomplete; 5 nothing judged
(every selected case is not applicable to what the adapter declares); 130 interrupted
(SIGINT, SIGTERM or SIGHUP: the adapter's process group is stopped and the
reports so far are written, marked interrupted; one already ignored when the command
starts, as SIGHUP under ``nohup``, stays ignored).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn, TextIO, cast

from kvconform.cli.common import (
    EXIT_ADAPTER,
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_NOTHING_JUDGED,
    EXIT_OK,
    EXIT_USAGE,
    AdapterStartFailed,
    Stopped,
    UsageError,
    _said,
    _silence,
    _unexpected,
    _Visible,
    keep_made_folders,
    remove_made_folders,
    run_one_shot,
)
from kvconform.cli.compare import cmd_compare
from kvconform.cli.explain import cmd_explain
from kvconform.cli.listing import cmd_list
from kvconform.cli.new_adapter import cmd_new_adapter
from kvconform.cli.parser import _parser
from kvconform.cli.run import cmd_run
from kvconform.cli.signals import _stop_on_signals

#: The most lines quoted after "the adapter could not start": the harness keeps the last
#: 20 lines of an adapter's standard error (protocol.channel.STDERR_TAIL_LINES) and a
#: line saying how many it quotes; more would come from a text no harness wrote.
_QUOTED_LINES = 64


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    console = _Visible(out or sys.stdout, "standard output")
    errors = _Visible(err or sys.stderr, "standard error")
    status = _command(argv, cast(TextIO, console), cast(TextIO, errors))
    with contextlib.suppress(BrokenPipeError):
        console.flush()
    if console.lost:  # said on standard error, if that one takes it
        errors.write(f"kvconform: error: {_said(console.lost.message())}\n")
    with contextlib.suppress(BrokenPipeError):
        errors.flush()  # lost there, it cannot be told: the status stands
    if console.lost and status in (EXIT_OK, EXIT_FAILED, EXIT_NOTHING_JUDGED):
        return EXIT_USAGE  # the verdict, or the listing, never reached its reader
    return status


def _command(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    """The command, its errors turned into their exit statuses (see the module's text)."""
    restore = _stop_on_signals()
    try:
        args = _parser().parse_args(argv)
        if args.command in ("run", "compare", "new-adapter"):  # the commands given paths
            _current_folder_exists()
        if args.command == "run":
            return cmd_run(args, out, err)
        if args.command == "list":
            return cmd_list(args, out, err)
        if args.command == "new-adapter":
            return cmd_new_adapter(args, out)
        if args.command == "explain":
            return cmd_explain(args, out, err)
        return cmd_compare(args, err)
    except UsageError as exc:
        remove_made_folders()  # a refused command leaves nothing behind
        err.write(f"kvconform: error: {_said(exc)}\n")
        return EXIT_USAGE
    except AdapterStartFailed as exc:
        # one line saying why, then the adapter's last standard error lines as the harness
        # quoted them (PROTO-13, protocol.md shows the form), each on a line of its own
        why, *quoted = str(exc).split("\n")
        err.write(f"kvconform: the adapter could not start: {_said(why)}\n")
        err.writelines(f"{_said(line)}\n" for line in quoted[:_QUOTED_LINES])
        return EXIT_ADAPTER
    except (KeyboardInterrupt, Stopped):
        err.write("kvconform: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (kvconform list | head): nothing more to say to it.
        _silence(out)
        return EXIT_OK
    except Exception as exc:
        err.write(f"kvconform: {_said(_unexpected(exc))}\n")
        return EXIT_INTERNAL
    finally:
        keep_made_folders()
        restore()


def _current_folder_exists() -> None:
    """The folder the command was started in is still there: relative paths (outputs,
    ``--adapter`` modules, which are imported with it first on the path) mean something."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise UsageError(
            "the current folder no longer exists (removed after this shell entered it): "
            "run kvconform from a folder that does"
        ) from None


def console() -> NoReturn:
    """The ``kvconform`` command: :func:`main`, then exit without tearing the heap down.

    Everything the command writes is written, closed and flushed by then, and the
    adapter process is already stopped; what is left is freeing the loaded suite
    object by object, which the operating system does at once. The loaded suite is
    also frozen out of the cycle collector's sight for the run (bench/README.md).
    """
    run_one_shot()
    try:
        status = main()
    except KeyboardInterrupt:  # a signal in the instant between main's answer and its end
        status = EXIT_INTERRUPTED
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stderr.write("kvconform: interrupted\n")
    except SystemExit as exc:  # --help, --version: argparse's own exit
        status = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    for stream in (sys.stdout, sys.stderr):  # main flushed both: this is what came after
        if stream is None:  # closed when the command started: it took nothing
            continue
        try:
            stream.flush()
        except BrokenPipeError:
            pass  # the reader went away: nothing more to say to it
        except (OSError, ValueError):
            if stream is sys.stdout and status in (EXIT_OK, EXIT_FAILED, EXIT_NOTHING_JUDGED):
                status = EXIT_USAGE  # the verdict, or the listing, never reached its reader
    os._exit(status)


# What callers and tests reach as kvconform.cli.NAME.
__all__ = [
    "EXIT_ADAPTER",
    "EXIT_FAILED",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_NOTHING_JUDGED",
    "EXIT_OK",
    "EXIT_USAGE",
    "UsageError",
    "_parser",
    "cmd_run",
    "console",
    "main",
]
