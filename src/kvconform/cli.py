"""The ``kvconform`` command.

    kvconform run                      # the whole suite against the built-in reference
    kvconform run --adapter-cmd "./my-adapter --stdio" --json report.json
    kvconform compare a.json b.json -o matrix.html
    kvconform list --requirement PLAN-6

The compiled suite is cached in ``$XDG_CACHE_HOME/kvconform`` (``~/.cache/kvconform``),
keyed by the digest of the suite's files and the code (kvconform.harness.cache);
``--no-cache`` or ``KVCONFORM_NO_CACHE=1`` loads every file afresh.

Exit statuses (spec/security.md): 0 conformant for the declared classes (or,
with an expectations file, no unexpected failure and no stale entry); 1 failures;
2 a usage or suite error (a bad argument, an unwritable output, a malformed or
modified suite file); 3 the adapter could not start, or stopped answering (the
cases it never ran are listed "not run"); 4 an internal error of kvconform
(a bug: the reports so far are written, marked incomplete); 5 nothing judged
(every selected case is not applicable to what the adapter declares); 130 interrupted
(SIGINT, SIGTERM or SIGHUP: the adapter's process group is stopped and the
reports so far are written, marked interrupted).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fnmatch
import gc
import io
import json
import os
import shlex
import signal
import sys
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TextIO, cast

import kvconform
from kvconform import limits
from kvconform.adapters import (
    DEFAULT_ADAPTER,
    AdapterLoadError,
    AdapterSpecError,
    load_adapter,
)
from kvconform.files import refuse_replacing
from kvconform.harness import manifest, suite
from kvconform.harness.runner import CaseResult, render_advice, run_case, step_labels
from kvconform.harness.scenario import Case
from kvconform.harness.yamlsource import SourceError
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.rendering import clip
from kvconform.reports.untrusted import one_line, visible
from kvconform.values import CLASSES, OPTIONS, AdapterInfo

if TYPE_CHECKING:  # imported where used: it loads PyYAML
    from kvconform.harness.expectations import Expectations

# Imported where they are used, so that a command pays only for what it needs:
# kvconform.reports (reports; compare), kvconform.harness.expectations (and with
# it PyYAML; --expectations), kvconform.differential and Hypothesis (--generated),
# numpy (the reference adapter, in process only), jsonschema and PyYAML (only
# when the suite is loaded rather than read from the cache).

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ADAPTER, EXIT_INTERNAL = 0, 1, 2, 3, 4
EXIT_NOTHING_JUDGED = 5
EXIT_INTERRUPTED = 130
#: The longest per-request timeout accepted (seconds).
MAX_TIMEOUT = limits.MAX_TIMEOUT


class UsageError(Exception):
    """A bad argument or an unusable suite file: exit status 2, one clear line."""


class AdapterStartFailed(Exception):
    """The adapter could not be started: exit status 3."""


class Unresponsive(Exception):
    """The adapter was given up (it timed out program after program): exit status 3."""


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP: stop as SIGINT does (a KeyboardInterrupt, so that everything
    that lets an interrupt through, the in-process driver included, lets it through)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


class _Version(argparse.Action):
    """``--version``: the package and suite versions, and the digest of the suite's files."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> NoReturn:
        integrity = manifest.check()
        state = "as shipped" if integrity.intact else f"MODIFIED: {integrity.problems()}"
        sys.stdout.write(
            f"kvconform {kvconform.__version__} (suite {kvconform.SUITE_VERSION}, "
            f"digest {integrity.digest}, {state})\n"
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
        help="a Python adapter, imported with the current folder first on the module path "
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
        help="per-request timeout for --adapter-cmd (default 10)",
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
    out.add_argument("--json", type=Path, metavar="FILE", help="JSON report (kvconform-report/1)")
    out.add_argument("--junit", type=Path, metavar="FILE", help="JUnit XML")
    out.add_argument(
        "--markdown", type=Path, metavar="FILE", help="Markdown summary (e.g. $GITHUB_STEP_SUMMARY)"
    )
    out.add_argument("--html", type=Path, metavar="FILE", help="self-contained HTML report")
    out.add_argument(
        "--trace",
        type=Path,
        metavar="FILE",
        help=(
            "record every request and response of the run, numbered beside the step that "
            "sent it, into FILE; failing cases carry their trace in every report"
        ),
    )
    out.add_argument(
        "--report-dir",
        type=Path,
        metavar="DIR",
        help="write report.json, report.xml, summary.md and report.html into DIR (a report "
        "also given by its own option, --json FILE say, is written to FILE instead)",
    )
    gate = run.add_argument_group("gating")
    gate.add_argument(
        "--expectations",
        type=Path,
        metavar="FILE",
        help="known failures; fail on anything else and on listed cases that pass",
    )
    gate.add_argument(
        "--write-expectations",
        type=Path,
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
        type=Path,
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
    compare.add_argument("reports", nargs="+", type=Path, metavar="REPORT.json")
    compare.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.html")

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
        help="the classes to claim, comma-separated: hash, identity, plan, signature, verify, "
        "plan_validity (default: hash); a class another requires is added and said so",
    )
    new_adapter.add_argument("directory", type=_named_directory, metavar="DIR")
    return parser


def _add_no_cache(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="parse, validate and compile every suite file now, neither reading nor writing "
        "the cache of the compiled suite (kept in $XDG_CACHE_HOME/kvconform, default "
        "~/.cache/kvconform, keyed by the files' digest and the code; also "
        "KVCONFORM_NO_CACHE=1)",
    )


def _cases(args: argparse.Namespace, integrity: manifest.Integrity) -> tuple[Case, ...]:
    """The suite's cases: from the cache when allowed and current, else loaded now.

    The cache is looked up by the digest the manifest check has just computed (the
    files are not hashed twice; see kvconform.harness.cache for why that is safe).
    """
    if args.no_cache:
        return suite.load_all_cases()
    return suite.all_cases(integrity.digest or None)


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
    """Seconds: a finite number above 0, at most :data:`MAX_TIMEOUT`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= MAX_TIMEOUT:  # also false for nan
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds above 0 and at most {MAX_TIMEOUT:g}, got {text!r}"
        )
    return value


def _grace(text: str) -> float:
    """Seconds: a finite number from 0 to :data:`~kvconform.limits.MAX_SHUTDOWN_GRACE`."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value <= limits.MAX_SHUTDOWN_GRACE:  # also false for nan
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from 0 to {limits.MAX_SHUTDOWN_GRACE:g}, got {text!r}"
        )
    return value


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


