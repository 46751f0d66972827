"""A hash program in the vector files' form: its ops, the runner that computes its
answers with the reference hasher (:func:`run_program`), and the HASH requirements it
exercises (:func:`derive_requires`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

U64_MAX = (1 << 64) - 1
MIB = 1 << 20

Op = dict[str, Any]
Vector = dict[str, Any]


class Hasher(Protocol):
    """The part of the reference ``KeyHasher`` the generator drives."""

    def mix_bytes(self, data: bytes) -> Any: ...
    def mix_str(self, text: str) -> Any: ...
    def mix_u64(self, value: int) -> Any: ...
    def mix_f64_bits(self, bits: int) -> Any: ...
    def mix_present(self, present: bool) -> Any: ...
    def mix_instance(self, instance_id: int) -> Any: ...
    def finish(self) -> int: ...


def op_bytes(data: bytes, repeat: int = 1) -> Op:
    op: Op = {"op": "bytes", "hex": data.hex()}
    if repeat != 1:
        op["repeat"] = repeat
    return op


def op_finish() -> Op:
    return {"op": "finish"}


#: Each op kind's fields after ``op``, in the order they are written.
_OP_FIELDS: dict[str, tuple[str, ...]] = {
    "bytes": ("hex", "repeat"),
    "str": ("value",),
    "u64": ("value",),
    "f64": ("bits",),
    "present": ("value",),
    "instance": ("value",),
    "finish": (),
}
_OPTIONAL_OP_FIELDS = frozenset({"repeat"})


def canonical_op(op: Any) -> Op:
    """``op`` with its fields in the written order; ValueError if a field is missing or unknown.

    The fields' values are checked when the program runs (:func:`run_program`).
    """
    if not isinstance(op, dict):
        raise ValueError(f"an op must be an object, got {op!r}")
    kind = op.get("op")
    if not isinstance(kind, str) or kind not in _OP_FIELDS:
        raise ValueError(f"unknown op {kind!r}")
    fields = _OP_FIELDS[kind]
    unknown = sorted(set(op) - {"op", *fields})
    if unknown:
        raise ValueError(f"{kind} op: unknown field(s) {', '.join(map(repr, unknown))}")
    out: Op = {"op": kind}
    for name in fields:
        if name in op:
            out[name] = op[name]
        elif name not in _OPTIONAL_OP_FIELDS:
            raise ValueError(f"{kind} op: missing field {name!r}")
    return out


def hex64(value: int) -> str:
    return f"0x{value:016x}"


def _parse_u64(text: Any) -> int:
    if not isinstance(text, str) or not text.isdigit() or not text.isascii():
        raise ValueError(f"u64 must be a decimal digit string, got {text!r}")
    value = int(text)
    if value > U64_MAX:
        raise ValueError(f"u64 out of range: {text}")
    return value


def _op_payload(op: Op) -> bytes:
    """The raw bytes of a ``bytes`` op, with its repeat applied."""
    hex_text = op["hex"]
    if not isinstance(hex_text, str) or not re.fullmatch(r"(?:[0-9a-f]{2})*", hex_text):
        raise ValueError(f"bytes.hex must be lowercase hex digit pairs: {hex_text!r}")
    repeat = op.get("repeat", 1)
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise ValueError(f"bytes.repeat must be an integer >= 1: {repeat!r}")
    return bytes.fromhex(hex_text) * repeat


def run_program(new_hasher: Callable[[], Hasher], ops: Sequence[Op]) -> list[str]:
    """Run a hash program with the reference hasher; the values its finish ops read."""
    if not ops or ops[-1] != op_finish():
        raise ValueError("a program must end with a finish op")
    hasher = new_hasher()
    out: list[str] = []
    for op in ops:
        kind = op["op"]
        if kind == "bytes":
            hasher.mix_bytes(_op_payload(op))
        elif kind == "str":
            if not isinstance(op["value"], str):
                raise ValueError(f"str.value must be a string: {op['value']!r}")
            hasher.mix_str(op["value"])
        elif kind == "u64":
            hasher.mix_u64(_parse_u64(op["value"]))
        elif kind == "f64":
            bits = op["bits"]
            if not isinstance(bits, str) or not re.fullmatch(r"0x[0-9a-f]{16}", bits):
                raise ValueError(f"f64.bits must be 0x + 16 lowercase hex digits: {bits!r}")
            hasher.mix_f64_bits(int(bits, 16))
        elif kind == "present":
            if not isinstance(op["value"], bool):
                raise ValueError(f"present.value must be a boolean: {op['value']!r}")
            hasher.mix_present(op["value"])
        elif kind == "instance":
            hasher.mix_instance(_parse_u64(op["value"]))
        elif kind == "finish":
            out.append(hex64(hasher.finish()))
        else:
            raise ValueError(f"unknown op {kind!r}")
    return out


# --------------------------------------------------------------------------
# Requirement derivation
# --------------------------------------------------------------------------

_OP_REQUIRES: dict[str, tuple[str, ...]] = {
    "bytes": ("HASH-14",),
    "str": ("HASH-5", "HASH-4"),
    "u64": ("HASH-4",),
    "f64": ("HASH-6", "HASH-4"),
    "present": ("HASH-7", "HASH-5", "HASH-4"),
    "instance": ("HASH-8", "HASH-5", "HASH-4"),
    "finish": (),
}

REQUIREMENT = re.compile(r"HASH-[1-9][0-9]*")


def _sort_requirements(ids: Iterable[str]) -> list[str]:
    return sorted(set(ids), key=lambda rid: (rid.split("-")[0], int(rid.split("-")[1])))


def derive_requires(ops: Sequence[Op], extra: Iterable[str] = ()) -> list[str]:
    """The HASH requirements a program exercises.

    Every program starts from the offset basis (HASH-1) and pins a byte-exact
    value (HASH-11). Any mixed byte brings in the fold step and its wrapping
    (HASH-2, HASH-3). A finish op that is not the program's only one exercises
    HASH-9. A u64 of 2^63 or more exercises the unsigned range (HASH-12); a
    non-ASCII string, strings as Unicode scalar values (HASH-13).
    """
    req: set[str] = {"HASH-1", "HASH-11", *extra}
    mixes_bytes = False
    for op in ops:
        req.update(_OP_REQUIRES[op["op"]])
        if op["op"] in ("u64", "instance") and _parse_u64(op["value"]) >= 1 << 63:
            req.add("HASH-12")  # the top half of the range mixes as unsigned
        if op["op"] == "str" and not op["value"].isascii():
            req.add("HASH-13")  # every Unicode scalar value, astral ones included
        if op["op"] == "bytes":
            mixes_bytes = mixes_bytes or bool(_op_payload(op))
        elif op["op"] != "finish":
            mixes_bytes = True
    if mixes_bytes:
        req.update(("HASH-2", "HASH-3"))
    if sum(1 for op in ops if op["op"] == "finish") > 1:
        req.add("HASH-9")
    return _sort_requirements(req)
