"""FNV-1a 64 by another code path: encode into one buffer, fold late, multiply by shifts.

Differs from the reference only in how the same bytes are folded (HASH-11 pins
the values, not the code):

- every mix appends its canonical encoding to one ``bytearray``; nothing is
  folded until ``finish`` (which folds what is pending and keeps the state, so
  mixing may continue: HASH-9);
- the multiplication by the FNV prime ``2**40 + 2**8 + 0xb3`` is done as a sum
  of shifts, masked to 64 bits;
- integers are encoded with ``struct.pack("<Q")`` (which refuses what is not a
  u64, HASH-12), strings with ``str.encode`` in strict mode (HASH-13).

Plan keys (the probe and held plans) are computed with this hasher over the
reference's composition, so they equal the reference's keys.
"""

from __future__ import annotations

import struct
from dataclasses import replace

from kvconform_reference import kv_cache, model, plan

from kvconform.adapters.reference import ReferenceAdapter, plan_identity
from kvconform.values import AdapterInfo, MixOp, PlanIdentity, StepInputs

from . import variant

_MASK = 0xFFFF_FFFF_FFFF_FFFF
_BASIS = 0xCBF2_9CE4_8422_2325


def fold(state: int, data: bytes | bytearray) -> int:
    for byte in data:
        state ^= byte
        state = (
            (state << 40)
            + (state << 8)
            + (state << 7)
            + (state << 5)
            + (state << 4)
            + (state << 1)
            + state
        ) & _MASK
    return state


class BufferedFnv:
    """The HASH primitives, encoded into a buffer and folded on ``finish``."""

    def __init__(self) -> None:
        self._pending = bytearray()
        self._state = _BASIS

    def raw(self, data: bytes) -> BufferedFnv:
        self._pending += data
        return self

    def u64(self, value: int) -> BufferedFnv:
        self._pending += struct.pack("<Q", value)
        return self

    def text(self, value: str) -> BufferedFnv:
        encoded = value.encode("utf-8", errors="strict")
        self._pending += encoded
        self._pending += struct.pack("<Q", len(encoded))
        return self

    def f64_bits(self, bits: int) -> BufferedFnv:
        return self.u64(bits)

    def f64(self, value: float) -> BufferedFnv:
        self._pending += struct.pack("<d", value)  # the bit pattern, as stored
        return self

    def present(self, on: bool) -> BufferedFnv:
        return self.text("some" if on else "none")

    def instance(self, instance_id: int) -> BufferedFnv:
        return self.text("instance").u64(instance_id)

    def finish(self) -> int:
        self._state = fold(self._state, self._pending)
        self._pending.clear()
        return self._state


def run(program: list[MixOp] | tuple[MixOp, ...]) -> list[int]:
    h = BufferedFnv()
    out: list[int] = []
    for op in program:
        kind, value = op.kind, op.value
        if kind == "finish":
            out.append(h.finish())
        elif kind == "bytes":
            assert isinstance(value, bytes)
            h.raw(value * op.repeat)
        elif kind == "str":
            assert isinstance(value, str)
            h.text(value)
        elif kind in ("u64", "f64"):
            assert isinstance(value, int)
            h.u64(value)
        elif kind == "present":
            h.present(bool(value))
        elif kind == "instance":
            assert isinstance(value, int)
            h.instance(value)
        else:
            raise ValueError(f"unknown mix op {kind!r}")
    return out


def key(ident: plan.PlanIdentity) -> int:
    """The reference composition (spec/plan.md, informative), on :class:`BufferedFnv`."""
    h = BufferedFnv().text("kvconform.plan").text(ident.family).u64(len(ident.params))
    for name in sorted(ident.params):
        value = ident.params[name]
        h.text(name)
        if isinstance(value, str):
            h.text("str").text(value)
        elif isinstance(value, float):
            h.text("f64").f64(value)
        else:
            h.text("u64").u64(value)
    h.u64(len(ident.hooks))
    for name in sorted(ident.hooks):
        h.text(name).present(ident.hooks[name])
    h.instance(ident.instance).text("alloc").u64(ident.alloc)
    g = ident.geometry
    h.u64(g.n_layers).u64(g.n_kv_heads).u64(g.head_dim).u64(g.max_seq_len).text(g.dtype)
    return h.u64(ident.step_tokens).finish()


class FnvSession:
    def __init__(self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int) -> None:
        self.key = key(plan.PlanIdentity.of(m, cache, step_tokens))


@variant(
    "shift-add-buffered-fnv",
    "FNV-1a folded late from one encoded buffer, the prime multiplication done by shifts "
    "and adds; struct-packed integers; plan keys on that hasher",
)
class ShiftAddFnv(ReferenceAdapter):
    #: Its plans are its own, with a boolean validity only (CONF-10).
    classes = ReferenceAdapter.classes - {"plan_validity"}

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="variant-shift-add")

    def hash(self, program: list[MixOp] | tuple[MixOp, ...]) -> list[int]:  # type: ignore[override]
        return run(program)

    def plan_key(self, identity: PlanIdentity) -> int:
        return key(plan_identity(identity))

    def session_new(  # type: ignore[override]
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> FnvSession:
        return FnvSession(m, cache, step_tokens)

    def session_valid(  # type: ignore[override]
        self, session: FnvSession, m: model.Model, cache: kv_cache.KvCache, step: StepInputs
    ) -> bool:
        now = key(plan.PlanIdentity.of(m, cache, len(step.token_ids)))
        return now == session.key