def select(cases: Sequence[Case], args: argparse.Namespace) -> list[Case]:
    """The cases matching every kind of selector given; an unknown selector is an error."""
    for cls in args.classes:
        if cls not in CLASSES:
            raise UsageError(f"--class {cls!r}: not one of {', '.join(CLASSES)}")
    reqs = suite.requirements()
    groups = {r.rsplit("-", 1)[0] for r in reqs}
    for req in args.requirement:
        if req not in reqs and req not in groups:
            raise UsageError(f"--requirement {req!r}: no such requirement or group in spec/")

    def wanted(case: Case) -> bool:
        checks: list[Callable[[], bool]] = []
        if args.area:
            checks.append(
                lambda: any(
                    case.area == a or case.area.startswith(a.rstrip("/") + "/") for a in args.area
                )
            )
        if args.classes:
            checks.append(lambda: case.cls in args.classes)
        if args.requirement:
            checks.append(
                lambda: any(
                    r in args.requirement or r.rsplit("-", 1)[0] in args.requirement
                    for r in case.requires
                )
            )
        if args.ids:
            checks.append(lambda: any(fnmatch.fnmatchcase(case.id, p) for p in args.ids))
        return all(check() for check in checks)

    chosen = [c for c in cases if wanted(c)]
    if not chosen:
        raise UsageError("the selection matches no case (see 'kvconform list')")
    return chosen


def _driver(args: argparse.Namespace) -> Driver:
    if args.adapter_cmd:
        argv = _adapter_argv(args.adapter_cmd)
        from kvconform.protocol.client import AdapterStartError, StdioDriver

        try:
            return StdioDriver(
                argv,
                timeout=args.timeout,
                shutdown_grace=args.shutdown_grace,
                protocol=args.protocol,
            )
        except AdapterStartError as exc:
            raise AdapterStartFailed(str(exc)) from None
    spec = args.adapter or DEFAULT_ADAPTER
    try:
        return InProcessDriver(load_adapter(spec))
    except AdapterLoadError as exc:  # named right, but not there: as a missing program
        raise AdapterStartFailed(str(exc)) from None
    except AdapterSpecError as exc:  # not 'module:factory' at all: a bad argument
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # its import, factory or describe(); sys.exit() included
        said = one_line(clip(f"{type(exc).__name__}: {exc}", 2000))
        raise AdapterStartFailed(f"adapter {spec!r} failed to start: {said}") from None


class Progress:
    """A counter on a terminal; one line per finished area otherwise."""

    def __init__(self, total: int, stream: TextIO, quiet: bool) -> None:
        self.total, self.stream, self.quiet = total, stream, quiet
        self.tty = stream.isatty()
        self.done = 0
        self.area: str | None = None
        self.area_counts: Counter[str] = Counter()

    def __call__(self, result: CaseResult) -> None:
        self.done += 1
        if self.quiet:
            return
        area = result.case.area
        if self.area is not None and area != self.area:
            self._flush_area()
        self.area = area
        self.area_counts[result.verdict] += 1
        if self.tty:
            failed = self.area_counts["failed"]
            self.stream.write(f"\r[{self.done}/{self.total}] {area:<28} {failed} failed ")
            self.stream.flush()

    def _flush_area(self) -> None:
        c = self.area_counts
        line = (
            f"{self.area:<28} {c['passed']:>4} passed {c['failed']:>3} failed "
            f"{c['not_applicable']:>3} n/a"
        )
        self.stream.write(("\r" if self.tty else "") + line + " " * 8 + "\n")
        self.stream.flush()
        self.area_counts = Counter()

    def finish(self) -> None:
        if not self.quiet and self.area is not None:
            self._flush_area()


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


def _output_paths(args: argparse.Namespace) -> dict[str, Path]:
    targets = {"json": args.json, "junit": args.junit, "markdown": args.markdown, "html": args.html}
    if args.report_dir:
        defaults = {
            "json": "report.json",
            "junit": "report.xml",
            "markdown": "summary.md",
            "html": "report.html",
        }
        for kind, name in defaults.items():
            targets[kind] = targets[kind] or args.report_dir / name
    return {kind: path for kind, path in targets.items() if path is not None}


