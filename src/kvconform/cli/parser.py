"""The argument parser of every command, and the argument types it checks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO, cast

import kvconform
from kvconform import limits
from kvconform.adapters import DEFAULT_ADAPTER
from kvconform.cli.common import UsageError, _Visible
from kvconform.harness import manifest
from kvconform.rendering import clip
from kvconform.values import CLASSES

if TYPE_CHECKING:
    from _typeshed import SupportsWrite

#: The longest per-request timeout accepted (seconds).
MAX_TIMEOUT = limits.MAX_TIMEOUT


def _say(stream: TextIO | None, text: str) -> None:
    """What the parser prints itself, before any command runs: on a stream that takes no
    more, a usage error (exit status 2); on a closed one, nothing."""
    shown = _Visible(stream, "standard output")
    shown.write(text)
    shown.flush()
    if shown.lost:
        raise UsageError(shown.lost.message())


def _path(text: str) -> Path:
    """A path argument, never empty: ``--report-dir "$UNSET"`` would name the current
    folder, and ``Path("")`` is ``.``."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path (an unset variable?)")
    return Path(text)


class _Parser(argparse.ArgumentParser):
    #: Whether this parser (not a command's own parser within it) refused the arguments.
    _refused = False

    def error(self, message: str) -> NoReturn:
        self._refused = True
        raise UsageError(f"{message} (see '{self.prog} --help')")

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        """As argparse's, except that a command missing its argument and given an option
        it does not have says so: ``kvconform explain -x`` names ``-x``, where argparse
        reports only the missing ``id``."""
        self._refused = False
        try:
            return super().parse_known_args(args, namespace)
        except UsageError:
            if not self._refused:  # a command's parser refused them, and said why
                raise
            given = list(sys.argv[1:] if args is None else args)
            words = given[: given.index("--")] if "--" in given else given
            unknown = [
                word
                for word in words
                if word.startswith("-")
                and word != "-"
                and word.split("=", 1)[0] not in self._option_string_actions
                and not word.lstrip("-").replace(".", "", 1).isdigit()  # a negative number
            ]
            if unknown:
                self.error(f"unrecognized arguments: {' '.join(unknown)}")
            raise

    def print_help(self, file: SupportsWrite[str] | None = None) -> None:
        """``--help`` as every other console output: a closed standard output takes
        nothing, one that cannot be written is an error (argparse would drop it silently)."""
        _say(cast("TextIO | None", sys.stdout if file is None else file), self.format_help())


