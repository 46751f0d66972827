"""Sources of choices: what every program writer draws from.

A writer is a plain function of a :class:`Source` of integer choices. Three sources feed
the same writers: :class:`RandomSource` (seeded, recording: the engine's fast path),
:class:`ReplaySource` (a recorded and edited choice sequence: the shrinker) and
:class:`HypothesisSource` (every choice from Hypothesis: :func:`strategy`). :func:`pick`,
:func:`flag` and :func:`items` are the choices every writer is made of.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from hypothesis import strategies as st

T = TypeVar("T")


class Source(Protocol):
    """Where a program writer's choices come from."""

    def integer(self, lo: int, hi: int) -> int:
        """A whole number from ``lo`` to ``hi`` inclusive; ``lo`` is the simplest."""
        ...

    def group(self, write: Callable[[], T]) -> T:
        """Run ``write`` as one unit (a step, a list element) the shrinker may delete whole."""
        ...


#: A program writer: a function of a source.
Writer = Callable[[Source], T]

#: A span of a choice sequence, ``[start, end)``, made by one :meth:`Source.group`.
Span = tuple[int, int]


class RecordedSource:
    """A source that records the choices made (as offsets from ``lo``) and the spans of
    groups, so that a program can be written again from its choices, or from edited ones."""

    def __init__(self) -> None:
        self.choices: list[int] = []
        self.spans: list[Span] = []

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def group(self, write: Callable[[], T]) -> T:
        start = len(self.choices)
        value = write()
        if len(self.choices) > start:
            self.spans.append((start, len(self.choices)))
        return value


class RandomSource(RecordedSource):
    """Pseudo-random choices from a seeded :class:`random.Random`, recorded.

    Only ``getrandbits`` is used (its output is fixed for a seed across Python
    versions), so a seed writes the same program everywhere.
    """

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self._bits = rng.getrandbits

    def integer(self, lo: int, hi: int) -> int:
        span = hi - lo
        if span <= 0:
            self.choices.append(0)
            return lo
        width = span.bit_length()
        offset = self._bits(width)
        while offset > span:
            offset = self._bits(width)
        self.choices.append(offset)
        return lo + offset


class Overrun(Exception):
    """A replayed choice sequence asked for more choices than any program needs."""


class ReplaySource(RecordedSource):
    """Replays ``prefix`` (offsets from ``lo``, clamped to each range), then chooses 0.

    What was actually chosen is recorded, so an edited sequence reads back normalized.
    """

    def __init__(self, prefix: Sequence[int], limit: int = 100_000) -> None:
        super().__init__()
        self._prefix = prefix
        self._limit = limit

    def integer(self, lo: int, hi: int) -> int:
        index = len(self.choices)
        if index >= self._limit:
            raise Overrun(f"more than {self._limit} choices")
        wanted = self._prefix[index] if index < len(self._prefix) else 0
        offset = min(wanted, max(0, hi - lo))
        self.choices.append(offset)
        return lo + offset


@functools.lru_cache(maxsize=4096)
def _integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


class HypothesisSource:
    """Every choice drawn from Hypothesis (inside a ``@st.composite`` or ``st.data()``)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        value: int = self._draw(_integers(lo, hi))
        return value

    def group(self, write: Callable[[], T]) -> T:
        """One Hypothesis span, so that Hypothesis's shrinker can delete it whole."""
        value: T = self._draw(_span(self, write))
        return value


# Made into strategies once, here: ``st.composite`` reads the source of the function it
# wraps (to warn of an unused ``draw``), which for a function made anew at every group
# took more time than the drawing.
@st.composite
def _span(
    draw: Callable[[st.SearchStrategy[Any]], Any], source: HypothesisSource, write: Callable[[], T]
) -> T:
    """``write``, its choices drawn with ``draw`` (one span of Hypothesis's choices)."""
    outer, source._draw = source._draw, draw
    try:
        return write()
    finally:
        source._draw = outer


@st.composite
def _written(draw: Callable[[st.SearchStrategy[Any]], Any], write: Writer[T]) -> T:
    return write(HypothesisSource(draw))


def strategy(write: Writer[T]) -> st.SearchStrategy[T]:
    """``write`` as a Hypothesis strategy (each choice one Hypothesis draw)."""
    return _written(write)


def pick(src: Source, options: Sequence[T]) -> T:
    """One of ``options`` (the first is the simplest)."""
    return options[src.integer(0, len(options) - 1)]


def flag(src: Source) -> bool:
    return src.integer(0, 1) == 1


def items(
    src: Source, write: Callable[[], T], max_size: int, min_size: int = 0, mean_extra: int = 5
) -> list[T]:
    """A list of ``min_size`` to ``max_size`` elements, about ``mean_extra`` more than the
    minimum on average; each element is a group, and the choice 0 ends the list."""
    out: list[T] = []
    while len(out) < max_size and (len(out) < min_size or src.integer(0, mean_extra) != 0):
        out.append(src.group(write))
    return out