def _preflight(args: argparse.Namespace) -> None:
    """Refuse, before anything runs, an argument the run would stumble on later."""
    if args.adapter_cmd is not None:
        _adapter_argv(args.adapter_cmd)
    if args.report_dir:
        _writable_dir(args.report_dir, "--report-dir")
    outputs = [(f"the {kind} report", path) for kind, path in _output_paths(args).items()]
    if args.write_expectations:
        outputs.append(("--write-expectations", args.write_expectations))
        if args.expectations and _same_file(args.expectations, args.write_expectations):
            raise UsageError(
                "--write-expectations would overwrite the --expectations file it reads "
                "(and replace every reason with TODO); write to another file"
            )
    if args.trace is not None:
        outputs.append(("--trace", args.trace))
    for index, (what, path) in enumerate(outputs):
        if _probe(path.is_dir, what, path):
            raise UsageError(f"{what}: {path} is a directory")
        try:
            refuse_replacing(path)
        except OSError as exc:
            raise UsageError(f"{what}: {exc}") from None
        _writable_dir(path.parent, what, create=False)
        for other, other_path in outputs[:index]:
            if _same_file(path, other_path):
                raise UsageError(f"{what} and {other} would both be written to {path}")
        if args.expectations and _same_file(path, args.expectations):
            raise UsageError(f"{what} would overwrite the --expectations file it reads ({path})")
    if args.export_counterexamples is not None:
        _writable_dir(args.export_counterexamples, "--export-counterexamples")


#: The most characters of one traced line kept (a line may be 16 MiB; every report
#: carries a failing case's trace).
_TRACE_LINE_LIMIT = 4000


def _with_wire(result: CaseResult, wire: Sequence[tuple[str, bytes]]) -> CaseResult:
    """The case's trace as the exact lines on the wire, each beside the step that sent it.

    Requests and responses pair up in order (a program is sent whole, then read);
    the last pair is the ``reset`` that ends the program. Lines are shown as the
    adapter wrote them, control characters escaped (:mod:`.reports.untrusted`), each
    clipped to :data:`_TRACE_LINE_LIMIT` characters with a note of its length.
    """

    if not wire:
        return result
    sent = [line for direction, line in wire if direction == "send"]
    received = [line for direction, line in wire if direction == "recv"]
    steps = step_labels(result.case)
    lines: list[str] = []
    for index in range(max(len(sent), len(received))):
        label = steps.get(index, "") if index < len(result.case.program) else "(end of program)"
        lines.append(f"{index + 1:>3} {label}")
        for mark, side in ((">", sent), ("<", received)):
            text = side[index].decode("utf-8", "backslashreplace") if index < len(side) else ""
            shown = one_line(clip(text, _TRACE_LINE_LIMIT)) if text else "(nothing)"
            lines.append(f"    {mark} {shown}")
    return dataclasses.replace(result, trace=tuple(lines))


def _write_trace(
    path: Path, results: Sequence[CaseResult], protocol: int | None = None
) -> list[str]:
    """Every traced case, in run order: its verdict, then each exchange (``--trace``).
    ``protocol``: the version spoken over stdio; ``None`` in process, where each
    request is shown in its protocol-1 wire form."""
    spoken = (
        "in process: each request in its protocol-1 wire form"
        if protocol is None
        else f"over stdio, protocol {protocol}, the lines as written"
        + (": every count a decimal string, PROTO-33" if protocol == 2 else "")
    )
    lines = [f"# kvconform trace: > what the harness sent, < what came back ({spoken})", ""]
    for result in results:
        if not result.trace:
            continue
        lines.append(f"{result.case.kind} {result.case.id}: {result.verdict}")
        lines += [f"  {line}" for line in result.trace]
        lines.append("")
    return _write_output("the trace", path, "\n".join(lines))


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


def _writable_dir(path: Path, what: str, *, create: bool = True) -> None:
    if _probe(path.exists, what, path) and not _probe(path.is_dir, what, path):
        raise UsageError(f"{what}: {path} exists and is not a directory")
    if create:
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{what}: cannot create {path}: {exc.strerror}") from None
    if not _probe(path.is_dir, what, path):
        raise UsageError(f"{what}: the folder {path} does not exist")
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{what}: the folder {path} is not writable")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False