class _Version(argparse.Action):
    """``--version``: the package and suite versions, and the digest of the suite's files."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        integrity = manifest.check()
        state = "as shipped" if integrity.intact else f"MODIFIED: {integrity.problems()}"
        _say(
            sys.stdout,
            f"kvconform {kvconform.__version__} (suite {kvconform.SUITE_VERSION}, "
            f"digest {integrity.digest}, {state})\n",
        )
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="kvconform", description="kvconform conformance suite")
    parser.add_argument(
        "--version",
        action=_Version,
        help="print the versions and the suite digest (to compare with the README's list)",
    )
    commands = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    commands.required = True

    run = commands.add_parser(
        "run",
        help="run the suite against an implementation",
        description="Run the suite against an implementation.",
    )
    who = run.add_mutually_exclusive_group()
    who.add_argument(
        "--adapter",
        metavar="MODULE:FACTORY",
        help="a Python adapter, imported with the current folder first on the module path, "
        "where the folder then stays, last "
        f"(default: the reference, {DEFAULT_ADAPTER}, imported without it)",
    )
    who.add_argument(
        "--adapter-cmd",
        metavar="COMMAND",
        help="an adapter process speaking the stdio protocol (spec/protocol.md); "
        "split like a shell would, run without a shell",
    )
    run.add_argument(
        "--timeout",
        type=_timeout,
        default=10.0,
        metavar="SECONDS",
        help="per-request timeout for --adapter-cmd, in seconds: above 0, at most "
        f"{MAX_TIMEOUT:g} (default 10)",
    )
    run.add_argument(
        "--shutdown-grace",
        type=_grace,
        default=limits.SHUTDOWN_GRACE,
        metavar="SECONDS",
        help="--adapter-cmd: seconds, in all, the adapter has to answer shutdown and exit "
        f"at the end of the run before its process group is killed (default "
        f"{limits.SHUTDOWN_GRACE:g}, 0 kills it at once; after a signal it is killed at once)",
    )
    _add_selection(run)
    out = run.add_argument_group("reports")
    out.add_argument("--json", type=_path, metavar="FILE", help="JSON report (kvconform-report/1)")
    out.add_argument("--junit", type=_path, metavar="FILE", help="JUnit XML")
    out.add_argument(
        "--markdown",
        type=_path,
        metavar="FILE",
        help="Markdown summary, replacing FILE (e.g. $GITHUB_STEP_SUMMARY, which it replaces "
        "too: to add to a job summary, write a file and append it)",
    )
    out.add_argument("--html", type=_path, metavar="FILE", help="self-contained HTML report")
    out.add_argument(
        "--trace",
        type=_path,
        metavar="FILE",
        help=(
            "record every request and response of the run, numbered beside the step that "
            "sent it (the harness's own requests -- handshake, shutdown, reset -- named as "
            "such), into FILE; failing cases carry their trace in every report"
        ),
    )
    out.add_argument(
        "--report-dir",
        type=_path,
        metavar="DIR",
        help="write report.json, report.xml, summary.md and report.html into DIR (a report "
        "also given by its own option, --json FILE say, is written to FILE instead)",
    )
    gate = run.add_argument_group("gating")
    gate.add_argument(
        "--expectations",
        type=_path,
        metavar="FILE",
        help="known failures; fail on anything else and on listed cases that pass",
    )
    gate.add_argument(
        "--write-expectations",
        type=_path,
        metavar="FILE",
        help="write the current failures as a starting expectations file",
    )
    generated = run.add_argument_group(
        "generated checks (need Hypothesis: the 'generated' extra, pip install '.[generated]' "
        "in a checkout)"
    )
    generated.add_argument(
        "--generated",
        type=_generated_count,
        metavar="N",
        help="also run the generated differential checks, N random programs "
        "per property (1 to 1000000), against the reference (cases generated.*)",
    )
    generated.add_argument(
        "--seed",
        type=_seed,
        metavar="S",
        help="seed of the generated checks: a number, or 'random' for a fresh one (default: "
        "the suite version's fixed seed, so every run generates the same programs; printed)",
    )
    generated.add_argument(
        "--export-counterexamples",
        type=_path,
        metavar="DIR",
        help="write each shrunk counterexample as a scenario file into DIR",
    )
    run.add_argument(
        "--allow-modified",
        action="store_true",
        help="run even if suite files differ from the shipped manifest",
    )
    run.add_argument(
        "--max-failures-shown",
        type=_count,
        default=10,
        metavar="N",
        help="failures printed in full at the end (default 10)",
    )
    run.add_argument(
        "--protocol",
        type=int,
        choices=(1, 2),
        default=None,
        help="with --adapter-cmd: speak only this protocol version (default: offer 2, the "
        "newest, and fall back to 1 for an adapter that refuses it, PROTO-32)",
    )
    run.add_argument(
        "--strict-messages",
        action="store_true",
        help="count an error message that does not name its field or values (ERR-13) as a "
        "failure, here and in the expectations gate; by default it is advice, shown apart "
        "and not part of the verdict (CONF-12)",
    )
    run.add_argument("--quiet", action="store_true", help="no progress display")
    _add_no_cache(run)

    listing = commands.add_parser(
        "list",
        help="list the cases a selection picks",
        description="List the cases a selection picks.",
    )
    _add_selection(listing)
    _add_no_cache(listing)
    listing.add_argument(
        "--allow-modified",
        action="store_true",
        help="list even if suite files differ from the shipped manifest",
    )

    explaining = commands.add_parser(
        "explain",
        help="explain a case or a requirement: its text, steps, basis and how to run it",
        description=(
            "Explain a case id (the scenario as written, each operation as sent and what it "
            "expects, its requirements' text and rationale, its basis, the command that runs "
            "it) or a requirement id (its text and rationale, and every case and vector that "
            "checks it)."
        ),
    )
    explaining.add_argument("id", help="a case id (kvconform list shows them) or a requirement id")
    _add_no_cache(explaining)
    explaining.add_argument(
        "--allow-modified",
        action="store_true",
        help="explain even if suite files differ from the shipped manifest",
    )

    compare = commands.add_parser(
        "compare",
        help="one HTML matrix from several JSON reports",
        description="Render several JSON reports as one HTML matrix.",
    )
    compare.add_argument("reports", nargs="+", type=_path, metavar="REPORT.json")
    compare.add_argument("-o", "--output", type=_path, required=True, metavar="FILE.html")

    new_adapter = commands.add_parser(
        "new-adapter",
        help="write a runnable stdio adapter skeleton to start an implementation from",
        description="Write a runnable stdio adapter skeleton into DIR: it completes the "
        "handshake, declares the classes given (and the classes they require), and answers "
        "every operation of them with the failure 'not implemented: <op>' for you to "
        "replace. DIR must be new or empty.",
    )
    new_adapter.add_argument(
        "--lang", required=True, choices=("python", "rust", "javascript"), help="its language"
    )
    new_adapter.add_argument(
        "--classes",
        metavar="CLASS,...",
        help=f"the classes to claim, comma-separated: {', '.join(CLASSES)} (default: hash); "
        "a class another requires is added and said so",
    )
    new_adapter.add_argument("directory", type=_named_directory, metavar="DIR")
    return parser


def _add_no_cache(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="parse, validate and compile every suite file now, neither reading nor writing "
        "the cache of the compiled suite (kept in $XDG_CACHE_HOME/kvconform, default "
        "~/.cache/kvconform, keyed by the files' digest and the code, the 8 entries "
        "used last kept; also KVCONFORM_NO_CACHE=1)",
    )


def _add_selection(parser: argparse.ArgumentParser) -> None:
    sel = parser.add_argument_group("selection (repeatable; a case must match every kind given)")
    sel.add_argument(
        "--area",
        action="append",
        default=[],
        metavar="AREA",
        help="e.g. alloc, verify, vectors (a prefix of the case's area)",
    )
    sel.add_argument(
        "--class",
        dest="classes",
        action="append",
        default=[],
        metavar="CLASS",
        help=", ".join(CLASSES[:-1]) + " or " + CLASSES[-1],
    )
    sel.add_argument(
        "--requirement",
        action="append",
        default=[],
        metavar="ID",
        help="a requirement id (PLAN-6) or group (PLAN)",
    )
    sel.add_argument(
        "--id",
        dest="ids",
        action="append",
        default=[],
        metavar="PATTERN",
        help="a case id or glob pattern (plan.over-keying.*)",
    )


def _timeout(text: str) -> float:
    """Seconds: a finite number above 0, at most :data:`MAX_TIMEOUT`, in ASCII."""
    try:
        return limits.seconds(text, 0, MAX_TIMEOUT)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _grace(text: str) -> float:
    """Seconds: a finite number from 0 to :data:`~kvconform.limits.MAX_SHUTDOWN_GRACE`."""
    try:
        return limits.seconds(text, 0, limits.MAX_SHUTDOWN_GRACE, low_allowed=True)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _named_directory(text: str) -> Path:
    """A folder named on the command line: an empty name (an unset variable, say) is not
    the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder name, got an empty one")
    return Path(text)


def _whole(text: str, what: str = "a whole number") -> int:
    """``text`` as a whole number written in ASCII digits only: ``int`` alone would also
    take spaces, a sign, underscores and other scripts' digits."""
    if not (text.isascii() and text.isdigit()) or len(text) > 30:
        raise argparse.ArgumentTypeError(f"expected {what}, got {clip(ascii(text), 60)}")
    return int(text)


def _count(text: str) -> int:
    return _whole(text)


#: The most programs per property ``--generated`` runs (a typo of a few more digits
#: would otherwise run for days).
MAX_GENERATED = 1_000_000


def _generated_count(text: str) -> int:
    value = _whole(text)
    if not 1 <= value <= MAX_GENERATED:
        raise argparse.ArgumentTypeError(f"expected 1 .. {MAX_GENERATED}, got {value}")
    return value


def _seed(text: str) -> int | str:
    """``--seed``: a whole number from 0 to 2^32-1, or ``random``."""
    if text == "random":
        return text
    value = _whole(text, "a whole number or 'random'")
    if not 0 <= value < 1 << 32:
        raise argparse.ArgumentTypeError(f"expected 0 .. 4294967295, got {value}")
    return value
