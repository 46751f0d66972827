"""Ids that start far from 1 and step by more than one; errors worded anew."""

from __future__ import annotations

from dataclasses import replace

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo, Fault

from . import variant

_WORDING = {
    "unmarked": "refused: this stored block has no stamp",
    "empty_payload": "refused: zero layers in the block",
    "unsupported_format": "refused: cannot read {field_words} {found}; this build reads {readable}",
    "degenerate_layer": (
        "refused: layer {layer} has N_KV_HEADS {n_kv_heads} and HEAD-DIM {head_dim}"
    ),
    "ragged_payload": "Layer #{layer}: {field_words} measured {found} but {expected} was required",
    "payload_mismatch": "Stamp lies about {field_words}: says {recorded}, buffers say {actual}",
    "incompatible": "Wrong block for us: {field_words} {found} (we run {expected})",
    "capacity_exceeded": "No room: MAX SEQ LEN {capacity} < {requested}",
    "layer_out_of_range": "There is no layer {layer} among {n_layers}",
    "layer_shape_mismatch": "Layer {layer}: {field_words} {found} where {expected} fits",
}


def reword(fault: Fault) -> Fault:
    """Say the same thing in other words: the field in spaced capitals, values as they are."""
    values = {
        k: ("x".join(map(str, v)) if isinstance(v, tuple) else v) for k, v in fault.values.items()
    }
    words = (fault.field or "").replace("_", " ").upper()
    message = _WORDING[fault.kind].format(layer=fault.layer, field_words=words, **values)
    return replace(fault, message=message)


@variant(
    "renumbered-reworded",
    "ids start at 10**12 (models) and 7 (caches) and step by 13; "
    "every error message worded differently",
)
class RenumberedReworded(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="renumbered-reworded", version="9.9.9")

    def model_instance_id(self, m):  # type: ignore[no-untyped-def]
        return 10**12 + 13 * super().model_instance_id(m)

    def cache_alloc_id(self, cache):  # type: ignore[no-untyped-def]
        return 7 + 13 * super().cache_alloc_id(cache)

    def _reworded(self, result):  # type: ignore[no-untyped-def]
        return reword(result) if isinstance(result, Fault) else result

    def cache_append(self, cache, tokens):  # type: ignore[no-untyped-def]
        return self._reworded(super().cache_append(cache, tokens))

    def cache_replace_layer(self, cache, layer, n_kv_heads, head_dim, max_seq_len):  # type: ignore[no-untyped-def]
        return self._reworded(
            super().cache_replace_layer(cache, layer, n_kv_heads, head_dim, max_seq_len)
        )

    def measure(self, model_name, payload):  # type: ignore[no-untyped-def]
        return self._reworded(super().measure(model_name, payload))

    def stamp(self, model_name, payload):  # type: ignore[no-untyped-def]
        return self._reworded(super().stamp(model_name, payload))

    def verify(self, recorded, payload, expected):  # type: ignore[no-untyped-def]
        return self._reworded(super().verify(recorded, payload, expected))