def cmd_run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    _preflight(args)
    integrity = manifest.Integrity(kvconform.SUITE_VERSION, "")  # until it is checked
    cases: list[Case] = []
    known = None
    try:  # a signal while the suite loads still leaves no earlier verdict at the reports
        integrity = _integrity(args, err)
        generated = _generated_options(args)
        # The one-shot command: the suite about to be loaded lives as long as the process,
        # so the cycle collector is paused until it is frozen out of its sight below, rather
        # than made to go through it (it would, once, right after the cache is read). A full
        # load (no cache, or a miss) then keeps its garbage until the process exits: about
        # 13 MB more at its peak, and no slower.
        pausing = _ONE_SHOT and gc.isenabled()
        if pausing:
            gc.disable()
        try:
            pool = [*_cases(args, integrity), *(generated.cases if generated else ())]
            cases = select(pool, args)
        except SourceError as exc:
            raise UsageError(str(exc)) from None
        if args.expectations:
            from kvconform.harness import expectations as expectations_mod

            try:
                from kvconform.differential import PROPERTY_IDS

                # a generated property may be listed, run or not (unchecked without --generated)
                listable = (*(c.id for c in pool), *PROPERTY_IDS)
                known = expectations_mod.load(args.expectations, listable)
            except SourceError as exc:
                raise UsageError(str(exc)) from None
        if _ONE_SHOT:
            gc.freeze()  # the loaded suite lives as long as the process: no collection need see it
        if pausing:
            gc.enable()
    except (KeyboardInterrupt, Stopped) as exc:
        _report_no_start(args, cases, integrity, exc, err, known, stage="while the suite loaded")
        raise
    try:
        driver = _driver(args)
    except (AdapterStartFailed, KeyboardInterrupt, Stopped) as exc:
        # No case can run: the reports say so, rather than leave an earlier run's verdict
        # at their paths (README, exit statuses 3 and 130).
        _report_no_start(args, cases, integrity, exc, err, known)
        raise
    if generated is not None and not any(case.kind == "generated" for case in cases):
        err.write("kvconform: --generated: the selection holds none of the generated.* cases\n")
        generated = None
    if generated is not None and not args.quiet:
        err.write(
            f"generated checks: {generated.examples} example(s) per property, "
            f"seed {generated.seed}\n"
        )
    wire: list[tuple[str, bytes]] | None = None
    if args.trace is not None and hasattr(driver, "trace"):  # over stdio: the lines themselves
        wire = []
        driver.trace = lambda direction, line: wire.append((direction, bytes(line)))
    started = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())  # UTC, ISO 8601
    clock = time.perf_counter()
    progress = Progress(len(cases), err, args.quiet)
    results: list[CaseResult] = []
    stopped: BaseException | None = None
    try:
        for case in cases:
            if case.kind == "generated" and generated is not None:
                results.append(generated.run(case, driver, err))
            elif wire is not None:
                wire.clear()
                results.append(
                    _with_wire(
                        run_case(case, driver, trace=True, strict_messages=args.strict_messages),
                        wire,
                    )
                )
            else:
                results.append(
                    run_case(
                        case,
                        driver,
                        trace=args.trace is not None,
                        strict_messages=args.strict_messages,
                    )
                )
            progress(results[-1])
            gave_up = getattr(driver, "given_up", None)
            if gave_up is not None and len(results) < len(cases):
                results += [
                    CaseResult(left, "not_run", reason=f"not run: {gave_up}")
                    for left in cases[len(results) :]
                ]
                raise Unresponsive(gave_up)
    except (KeyboardInterrupt, Stopped, Exception) as exc:
        stopped = exc  # the reports so far are written below, marked incomplete
    finally:
        progress.finish()
        if isinstance(stopped, KeyboardInterrupt | Stopped) and hasattr(driver, "shutdown_grace"):
            driver.shutdown_grace = 0.0  # a supervisor's signal: the adapter's group goes now
        try:
            driver.close()
        except (KeyboardInterrupt, Stopped) as exc:  # a second signal while it shuts down
            stopped = stopped or exc
    incomplete = None if stopped is None else _stop_reason(stopped, len(results), len(cases))
    if incomplete is not None:  # the summary counts the whole selection, run or not
        results += [
            CaseResult(left, "not_run", reason=f"not run: {incomplete}")
            for left in cases[len(results) :]
        ]
    seconds = time.perf_counter() - clock
    from kvconform.reports import record

    gate = None
    if known:
        from kvconform.harness import expectations as expectations_mod

        gate = expectations_mod.gate(results, known, strict_messages=args.strict_messages)
        todo = sum(k.reason.startswith("TODO") for k in known.known)
        if todo:  # --write-expectations starts every reason as a TODO to edit
            err.write(
                f"kvconform: note: {todo} entr{'y' if todo == 1 else 'ies'} of "
                f"{_said(known.file)} still give a TODO as the reason\n"
            )
    report = record.build(
        results,
        driver.info,
        suite_digest=integrity.digest,
        started=started,
        seconds=seconds,
        selection={
            k: v
            for k, v in (
                ("area", args.area),
                ("class", args.classes),
                ("requirement", args.requirement),
                ("id", args.ids),
                ("strict_messages", args.strict_messages),
            )
            if v
        },
        gate=None if gate is None or known is None else expectations_mod.as_report(gate, known),
    )
    if generated is not None:
        report["selection"]["generated"] = {"examples": generated.examples, "seed": generated.seed}
    if not integrity.intact:
        report["suite"]["modified"] = integrity.problems()
    spoken = getattr(driver, "protocol", None)
    if isinstance(spoken, int):  # over stdio: the version hello settled on (PROTO-32)
        report["adapter"]["protocol"] = spoken
    incidents = getattr(driver, "incidents", None)
    if incidents:
        report["adapter"]["incidents"] = list(incidents)
    if incomplete is not None:
        report["incomplete"] = incomplete
        report["stopped_by"] = _stop_kind(stopped)
    # every output of this run, or (after a signal) none changed; and no other run's
    # outputs written in between (two runs sharing a --report-dir leave one run's set)
    with _signals_held(), _outputs_locked(args):
        unwritten = [] if generated is None else list(generated.unwritten)
        unwritten += _write_reports(args, report)
        if args.trace is not None:
            spoken = getattr(driver, "protocol", None)
            unwritten += _write_trace(
                args.trace, results, spoken if isinstance(spoken, int) else None
            )
        if stopped is None and args.write_expectations:
            from kvconform.harness import expectations as expectations_mod

            text, n = expectations_mod.render(results)
            unwritten += _write_output("--write-expectations", args.write_expectations, text)
            if not unwritten:
                err.write(f"wrote {n} known failure(s) to {args.write_expectations}\n")
    if stopped is not None:
        _print_summary(report, results, args, integrity, out)
        _say_unwritten(unwritten, err)
        err.write(f"kvconform: {report['incomplete']}\n")
        if isinstance(stopped, KeyboardInterrupt | Stopped):
            return EXIT_INTERRUPTED
        if isinstance(stopped, Unresponsive):
            return EXIT_ADAPTER
        return EXIT_INTERNAL
    _print_summary(report, results, args, integrity, out)
    if generated is not None:  # how to reproduce, whatever becomes of the outputs
        out.write(
            f"generated checks: {generated.examples} example(s) per property, seed "
            f"{generated.seed} (reproduce with --generated {generated.examples} "
            f"--seed {generated.seed})\n"
        )
    if _say_unwritten(unwritten, err):
        return EXIT_USAGE
    if gate is not None and not gate.ok:
        return EXIT_FAILED
    if record.judged_nothing(report):
        return EXIT_NOTHING_JUDGED
    if gate is not None:
        return EXIT_OK
    return EXIT_OK if report["summary"]["failed"] == 0 else EXIT_FAILED


