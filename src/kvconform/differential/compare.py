"""Judging an implementation's outcomes against the reference's, operation by operation.

Everything here follows the judging rules of CONF-12: values that are normative
(validity, lengths, signatures, hash values, errors by kind, field, layer and
values) are compared exactly; ids and plan keys only by relation. Nothing here
needs Hypothesis.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from kvconform.harness.checks import canonical_values, describe, show_error
from kvconform.protocol import codec
from kvconform.protocol import operations as ops
from kvconform.values import Broken, ErrorValue, Ok, Outcome, Refused, Signature

#: A program is a tuple of operations, run from no handles to none.
Program = tuple[ops.Op, ...]


def _relation_read(op: ops.Op) -> tuple[str, Literal["order", "equality"]] | None:
    """How reads of ``op`` are compared, if only by relation (the table's ``relation``):
    ids by equality and order (ID-8), plan keys by equality only (PLAN-3)."""
    return ops.BY_CLASS[type(op)].relation


Relation = Literal["equal to", "less than", "greater than", "different from"]


@dataclass(frozen=True)
class Mismatch:
    """The first answer on which the implementation and the reference disagree."""

    #: Index of the operation in the program.
    index: int
    expected: str
    actual: str
    requires: tuple[str, ...]
    #: For a relation: the index of the earlier read it is related to, and how the
    #: reference and the implementation relate the two (``"equal to"``, ``"less than"``, ...).
    related_to: int | None = None
    relations: tuple[Relation | None, Relation | None] | None = None
    #: The implementation broke on this operation instead of answering: nothing judged.
    broken: bool = False


class ReferenceBroken(RuntimeError):
    """The reference could not run a generated program: the generator's fault, not the adapter's."""


def relation(a: object, b: object, mode: Literal["order", "equality"]) -> Relation | None:
    """How ``b`` relates to ``a``; ``None`` when either is not an unsigned integer."""
    if not (_is_u64(a) and _is_u64(b)):
        return None
    assert isinstance(a, int) and isinstance(b, int)
    if a == b:
        return "equal to"
    if mode == "equality":
        return "different from"
    return "greater than" if b > a else "less than"


def judged(outcome: Outcome) -> str:
    """An outcome as far as it is judged: an error without its (free) message."""
    if isinstance(outcome, Refused):
        f = outcome.fault
        return show_error(f.kind, f.field, f.layer, f.values)
    return describe(outcome)


def well_formed(program: Sequence[ops.Op]) -> bool:
    """Whether every handle is used only while live, as the kind of object its field
    names, and every toggled hook is declared.

    Read from the operation table: a new handle binds what the operation makes, a
    handle field must name a live object of its kind, a released one any live object.
    The generator only writes well-formed programs; shrinking by deleting
    operations keeps only candidates that still are.
    """
    hooks: dict[str, frozenset[str]] = {}  # live model -> its declared hooks
    live: dict[str, str] = {}  # live handle -> kind
    for op in program:
        spec = ops.BY_CLASS[type(op)]
        for name in spec.handles:
            if live.get(getattr(op, name)) != name:
                return False
        for name in spec.releases:
            if live.pop(getattr(op, name), None) is None:
                return False
        if spec.binds is not None and spec.makes is not None:
            handle = getattr(op, spec.binds)
            if handle in live:
                return False
            live[handle] = spec.makes
        if isinstance(op, ops.ModelNew):
            hooks[op.handle] = frozenset(h for h, _ in op.spec.hooks)
        elif isinstance(op, ops.ModelReload):
            hooks[op.handle] = hooks[op.model]
        elif isinstance(op, ops.ModelSetHook) and op.hook not in hooks[op.model]:
            return False
    return True


def renumber(program: Sequence[ops.Op]) -> Program:
    """The same program with handles renamed m1, m2, ... c1, ... s1, ... in order of binding
    (the first letter of the kind of object, from the operation table).

    Handle names are never judged (CONF-12), so the outcomes stay the same; the
    shrunk program just reads better without the gaps deleted steps leave.
    """
    counts: dict[str, int] = {}
    names: dict[str, str] = {}
    out: list[ops.Op] = []
    for op in program:
        spec = ops.BY_CLASS[type(op)]
        changes = {
            f: names[getattr(op, f)]
            for f in (*spec.handles, *spec.releases)
            if getattr(op, f) in names
        }
        if spec.binds is not None and spec.makes is not None:
            prefix = spec.makes[0]
            counts[prefix] = counts.get(prefix, 0) + 1
            names[getattr(op, spec.binds)] = changes[spec.binds] = f"{prefix}{counts[prefix]}"
        out.append(dataclasses.replace(op, **changes) if changes else op)
    return tuple(out)


def _is_u64(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64


def typed(value: object) -> object:
    """``value`` with the type of every scalar in it, so 2 and 2.0 (or 1 and True) differ.

    The wire cannot carry such a difference (a signature field or a count is a
    JSON integer), but an in-process adapter can return one, and ``==`` hides it.
    """
    if isinstance(value, Signature):
        return ("signature", *(typed(getattr(value, f.name)) for f in dataclasses.fields(value)))
    if isinstance(value, tuple | list):
        return (type(value).__name__, *(typed(v) for v in value))
    return (type(value).__name__, value)


def observation(outcome: Outcome) -> object:
    """What is judged of one outcome when it is not a relation read."""
    if isinstance(outcome, Ok):
        return ("ok", typed(outcome.value))
    if isinstance(outcome, Refused):
        f = outcome.fault
        values = canonical_values(f.values)
        return (
            "error",
            typed(f.kind),
            typed(f.field),
            typed(f.layer),
            tuple(sorted((k, typed(v)) for k, v in values.items())),
        )
    return ("broken", outcome.reason)


def compare(
    program: Sequence[ops.Op], expected: Sequence[Outcome], actual: Sequence[Outcome]
) -> Mismatch | None:
    """The first disagreement of ``actual`` (the implementation) with ``expected`` (the reference).

    Raises :class:`ReferenceBroken` if the reference failed an operation: such a
    program is outside the operations' preconditions and judges nothing.
    """
    for index, outcome in enumerate(expected):
        if isinstance(outcome, Broken):
            op = program[index]
            raise ReferenceBroken(
                f"the reference could not run operation {index + 1} ({render_op(op)}): "
                f"{outcome.reason}"
            )
    if len(actual) != len(expected):
        return Mismatch(
            min(len(actual), len(expected) - 1) if expected else 0,
            f"{len(expected)} outcomes",
            f"{len(actual)} outcomes",
            ("CONF-3",),
        )
    reads: dict[tuple[str, Literal["order", "equality"]], list[tuple[int, object, object]]] = {}
    for index, (op, ref, got) in enumerate(zip(program, expected, actual, strict=True)):
        spec = ops.BY_CLASS[type(op)]
        # what the table says a disagreement here bears on, and the rules of its block's version
        requires = _request_cites(op) or spec.cites + _version_2_cites(op)
        kind = spec.relation
        if kind is not None and isinstance(ref, Ok) and isinstance(got, Ok):
            label, mode = kind
            if relation(got.value, got.value, mode) is None:
                return Mismatch(
                    index, f"{_article(label)} (an unsigned 64-bit integer)", judged(got), requires
                )
            if mode == "order" and got.value == 0:  # the one constant ids are judged against
                return Mismatch(index, f"a non-zero {label}", f"the {label} 0", (spec.nonzero,))
            earlier = reads.setdefault(kind, [])
            for before, ref_before, got_before in earlier:
                want = relation(ref_before, ref.value, mode)
                have = relation(got_before, got.value, mode)
                if want != have:
                    return Mismatch(
                        index,
                        f"the {label} of operation {index + 1} {want} "
                        f"the {label} of operation {before + 1}",
                        f"the {label} of operation {index + 1} {have} "
                        f"the {label} of operation {before + 1}",
                        requires,
                        related_to=before,
                        relations=(want, have),
                    )
            earlier.append((index, ref.value, got.value))
            continue
        broken = isinstance(got, Broken)
        if kind is not None and isinstance(ref, Ok):
            return Mismatch(
                index, f"success: {_article(kind[0])}", judged(got), requires, broken=broken
            )
        if observation(ref) != observation(got):
            return Mismatch(index, judged(ref), judged(got), requires, broken=broken)
    return None


def _request_cites(op: ops.Op) -> tuple[str, ...]:
    """What a disagreement on a ``request_new`` bears on, by what the request carries: the
    table's PREFIX-14 is the one refusal the class allows (an empty salt); a request with
    another salt bears on PREFIX-13, one with a user key on PREFIX-15, a plain one on
    PREFIX-1 (every request is answered). ``()`` for any other operation."""
    if not isinstance(op, ops.RequestNew):
        return ()
    cites = []
    if op.salt is not None:
        cites.append("PREFIX-14" if op.salt == "" else "PREFIX-13")
    if op.user_key is not None:
        cites.append("PREFIX-15")
    return tuple(cites) or ("PREFIX-1",)


def _version_2_cites(op: ops.Op) -> tuple[str, ...]:
    """What a disagreement on a version-2 block also bears on: measuring under the layout
    the writer supplies (PROF-6, PROF-8), verifying in the order of VERIFY-10."""
    if isinstance(op, ops.Measure | ops.Stamp) and op.layout is not None:
        return ("PROF-6", "PROF-8")
    if isinstance(op, ops.Verify) and any(
        sig is not None and sig.layout is not None for sig in (op.recorded, op.expected)
    ):
        return ("VERIFY-10",)
    return ()


# Rendering ---------------------------------------------------------------------


def render_op(op: ops.Op, limit: int = 160) -> str:
    """One line for an operation, from its wire form: ``cache_append(cache=c1, tokens=3)``."""
    wire = codec.to_wire(op)
    wire.pop("op")
    parts = [f"{name}={_compact(value)}" for name, value in wire.items()]
    text = f"{op.name}({', '.join(parts)})"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _compact(value: object) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _article(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def relation_labels(program: Sequence[ops.Op], outcomes: Sequence[Outcome]) -> dict[int, str]:
    """A label for each relation read that shows its relations and hides its number.

    Ids are numbered by rank among the program's ids of their kind (#1 is the
    smallest); plan keys are lettered by first appearance (equal keys, equal letters).
    """
    values: dict[tuple[str, Literal["order", "equality"]], list[tuple[int, int]]] = {}
    for index, (op, outcome) in enumerate(zip(program, outcomes, strict=False)):
        read = _relation_read(op)
        if read is not None and isinstance(outcome, Ok) and _is_u64(outcome.value):
            values.setdefault(read, []).append((index, outcome.value))  # type: ignore[arg-type]
    labels: dict[int, str] = {}
    for (noun, mode), reads in values.items():
        if mode == "order":
            rank = {v: n for n, v in enumerate(sorted({v for _, v in reads}), start=1)}
            for index, value in reads:
                labels[index] = f"{noun} 0 (zero)" if value == 0 else f"{noun} #{rank[value]}"
        else:
            letters: dict[int, str] = {}
            for index, value in reads:
                letters.setdefault(value, _letters(len(letters)))
                labels[index] = f"{noun} {letters[value]}"
    return labels


def _letters(n: int) -> str:
    text = ""
    n += 1
    while n:
        n, rest = divmod(n - 1, 26)
        text = chr(ord("A") + rest) + text
    return text


def render_outcome(op: ops.Op, outcome: Outcome, label: str | None = None) -> str:
    """An outcome as the listing shows it; a relation read shows its label, not its number."""
    read = _relation_read(op)
    if read is not None and isinstance(outcome, Ok):
        return label or _article(read[0])
    return judged(outcome)


def render_program(
    program: Sequence[ops.Op],
    expected: Sequence[Outcome],
    actual: Sequence[Outcome] | None = None,
    mismatch: Mismatch | None = None,
) -> str:
    """A numbered listing: each operation, the reference's answer, and where they part."""
    want = relation_labels(program, expected)
    have = relation_labels(program, actual) if actual is not None else {}
    lines = []
    for index, op in enumerate(program):
        answer = render_outcome(op, expected[index], want.get(index))
        line = f"{index + 1:>3}. {render_op(op)} -> {answer}"
        if mismatch is not None and index == mismatch.index and actual is not None:
            got = actual[index] if index < len(actual) else None
            shown = "nothing" if got is None else render_outcome(op, got, have.get(index))
            line += f"   <-- the implementation: {shown}"
            if mismatch.related_to is not None:
                before = mismatch.related_to
                line += f" (and {have.get(before, '?')} at operation {before + 1})"
        lines.append(line)
    return "\n".join(lines)


def error_parts(values: Mapping[str, ErrorValue]) -> dict[str, object]:
    """Error values in their data form (lists for tuples), for scenario files and reports."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}


@dataclass(frozen=True)
class Counterexample:
    """A shrunk program on which the implementation disagrees with the reference."""

    property_id: str
    program: Program
    #: The reference's outcomes.
    expected: tuple[Outcome, ...]
    #: The implementation's outcomes.
    actual: tuple[Outcome, ...]
    mismatch: Mismatch
    #: Where other engines the rules allow were asked too (:attr:`Property.alternatives`),
    #: every answer list that was right: the reference's and theirs. ``expected`` is the
    #: one that agrees longest with the implementation.
    allowed: tuple[tuple[Outcome, ...], ...] = ()

    def listing(self) -> str:
        return render_program(self.program, self.expected, self.actual, self.mismatch)
