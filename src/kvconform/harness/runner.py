"""Running cases: applicability, verdicts, and how a failure reads.

A case an implementation does not claim is *not applicable*, with a reason,
never passed (CONF-3). Skips are named predicates that return that reason.
"""

from __future__ import annotations

import json
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from kvconform.harness import stakes
from kvconform.harness.checks import SUCCESS, Answers, Check, Failure, OutcomeCheck, Refuses
from kvconform.harness.declarations import (
    adapt,
    capability_missing,
    option_not_declared,
    prefix_inputs_given,
)
from kvconform.harness.explain import requirement_summary
from kvconform.harness.reexpress import reexpress
from kvconform.harness.reexpress_prefix import reexpress_blocks
from kvconform.harness.scenario import Case
from kvconform.protocol import codec
from kvconform.protocol.driver import Driver
from kvconform.protocol.operations import CacheAllocId, Measure, ModelInstanceId, Op, Stamp, Verify
from kvconform.protocol.steps import HARNESS_STEPS, shown
from kvconform.values import PREFIX_INPUTS, AdapterInfo, Broken, Ok, Outcome, Refused

#: ``not_run``: the run ended before the case (its adapter was given up); no verdict.
Verdict = Literal["passed", "failed", "not_applicable", "not_run"]


@dataclass(frozen=True)
class CaseResult:
    case: Case
    verdict: Verdict
    failures: tuple[Failure, ...] = ()
    reason: str = ""
    seconds: float = 0.0
    #: Every operation as sent and what came back, when the run was traced (``--trace``).
    trace: tuple[str, ...] = ()
    #: Findings that are advice, not verdict: an error whose kind, field, layer and
    #: values were right but whose message does not name its field or values (ERR-13,
    #: CONF-12). Empty under ``strict_messages``, where they are failures instead.
    advice: tuple[Failure, ...] = ()

    @property
    def stake(self) -> stakes.CaseStake | None:
        """A failed case's stake: the gravest of its judged checks' (CONF-18)."""
        if self.verdict != "failed":
            return None
        return stakes.of_case(f.stake for f in self.failures if not f.broken)

    def report(self) -> str:
        """What a person needs to see when the case failed (with its trace, if traced)."""
        reason = self.reason if self.verdict == "not_applicable" else ""
        text = render_failure(self.case, self.failures, reason)
        if self.trace and self.verdict == "failed":
            text += "\n  trace (> sent, < received):\n" + "\n".join(f"  {t}" for t in self.trace)
        return text


def class_not_claimed(case: Case, info: AdapterInfo) -> str | None:
    """The case, or one of its operations, needs a class the adapter does not declare."""
    needed = {case.cls, *(op.needs for op in case.program if op.needs)}
    missing = sorted(needed - set(info.classes))
    if missing:
        return f"{info.name} does not declare the class {', '.join(missing)}"
    return None


def profile_not_declared(case: Case, info: AdapterInfo) -> str | None:
    """The case assumes a block format declaration the adapter does not make (PROF-3).

    A case says so with ``profile`` (writes N, reads exactly {N}) or ``format``
    (the members given must match); a ``signature`` or ``verify`` case that says
    nothing is written for profile v1 (CONF-11): its stamps and measures need a
    writer of version 1, its verifications a reader of version 1.
    """
    declared = (
        f"{info.name} writes v{info.format_writes} and reads {sorted(info.format_reads)} (PROF-3)"
    )
    if case.profile is not None:
        if info.format_writes != case.profile or set(info.format_reads) != {case.profile}:
            return f"assumes format profile v{case.profile}; {declared}"
        return None
    if case.format_writes is not None and info.format_writes != case.format_writes:
        return f"assumes a writer of version {case.format_writes}; {declared}"
    if case.format_reads is not None and set(case.format_reads) != set(info.format_reads):
        return f"assumes the readable set {list(case.format_reads)}; {declared}"
    missing = [v for v in case.format_reads_include if v not in info.format_reads]
    if missing:
        return f"assumes a reader of version {missing[0]}; {declared}"
    if case.format_writes is not None or case.format_reads is not None or case.format_reads_include:
        return None
    if case.cls not in ("signature", "verify"):
        return None
    writes = any(isinstance(op, Measure | Stamp) for op in case.program)
    if writes and info.format_writes != 1:
        return f"written for profile v1 (its stamps carry no layout, CONF-11); {declared}"
    if any(isinstance(op, Verify) for op in case.program) and 1 not in info.format_reads:
        return f"written for profile v1 (it verifies version-1 blocks, CONF-11); {declared}"
    return None