class _Generated:
    """The generated checks of one run (kvconform.differential): N examples, a seed."""

    def __init__(
        self,
        examples: int,
        seed: int,
        export_dir: Path | None,
        label: str | None,
        quiet: bool = False,
    ) -> None:
        from kvconform.differential import engine

        self.engine = engine
        self.examples, self.seed, self.export_dir, self.label = examples, seed, export_dir, label
        self.quiet = quiet
        #: The counterexamples that could not be written (outputs of the run: exit 2).
        self.unwritten: list[str] = []
        self.cases = engine.generated_cases()
        self.reference = engine.reference_driver()

    def run(self, case: Case, driver: Driver, err: TextIO) -> CaseResult:
        prop = self.engine.PROPERTIES_BY_ID[case.id]
        tty = err.isatty() and not self.quiet
        shown = [0.0]

        def on_run(runs: int) -> None:  # on a terminal, at most ten updates a second
            now = time.perf_counter()
            if now - shown[0] >= 0.1:
                shown[0] = now
                err.write(f"\r  {case.id}: program {runs} of about {self.examples} ")
                err.flush()

        result = self.engine.run_property(
            prop,
            driver,
            examples=self.examples,
            seed=self.seed,
            reference=self.reference,
            export_dir=self.export_dir,
            label=self.label,
            on_run=on_run if tty else None,
        )
        if not self.quiet:  # a line per property, with what it cost
            clear = "\r" if tty else ""
            if result.verdict == "failed":  # shrinking runs programs of its own
                runs = f"{result.runs} programs run, shrinking included"
            elif result.verdict == "passed" and result.runs < self.examples:
                runs = f"{self.examples} programs drawn, {result.runs} distinct"
            else:
                runs = f"{result.runs} programs"
            err.write(
                f"{clear}  {case.id}: {result.verdict.replace('_', ' ')} "
                f"({runs}, {result.seconds:.1f} s)" + " " * 12 + "\n"
            )
        if result.exported is not None:
            err.write(f"wrote counterexample scenario {result.exported}\n")
        if result.export_error:
            self.unwritten.append(f"{case.id}: {result.export_error}")
        return self.engine.case_result(result)


def _generated_options(args: argparse.Namespace) -> _Generated | None:
    if args.generated is None:
        for flag, value in (
            ("--seed", args.seed),
            ("--export-counterexamples", args.export_counterexamples),
        ):
            if value is not None:
                raise UsageError(f"{flag} needs --generated N")
        return None
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise UsageError(
            "--generated needs Hypothesis: install the 'generated' extra "
            "(pip install '.[generated]' in a checkout, 'kvconform[generated]' after a release)"
        ) from None
    from kvconform.differential.engine import DEFAULT_SEED, new_seed

    seed = DEFAULT_SEED if args.seed is None else new_seed() if args.seed == "random" else args.seed
    return _Generated(
        args.generated,
        seed,
        args.export_counterexamples,
        args.adapter_cmd or args.adapter,
        quiet=args.quiet,
    )


def _seed(text: str) -> int | str:
    """``--seed``: a whole number from 0 to 2^32-1, or ``random``."""
    if text == "random":
        return text
    value = _whole(text, "a whole number or 'random'")
    if not 0 <= value < 1 << 32:
        raise argparse.ArgumentTypeError(f"expected 0 .. 4294967295, got {value}")
    return value


def _report_no_start(
    args: argparse.Namespace,
    cases: Sequence[Case],
    integrity: manifest.Integrity,
    why: BaseException,
    err: TextIO,
    known: Expectations | None = None,
    stage: str = "before the adapter answered hello",
) -> None:
    """Write the reports of a run whose adapter never answered ``hello`` (``stage`` says
    when it stopped): every selected case not run (none, when the suite was not loaded
    yet), the report marked incomplete (a gate, if any, not reached), the adapter named
    by its command."""
    if not _output_paths(args):
        return
    from kvconform.reports import record

    if isinstance(why, AdapterStartFailed):
        reason = f"the adapter could not start: {clip(str(why), 2000)}"
    else:
        reason = _stop_reason(why, 0, len(cases)) + f", {stage}"
    command = (
        _adapter_argv(args.adapter_cmd)[0] if args.adapter_cmd else args.adapter or DEFAULT_ADAPTER
    )
    unknown = AdapterInfo(
        name=clip(command, 200),
        version="(no answer)",
        language="(no answer)",
        classes=frozenset(),
        format_writes=None,
        format_reads=frozenset(),
    )
    results = [CaseResult(case, "not_run", reason=f"not run: {reason}") for case in cases]
    gate = None
    if known is not None:  # every listed case unchecked: the gate is not reached
        from kvconform.harness import expectations as expectations_mod

        gate = expectations_mod.as_report(expectations_mod.gate(results, known), known)
    report = record.build(
        results,
        unknown,
        suite_digest=integrity.digest,
        started=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
        seconds=0.0,
        gate=gate,
    )
    report["incomplete"] = reason
    report["stopped_by"] = (
        "adapter_not_started" if isinstance(why, AdapterStartFailed) else _stop_kind(why)
    )
    with _signals_held(), _outputs_locked(args):
        _say_unwritten(_write_reports(args, report), err)


def _stop_kind(stopped: BaseException | None) -> str:
    """What ended a run early, as the JSON report's ``stopped_by`` names it (the exit
    status follows it: 130, 3 or 4), so that CI need not read the ``incomplete`` text."""
    if isinstance(stopped, Stopped | KeyboardInterrupt):
        return "interrupted"
    if isinstance(stopped, Unresponsive):
        return "adapter_unresponsive"
    return "internal_error"


