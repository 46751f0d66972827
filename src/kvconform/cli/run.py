"""kvconform run: the suite against an implementation, to a verdict."""

from __future__ import annotations

import argparse
import gc
import signal
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

import kvconform
from kvconform.adapters import DEFAULT_ADAPTER, AdapterLoadError, AdapterSpecError, load_adapter
from kvconform.harness import manifest
from kvconform.harness.runner import CaseResult, run_case
from kvconform.harness.scenario import Case
from kvconform.harness.yamlsource import SourceError
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.rendering import clip
from kvconform.reports.untrusted import one_line
from kvconform.values import AdapterInfo

if TYPE_CHECKING:
    from kvconform.harness.expectations import Expectations
    from kvconform.protocol.exchange import Trace
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
    Unresponsive,
    UsageError,
    _adapter_argv,
    _integrity,
    _said,
    _same_file,
    _unexpected,
    _writable_dir,
    _writable_file,
    one_shot,
)
from kvconform.cli.generated import _generated_options
from kvconform.cli.outputs import (
    _output_paths,
    _outputs_locked,
    _say_unwritten,
    _with_wire,
    _write_output,
    _write_reports,
    _write_trace,
)
from kvconform.cli.selection import _cases, select
from kvconform.cli.signals import _signals_held
from kvconform.cli.summary import Progress, _print_summary


def _driver(args: argparse.Namespace, wire: list[tuple[str, bytes]] | None = None) -> Driver:
    """The driver of the run's adapter; over stdio, with ``wire`` given, every line sent and
    received is appended to it from the first ``hello`` on (``--trace``)."""
    if args.adapter_cmd:
        argv = _adapter_argv(args.adapter_cmd)
        from kvconform.protocol.client import AdapterStartError, StdioDriver

        try:
            return StdioDriver(
                argv,
                timeout=args.timeout,
                shutdown_grace=args.shutdown_grace,
                protocol=args.protocol,
                trace=None if wire is None else _recorder(wire),
            )
        except AdapterStartError as exc:
            raise AdapterStartFailed(str(exc)) from None
    spec = DEFAULT_ADAPTER if args.adapter is None else args.adapter  # "" is refused
    try:
        return InProcessDriver(load_adapter(spec), factory=lambda: load_adapter(spec))
    except AdapterLoadError as exc:  # named right, but not there: as a missing program
        raise AdapterStartFailed(str(exc)) from None
    except AdapterSpecError as exc:  # not 'module:factory' at all: a bad argument
        raise UsageError(str(exc)) from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # its import, factory or describe(); sys.exit() included
        said = one_line(clip(f"{type(exc).__name__}: {exc}", 2000))
        raise AdapterStartFailed(f"adapter {spec!r} failed to start: {said}") from None


def _recorder(wire: list[tuple[str, bytes]]) -> Trace:
    """A driver's trace hook that appends each line, with its direction, to ``wire``."""

    def record(direction: str, line: bytes) -> None:
        wire.append((direction, bytes(line)))

    return record


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
        _writable_file(path, what)
        for other, other_path in outputs[:index]:
            if _same_file(path, other_path):
                raise UsageError(f"{what} and {other} would both be written to {path}")
        if args.expectations and _same_file(path, args.expectations):
            raise UsageError(f"{what} would overwrite the --expectations file it reads ({path})")
    if args.export_counterexamples is not None:
        _writable_dir(args.export_counterexamples, "--export-counterexamples")


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
        pausing = one_shot() and gc.isenabled()
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
        if one_shot():
            gc.freeze()  # the loaded suite lives as long as the process: no collection need see it
        if pausing:
            gc.enable()
    except (KeyboardInterrupt, Stopped) as exc:
        _report_no_start(args, cases, integrity, exc, err, known, stage="while the suite loaded")
        raise
    # over stdio, --trace records every line from the first hello: the handshake (which
    # no case owns) and the closing shutdown are traced apart from the cases
    wire: list[tuple[str, bytes]] | None = [] if args.trace and args.adapter_cmd else None
    try:
        driver = _driver(args, wire)
    except (AdapterStartFailed, KeyboardInterrupt, Stopped) as exc:
        # No case can run: the reports say so, rather than leave an earlier run's verdict
        # at their paths (README, exit statuses 3 and 130).
        _report_no_start(args, cases, integrity, exc, err, known, opening=wire or ())
        raise
    opening = tuple(wire or ())
    if generated is not None and not any(case.kind == "generated" for case in cases):
        err.write("kvconform: --generated: the selection holds none of the generated.* cases\n")
        generated = None
    if generated is not None and not args.quiet:
        err.write(
            f"generated checks: {generated.examples} example(s) per property, "
            f"seed {generated.seed}\n"
        )
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
        if wire is not None:
            wire.clear()  # what the last case sent is in its result; what follows is the close
        try:
            driver.close()
        except (KeyboardInterrupt, Stopped) as exc:  # a second signal while it shuts down
            stopped = stopped or exc
    closing = tuple(wire or ())
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
                args.trace,
                results,
                spoken if isinstance(spoken, int) else None,
                opening=opening,
                closing=closing,
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


def _report_no_start(
    args: argparse.Namespace,
    cases: Sequence[Case],
    integrity: manifest.Integrity,
    why: BaseException,
    err: TextIO,
    known: Expectations | None = None,
    stage: str = "before the adapter answered hello",
    opening: Sequence[tuple[str, bytes]] = (),
) -> None:
    """Write the reports of a run whose adapter never answered ``hello`` (``stage`` says
    when it stopped): every selected case not run (none, when the suite was not loaded
    yet), the report marked incomplete (a gate, if any, not reached), the adapter named
    by its command; and the trace (``--trace``) of the handshake, if one began."""
    if not _output_paths(args) and args.trace is None:
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
        unwritten = _write_reports(args, report)
        if args.trace is not None:  # the handshake that failed, if one began
            unwritten += _write_trace(args.trace, (), opening=opening)
        _say_unwritten(unwritten, err)


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
    return _unexpected(stopped, ran)