SKIPS: tuple[Callable[[Case, AdapterInfo], str | None], ...] = (
    class_not_claimed,
    profile_not_declared,
    option_not_declared,
    capability_missing,
)


def not_applicable(case: Case, info: AdapterInfo) -> str | None:
    for predicate in SKIPS:
        reason = predicate(case, info)
        if reason:
            return reason
    return None


def in_declared_shape(case: Case, info: AdapterInfo) -> tuple[Case, str | None]:
    """The case as judged for ``info``: as written, or re-expressed into the declared shape
    (INTERPRETING.md §6.4), and the reason it is not applicable, if it is not."""
    reason = not_applicable(case, info)
    if reason is None:
        return case, None
    rewritten = reexpress(case, info)
    if rewritten is None:  # §6.4.1 to §6.4.3 meet no prefix case: then §6.4.4, if any
        rewritten = reexpress_blocks(case, info)
    if rewritten is None:
        return case, reason
    if isinstance(rewritten, str):
        return case, f"{reason}; not re-expressed: {rewritten}"
    return rewritten, not_applicable(rewritten, info)


def step_labels(case: Case) -> dict[int, str]:
    """The step of the scenario that sent each operation, by its index in the program."""
    return {c.op_index: c.where.step for c in case.checks if isinstance(c, OutcomeCheck)}


def trace_lines(case: Case, outcomes: Sequence[Outcome]) -> tuple[str, ...]:
    """Each operation as sent and what came back, numbered, beside the step that sent it.

    A request is its protocol-1 wire form without ``seq`` (what a stdio adapter
    receives; an in-process adapter receives the same values as arguments); an
    answer is the outcome in the same form (``ok``, ``error``), or the harness's
    account of an exchange that gave none. Text is ASCII-escaped, so an adapter's
    words are inert wherever the trace is shown.
    """
    steps = step_labels(case)
    lines: list[str] = []
    for index, (op, outcome) in enumerate(zip(case.program, outcomes, strict=False)):
        lines.append(f"{index + 1:>3} {steps.get(index, '')}")
        lines.append(f"    > {shown(op)}")
        lines.append(f"    < {_answer(op, outcome)}")
    return tuple(lines)


def _answer(op: Op, outcome: Outcome) -> str:
    if isinstance(op, HARNESS_STEPS) and isinstance(outcome, Ok):
        return "(done)"
    if isinstance(outcome, Ok):
        return json.dumps(codec.result_to_wire(op, outcome.value))
    if isinstance(outcome, Refused):
        return json.dumps({"error": codec.fault_to_wire(outcome.fault)})
    return "(no answer) " + json.dumps(outcome.reason)


def is_message_finding(failure: Failure) -> bool:
    """Whether ``failure`` is only an error message's wording (ERR-13): advice by default."""
    return not failure.broken and failure.requires == MESSAGE_RULE


#: What a message-only finding cites (ERR-13, which replaces ERR-6).
MESSAGE_RULE = ("ERR-13",)


def run_case(
    case: Case, driver: Driver, *, trace: bool = False, strict_messages: bool = False
) -> CaseResult:
    """Run ``case`` and judge it. A message-only finding (ERR-13) is advice, kept apart
    from the failures, unless ``strict_messages`` (``--strict-messages``) makes it one
    (CONF-12)."""
    case, reason = in_declared_shape(case, driver.info)
    if reason:
        return CaseResult(case, "not_applicable", reason=reason)
    case = adapt(case, driver.info)
    start = time.perf_counter()
    outcomes = driver.run(case.program)
    seconds = time.perf_counter() - start
    traced = trace_lines(case, outcomes) if trace else ()
    if len(outcomes) != len(case.program):
        failure = Failure(
            where=case.checks[0].where if case.checks else None,  # type: ignore[arg-type]
            expected=f"{len(case.program)} outcomes",
            actual=f"{len(outcomes)} outcomes",
        )
        return CaseResult(case, "failed", (failure,), seconds=seconds, trace=traced)
    probes = {  # steps where a failure answer is a right one (CONF-9, PLAN-24)
        c.op_index
        for c in case.checks
        if isinstance(c, OutcomeCheck) and isinstance(c.expect, Refuses | Answers)
    }
    first_break = next(
        (i for i, o in enumerate(outcomes) if isinstance(o, Broken) and i not in probes), None
    )
    failures: list[Failure] = []
    for check in case.checks:
        found = check.evaluate(outcomes)
        if found is None:
            continue
        # In step order: an adapter failure explains what follows it, never a wrong answer
        # judged before it, which stays the case's first failure. An answer after the break
        # is to a program the adapter did not run as written (a request left without the
        # item it refused to attach): it is not judged (spec/security.md).
        if first_break is not None and not found.broken and _last_step(check) > first_break:
            found = replace(found, broken=True)
        if not found.broken:
            found = replace(found, stake=_stake(check, case.program, outcomes))
        failures.append(found)
    if first_break is not None and not failures:
        failures.append(Failure(case.checks[0].where, "no adapter failure", "adapter failure"))
    failures += _ids_given_again(case, outcomes, driver, first_break)
    advice: tuple[Failure, ...] = ()
    if not strict_messages:
        advice = tuple(f for f in failures if is_message_finding(f))
        failures = [f for f in failures if not is_message_finding(f)]
    verdict: Verdict = "failed" if failures else "passed"
    return CaseResult(case, verdict, tuple(failures), seconds=seconds, trace=traced, advice=advice)