def _stop_reason(stopped: BaseException, done: int, total: int) -> str:
    """What ended a run early, for the console and for the reports' ``incomplete``."""
    ran = f"after {done} of {total} cases"
    if isinstance(stopped, Stopped):
        return f"interrupted by signal {signal.Signals(stopped.signum).name} {ran}"
    if isinstance(stopped, KeyboardInterrupt):
        return f"interrupted {ran}"
    if isinstance(stopped, Unresponsive):
        return f"{stopped}; the cases after it are not run"
    where = traceback.extract_tb(stopped.__traceback__)[-1]
    return (
        f"internal error {ran}: {type(stopped).__name__}: {stopped} "
        f"(at {Path(where.filename).name}:{where.lineno}; please report it)"
    )


def _write_reports(args: argparse.Namespace, report: dict[str, object]) -> list[str]:
    """Write every report of the run; one line for each that could not be written."""
    targets = _output_paths(args)
    if not targets:
        return []
    from kvconform.reports import html, junit, markdown, record

    writers = {
        "json": record.write,
        "junit": junit.write,
        "markdown": markdown.write,
        "html": html.write_run,
    }
    unwritten = []
    for kind, path in targets.items():  # each one attempted, whatever became of the others
        try:
            writers[kind](report, path)
        except OSError as exc:
            unwritten.append(f"cannot write the {kind} report to {path}: {exc}")
    return unwritten


def _write_output(what: str, path: Path, text: str) -> list[str]:
    """Write one output of the run whole (or not at all); what went wrong, if anything."""
    from kvconform.files import write_atomic

    try:
        write_atomic(path, text)
    except OSError as exc:
        return [f"cannot write {what} to {path}: {exc}"]
    return []


def _say_unwritten(unwritten: Sequence[str], err: TextIO) -> bool:
    """One line per output that could not be written after the run (exit status 2)."""
    for line in unwritten:
        err.write(f"kvconform: error: {_said(line)}\n")
    return bool(unwritten)


def _said(what: object) -> str:
    """An error's text as one console line: it may quote a file, a path or an adapter
    (untrusted, of any size), so it is clipped and its line breaks escaped."""
    return one_line(clip(str(what), 2000))


