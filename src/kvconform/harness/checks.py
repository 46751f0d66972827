"""Expectations, and how an implementation's outcomes are judged against them.

Ids are judged only by equality and order (ID-8, CONF-12); errors by kind,
field, layer and values, plus the ERR-13 check (advice, CONF-12) that the free-form message names
the field and the values. Handle names and message wording are never judged.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from kvconform.rendering import clip, render, render_hashes
from kvconform.values import Broken, ErrorValue, Fault, Ok, Outcome, Refused, Signature


@dataclass(frozen=True)
class Where:
    """Where a check comes from: the file, its line, and the step as a reader counts it."""

    file: str
    line: int | None
    step: str

    def __str__(self) -> str:
        at = f"{self.file}:{self.line}" if self.line else self.file
        return f"{self.step} ({at})"


@dataclass(frozen=True)
class Failure:
    """One failed check."""

    where: Where
    expected: str
    actual: str
    #: Requirements this particular check adds to the case's own (e.g. ERR-13).
    requires: tuple[str, ...] = ()
    detail: str = ""
    #: The adapter broke on this step (a crash, a timeout, a malformed reply): no answer
    #: was judged (PROTO-13 .. PROTO-29).
    broken: bool = False
    #: Which way the answer erred, where the step says (CONF-18, :mod:`.stakes`):
    #: ``unsafe``, ``lost_reuse``, or ``""`` for neither.
    stake: str = ""


# Expectations on one operation's outcome ------------------------------------


@dataclass(frozen=True)
class Succeeds:
    """The operation must succeed; its value is used elsewhere or not at all."""

    def judge(self, outcome: Outcome) -> tuple[str, str, tuple[str, ...]] | None:
        if isinstance(outcome, Ok):
            return None
        return SUCCESS, describe(outcome), ()


@dataclass(frozen=True)
class Validity:
    """A validity check must answer valid (``True``) or invalid."""

    valid: bool

    def judge(self, outcome: Outcome) -> tuple[str, str, tuple[str, ...]] | None:
        if isinstance(outcome, Ok) and outcome.value is self.valid:
            return None
        want = "plan valid" if self.valid else "plan invalid"
        return want, describe(outcome), ()


@dataclass(frozen=True)
class ValueIs:
    """The operation's value must equal ``value`` (hash results, lengths)."""

    value: object

    def judge(self, outcome: Outcome) -> tuple[str, str, tuple[str, ...]] | None:
        if isinstance(outcome, Ok) and strictly_equal(outcome.value, self.value):
            return None
        return show(self.value), describe(outcome), ()


@dataclass(frozen=True)
class ValueOneOf:
    """The operation's value must equal one of ``values``: a count the specification
    leaves to the engine among these (``expect_one_of``; PREFIX-24's order within one
    store)."""

    values: tuple[object, ...]

    def judge(self, outcome: Outcome) -> tuple[str, str, tuple[str, ...]] | None:
        if isinstance(outcome, Ok) and any(strictly_equal(outcome.value, v) for v in self.values):
            return None
        return one_of_text(self.values), describe(outcome), ()


@dataclass(frozen=True)
class SignatureIs:
    """The operation must yield exactly this signature."""

    signature: Signature

    def judge(self, outcome: Outcome) -> tuple[str, str, tuple[str, ...]] | None:
        if isinstance(outcome, Ok) and strictly_equal(outcome.value, self.signature):
            return None
        return show(self.signature), describe(outcome), ()


@dataclass(frozen=True)
class ErrorIs:
    """The operation must be refused with exactly this error (ERR-5)."""

    kind: str
    field: str | None
    layer: int | None
    values: Mapping[str, ErrorValue]

    def judge(self, outcome: Outcome) -> tuple[str, str, tuple[str, ...]] | None:
        want = show_error(self.kind, self.field, self.layer, self.values)
        if not isinstance(outcome, Refused):
            return want, describe(outcome), ()
        fault = outcome.fault
        got, wanted = canonical_values(fault.values), canonical_values(self.values)
        if (
            (fault.kind, fault.field) != (self.kind, self.field)
            or not strictly_equal(fault.layer, self.layer)
            or got.keys() != wanted.keys()
            or not all(strictly_equal(got[k], wanted[k]) for k in wanted)
        ):
            return want, describe(outcome), ()
        missing = message_omissions(fault)
        if missing:
            return (
                "a message naming the field and every value",
                f"message {render(fault.message)} does not mention {', '.join(missing)}",
                ("ERR-13",),
            )
        return None


