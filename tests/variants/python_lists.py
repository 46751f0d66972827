"""Plain Python lists everywhere, and signatures written from the specification alone.

Differs from the reference only where the specification leaves room:

- the KV cache keeps, per layer, a Python list of K rows and one of V rows
  (one row of ``n_kv_heads * head_dim`` floats per position), grown on demand
  up to the capacity; the length is tracked beside them;
- payload buffers are Python lists, measured with ``len``;
- measuring and verifying are an independent implementation of SIG-4 .. SIG-9
  and VERIFY-9 .. VERIFY-7 that shares no code with ``reference/``, with its
  own error wording (ERR-5);
- ids come from two counters of its own that start at 2**40 and 2**41 and step
  by 1000 (ID-8).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvconform_reference import kv_cache, model, plan
from kvconform_reference.identity import KvAllocId, ModelInstanceId

from kvconform.adapters.reference import ReferenceAdapter, model_config
from kvconform.values import AdapterInfo, Fault, Geometry, ModelSpec, Payload, Signature

from . import variant

# --- ids -------------------------------------------------------------------------

_LOCK = threading.Lock()
_MODEL_IDS = itertools.count(2**40, 1000)
_CACHE_IDS = itertools.count(2**41, 1000)


def _next(counter: itertools.count[int]) -> int:
    with _LOCK:
        return next(counter)


class ListModel(model.Model):
    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        self.instance_id = ModelInstanceId(_next(_MODEL_IDS))

    def reload(self) -> model.Model:
        return ListModel(self.config)


# --- the cache -------------------------------------------------------------------


class ListCache:
    """Per layer, a list of K rows and a list of V rows; a length; an allocation id."""

    #: Where the storage lives and what each layer's storage is (PLAN-21); this
    #: variant claims no rebind, but a plan bakes both when it is built.
    residency: str | None = "host"

    @property
    def layer_storage(self) -> tuple[str, ...]:
        return ("host-f32",) * self.geometry.n_layers

    def __init__(self, geometry: kv_cache.CacheGeometry) -> None:
        self.geometry = geometry
        self._k: list[list[list[float]]] = [[] for _ in range(geometry.n_layers)]
        self._v: list[list[list[float]]] = [[] for _ in range(geometry.n_layers)]
        self._length = 0
        self._alloc = _next(_CACHE_IDS)

    @property
    def alloc_id(self) -> KvAllocId:
        return KvAllocId(self._alloc)

    def __len__(self) -> int:
        return self._length

    def append(self, tokens: int) -> Fault | None:
        g = self.geometry
        if self._length + tokens > g.max_seq_len:
            wanted = self._length + tokens
            return Fault(
                "capacity_exceeded",
                "max_seq_len",
                None,
                {"capacity": g.max_seq_len, "requested": wanted},
                f"max_seq_len {g.max_seq_len} leaves no room for a length of {wanted}",
            )
        width = g.n_kv_heads * g.head_dim
        for rows in (*self._k, *self._v):
            for position in range(self._length, self._length + tokens):
                row = [float(position)] * width
                if position < len(rows):
                    rows[position] = row  # overwrite in place: the same list
                else:
                    rows.append(row)
        self._length += tokens
        return None

    def truncate(self, length: int) -> None:
        if length < 0:
            raise ValueError("negative length")
        self._length = min(self._length, length)  # rows stay where they are

    def clear(self) -> None:
        self._k = [[] for _ in self._k]
        self._v = [[] for _ in self._v]
        self._length = 0
        self._alloc = _next(_CACHE_IDS)

    def replace_layer(self, layer: int, heads: int, dim: int, capacity: int) -> Fault | None:
        g = self.geometry
        if layer >= g.n_layers or layer < 0:
            return Fault(
                "layer_out_of_range",
                None,
                layer,
                {"n_layers": g.n_layers},
                f"layer index {layer} is not below n_layers {g.n_layers}",
            )
        offered = {"n_kv_heads": heads, "head_dim": dim, "max_seq_len": capacity}
        for name, found in offered.items():  # dicts keep ALLOC-17's order
            expected = getattr(g, name)
            if found != expected:
                return Fault(
                    "layer_shape_mismatch",
                    name,
                    layer,
                    {"expected": expected, "found": found},
                    f"layer {layer} replacement: {name} {found} where the cache has {expected}",
                )
        width = heads * dim
        self._k[layer] = [[0.0] * width for _ in range(self._length)]
        self._v[layer] = [[0.0] * width for _ in range(self._length)]
        self._alloc = _next(_CACHE_IDS)
        return None


# --- signatures and verification, from the specification -------------------------

FIELDS = ("format_version", "model", "n_layers", "n_kv_heads", "head_dim", "dtype", "tokens")
WRITES = 1
READS = (1,)


@dataclass(frozen=True)
class ListLayer:
    heads: int
    dim: int
    seq_len: int
    k: list[float]
    v: list[float]


def _ragged(layer: int, field: str, expected: object, found: object) -> Fault:
    def shown(value: object) -> str:
        return "/".join(map(str, value)) if isinstance(value, tuple) else str(value)

    return Fault(
        "ragged_payload",
        field,
        layer,
        {"expected": expected, "found": found},  # type: ignore[dict-item]
        f"layer {layer} contradicts itself on {field}: {shown(found)} (wanted {shown(expected)})",
    )


def _tokens_in(index: int, layer: ListLayer, width: int) -> int | Fault:
    """SIG-7: k length a multiple of the width, v as long as k, the claim as measured."""
    if len(layer.k) % width:
        return _ragged(index, "k_length", width, len(layer.k))
    if len(layer.v) != len(layer.k):
        return _ragged(index, "v_length", len(layer.k), len(layer.v))
    tokens = len(layer.k) // width
    if layer.seq_len != tokens:
        return _ragged(index, "seq_len", tokens, layer.seq_len)
    return tokens


def measure(
    model_name: str, layers: Sequence[ListLayer], version: int = WRITES
) -> Signature | Fault:
    if len(layers) == 0:
        return Fault("empty_payload", message="an empty payload has nothing to measure")
    heads, dim = layers[0].heads, layers[0].dim
    if heads * dim == 0 or heads * dim >= 1 << 64:  # SIG-6, SIG-15: no width to measure by
        return Fault(
            "degenerate_layer",
            None,
            0,
            {"n_kv_heads": heads, "head_dim": dim},
            f"first layer has {heads} heads of dimension {dim}",
        )
    width = heads * dim
    tokens = _tokens_in(0, layers[0], width)
    if isinstance(tokens, Fault):
        return tokens
    for index in range(1, len(layers)):
        layer = layers[index]
        if (layer.heads, layer.dim) != (heads, dim):
            return _ragged(index, "layer_shape", (heads, dim), (layer.heads, layer.dim))
        here = _tokens_in(index, layer, width)
        if isinstance(here, Fault):
            return here
        if here != tokens:
            return _ragged(index, "token_count", tokens, here)
    return Signature(version, model_name, len(layers), heads, dim, "f32", tokens)


def verify(
    recorded: Signature | None, layers: Sequence[ListLayer], expected: Signature
) -> Signature | Fault:
    if recorded is None:
        return Fault("unmarked", message="no stamp: this block is unmarked and is not used")
    if recorded.format_version not in READS:
        return Fault(
            "unsupported_format",
            "format_version",
            None,
            {"found": recorded.format_version, "readable": tuple(sorted(READS))},
            f"format_version {recorded.format_version} unknown; this reader takes {list(READS)}",
        )
    measured = measure(recorded.model, layers, recorded.format_version)
    if isinstance(measured, Fault):
        return measured
    for name in FIELDS:
        said, has = getattr(recorded, name), getattr(measured, name)
        if said != has:
            return Fault(
                "payload_mismatch",
                name,
                None,
                {"recorded": said, "actual": has},
                f"the stamp's {name} is {said} but the payload's is {has}",
            )
    for name in FIELDS:
        want, has = getattr(expected, name), getattr(measured, name)
        if want != has:
            return Fault(
                "incompatible",
                name,
                None,
                {"expected": want, "found": has},
                f"not for this reader: {name} {has} instead of {want}",
            )
    return measured


def list_layers(payload: Payload) -> list[ListLayer]:
    return [
        ListLayer(d.n_kv_heads, d.head_dim, d.seq_len, [0.5] * d.k_len, [-0.5] * d.v_len)
        for d in payload
    ]


# --- the adapter -----------------------------------------------------------------


@variant(
    "python-lists",
    "a cache of per-layer Python lists of rows; payloads as Python lists; measuring and "
    "verifying written independently of reference/; its own id counters and wording",
)
class PythonLists(ReferenceAdapter):
    #: Its plans are its own, with a boolean validity only (CONF-10).
    classes = ReferenceAdapter.classes - {"plan_validity"}

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="variant-python-lists")

    def model_new(self, spec: ModelSpec) -> model.Model:
        return ListModel(model_config(spec))

    def cache_new(self, geometry: Geometry) -> ListCache:
        g = geometry
        return ListCache(
            kv_cache.CacheGeometry(g.n_layers, g.n_kv_heads, g.head_dim, g.max_seq_len, g.dtype)
        )

    def cache_append(self, cache: ListCache, tokens: int) -> Fault | None:  # type: ignore[override]
        return cache.append(tokens)

    def cache_truncate(self, cache: ListCache, length: int) -> None:  # type: ignore[override]
        cache.truncate(length)

    def cache_clear(self, cache: ListCache) -> None:  # type: ignore[override]
        cache.clear()

    def cache_replace_layer(  # type: ignore[override]
        self,
        cache: ListCache,
        layer: int,
        n_kv_heads: int | None,
        head_dim: int | None,
        max_seq_len: int | None,
    ) -> Fault | None:
        g = cache.geometry
        return cache.replace_layer(
            layer,
            g.n_kv_heads if n_kv_heads is None else n_kv_heads,
            g.head_dim if head_dim is None else head_dim,
            g.max_seq_len if max_seq_len is None else max_seq_len,
        )

    def cache_alloc_id(self, cache: ListCache) -> int:  # type: ignore[override]
        return cache.alloc_id.value

    def cache_len(self, cache: ListCache) -> int:  # type: ignore[override]
        return len(cache)

    def session_new(  # type: ignore[override]
        self, m: model.Model, cache: ListCache, step_tokens: int
    ) -> plan.DecodePlan:
        return plan.DecodePlan(m, cache, step_tokens)  # type: ignore[arg-type]

    def measure(self, model_name: str, payload: Payload) -> Signature | Fault:
        return measure(model_name, list_layers(payload))

    def stamp(self, model_name: str, payload: Payload) -> Signature | Fault:
        return measure(model_name, list_layers(payload), WRITES)

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        return verify(recorded, list_layers(payload), expected)