@contextlib.contextmanager
def _outputs_locked(args: argparse.Namespace) -> Iterator[None]:
    """Hold an exclusive lock on each folder the run's outputs go to while they are
    written, so that two runs writing one set of outputs (a shared ``--report-dir``)
    write them one after the other: a reader finds one run's set, never a mix.

    The lock is ``flock`` on the folder itself (POSIX; elsewhere nothing is locked), so
    no lock file is left behind; the folders are locked in one order, so two runs whose
    outputs share some folders cannot wait on each other for ever."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    paths = list(_output_paths(args).values())
    paths += [p for p in (args.trace, args.write_expectations) if p is not None]
    folders = sorted({str(path.parent.resolve()) for path in paths})
    held: list[int] = []
    try:
        for folder in folders:
            try:
                descriptor = os.open(folder, os.O_RDONLY)
            except OSError:
                continue  # the write itself will say why the folder cannot be used
            held.append(descriptor)
            with contextlib.suppress(OSError):
                fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        for descriptor in held:
            os.close(descriptor)  # which releases its lock


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


def _print_summary(
    report: dict[str, Any],
    results: Sequence[CaseResult],
    args: argparse.Namespace,
    integrity: manifest.Integrity,
    out: TextIO,
) -> None:
    from kvconform.reports.record import (
        advice_text,
        caveats,
        format_text,
        gate_state,
        not_answers,
        only_broken,
    )
    from kvconform.reports.record import verdict as record_verdict

    s, a = report["summary"], report["adapter"]
    failed = [r for r in results if r.verdict == "failed"]
    for r in failed[: args.max_failures_shown]:
        out.write("\n" + r.report() + "\n")
    if len(failed) > args.max_failures_shown:
        out.write(
            f"\n... {len(failed) - args.max_failures_shown} more failure(s); see the reports\n"
        )
    advised = [r for r in results if r.advice]
    if advised:  # apart from the failures: advice, not verdict (CONF-12)
        out.write("\nadvice (not part of the verdict; --strict-messages makes these failures):\n")
        for r in advised[: args.max_failures_shown]:
            out.write(render_advice(r) + "\n")
        if len(advised) > args.max_failures_shown:
            out.write(f"... {len(advised) - args.max_failures_shown} more; see the reports\n")
    out.write(
        f"\nkvconform {report['suite']['version']} (digest {integrity.digest[:16]}) "
        f"against {a['name']} {a['version']} ({a['language']}"
        + (f", protocol {a['protocol']}" if "protocol" in a else "")
        + ")\n"
    )
    out.write(
        f"classes declared: {', '.join(a['classes']) or 'none'}; "
        f"format {format_text(a['format'])}\n"
    )
    chosen = [
        f"{name}: {value}" for name, value in a["options"].items() if value != OPTIONS[name].default
    ]
    caps = dict(a["capabilities"])
    if chosen or caps:
        out.write(
            "declared: "
            + "; ".join(chosen + [f"{k}: {json.dumps(v)}" for k, v in sorted(caps.items())])
            + " (CONF-6, CONF-7; every other option at its default)\n"
        )
    out.write("\n")
    declared = set(a["classes"])
    labels = {cls: cls if cls in declared else f"{cls} (not declared)" for cls in s["by_class"]}
    width = max([12, *map(len, labels.values())])
    out.write(f"{'class':<{width}} {'passed':>7} {'failed':>7} {'n/a':>5}\n")
    for cls, c in s["by_class"].items():
        out.write(
            f"{labels[cls]:<{width}} {c['passed']:>7} {c['failed']:>7} {c['not_applicable']:>5}\n"
        )
    out.write(
        f"\n{'area':<28} {'passed':>7} {'failed':>7} {'n/a':>5}"
        "   (the same cases by scenario folder or vector file)\n"
    )
    for area, c in s["by_area"].items():
        out.write(f"{area:<28} {c['passed']:>7} {c['failed']:>7} {c['not_applicable']:>5}\n")
    reasons = Counter(r.reason for r in results if r.verdict == "not_applicable")
    if reasons:
        out.write("\nnot applicable:\n")
        for reason, n in reasons.most_common():
            out.write(f"  {n:>4}  {reason}\n")
    unjudged = [
        req for req, v in report["requirements"].items() if v["verdict"] == "not_applicable"
    ]
    if unjudged and (s["passed"] or s["failed"]):
        shown = ", ".join(unjudged[:24]) + (
            f" and {len(unjudged) - 24} more" if len(unjudged) > 24 else ""
        )
        out.write(
            f"\nnot judged: {len(unjudged)} requirement(s) whose every selected case was not "
            f"applicable to this declaration (the verdict says nothing of them): {shown}\n"
        )
    incidents = report["adapter"].get("incidents", [])
    if incidents:
        out.write("\nadapter incidents (against the protocol; not part of the verdict):\n")
        out.writelines(f"  {one_line(line)}\n" for line in incidents[:10])
        if len(incidents) > 10:
            out.write(f"  ... and {len(incidents) - 10} more (in the JSON report)\n")
    gate = report.get("gate")
    if gate:
        out.write(
            f"\nexpectations {_said(gate['file'])}: {len(gate['expected_failures'])} expected "
            f"failure(s), {len(gate['unexpected_failures'])} unexpected, "
            f"{len(gate['stale'])} stale\n"
        )
        changed = {c["id"]: c for c in gate.get("changed", [])}
        for case_id in gate["unexpected_failures"]:
            if case_id in changed:
                was, now = changed[case_id]["listed"], changed[case_id]["now"]
                listed = _CAUSE_WORDS.get(was, "a wrong answer or a message's wording")
                out.write(
                    f"  listed as failing by {listed}, now fails by {_CAUSE_WORDS[now]}:"
                    f" {case_id}\n"
                )
            else:
                out.write(f"  unexpected failure: {case_id}\n")
        for case_id in gate["stale"]:
            out.write(f"  listed as failing but passes (remove it): {case_id}\n")
        if gate["unchecked"]:
            shown = ", ".join(gate["unchecked"][:10])
            more = f" and {len(gate['unchecked']) - 10} more" if len(gate["unchecked"]) > 10 else ""
            out.write(
                f"  listed but not checked in this run (not selected, not applicable, or a "
                f"generated property without --generated): {shown}{more}\n"
            )
    verdict = {
        "conformant": "CONFORMANT for the declared classes",
        "not conformant": "NOT CONFORMANT",
        "no verdict": "NO VERDICT",
    }[record_verdict(report)]
    state = gate_state(report)
    if state == "passed" and s["failed"]:
        verdict += "; gate passed: every failure is a known one"
    elif state is not None and state != "passed":
        verdict += f"; gate {state}"
    split = ""
    if only_broken(s):
        # No answer was judged: the basis says what a wrong answer would have meant.
        by = s["failed_by_basis"]
        split = (
            " (every one where the adapter broke instead of answering, so none judged an "
            f"answer; {by['seed']} on the seeds' semantics, {by['decision']} on a decision)"
        )
    elif s["failed"]:
        by = s["failed_by_basis"]
        split = (
            f" ({by['seed']} on the seeds' semantics: fix first; "
            f"{by['decision']} on a decision of the specification: policy"
            f"{not_answers(s)})"
        )
    reexpressed = sum(1 for c in report.get("results", []) if c.get("reexpressed"))
    if reexpressed:
        out.write(
            f"\n{reexpressed} cases judged re-expressed into the declared shape "
            "(INTERPRETING.md 6.4; each case's reexpressed in the JSON report says how)\n"
        )
    notes = caveats(report)
    if notes:
        verdict += f" ({'; '.join(n.split(':')[0] for n in notes)})"
        out.write("".join(f"\n{note}" for note in notes) + "\n")
    if advice_text(s):
        out.write(f"\n{advice_text(s)}\n")
    out.write(
        f"\n{s['passed']} passed, {s['failed']} failed{split}, {s['not_applicable']} not "
        f"applicable{_not_run(s)} of {s['total']} in {report['seconds']:.1f} s: {verdict}\n"
    )


#: How the console names a failure's cause (runner.CAUSES).
_CAUSE_WORDS = {
    "answer": "a wrong answer",
    "message": "a message's wording",
    "adapter": "the adapter breaking",
}


def _not_run(summary: dict[str, Any]) -> str:
    return f", {summary['not_run']} not run" if summary.get("not_run") else ""


def cmd_list(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    integrity = _integrity(args, err)
    try:
        from kvconform.differential.engine import generated_cases

        generated = generated_cases()
    except ImportError:  # without the 'generated' extra there are none to run
        generated = []
    selecting = bool(args.area or args.classes or args.requirement or args.ids)
    try:
        pool = _cases(args, integrity)
        cases = select([*pool, *generated] if selecting else pool, args)
    except SourceError as exc:
        raise UsageError(str(exc)) from None
    for case in cases:
        runs_with = "  (runs with --generated N)" if case.kind == "generated" else ""
        out.write(f"{case.id:<60} {case.cls:<10} {','.join(case.requires)}{runs_with}\n")
    out.write(f"{len(cases)} case(s)\n")
    if generated and not selecting:
        names = ", ".join(case.id for case in generated)
        out.write(f"and {len(generated)} generated checks, run with --generated N: {names}\n")
    return EXIT_OK


def cmd_explain(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from kvconform.harness import explain

    integrity = _integrity(args, err)
    try:
        out.write(explain.explain(args.id, _cases(args, integrity)) + "\n")
    except explain.UnknownId as exc:
        raise UsageError(str(exc)) from None
    return EXIT_OK


def cmd_compare(args: argparse.Namespace, err: TextIO) -> int:
    from kvconform.reports import html, record

    for path in args.reports:
        if _same_file(path, args.output):
            raise UsageError(f"-o {args.output} would overwrite the report it reads")
    seen: dict[Path, Path] = {}
    for path in args.reports:  # one report twice would be two identical columns
        same = seen.setdefault(path.resolve(), path)
        if same is not path:
            raise UsageError(f"{path} is given twice (as {same})")
    reports = []
    for path in args.reports:
        try:
            reports.append(record.read(path))
        except SourceError as exc:
            raise UsageError(f"{path}: not a kvconform JSON report ({exc})") from None
    differ = html.suites_differ(reports)
    if differ:
        err.write(f"kvconform: warning: {_said(differ)}\n")
    try:
        html.write_compare(reports, args.output, [str(path) for path in args.reports])
    except OSError as exc:
        raise UsageError(f"cannot write {args.output}: {exc}") from None
    err.write(f"wrote {_said(args.output)} ({len(reports)} implementations)\n")
    return EXIT_OK


def cmd_new_adapter(args: argparse.Namespace, out: TextIO) -> int:
    """``kvconform new-adapter``: write an adapter skeleton (kvconform.skeletons)."""
    from kvconform import skeletons

    try:
        made = skeletons.generate(args.lang, skeletons.parse_classes(args.classes), args.directory)
    except skeletons.SkeletonError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"cannot write the skeleton into {args.directory}: {exc}") from None
    plan = made.plan
    folder = one_line(str(made.directory))  # a path the user typed: one line, breaks escaped
    for cls, by in plan.added.items():
        verb = "requires" if len(by) == 1 else "require"
        out.write(f"added the class {cls}: {' and '.join(by)} {verb} it (CONF-1)\n")
    out.write(
        f"wrote a {plan.language} adapter skeleton into {folder}: "
        f"{', '.join(made.files)}\n"
        f"it claims {', '.join(plan.classes)}; each of their {len(plan.claimed)} operation(s) "
        f"answers 'not implemented: <op>' until you replace it (README.md says how)\n"
        f"next, in {folder}:\n"
    )
    if made.build:
        out.write(f"  {one_line(made.build)}\n")
    out.write(f'  kvconform run --adapter-cmd "{one_line(made.command)}"\n')
    return EXIT_OK


class _Visible(io.TextIOBase):
    """A console stream on which an adapter's words cannot act (spec/security.md).

    Everything written is made visible (:func:`kvconform.reports.untrusted.visible`):
    control sequences and lone surrogates appear as escapes. The one control
    character the command itself uses, a carriage return that starts a progress
    update, is kept.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if text.startswith("\r"):
            self._stream.write("\r" + visible(text[1:]))
        else:
            self._stream.write(visible(text))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def writable(self) -> bool:
        return True