def _stake(check: Check, program: Sequence[Op], outcomes: Sequence[Outcome]) -> str:
    """Which way a failed check's answer erred, where its step says (CONF-18)."""
    if isinstance(check, OutcomeCheck):
        index = check.op_index
        return stakes.of_outcome(program[index], check.expect, outcomes[index])
    return stakes.of_relation(check.relation, [program[ref.op_index] for ref in check.refs])


def _last_step(check: Check) -> int:
    """The last step of the program whose outcome ``check`` reads."""
    if isinstance(check, OutcomeCheck):
        return check.op_index
    return max(ref.op_index for ref in check.refs)


@dataclass
class _IdLedger:
    """The ids one adapter process has given, by kind, and the case that first read each."""

    #: The driver's count of (re)starts these ids come from: a new process starts anew.
    process: int = -1
    given: dict[str, dict[int, str]] = field(default_factory=dict)


#: One ledger per driver, for as long as the driver lives.
_LEDGERS: weakref.WeakKeyDictionary[Driver, _IdLedger] = weakref.WeakKeyDictionary()
_ID_READS: dict[type[Op], tuple[str, str]] = {
    ModelInstanceId: ("instance", "ID-3"),
    CacheAllocId: ("allocation", "ALLOC-1"),
}


def _ids_given_again(
    case: Case, outcomes: Sequence[Outcome], driver: Driver, first_break: int | None = None
) -> list[Failure]:
    """An id this case read that an earlier case, on the same adapter process, read too.

    Every object is released at the end of its program (PROTO-16), so an id read in two
    programs was given to two objects: ids are never issued twice within a process
    (ID-3, ALLOC-1), whatever the programs in between. Ids of one kind are compared
    with ids of that kind only; an adapter restarted since gives its ids anew. A read
    after the step the adapter broke on is remembered but not judged (§7.3).
    """
    try:
        ledger = _LEDGERS.setdefault(driver, _IdLedger())
    except TypeError:  # a driver that cannot be weakly referenced keeps no ledger
        return []
    process = getattr(driver, "restarts", 0)
    if process != ledger.process:
        ledger.process = process
        ledger.given.clear()
    failures: list[Failure] = []
    read: dict[str, set[int]] = {}
    for index, (op, outcome) in enumerate(zip(case.program, outcomes, strict=False)):
        kind_and_rule = _ID_READS.get(type(op))
        if kind_and_rule is None or not isinstance(outcome, Ok) or type(outcome.value) is not int:
            continue
        kind, rule = kind_and_rule
        value = outcome.value
        earlier = ledger.given.get(kind, {}).get(value)
        judged = first_break is None or index < first_break
        if earlier is not None and judged and value not in read.get(kind, set()):
            where = next(
                (
                    c.where
                    for c in case.checks
                    if isinstance(c, OutcomeCheck) and c.op_index == index
                ),
                case.checks[0].where,
            )
            failures.append(
                Failure(
                    where,
                    f"an {kind} id no earlier case of this adapter process read",
                    f"{value}, read in {earlier} already: an id given twice",
                    requires=(rule,),
                    stake="unsafe",  # a plan keyed on the earlier holder's id could pass
                )
            )
        read.setdefault(kind, set()).add(value)
    for kind, values in read.items():
        for value in values:
            ledger.given.setdefault(kind, {}).setdefault(value, case.id)
    return failures


def run_cases(
    cases: Iterable[Case], driver: Driver, *, trace: bool = False, strict_messages: bool = False
) -> list[CaseResult]:
    return [run_case(case, driver, trace=trace, strict_messages=strict_messages) for case in cases]