@dataclass(frozen=True)
class ShapeMismatchIs:
    """A replacement layer of another shape: refused on the first differing field (ALLOC-17).

    ``differing`` lists every field that differs as (field, the cache's value,
    the replacement's value), in the default order; which one is reported
    depends on the order the implementation declares (``replace_layer_order``).
    """

    layer: int
    differing: tuple[tuple[str, int, int], ...]

    def in_order(self, order: Sequence[str]) -> ErrorIs:
        name, expected, found = min(self.differing, key=lambda d: order.index(d[0]))
        return ErrorIs(
            "layer_shape_mismatch", name, self.layer, {"expected": expected, "found": found}
        )

    def judge(self, outcome: Outcome) -> tuple[str, str, tuple[str, ...]] | None:
        return self.in_order([d[0] for d in self.differing]).judge(outcome)


@dataclass(frozen=True)
class Refuses:
    """A must-not-succeed probe: any refusal passes, any ``ok`` answer fails (CONF-9).

    Used where the specification requires a refusal but gives it no normative
    kind (HASH-12, HASH-13, ALLOC-14, ALLOC-15's ``refuse``): a typed error, an
    adapter ``failure`` or an ``error`` answer all count as refusing.
    """

    def judge(self, outcome: Outcome) -> tuple[str, str, tuple[str, ...]] | None:
        # An ``ok`` whose value is malformed claims success all the same (CONF-9); a
        # crash, a timeout or a garbled line cannot be told from a refusal, and pass.
        if isinstance(outcome, Ok) or (isinstance(outcome, Broken) and outcome.claims_success):
            return "a refusal (any error or failure answer)", describe(outcome), ()
        return None


@dataclass(frozen=True)
class Answers:
    """The step's own outcome is not judged: what follows it is.

    For a step whose outcome the specification leaves open (PLAN-24: a rebind to a
    cache of another structure may succeed or be refused, and a structural refusal
    has no kind, so a ``failure`` answer is as right as a typed error, CONF-9); the
    plan must stay stale, which the later steps check. An adapter that broke here
    leaves those later steps without answers, and they fail.
    """

    def judge(self, outcome: Outcome) -> tuple[str, str, tuple[str, ...]] | None:
        return None


Expectation = (
    Succeeds
    | Validity
    | ValueIs
    | ValueOneOf
    | SignatureIs
    | ErrorIs
    | ShapeMismatchIs
    | Refuses
    | Answers
)


def strictly_equal(a: object, b: object) -> bool:
    """Equal, and of the same kinds: ``4.0`` is not the count ``4``, ``True`` is not ``1``.

    Python's ``==`` would accept both; a wire decoder in another language would not,
    so the in-process judge must not either (ERR-4, SIG-1).
    """
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and a == b
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(strictly_equal(x, y) for x, y in zip(a, b, strict=True))
    if dataclasses.is_dataclass(a) and dataclasses.is_dataclass(b):
        return type(a) is type(b) and all(
            strictly_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
        )
    return a == b


def canonical_values(values: Mapping[str, ErrorValue]) -> dict[str, ErrorValue]:
    return {k: tuple(v) if isinstance(v, list | tuple) else v for k, v in values.items()}


def message_omissions(fault: Fault) -> list[str]:
    """What an error message fails to mention, per ERR-13 (empty when it is fine).

    The field may be spelled any way (``head_dim``, ``head dim``, ``HeadDim``):
    letters and digits are compared without case, punctuation and spaces.
    Each scalar value must appear as written (a number as a whole number: ``4``
    is not found in ``64``); pairs and lists may be rendered in any form.
    """
    missing = []
    message = fault.message
    if not message.strip():
        return ["anything (it is empty)"]
    squeezed = re.sub(r"[^a-z0-9]", "", message.lower())
    if fault.field and re.sub(r"[^a-z0-9]", "", fault.field.lower()) not in squeezed:
        missing.append(f"the field {fault.field}")
    for name, value in fault.values.items():
        if isinstance(value, tuple | list) or value is None:
            continue  # a pair, a list or "no window" may be rendered in any form (PROF-10)
        if not _mentions(message, value):
            missing.append(f"{name}={value}")
    return missing


def _mentions(message: str, value: object) -> bool:
    """Whether ``value`` is in ``message``; a number only as a whole number (4 is not in 64)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return re.search(rf"(?<![0-9]){value}(?![0-9])", message) is not None
    return str(value) in message


# Checks ------------------------------------------------------------------------


@dataclass(frozen=True)
class OutcomeCheck:
    """One operation's outcome against one expectation."""

    where: Where
    op_index: int
    expect: Expectation

    def evaluate(self, outcomes: Sequence[Outcome]) -> Failure | None:
        verdict = self.expect.judge(outcomes[self.op_index])
        if verdict is None:
            return None
        expected, actual, requires = verdict
        outcome = outcomes[self.op_index]
        if isinstance(outcome, Broken):
            return Failure(self.where, expected, actual, requires, outcome.detail, broken=True)
        return Failure(self.where, expected, actual, requires)


