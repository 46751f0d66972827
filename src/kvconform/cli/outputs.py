"""Writing a run's outputs: the reports, the trace, and what could not be written."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from kvconform.cli.common import _said
from kvconform.harness.runner import CaseResult, step_labels
from kvconform.harness.scenario import Case
from kvconform.protocol.steps import HARNESS_STEPS
from kvconform.rendering import clip
from kvconform.reports.untrusted import one_line


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


#: The most characters of one traced line kept (a line may be 16 MiB; every report
#: carries a failing case's trace).
_TRACE_LINE_LIMIT = 4000


def _with_wire(result: CaseResult, wire: Sequence[tuple[str, bytes]]) -> CaseResult:
    """The case's trace as the exact lines on the wire, each beside the step that sent it.

    Requests and responses pair up in order (a program is sent whole, then read).
    Each request is labelled by :func:`_wire_labels`. Lines are shown as the adapter
    wrote them, control characters escaped (:mod:`.reports.untrusted`), each clipped to
    :data:`_TRACE_LINE_LIMIT` characters with a note of its length.
    """

    if not wire:
        return result
    sent = [line for direction, line in wire if direction == "send"]
    return dataclasses.replace(result, trace=_exchanges(wire, _wire_labels(result.case, sent)))


def _exchanges(wire: Sequence[tuple[str, bytes]], labels: Sequence[str]) -> tuple[str, ...]:
    """``wire`` as numbered exchanges: each request beside its label, then its answer."""
    sent = [line for direction, line in wire if direction == "send"]
    received = [line for direction, line in wire if direction == "recv"]
    lines: list[str] = []
    for index in range(max(len(sent), len(received))):
        lines.append(f"{index + 1:>3} {labels[index] if index < len(labels) else ''}".rstrip())
        for mark, side in ((">", sent), ("<", received)):
            text = side[index].decode("utf-8", "backslashreplace") if index < len(side) else ""
            shown = one_line(clip(text, _TRACE_LINE_LIMIT)) if text else "(nothing)"
            lines.append(f"    {mark} {shown}")
    return tuple(lines)


def _wire_labels(case: Case, sent: Sequence[bytes]) -> list[str]:
    """Beside each request of ``sent``, the step of ``case`` that sent it.

    The operations of the program go out in order; between them the harness sends
    requests of its own, named for what they are: the handshake of an adapter started
    for this case (after the one before it broke), the ``shutdown`` and handshake of a
    ``restart`` step (labelled as that step, PROTO-37), and the ``reset`` that ends the
    program or a part of it before a restart. A request is told apart by its ``op``
    (the harness wrote the line itself).
    """
    steps = step_labels(case)
    program = case.program
    position = 0  # the operation of the program that goes on the wire next
    labels: list[str] = []
    for line in sent:
        name = _request_op(line)
        pending = program[position] if position < len(program) else None
        if name == "reset":
            labels.append("(end of program)" if pending is None else "(end of a part: reset)")
        elif name in ("hello", "shutdown") and isinstance(pending, HARNESS_STEPS):
            labels.append(steps.get(position, ""))
            position += name == "hello"  # the restart is done once the new process answers
        elif name == "hello":
            labels.append("(handshake: the adapter started for this case)")
        elif name == "shutdown":
            labels.append("(shutdown)")
        else:
            labels.append(steps.get(position, ""))
            position += 1
    return labels


def _request_op(line: bytes) -> str | None:
    """The ``op`` of a request line the harness wrote; ``None`` if it has none."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    op = message.get("op") if isinstance(message, dict) else None
    return op if isinstance(op, str) else None


def _write_trace(
    path: Path,
    results: Sequence[CaseResult],
    protocol: int | None = None,
    *,
    opening: Sequence[tuple[str, bytes]] = (),
    closing: Sequence[tuple[str, bytes]] = (),
) -> list[str]:
    """Every traced case, in run order: its verdict, then each exchange (``--trace``).
    ``protocol``: the version spoken over stdio; ``None`` in process, where each
    request is shown in its protocol-1 wire form, or over stdio before a handshake
    settled one. ``opening``: the lines of the handshake that started the adapter, which
    no case owns (every offer, refused or answered); ``closing``: those of the
    ``shutdown`` that ended the run."""
    if protocol is not None:
        spoken = f"over stdio, protocol {protocol}, the lines as written" + (
            ": every count a decimal string, PROTO-33" if protocol == 2 else ""
        )
    elif opening:
        spoken = "over stdio, the lines as written; the handshake settled no protocol"
    elif not results:
        spoken = "nothing was exchanged: the run stopped before an adapter answered"
    else:
        spoken = "in process: each request in its protocol-1 wire form"
    lines = [f"# kvconform trace: > what the harness sent, < what came back ({spoken})", ""]
    if opening:
        lines.append("the handshake (the adapter started)")
        lines += [f"  {line}" for line in _exchanges(opening, ["(handshake)"] * len(opening))]
        lines.append("")
    for result in results:
        if not result.trace:
            continue
        lines.append(f"{result.case.kind} {result.case.id}: {result.verdict}")
        lines += [f"  {line}" for line in result.trace]
        lines.append("")
    if closing:
        lines.append("the end of the run")
        lines += [f"  {line}" for line in _exchanges(closing, ["(shutdown)"] * len(closing))]
        lines.append("")
    return _write_output("the trace", path, "\n".join(lines))


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
