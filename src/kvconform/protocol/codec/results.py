"""The wire form of a result: an ``ok`` value by the operation's result kind, and the
outcome a response gives an operation (:func:`outcome_of`)."""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Mapping
from typing import Any

from kvconform import limits
from kvconform.protocol.codec.scalars import WireError, u64_from_wire, u64_of, u64_to_wire
from kvconform.protocol.codec.values import (
    fault_from_wire,
    fault_to_wire,
    signature_from_wire,
    signature_to_wire,
)
from kvconform.protocol.operations import Op, ResultKind
from kvconform.rendering import clip
from kvconform.values import VALIDITY_OUTCOMES, Broken, Fault, Ok, Outcome, Refused, Signature

#: The four response forms; exactly one appears next to ``seq``.
RESPONSE_FORMS = ("ok", "error", "unsupported", "failure")


def _is_u64(value: object) -> bool:
    # exactly an int, as the wire carries it: a subclass's own comparisons are not run
    return type(value) is int and 0 <= value < 1 << 64


def _shown(value: object) -> str:
    """``repr(value)`` clipped, or its type's name if its own ``repr`` fails."""
    try:
        return clip(repr(value))
    except Exception:
        return f"a {type(value).__name__} whose repr() fails"


def result_type_problem(op: Op, value: object) -> str | None:
    """Why ``value`` is not what ``op`` returns (a Fault aside), or ``None`` if it is."""
    kind = type(op).result
    if kind == "null" or isinstance(value, Fault):
        return None
    if kind == "u64" and not _is_u64(value):
        return f"{op.name} returned {_shown(value)}, expected an unsigned 64-bit integer"
    if kind == "u64_list" and (
        type(value) not in (list, tuple) or not all(_is_u64(v) for v in value)  # type: ignore[attr-defined]
    ):
        return f"{op.name} returned {_shown(value)}, expected unsigned 64-bit integers"
    if kind == "count" and not _is_u64(value):
        return f"{op.name} returned {_shown(value)}, expected a non-negative integer"
    if kind == "bool" and not isinstance(value, bool):
        return f"{op.name} returned {_shown(value)}, expected true or false"
    if kind == "signature" and not isinstance(value, Signature):
        return f"{op.name} returned {_shown(value)}, expected a signature or a fault"
    if kind == "validity" and (type(value) is not str or value not in VALIDITY_OUTCOMES):
        outcomes = ", ".join(VALIDITY_OUTCOMES)
        return f"{op.name} returned {_shown(value)}, expected one of {outcomes}"
    return None


def result_to_wire(op: Op, value: object) -> dict[str, Any]:
    """The response body (without ``seq``) for an adapter method's return value.

    A :class:`~kvconform.values.Fault` becomes ``error``; any other value must have the
    type the operation returns (:func:`result_type_problem`), or
    :class:`TypeError` names the mismatch.
    """
    if isinstance(value, Fault):
        return {"error": fault_to_wire(value)}
    problem = result_type_problem(op, value)
    if problem is not None:
        raise TypeError(problem)
    kind = type(op).result
    if kind == "null":
        return {"ok": None}
    if kind == "u64":
        return {"ok": u64_to_wire(value)}  # type: ignore[arg-type]
    if kind == "u64_list":
        return {"ok": [u64_to_wire(v) for v in value]}  # type: ignore[attr-defined]
    if kind == "signature":
        return {"ok": signature_to_wire(value)}  # type: ignore[arg-type]
    return {"ok": value}  # a count or a boolean