#: Why a failed case failed, in the order a person should read them (the wrong answers
#: are sorted by basis, CONF-8, and by stake, CONF-18; the other two are neither).
CAUSES = ("answer", "message", "adapter")
_CAUSE_TEXT = {
    "message": "only the error's message wording (ERR-13, a failure under --strict-messages); "
    "its kind, field and values were right",
    "adapter": "the adapter broke instead of answering: no answer was judged",
}


def cause_of(failures: Sequence[Failure]) -> str:
    """``answer`` if any judged check found a wrong answer (even one the adapter broke
    after), else ``adapter`` if the adapter broke on a step, else ``message``: every
    failed check is an error's message (ERR-13, a failure only under ``strict_messages``)."""
    judged = [f for f in failures if not f.broken]
    if any(f.requires != MESSAGE_RULE for f in judged) or not failures:
        return "answer"
    return "adapter" if len(judged) < len(failures) else "message"


def _hanging(text: str) -> str:
    """``text`` with its later lines indented under the first (a label is 12 wide)."""
    return text.replace("\n", "\n" + " " * 12)


def render_failure(case: Case, failures: tuple[Failure, ...], reason: str = "") -> str:
    if reason:
        return f"{case.id}: not applicable: {reason}"
    if not failures:
        return f"{case.id}: passed"
    first = failures[0]
    # a generated check bears on every rule of its class; a disagreement it found names the
    # rules that one bears on (differential.prefix.refine), and those are what is shown
    cited = first.requires if case.kind == "generated" and first.requires else case.requires
    requires = ", ".join(dict.fromkeys((*cited, *first.requires)))
    lines = [
        f"{case.kind} {case.id} failed at {first.where}",
        f"  expected: {_hanging(first.expected)}",
        f"  actual:   {_hanging(first.actual)}",
        f"  requires: {requires}",
        *(f"    {req}: {requirement_summary(req)}" for req in requires.split(", ")),
        f"  basis:    {_basis(case)}",
        f"  why:      {case.why}",
    ]
    stake = stakes.of_case(f.stake for f in failures if not f.broken)
    if stake in STAKE_TEXT:
        lines.insert(-2, f"  stake:    {STAKE_TEXT[stake]}")
        if first.stake != stake:  # the case's first failure is not the one that ranks it
            at = next(f for f in failures if f.stake == stake and not f.broken)
            lines.insert(
                -2,
                f"            at {at.where}: expected {_hanging(at.expected)}; "
                f"actual {_hanging(at.actual)}",
            )
    cause = cause_of(failures)
    if cause != "answer":
        lines.insert(-2, f"  cause:    {_CAUSE_TEXT[cause]}")
    inputs = _inputs_given(case)
    if inputs and first.expected == SUCCESS:
        lines.insert(
            -2,
            f"  hint:     an engine whose requests cannot carry {' or '.join(inputs)} declares "
            "capabilities.prefix_inputs without it (PREFIX-23), which sets such cases aside",
        )
    if case.incident:
        lines.append(f"  incident: {case.incident}")
    if first.detail:
        lines.append("  detail:\n    " + first.detail.strip().replace("\n", "\n    "))
    later = failures[1:]
    unjudged = sum(f.broken for f in later)  # what follows a broken step judged nothing
    if later and unjudged < len(later):
        lines.append(f"  ({len(later) - unjudged} more failed check(s) in this {case.kind})")
    if unjudged:
        lines.append(f"  ({unjudged} later check(s) not judged: the adapter broke)")
    return "\n".join(lines)


def _inputs_given(case: Case) -> list[str]:
    """The discriminants of PREFIX-23 the case gives its requests, in the table's order."""
    given = {name for op in case.program for name in prefix_inputs_given(op)}
    return [name for name in PREFIX_INPUTS if name in given]


def _basis(case: Case) -> str:
    """What the verdict rests on: who settled the rule (CONF-8), not what breaking it costs."""
    if not case.basis:
        return "the seeds' semantics (a rule every implementation shares)"
    return (
        f"decision {', '.join(case.basis)} of the specification (spec/README.md, Decisions: "
        "a point the seeds leave open, settled there with its reason)"
    )


#: What a failed case's stake means, as its text shows it (CONF-18).
STAKE_TEXT = {
    "unsafe": "unsafe: it reused or accepted what must not be (fix first; CONF-18)",
    "lost_reuse": "lost reuse: it gave up reuse it was owed (CONF-18)",
}


def render_advice(result: CaseResult) -> str:
    """A case's advice (ERR-13), one finding a line: shown apart from failures (CONF-12)."""
    lines = [f"{result.case.kind} {result.case.id}: advice (ERR-13, not part of the verdict)"]
    for finding in result.advice:
        lines.append(f"  at {finding.where}: {_hanging(finding.actual)}")
    return "\n".join(lines)
