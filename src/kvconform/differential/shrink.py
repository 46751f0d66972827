"""Shrinking a failing program by editing the choices that wrote it.

A writer (:mod:`.strategies`) turns a sequence of integer choices into a program; a
failing program is made simpler by editing its choices (a prefix kept, a group or a
run deleted or zeroed, a choice lowered) and replaying them, keeping each candidate
that still disagrees with the reference and is simpler (shorter, or as long and
smaller). :mod:`.engine` runs it on the first disagreement of a property.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace

from kvconform.differential import strategies
from kvconform.differential.compare import (
    Counterexample,
    Program,
    ReferenceBroken,
    renumber,
    well_formed,
)
from kvconform.protocol import operations as ops


class _OutOfTime(Exception):
    pass


def _shortlex(choices: Sequence[int]) -> tuple[int, Sequence[int]]:
    return (len(choices), choices)


def shrink_choices(
    write: strategies.Writer[Program],
    judge: Callable[[Program], Counterexample | ReferenceBroken | None],
    choices: Sequence[int],
    cx: Counterexample,
    deadline: float,
) -> Counterexample:
    """The simplest failing program found by editing the choices that wrote ``cx``.

    A candidate is the choice sequence with a prefix kept, a group (a step, a list
    element) or a run of choices deleted or zeroed, or one choice lowered; it is
    replayed (:class:`~.strategies.ReplaySource`: choices past the end are 0, which
    ends every list) and kept if it still disagrees and its choices are simpler
    (shorter, or as long and smaller). Choices are ordered so that simpler choices
    write simpler programs. It stops at ``deadline`` with the simplest so far; a
    failure that shrinks before the deadline shrinks to the same program every time.
    """
    best: list[int] = list(choices)
    best_spans: list[strategies.Span] = []
    found = cx

    def attempt(candidate: list[int]) -> bool:
        nonlocal best, best_spans, found
        if time.perf_counter() >= deadline:
            raise _OutOfTime
        source = strategies.ReplaySource(candidate, limit=len(best) + 64)
        try:
            program = write(source)
        except Exception:  # too many choices, or a writer fault: not a simpler failure
            return False
        if _shortlex(source.choices) >= _shortlex(best) or not program:
            return False
        judged = judge(program)
        if not isinstance(judged, Counterexample):
            return False
        best, best_spans, found = source.choices, source.spans, judged
        return True

    # the spans of the original choices
    replay = strategies.ReplaySource(best)
    write(replay)
    best_spans = replay.spans
    try:
        improved = True
        while improved:
            before = best
            _shrink_prefix(best, attempt)
            _delete_spans(lambda: best, lambda: best_spans, attempt)
            for size in (8, 4, 2, 1):
                _delete_runs(lambda: best, size, attempt)
            for size in (8, 4, 2, 1):
                _zero_runs(lambda: best, size, attempt)
            _lower_each(lambda: best, attempt)
            improved = best != before
    except _OutOfTime:
        pass
    return found


def _shrink_prefix(best: list[int], attempt: Callable[[list[int]], bool]) -> None:
    """Keep the shortest prefix that still fails (by bisection; what follows a
    disagreement rarely matters)."""
    lo, hi = 0, len(best)
    while lo < hi:
        mid = (lo + hi) // 2
        if attempt(best[:mid]):
            hi = mid
        else:
            lo = mid + 1


def _delete_spans(
    best: Callable[[], list[int]],
    spans: Callable[[], list[strategies.Span]],
    attempt: Callable[[list[int]], bool],
) -> None:
    """Delete whole groups, the last first."""
    index = 0
    while True:
        order = sorted(set(spans()), key=lambda s: (-s[0], s[1]))
        if index >= len(order):
            return
        start, end = order[index]
        current = best()
        if not attempt(current[:start] + current[end:]):
            index += 1


def _delete_runs(
    best: Callable[[], list[int]], size: int, attempt: Callable[[list[int]], bool]
) -> None:
    at = len(best()) - size
    while at >= 0:
        current = best()
        if not attempt(current[:at] + current[at + size :]):
            at -= 1
        at = min(at, len(best()) - size)


def _zero_runs(
    best: Callable[[], list[int]], size: int, attempt: Callable[[list[int]], bool]
) -> None:
    at = len(best()) - size
    while at >= 0:
        current = best()
        if any(current[at : at + size]):
            attempt(current[:at] + [0] * size + current[at + size :])
        at = min(at - 1, len(best()) - size)


def _lower_each(best: Callable[[], list[int]], attempt: Callable[[list[int]], bool]) -> None:
    """Lower each choice as far as it still fails (0 first, then by bisection)."""
    at = len(best()) - 1
    while at >= 0:
        current = best()
        if at < len(current) and current[at] > 0:
            value = current[at]
            if not attempt([*current[:at], 0, *current[at + 1 :]]):
                lo, hi = 0, value  # lo passes, hi fails
                while lo + 1 < hi:
                    current = best()
                    if at >= len(current) or current[at] != hi:
                        break  # the choices moved: on to the next
                    mid = (lo + hi) // 2
                    if attempt([*current[:at], mid, *current[at + 1 :]]):
                        hi = mid
                    else:
                        lo = mid
        at = min(at - 1, len(best()) - 1)


def _candidates(program: Program) -> list[Program]:
    """``program`` with one operation removed, or one mix op of one hash program removed."""
    out: list[Program] = []
    for index in reversed(range(len(program))):
        if len(program) > 1:
            out.append(program[:index] + program[index + 1 :])
        op = program[index]
        if isinstance(op, ops.Hash):
            for at in reversed(range(len(op.program) - 1)):  # the closing finish stays
                smaller = ops.Hash(program=op.program[:at] + op.program[at + 1 :])
                out.append((*program[:index], smaller, *program[index + 1 :]))
    return out


def minimize(
    judge: Callable[[Program], Counterexample | ReferenceBroken | None],
    cx: Counterexample,
    deadline: float,
    keeps: Callable[[Program], bool] | None = None,
) -> tuple[Counterexample, int]:
    """Delete what the shrinker left that the disagreement does not need (greedy, one at a
    time).

    A shrinker of choices shrinks values well but cannot always delete an early step
    whose removal changes how later choices are read; this pass can. A candidate is
    kept only if it is well formed and, given ``keeps`` (the property's
    :attr:`~kvconform.differential.properties.Property.keeps`), still within what the
    property's programs promise: a deletion can take a program where a correct
    implementation may answer otherwise than the reference, which is no counterexample.
    """
    runs = 0
    improved = True
    while improved and time.perf_counter() < deadline:
        improved = False
        for candidate in _candidates(cx.program):
            if time.perf_counter() >= deadline:
                break
            if not well_formed(candidate) or (keeps is not None and not keeps(candidate)):
                continue
            runs += 1
            judged = judge(candidate)
            if isinstance(judged, Counterexample):
                cx = judged
                improved = True
                break
    return replace(cx, program=renumber(cx.program)), runs


@contextlib.contextmanager
def hypothesis_shrinking_deadline(seconds: float) -> Iterator[None]:
    """Bound Hypothesis's shrinker (its own limit is five minutes).

    ``MAX_SHRINKING_SECONDS`` is an internal knob of Hypothesis: it is set only
    if present, and restored afterwards. Without it the check-level budget in
    :func:`run_property` still stops new programs from running, only less promptly.
    """
    from hypothesis.internal.conjecture import engine as conjecture

    before = getattr(conjecture, "MAX_SHRINKING_SECONDS", None)
    if not isinstance(before, int | float):
        yield
        return
    conjecture.MAX_SHRINKING_SECONDS = seconds  # type: ignore[assignment]
    try:
        yield
    finally:
        conjecture.MAX_SHRINKING_SECONDS = before  # type: ignore[assignment]