def result_from_wire(op: Op, raw: object) -> object:
    """The Python value of an ``ok`` response to ``op``; :class:`~.WireError` if malformed."""
    kind = type(op).result
    where = f"{op.name} result"
    if kind == "null":
        if raw is not None:
            raise WireError(f"{where}: expected null, got {clip(repr(raw))}")
        return None
    if kind == "u64":
        return u64_from_wire(raw, where)
    if kind == "u64_list":
        if not isinstance(raw, list):
            raise WireError(f"{where}: expected a list of decimal strings, got {clip(repr(raw))}")
        return tuple(u64_from_wire(v, f"{where}[{i}]") for i, v in enumerate(raw))
    if kind == "count":
        if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
            raise WireError(f"{where}: expected a non-negative integer, got {clip(repr(raw))}")
        return raw
    if kind == "bool":
        if not isinstance(raw, bool):
            raise WireError(f"{where}: expected true or false, got {clip(repr(raw))}")
        return raw
    if kind == "validity":
        if raw not in VALIDITY_OUTCOMES:
            raise WireError(
                f"{where}: expected one of {', '.join(VALIDITY_OUTCOMES)}, got {clip(repr(raw))}"
            )
        return raw
    return signature_from_wire(raw, where)


_OK_NONE = Ok(None)
_OK_TRUE = Ok(True)
_OK_FALSE = Ok(False)


def _fast_null(raw: object) -> Outcome | None:
    return _OK_NONE if raw is None else None


def _fast_count(raw: object) -> Outcome | None:
    return Ok(raw) if type(raw) is int and raw >= 0 else None


def _fast_bool(raw: object) -> Outcome | None:
    return _OK_TRUE if raw is True else _OK_FALSE if raw is False else None


def _fast_u64(raw: object) -> Outcome | None:
    number = u64_of(raw)
    return None if number is None else Ok(number)


def _fast_u64_list(raw: object) -> Outcome | None:
    if type(raw) is not list:
        return None
    values = []
    for item in raw:
        number = u64_of(item)
        if number is None:
            return None
        values.append(number)
    return Ok(tuple(values))


def _fast_none(raw: object) -> Outcome | None:
    return None


#: The outcome of a well-formed ``ok`` value of each result kind, checked by its type
#: alone; ``None`` sends anything else (and every signature) to :func:`result_from_wire`,
#: which gives the same value or says what is wrong.
_FAST_OK: dict[str, Callable[[object], Outcome | None]] = {
    "null": _fast_null,
    "count": _fast_count,
    "bool": _fast_bool,
    "u64": _fast_u64,
    "u64_list": _fast_u64_list,
    "signature": _fast_none,
    "validity": _fast_none,
}
if set(_FAST_OK) != set(typing.get_args(ResultKind)):  # pragma: no cover
    raise RuntimeError("codec.results._FAST_OK does not cover every result kind of the table")
_NOTHING = object()


def outcome_of(op: Op, response: Mapping[str, Any]) -> Outcome:
    """The outcome a well-sequenced response gives ``op`` (a malformed body is Broken)."""
    if len(response) == 2:
        raw = response.get("ok", _NOTHING)
        if raw is not _NOTHING and "seq" in response:
            outcome = _FAST_OK[type(op).result](raw)
            if outcome is not None:
                return outcome
    forms = [key for key in response if key != "seq"]
    if len(forms) != 1 or forms[0] not in RESPONSE_FORMS:
        return Broken(
            f"malformed response to {op.name}: expected 'seq' and exactly one of "
            f"{', '.join(RESPONSE_FORMS)}; got members {sorted(response)}"
        )
    form = forms[0]
    body = response[form]
    try:
        if form == "ok":
            value = result_from_wire(op, body)
            return Ok(value)
        if form == "error":
            return Refused(fault_from_wire(body, "error"))
    except WireError as exc:
        return Broken(f"malformed response to {op.name}: {exc}", claims_success=form == "ok")
    text = clip(body if isinstance(body, str) else _dumped(body), SHOWN_LIMIT)
    if form == "unsupported":
        return Broken(f"the adapter answered unsupported to {op.name}: {text}")
    return Broken(text if text else f"the adapter answered failure to {op.name} (no message)")


#: The most characters of an adapter's own text a failure keeps (a failure message,
#: an unsupported answer): enough for any message, not a report of megabytes.
SHOWN_LIMIT = limits.SHOWN_CHARS


def _dumped(body: object) -> str:
    try:
        return json.dumps(body)
    except (ValueError, RecursionError):
        return f"(a {type(body).__name__} nested too deeply to show)"