@dataclass(frozen=True)
class ValueRef:
    """A named value: the result of one operation (the last finish, for a hash)."""

    name: str
    op_index: int
    last: bool = False

    def get(self, outcomes: Sequence[Outcome]) -> object:
        outcome = outcomes[self.op_index]
        if not isinstance(outcome, Ok):
            raise LookupError(f"{self.name} has no value: its operation gave {describe(outcome)}")
        value = outcome.value
        if self.last:
            assert isinstance(value, tuple)
            return value[-1] if value else None
        return value


Relation = Literal["same", "differ", "increasing", "nonzero", "together"]

_RELATION_TEXT = {
    "same": "all equal",
    "differ": "pairwise different",
    "increasing": "strictly increasing in this order",
    "nonzero": "each a non-zero id",
    "together": "together",
}


@dataclass(frozen=True)
class RelationCheck:
    """Named values must be equal, pairwise different, strictly increasing, or, together,
    one of the listed rows of values (``together``)."""

    where: Where
    relation: Relation
    refs: tuple[ValueRef, ...]
    #: Requirements a failure of this check adds to the case's own.
    requires: tuple[str, ...] = ()
    #: For ``together``: the rows the values may be, each a value per ref, in order.
    rows: tuple[tuple[object, ...], ...] = ()

    def evaluate(self, outcomes: Sequence[Outcome]) -> Failure | None:
        names = ", ".join(ref.name for ref in self.refs)
        expected = f"{names}: {_RELATION_TEXT[self.relation]}"
        if self.relation == "together":
            expected += " " + rows_text(self.rows)
        try:
            values = [ref.get(outcomes) for ref in self.refs]
        except LookupError as exc:  # a value never given: judged only if it was answered
            broken = any(isinstance(outcomes[ref.op_index], Broken) for ref in self.refs)
            return Failure(self.where, expected, str(exc), self.requires, broken=broken)
        if self.relation == "nonzero":
            # The one comparison with a constant the suite makes: zero is what an
            # uninitialised id looks like (ID-1), whatever numbering is chosen.
            ok = all(isinstance(v, int) and not isinstance(v, bool) and v != 0 for v in values)
        elif self.relation == "same":
            ok = all(strictly_equal(v, values[0]) for v in values)
        elif self.relation == "differ":
            ok = len({repr(v) for v in values}) == len(values)
        elif self.relation == "together":
            ok = any(strictly_equal(tuple(values), row) for row in self.rows)
        else:
            ok = all(
                isinstance(a, int) and isinstance(b, int) and a < b
                for a, b in itertools.pairwise(values)
            )
        if ok:
            return None
        shown = ", ".join(f"{ref.name}={show(v)}" for ref, v in zip(self.refs, values, strict=True))
        return Failure(self.where, expected, shown, self.requires)


Check = OutcomeCheck | RelationCheck


# Rendering ------------------------------------------------------------------


def show(value: object) -> str:
    """A value in a failure, JSON style (:mod:`kvconform.rendering`); hash results in hex."""
    if isinstance(value, tuple) and value and all(type(v) is int for v in value):
        return render_hashes(value)
    return render(value)


def one_of_text(values: Sequence[object]) -> str:
    """The values an ``expect_one_of`` accepts, as a failure shows them."""
    return "one of " + ", ".join(show(v) for v in values)


def rows_text(rows: Sequence[Sequence[object]]) -> str:
    """The rows a ``together`` relation accepts, as a failure shows them."""
    return "one of " + ", ".join("(" + ", ".join(show(v) for v in row) + ")" for row in rows)


def show_error(
    kind: str, field: str | None, layer: int | None, values: Mapping[str, ErrorValue]
) -> str:
    parts = []
    if field is not None:
        parts.append(f"field={field}")
    if layer is not None:
        parts.append(f"layer={layer}")
    parts += [f"{k}={render(v)}" for k, v in values.items()]
    return f"error {kind}" + (f" ({', '.join(parts)})" if parts else "")


#: The most characters one outcome takes in a failure: an adapter's answer is its own
#: text, and a hostile one (a list of 400,000 hashes, a message of megabytes) must not
#: make a report of megabytes.
DESCRIBED_LIMIT = 4000

#: What a failure shows as expected, or as the outcome, where an operation succeeds
#: with nothing to compare.
SUCCESS = "success"


def describe(outcome: Outcome) -> str:
    """``outcome`` as a failure shows it, clipped to :data:`DESCRIBED_LIMIT` characters."""
    if isinstance(outcome, Ok):
        if isinstance(outcome.value, bool):
            return "plan valid" if outcome.value else "plan invalid"
        if outcome.value is None:
            return SUCCESS
        return clip(f"success: {show(outcome.value)}", DESCRIBED_LIMIT)
    if isinstance(outcome, Refused):
        f = outcome.fault
        text = show_error(f.kind, f.field, f.layer, f.values) + f" -- {render(f.message)}"
        return clip(text, DESCRIBED_LIMIT)
    return clip(f"adapter failure: {outcome.reason}", DESCRIBED_LIMIT)
