"""An engine whose counts are binary64 numbers, as a JavaScript engine's are (CONF-13).

- ``float-counts-53``: every count it is given (cache geometry, lengths, token
  counts, step widths, layer indices, payload and signature counts, layouts) is held
  the way a JavaScript ``Number`` holds it: it goes through ``float`` on the way in,
  and whatever is computed from it comes out of that. It declares
  ``uint_bits: 53``, so the suite sends it no count above 2^53 - 1, and for every
  count it is sent the round trip is exact, so it must pass every case it is given.
  A stamp it verifies is read exactly (over protocol 2 the count is a string, and a
  JavaScript reader compares it as a ``BigInt``): one holding a count above 2^53 - 1
  is refused as ``unrepresentable`` with the count as sent (VERIFY-12), never rounded.
  Served over stdio, where the harness offers protocol 2 and the server speaks it.
  u64 values (ids, keys, u64 parameters) are exact, as ``BigInt`` holds them.

The mutant ``rounds-counts-past-53-bits`` (tests/mutants/widths.py) is this engine
without the exact read of a stamp: it is caught by
``verify.unrepresentable.count-beyond-53-bits``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import (
    AdapterInfo,
    Fault,
    Geometry,
    LayerDesc,
    Layout,
    Payload,
    PlanIdentity,
    Signature,
    StepInputs,
)

from . import variant

#: The widest count a binary64 holds exactly, every count below it too.
LIMIT_53 = (1 << 53) - 1


def number(count: int) -> int:
    """``count`` as a JavaScript ``Number`` holds it (exact up to 2^53, rounded above)."""
    return int(float(count))


def _layer(layer: LayerDesc) -> LayerDesc:
    return replace(
        layer,
        n_kv_heads=number(layer.n_kv_heads),
        head_dim=number(layer.head_dim),
        seq_len=number(layer.seq_len),
        k_len=number(layer.k_len),
        v_len=number(layer.v_len),
        v_head_dim=None if layer.v_head_dim is None else number(layer.v_head_dim),
    )


def _payload(payload: Payload) -> Payload:
    return tuple(_layer(layer) for layer in payload)


def _layout(layout: Layout | None) -> Layout | None:
    if layout is None:
        return None
    window = layout.sliding_window
    return Layout(number(layout.block_size), None if window is None else number(window))


def _signature(sig: Signature) -> Signature:
    return replace(
        sig,
        format_version=number(sig.format_version),
        n_layers=number(sig.n_layers),
        n_kv_heads=number(sig.n_kv_heads),
        head_dim=number(sig.head_dim),
        tokens=number(sig.tokens),
        layout=_layout(sig.layout),
    )


def _geometry(g: Geometry) -> Geometry:
    return replace(
        g,
        n_layers=number(g.n_layers),
        n_kv_heads=number(g.n_kv_heads),
        head_dim=number(g.head_dim),
        max_seq_len=number(g.max_seq_len),
    )


def _step(step: StepInputs) -> StepInputs:
    return replace(
        step,
        token_ids=tuple(number(t) for t in step.token_ids),
        write_offset=number(step.write_offset),
        mask=tuple(number(m) for m in step.mask),
    )


class _Float53(ReferenceAdapter):
    """The reference behind a boundary that holds every count as a binary64 number."""

    #: Whether a stamp's counts are read exactly before anything is rounded (VERIFY-12).
    exact_stamps = True
    label = "float-counts-53"

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name=self.label, language="javascript", uint_bits=53)

    def cache_new(self, geometry: Geometry):  # type: ignore[no-untyped-def]
        return super().cache_new(_geometry(geometry))

    def cache_new_placed(  # type: ignore[no-untyped-def]
        self, geometry: Geometry, residency: str | None, layer_storage: Sequence[str]
    ):
        return super().cache_new_placed(_geometry(geometry), residency, layer_storage)

    def cache_append(self, cache, tokens: int):  # type: ignore[no-untyped-def]
        return super().cache_append(cache, number(tokens))

    def cache_truncate(self, cache, length: int):  # type: ignore[no-untyped-def]
        return super().cache_truncate(cache, number(length))

    def cache_replace_layer(  # type: ignore[no-untyped-def]
        self, cache, layer: int, n_kv_heads, head_dim, max_seq_len
    ):
        def held(value: int | None) -> int | None:
            return None if value is None else number(value)

        return super().cache_replace_layer(
            cache, number(layer), held(n_kv_heads), held(head_dim), held(max_seq_len)
        )

    def plan_key(self, identity: PlanIdentity) -> int:
        return super().plan_key(
            replace(
                identity,
                geometry=_geometry(identity.geometry),
                step_tokens=number(identity.step_tokens),
            )
        )

    def session_new(self, model, cache, step_tokens: int):  # type: ignore[no-untyped-def]
        return super().session_new(model, cache, number(step_tokens))

    def session_valid(self, session, model, cache, step: StepInputs) -> bool:  # type: ignore[no-untyped-def]
        return super().session_valid(session, model, cache, _step(step))

    def session_validity(self, session, model, cache, step: StepInputs) -> str:  # type: ignore[no-untyped-def]
        return super().session_validity(session, model, cache, _step(step))

    def measure(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        if layout is None:
            return super().measure(model_name, _payload(payload))
        return super().measure(model_name, _payload(payload), layout=_layout(layout))

    def stamp(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        if layout is None:
            return super().stamp(model_name, _payload(payload))
        return super().stamp(model_name, _payload(payload), layout=_layout(layout))

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        if self.exact_stamps and recorded is not None and recorded.format_version in self.reads:
            for name in ("n_layers", "n_kv_heads", "head_dim", "tokens"):
                found = getattr(recorded, name)  # exact: a BigInt of the decimal string
                if found > LIMIT_53:
                    return Fault(
                        kind="unrepresentable",
                        field=name,
                        values={"found": found},
                        message=f"the stamp's {name} {found} is beyond 2^53 - 1, "
                        "the widest count a Number holds",
                    )
        held = None if recorded is None else _signature(recorded)
        return super().verify(held, _payload(payload), _signature(expected))


@variant(
    "float-counts-53",
    "every count held as a binary64 number, as in JavaScript (capabilities.uint_bits: 53), "
    "served over protocol 2; a stamp beyond 2^53 - 1 is unrepresentable, read exactly",
    transport="stdio",
)
class Float53(_Float53):
    pass


@variant(
    "float-counts-53-v2",
    "float-counts-53 as a profile-v2 writer and reader, in process",
)
class Float53V2(_Float53):
    label = "float-counts-53-v2"

    def __init__(self) -> None:
        super().__init__(writes=2)