def _handle(
    signals: Sequence[str] | Mapping[int, Any], handler: Callable[[int, Any], None] | None = None
) -> dict[int, Any]:
    """Give the named signals ``handler`` (or give each number of a mapping its handler
    back); the handlers they had. Signals this system lacks are skipped; outside the main
    thread nothing is changed."""
    pairs = (
        list(signals.items())
        if isinstance(signals, Mapping)
        else [(n, handler) for n in (getattr(signal, name, None) for name in signals) if n]
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


def _silence(stream: TextIO) -> None:
    """Point stdout at /dev/null so that flushing it at exit cannot raise again."""
    if stream is not sys.stdout and not isinstance(stream, _Visible):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(
    argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = cast(TextIO, _Visible(out or sys.stdout))
    err = cast(TextIO, _Visible(err or sys.stderr))
    restore = _stop_on_signals()
    try:
        args = _parser().parse_args(argv)
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
        err.write(f"kvconform: error: {_said(exc)}\n")
        return EXIT_USAGE
    except AdapterStartFailed as exc:
        err.write(f"kvconform: the adapter could not start: {_said(exc)}\n")
        return EXIT_ADAPTER
    except (KeyboardInterrupt, Stopped):
        err.write("kvconform: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (kvconform list | head): nothing more to say to it.
        _silence(out)
        return EXIT_OK
    except Exception as exc:
        where = traceback.extract_tb(exc.__traceback__)[-1]
        err.write(
            f"kvconform: internal error: {type(exc).__name__}: {_said(exc)} "
            f"(at {Path(where.filename).name}:{where.lineno}; please report it)\n"
        )
        return EXIT_INTERNAL
    finally:
        restore()


#: Set by :func:`console`: this process runs one command and exits, so what it loads
#: can be frozen out of the cycle collector's sight (not when ``main`` is called in a
#: longer-lived process, such as a test session).
_ONE_SHOT = False


def console() -> NoReturn:
    """The ``kvconform`` command: :func:`main`, then exit without tearing the heap down.

    Everything the command writes is written, closed and flushed by then, and the
    adapter process is already stopped; what is left is freeing the loaded suite
    object by object, which the operating system does at once. The loaded suite is
    also frozen out of the cycle collector's sight for the run (bench/README.md).
    """
    global _ONE_SHOT
    _ONE_SHOT = True
    try:
        status = main()
    except KeyboardInterrupt:  # a signal in the instant between main's answer and its end
        status = EXIT_INTERRUPTED
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write("kvconform: interrupted\n")
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    console()
