"""One JSON line of the stdio protocol: encoding a request or response line, decoding
one, and the short path that reads the usual answer from its bytes
(:func:`quick_outcome`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from json import encoder as _json_encoder
from json.scanner import make_scanner
from typing import Any

from kvconform.protocol.codec.requests import to_wire
from kvconform.protocol.codec.results import (
    _FAST_OK,
    _NOTHING,
    _OK_FALSE,
    _OK_NONE,
    _OK_TRUE,
    _fast_none,
)
from kvconform.protocol.codec.scalars import _U64_LIMIT
from kvconform.protocol.operations import Op
from kvconform.values import Ok, Outcome

_ENCODER = json.JSONEncoder(separators=(",", ":"))
_DECODER = json.JSONDecoder()
_DECODE = _DECODER.decode
#: The decoder's scanner (the C one when the interpreter has it): one value from an index,
#: what ``decode`` runs once it has skipped whitespace. (typeshed types its argument as
#: the scanner class itself; at run time it is the decoder whose settings it copies.)
_SCAN: Callable[[str, int], tuple[Any, int]] = make_scanner(_DECODER)  # type: ignore[arg-type]


def decode_line(line: bytes) -> Any:
    """The JSON value of one line; :class:`ValueError` if it is not UTF-8 JSON.

    Exactly :meth:`json.JSONDecoder.decode` (integers of any size stay exact,
    ``\\ud800`` escapes give lone surrogates, ``NaN`` is a float), without its
    set-up for a line that starts with its value; a line nested too deeply to
    decode is a :class:`ValueError` too.
    """
    try:
        text = line.decode()  # UTF-8
        try:
            value, end = _SCAN(text, 0)
        except StopIteration:  # not a JSON value at index 0: let decode() say why
            return _DECODE(text)
        if end == len(text) or not text[end:].strip(" \t\n\r"):  # JSON whitespace after
            return value
        return _DECODE(text)  # for its "Extra data" error
    except RecursionError:
        raise ValueError("JSON nested too deeply to decode") from None


def _exact_u64(text: bytes) -> int | None:
    """The value of a u64 written exactly as PROTO-17 writes it, quotes included (else None)."""
    if len(text) < 3 or text[0] != 34 or text[-1] != 34:
        return None
    digits = text[1:-1]
    if not digits.isdigit() or len(digits) > 20 or (digits[0] == 48 and len(digits) > 1):
        return None  # bytes.isdigit: ASCII digits only
    number = int(digits)
    return number if number < _U64_LIMIT else None


def _exact_count(value: bytes, sep: bytes) -> Outcome | None:
    if value.isdigit() and len(value) <= 20 and (value[0] != 48 or len(value) == 1):
        return Ok(int(value))
    return None


def _exact_one_u64(value: bytes, sep: bytes) -> Outcome | None:
    number = _exact_u64(value)
    return None if number is None else Ok(number)


def _exact_u64_list(value: bytes, sep: bytes) -> Outcome | None:
    if value[:1] != b"[" or value[-1:] != b"]":
        return None
    inner = value[1:-1]
    if not inner:
        return Ok(())
    numbers = []
    for item in inner.split(sep):
        number = _exact_u64(item)
        if number is None:
            return None
        numbers.append(number)
    return Ok(tuple(numbers))


_EXACT_BOOLS = {b"true": _OK_TRUE, b"false": _OK_FALSE}

#: The outcome of an ``ok`` value in its usual spelling (no escapes, no spaces but the
#: separator's), read from the bytes; anything else is None and is decoded as JSON.
_EXACT_OK: dict[str, Callable[[bytes, bytes], Outcome | None]] = {
    "null": lambda value, sep: _OK_NONE if value == b"null" else None,
    "count": _exact_count,
    "bool": lambda value, sep: _EXACT_BOOLS.get(value),
    "u64": _exact_one_u64,
    "u64_list": _exact_u64_list,
    "signature": lambda value, sep: None,
    "validity": lambda value, sep: None,
}


#: The outcomes already read by :data:`_EXACT_OK`, by result kind and the bytes after
#: ``seq``. Such bytes are exactly ``,"ok":VALUE}`` (or with the spaces), so their
#: outcome does not depend on ``seq``; most answers recur (``null``, ``true``, small
#: counts), and a recurring one is judged by one lookup. Outcomes are immutable.
_EXACT_MEMO: dict[str, dict[bytes, Outcome]] = {kind: {} for kind in _EXACT_OK}
_MEMO_BYTES = 256
_MEMO_ENTRIES = 4096


def quick_outcome(op: Op, line: bytes, seq: int) -> Outcome | None:
    """The outcome of ``line`` if it is the usual answer to request ``seq`` for ``op``.

    The usual answer is ``{"seq": seq, "ok": value}`` in ASCII with a well-formed
    value; for it this is what :func:`decode_line` then :func:`~.results.outcome_of` give.
    Anything else is ``None``: the caller then decodes ``line`` and checks it in full.
    The usual spellings (compact, or with a space after each separator, no escapes)
    are read from the bytes without decoding (:data:`_EXACT_OK`, :data:`_EXACT_MEMO`);
    any other spelling is decoded as JSON.
    """
    kind = type(op).result
    fast = _FAST_OK[kind]
    if fast is _fast_none:
        return None
    cut = line.find(b",")
    if cut > 0 and line[-1:] == b"}":  # the usual answer, written compactly or with spaces
        head = line[:cut]
        if head == b'{"seq":%d' % seq or head == b'{"seq": %d' % seq:
            rest = line[cut:]
            memo = _EXACT_MEMO[kind]
            known = memo.get(rest)
            if known is not None:
                return known
            if rest.startswith(b',"ok":'):
                exact = _EXACT_OK[kind](rest[6:-1], b",")
            elif rest.startswith(b', "ok": '):
                exact = _EXACT_OK[kind](rest[8:-1], b", ")
            else:
                exact = None
            if exact is not None:
                if len(rest) <= _MEMO_BYTES:
                    if len(memo) >= _MEMO_ENTRIES:
                        memo.clear()
                    memo[rest] = exact
                return exact
    try:
        response, end = _SCAN(line.decode(), 0)
    except (ValueError, StopIteration, RecursionError):
        return None
    if end == len(line) and type(response) is dict and len(response) == 2:
        got = response.get("seq")
        if got == seq and type(got) is int:
            raw = response.get("ok", _NOTHING)
            if raw is not _NOTHING:
                return fast(raw)
    return None


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_c_make_encoder = getattr(_json_encoder, "c_make_encoder", None)
#: ``_ENCODER``'s output without its per-call set-up: the C encoder, made once (no
#: circular-reference bookkeeping; on any error :func:`encode_json` falls back to
#: ``_ENCODER``, which raises what it always raised).
_FAST_ENCODE: Callable[[Any, int], Sequence[str]] | None = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(
        None,  # markers: no circular-reference check
        _not_json,  # default
        _json_encoder.encode_basestring_ascii,  # ASCII only: \u escapes, even for "\ud800"
        None,  # indent
        ":",  # key separator
        ",",  # item separator
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan, as _ENCODER
    )
)


def encode_json(value: Any) -> str:
    """``value`` as compact ASCII-only JSON: the text ``json.JSONEncoder`` gives.

    :class:`TypeError` or :class:`ValueError` if ``value`` holds something JSON
    cannot carry.
    """
    if _FAST_ENCODE is not None:
        try:
            return "".join(_FAST_ENCODE(value, 0))
        except (TypeError, ValueError, RecursionError):
            pass  # the standard encoder raises the usual error, or encodes after all
    return _ENCODER.encode(value)


def request_tail(message: Op | Mapping[str, Any]) -> bytes:
    """The bytes of a request line after its ``seq`` member (see :func:`request_line`).

    Encode an operation or message once, then give it any number of sequence
    numbers; :class:`TypeError` or :class:`ValueError` as :func:`encode_line`.
    """
    text = encode_json(to_wire(message) if isinstance(message, Op) else message)
    if text == "{}":
        raise ValueError("a request has an 'op'")
    return (text[1:] + "\n").encode("ascii")


#: A request line: ``REQUEST_LINE % (seq, tail)`` is :func:`request_line`.
REQUEST_LINE = b'{"seq":%d,%s'


def request_line(seq: int, tail: bytes) -> bytes:
    """The request line ``seq`` of a message whose :func:`request_tail` is ``tail``:
    byte for byte what :func:`encode_line` gives."""
    return REQUEST_LINE % (seq, tail)


def encode_line(seq: int | None, message: Mapping[str, Any]) -> bytes:
    """One request or response line: ``seq`` first, compact JSON, ASCII only, newline.

    ASCII only (``\\u`` escapes) so that any string, even one holding an unpaired
    surrogate (HASH-13), can be written; :class:`TypeError` or :class:`ValueError`
    if ``message`` holds something JSON cannot carry.
    """
    return (encode_json({"seq": seq, **message}) + "\n").encode("ascii")
