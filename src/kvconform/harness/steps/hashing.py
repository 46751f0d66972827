"""The ``hash`` verb, the data form of a mix op (:func:`mix_op`), and the values no
primitive may mix (HASH-12, HASH-13)."""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from kvconform.harness.checks import Expectation, Refuses, ValueIs, ValueRef, Where
from kvconform.harness.steps.compiler import _Args, _CompilerBase, _Iter
from kvconform.harness.yamlsource import PathKey
from kvconform.protocol import operations as ops
from kvconform.values import MixOp, PlanIdentity


class _HashVerbs(_CompilerBase):
    """Hash programs."""

    def _v_hash(self, args: _Args, at: PathKey, where: Where, it: _Iter) -> None:
        program = tuple(mix_op(raw) for raw in args["ops"])
        finishes = sum(1 for op in program if op.kind == "finish")
        if finishes == 0:
            raise self._fail((*at, "ops"), "a hash program must end with a finish op")
        if program[-1].kind != "finish":
            raise self._fail((*at, "ops"), "a hash program must end with a finish op")
        probe = bool(args.get("expect_refusal"))
        self._admissible(probe, _unmixable_in_program(program), at)
        expect: Expectation | None = Refuses() if probe else None
        if "expect" in args:
            if probe:
                raise self._fail((*at, "expect"), "a probe that must be refused has no values")
            if len(args["expect"]) != finishes:
                raise self._fail(
                    (*at, "expect"), f"{finishes} finish ops but {len(args['expect'])} values"
                )
            expect = ValueIs(tuple(int(v, 16) for v in args["expect"]))
        index = self._emit(ops.Hash(program=program), where, expect)
        if "as" in args:
            self._bind_value(args["as"], ValueRef(args["as"], index, last=True), (*at, "as"), it)


_U64_MAX = (1 << 64) - 1


def _unmixable(value: object) -> str | None:
    """Why no primitive may mix ``value`` (HASH-12, HASH-13), or ``None``."""
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= _U64_MAX:
        return f"the integer {value} is outside 0 .. 2^64-1 (HASH-12)"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            shown = value.encode("utf-8", "backslashreplace").decode()
            return f"the string {shown!r} has no UTF-8 form (HASH-13)"
    return None


def _unmixable_in_program(program: Sequence[MixOp]) -> str | None:
    for mix in program:
        found = _unmixable(mix.value) if mix.kind in ("u64", "instance", "str") else None
        if mix.kind == "f64" and isinstance(mix.value, int):
            found = _unmixable(mix.value)
        if found:
            return found
    return None


def _unmixable_in_key(identity: PlanIdentity) -> str | None:
    spec = identity.model
    candidates: list[object] = [spec.family, identity.instance, identity.alloc]
    for name, value in spec.params:
        candidates += [name, value]
    candidates += [name for name, _ in spec.hooks]
    candidates += [identity.geometry.dtype]
    for candidate in candidates:
        found = _unmixable(candidate)
        if found:
            return found
    return None


def mix_op(raw: Mapping[str, Any]) -> MixOp:
    """A mix op from its data form (scenario YAML or vector JSON)."""
    kind = raw["op"]
    if kind == "bytes":
        return MixOp("bytes", bytes.fromhex(raw["hex"]), raw.get("repeat", 1))
    if kind in ("u64", "instance"):
        value = raw["value"]
        if isinstance(value, str):
            value = int(value, 16) if value.startswith("0x") else int(value)
        return MixOp(kind, value)
    if kind == "f64":
        if "bits" in raw:
            return MixOp("f64", int(raw["bits"], 16))
        bits = int.from_bytes(struct.pack("<d", float(raw["value"])), "little")
        return MixOp("f64", bits)
    if kind == "finish":
        return MixOp("finish")
    return MixOp(kind, raw["value"])
