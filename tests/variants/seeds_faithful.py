"""The seeds' own types and composition, written afresh (CONF-12, CONF-6, CONF-7).

Nothing here comes from the reference implementation. It is the two seed
modules transcribed into Python as literally as the adapter interface allows:

- **seed 000 (fuel-tensor)**: :class:`ShapeKeyHasher` keeps its raw fold
  private (``_mix_bytes``), exactly as ``mix_bytes`` is private in the seed, so
  this variant declares ``raw_fold: false`` and its ``hash`` refuses a ``bytes``
  op. :class:`ModelInstanceId` and :class:`KvAllocId` come from module-level
  counters that start at 1. A model is a typed per-family configuration (the
  seed's ``Qwen3Model``/``LlamaModel`` each mix their own decode key), so the
  key holds a *fixed* set of parameters per family (``plan_key_params: fixed``,
  :data:`KEY_SCHEMA`). The key is composed the seed's way: the model's key
  (family, its fixed fields, its instance id), then the allocation id, then the
  geometry the seed's predicate used to key on alone, ``(seq, max_seq_len,
  n_layers, cache_dtype)``. The cache's head layout is not mixed: a cache of
  another head layout is another allocation (``plan_key_cache_heads: implied``).
- **seed 002 (ferrox-core)**: :class:`CacheSignature` with ``dtype: KvDtype``,
  an enum whose only value is ``F32`` (so this variant declares ``dtypes:
  {f32}``); ``from_payload``; ``UnverifiedBlock.verify`` in the order of the
  seed's code (unmarked, unsupported format, payload coherence, payload
  mismatch, incompatible); the closed set of :class:`SignatureError`. A stamp
  naming a dtype the enum lacks cannot be decoded into a ``CacheSignature`` at
  all: it is refused as ``unrepresentable`` while the stamp is decoded, after
  its format version was found readable and before the payload is measured
  (VERIFY-9).

The cache's element type is the *other* seed's enum: fuel-tensor's ``KvCache``
is built with a ``fuel_ir::DType`` (``DType::F32`` in the seed's test), an
enum of the IR's element types, not ferrox-core's one-value ``KvDtype``; the
seed mixes ``cache_dtype`` into its key precisely because it takes several
values. :class:`DType` gives it the vocabulary's three (SIG-11).

kvconform's canonical spellings are used where the seed writes text (ERR-3,
ERR-4): ``layer_shape`` rather than "layer shape", a shape as the pair
``(n_kv_heads, head_dim)``, a ``k_length`` expectation as the per-token width.
"""

from __future__ import annotations

import struct
import threading
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import ClassVar

from kvconform import __version__
from kvconform.values import (
    AdapterInfo,
    Fault,
    Geometry,
    LayerDesc,
    MixOp,
    ModelSpec,
    Payload,
    PlanIdentity,
    Signature,
    StepInputs,
)

from . import variant

U64_MAX = (1 << 64) - 1
U32_MAX = (1 << 32) - 1


def _u64(value: int, what: str) -> int:
    """A value the seed's ``u64``/``usize`` can hold, or a refusal (HASH-12)."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= U64_MAX:
        raise ValueError(f"{what} {value!r} is not a u64")
    return value


# =====================================================================================
# Seed 000, fuel-tensor 0.19.1: ids and the key hasher
# =====================================================================================


class _AtomicU64:
    """``static NEXT_...: AtomicU64 = AtomicU64::new(1)`` with ``fetch_add(1)``."""

    def __init__(self, start: int) -> None:
        self._value = start
        self._lock = threading.Lock()

    def fetch_add(self, n: int) -> int:
        with self._lock:
            value = self._value
            self._value += n
        if value > U64_MAX:  # the seed would wrap to 0; refusing keeps ids unrecycled
            raise OverflowError("id counter exhausted")
        return value


#: Starts at 1 so a zero-initialized field can never be mistaken for a real id.
NEXT_MODEL_INSTANCE = _AtomicU64(1)
#: Starts at 1 so a zero-initialized field can never be mistaken for a real id.
NEXT_KV_ALLOC = _AtomicU64(1)


@dataclass(frozen=True)
class ModelInstanceId:
    """A process-unique, never-recycled identity for one constructed model."""

    _id: int

    def __post_init__(self) -> None:
        _u64(self._id, "model instance id")

    @classmethod
    def next(cls) -> ModelInstanceId:
        return cls(NEXT_MODEL_INSTANCE.fetch_add(1))

    def get(self) -> int:
        return self._id


@dataclass(frozen=True)
class KvAllocId:
    """A process-unique, never-recycled identity for one KV allocation."""

    _id: int

    def __post_init__(self) -> None:
        _u64(self._id, "kv allocation id")

    @classmethod
    def next(cls) -> KvAllocId:
        return cls(NEXT_KV_ALLOC.fetch_add(1))

    def get(self) -> int:
        return self._id


class ShapeKeyHasher:
    """FNV-1a 64 over a canonical encoding of a model's decode identity.

    The raw fold is private, as in the seed: only the typed mixes reach it.
    There is deliberately no ``mix_weight``.
    """

    __slots__ = ("_state",)

    def __init__(self) -> None:
        self._state = 0xCBF2_9CE4_8422_2325

    def _mix_bytes(self, data: bytes) -> None:
        state = self._state
        for b in data:
            state ^= b
            state = (state * 0x100_0000_01B3) & U64_MAX  # wrapping_mul
        self._state = state

    def mix_str(self, s: str) -> ShapeKeyHasher:
        data = s.encode("utf-8")  # strict: a string with no UTF-8 form is refused here
        self._mix_bytes(data)
        # Length-delimit so ("ab", "c") cannot collide with ("a", "bc").
        self._mix_bytes(len(data).to_bytes(8, "little"))
        return self

    def mix_u64(self, v: int) -> ShapeKeyHasher:
        self._mix_bytes(_u64(v, "u64").to_bytes(8, "little"))
        return self

    def mix_f64(self, v: float) -> ShapeKeyHasher:
        """By bit pattern: ``+0.0`` and ``-0.0`` differ, a NaN mixes its payload."""
        if not isinstance(v, float):
            raise TypeError(f"mix_f64 takes an f64, not {type(v).__name__}")
        self._mix_bytes(struct.pack("<d", v))
        return self

    def mix_instance(self, id: ModelInstanceId) -> ShapeKeyHasher:
        return self.mix_str("instance").mix_u64(id.get())

    def mix_present(self, present: bool) -> ShapeKeyHasher:
        if not isinstance(present, bool):
            raise TypeError("mix_present takes a bool")
        return self.mix_str("some" if present else "none")

    def finish(self) -> int:
        return self._state


def f64_from_bits(bits: int) -> float:
    return struct.unpack("<d", _u64(bits, "f64 bit pattern").to_bytes(8, "little"))[0]


# --- fuel-tensor's models: typed per-family configurations ---------------------------

#: The fields a family's config holds, in the fixed order its decode key mixes them.
#: ``hook`` fields are optional hooks (mixed as presence). A realistic decoder config;
#: anything else is not a field of the type and cannot be constructed.
_DECODER_FIELDS: tuple[tuple[str, str], ...] = (
    ("n_layers", "u64"),
    ("n_heads", "u64"),
    ("n_kv_heads", "u64"),
    ("hidden", "u64"),
    ("intermediate", "u64"),
    ("vocab", "u64"),
    ("rms_norm_eps", "f64"),
    ("mask_policy", "str"),
    ("logit", "hook"),
    ("sampler", "hook"),
)

FAMILY_FIELDS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "llama": _DECODER_FIELDS,
    # Qwen3: per-head Q/K RmsNorm and a sliding-window mask.
    "qwen3": (*_DECODER_FIELDS[:8], ("sliding_window", "u64"), *_DECODER_FIELDS[8:]),
}

#: What this variant declares (capabilities.key_schema, PLAN-17).
KEY_SCHEMA: Mapping[str, Mapping[str, str]] = {
    family: dict(fields) for family, fields in FAMILY_FIELDS.items()
}


@dataclass(frozen=True)
class ModelConfig:
    """One family's config: each fixed field holds a value or is absent (``None``).

    For a hook field the value is whether the hook is attached *as configured*;
    ``None`` means the configuration has no such hook at all.
    """

    family: str
    values: tuple[object, ...]

    @classmethod
    def from_spec(cls, spec: ModelSpec) -> ModelConfig:
        fields = FAMILY_FIELDS.get(spec.family)
        if fields is None:
            raise ValueError(f"no model type for the family {spec.family!r}")
        kinds = dict(fields)
        given: dict[str, object] = {}
        for name, value in spec.params:
            kind = kinds.get(name)
            if kind is None or kind == "hook" or not _fits(kind, value):
                raise ValueError(f"the {spec.family} config has no {name!r} field of that type")
            given[name] = value
        for name, present in spec.hooks:
            if kinds.get(name) != "hook":
                raise ValueError(f"the {spec.family} config has no {name!r} hook")
            given[name] = bool(present)
        return cls(spec.family, tuple(given.get(name) for name, _ in fields))

    @property
    def fields(self) -> tuple[tuple[str, str], ...]:
        return FAMILY_FIELDS[self.family]

    def hook_index(self, hook: str) -> int | None:
        for index, (name, kind) in enumerate(self.fields):
            if name == hook and kind == "hook":
                return index
        return None


def _fits(kind: str, value: object) -> bool:
    if kind == "u64":
        return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= U64_MAX
    if kind == "f64":
        return isinstance(value, float)
    return isinstance(value, str)


class Model:
    """A constructed model: its config, its live hooks, its id (minted once)."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self.values = list(config.values)
        self.instance_id = ModelInstanceId.next()

    def set_hook(self, hook: str, present: bool) -> None:
        """Attach or detach an optional hook in place; the instance id stays."""
        index = self.config.hook_index(hook)
        if index is None or self.values[index] is None:
            raise KeyError(f"the {self.config.family} config declares no hook {hook!r}")
        self.values[index] = bool(present)

    def mix_decode_key(self, h: ShapeKeyHasher) -> None:
        mix_model_key(h, self.config.family, self.config.fields, self.values, self.instance_id)


def mix_model_key(
    h: ShapeKeyHasher,
    family: str,
    fields: Sequence[tuple[str, str]],
    values: Sequence[object],
    instance: ModelInstanceId,
) -> None:
    """The model's decode key: family literal, each fixed field, then the instance id.

    Each field is ``present(false)`` when absent, else ``present(true)`` and its
    value (a hook's value is its own presence). The family fixes the fields, their
    order and their types, and every value is fixed-width or length-delimited, so
    the encoding parses back: injective (PLAN-5).
    """
    h.mix_str(family)
    for (_, kind), value in zip(fields, values, strict=True):
        if value is None:
            h.mix_present(False)
            continue
        h.mix_present(True)
        if kind == "u64":
            h.mix_u64(value)  # type: ignore[arg-type]
        elif kind == "f64":
            h.mix_f64(value)  # type: ignore[arg-type]
        elif kind == "str":
            h.mix_str(value)  # type: ignore[arg-type]
        else:
            h.mix_present(value)  # type: ignore[arg-type]
    h.mix_instance(instance)


# --- fuel-tensor's KV cache ----------------------------------------------------------


class DType(Enum):
    """``fuel_ir::DType``, the IR's element types (the cache's, not the signature's)."""

    F32 = ("f32", "f")
    F16 = ("f16", "H")  # binary16 bit patterns (the array module has no half type)
    BF16 = ("bf16", "H")  # bfloat16 bit patterns

    @property
    def name_str(self) -> str:
        return self.value[0]

    @classmethod
    def parse(cls, name: str) -> DType:
        for d in cls:
            if d.value[0] == name:
                return d
        raise ValueError(f"fuel_ir::DType has no {name!r}")


@dataclass
class KvLayer:
    """One layer's K and V storage, ``max_seq_len * n_kv_heads * head_dim`` each."""

    n_kv_heads: int
    head_dim: int
    max_seq_len: int
    dtype: DType
    k: array = field(repr=False)
    v: array = field(repr=False)

    @classmethod
    def allocate(cls, n_kv_heads: int, head_dim: int, max_seq_len: int, dtype: DType) -> KvLayer:
        for name, value in (
            ("n_kv_heads", n_kv_heads),
            ("head_dim", head_dim),
            ("max_seq_len", max_seq_len),
        ):
            if _u64(value, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        n = max_seq_len * n_kv_heads * head_dim
        zeros = array(dtype.value[1], bytes(array(dtype.value[1]).itemsize * n))
        return cls(n_kv_heads, head_dim, max_seq_len, dtype, zeros, array(zeros.typecode, zeros))


class CacheError(Exception):
    kind: ClassVar[str] = ""

    def fault(self) -> Fault:
        raise NotImplementedError


class CapacityExceeded(CacheError):
    kind = "capacity_exceeded"

    def __init__(self, capacity: int, requested: int) -> None:
        super().__init__(f"append needs {requested} positions but max_seq_len is {capacity}")
        self.capacity, self.requested = capacity, requested

    def fault(self) -> Fault:
        values = {"capacity": self.capacity, "requested": self.requested}
        return Fault(self.kind, "max_seq_len", None, values, str(self))


class LayerOutOfRange(CacheError):
    kind = "layer_out_of_range"

    def __init__(self, layer: int, n_layers: int) -> None:
        super().__init__(f"no layer {layer} in a cache of n_layers={n_layers}")
        self.layer, self.n_layers = layer, n_layers

    def fault(self) -> Fault:
        return Fault(self.kind, None, self.layer, {"n_layers": self.n_layers}, str(self))


class LayerShapeMismatch(CacheError):
    kind = "layer_shape_mismatch"

    def __init__(self, layer: int, field_name: str, expected: int, found: int) -> None:
        super().__init__(
            f"layer {layer}: replacement has {field_name}={found}, the cache has {expected}"
        )
        self.layer, self.field_name, self.expected, self.found = layer, field_name, expected, found

    def fault(self) -> Fault:
        values = {"expected": self.expected, "found": self.found}
        return Fault(self.kind, self.field_name, self.layer, values, str(self))


class KvCache:
    """fuel-tensor's ``KvCache``: storage, ``cached_len`` and the allocation id."""

    def __init__(
        self, n_layers: int, n_kv_heads: int, head_dim: int, max_seq_len: int, dtype: DType
    ) -> None:
        if _u64(n_layers, "n_layers") < 1:
            raise ValueError("n_layers must be at least 1")
        self.n_layers, self.n_kv_heads, self.head_dim = n_layers, n_kv_heads, head_dim
        self.max_seq_len, self.dtype = max_seq_len, dtype
        self._layers = self._fresh_layers()
        self.cached_len = 0
        self._alloc_id = KvAllocId.next()  # constructing a cache is a new allocation

    @classmethod
    def with_capacity(
        cls, n_layers: int, n_kv_heads: int, head_dim: int, max_seq_len: int, dtype: DType
    ) -> KvCache:
        return cls(n_layers, n_kv_heads, head_dim, max_seq_len, dtype)

    def _fresh_layers(self) -> list[KvLayer]:
        return [
            KvLayer.allocate(self.n_kv_heads, self.head_dim, self.max_seq_len, self.dtype)
            for _ in range(self.n_layers)
        ]

    def alloc_id(self) -> KvAllocId:
        return self._alloc_id

    def layer(self, index: int) -> KvLayer:
        return self._layers[index]

    def append(self, tokens: int) -> None:
        """Write ``tokens`` positions in place: storage, and so the id, unchanged."""
        end = self.cached_len + _u64(tokens, "tokens")
        if end > self.max_seq_len:
            raise CapacityExceeded(capacity=self.max_seq_len, requested=end)
        width = self.n_kv_heads * self.head_dim
        fill: float | int = float(end) if self.dtype is DType.F32 else end & 0xFFFF
        for layer in self._layers:
            for buf in (layer.k, layer.v):
                buf[self.cached_len * width : end * width] = array(
                    buf.typecode, [fill] * ((end - self.cached_len) * width)
                )
        self.cached_len = end

    def truncate_to(self, length: int) -> None:
        """Rewind: moves ``cached_len`` only; touches no storage, keeps the id."""
        if length < 0:
            raise ValueError("length must not be negative")
        self.cached_len = min(self.cached_len, length)

    def clear(self) -> None:
        """Release the storage for fresh storage: a new allocation id."""
        self._layers = self._fresh_layers()
        self.cached_len = 0
        self._alloc_id = KvAllocId.next()

    def set_layer(self, index: int, layer: KvLayer) -> None:
        """Replace one layer's storage: a new allocation id; the length stays."""
        if not 0 <= index < self.n_layers:
            raise LayerOutOfRange(index, self.n_layers)
        current = self._layers[index]
        for name in ("n_kv_heads", "head_dim", "max_seq_len"):
            expected, found = getattr(current, name), getattr(layer, name)
            if expected != found:
                raise LayerShapeMismatch(index, name, expected, found)
        if layer.dtype is not current.dtype:
            raise ValueError("a replacement layer must have the cache's element type")
        self._layers[index] = layer
        self._alloc_id = KvAllocId.next()


# --- fuel-tensor's held plan -----------------------------------------------------------


def decode_key(
    family: str,
    fields: Sequence[tuple[str, str]],
    values: Sequence[object],
    instance: ModelInstanceId,
    alloc: KvAllocId,
    seq: int,
    max_seq_len: int,
    n_layers: int,
    cache_dtype: DType,
) -> int:
    """The validity key: the model's key, the allocation, then the step geometry.

    ``(seq, max_seq_len, n_layers, cache_dtype)`` is the seed's old key, kept in its
    own order; ``seq`` is the tokens per step. Every slot is fixed-width or
    length-delimited after a model key that parses back, so it stays injective.
    """
    h = ShapeKeyHasher()
    mix_model_key(h, family, fields, values, instance)
    h.mix_u64(alloc.get())
    h.mix_u64(seq).mix_u64(max_seq_len).mix_u64(n_layers).mix_str(cache_dtype.name_str)
    return h.finish()


class DecodeSession:
    """A held plan: it records its key and keeps neither the model nor the cache."""

    def __init__(self, model: Model, cache: KvCache, seq: int) -> None:
        if _u64(seq, "seq") < 1:
            raise ValueError("a step has at least one token")
        self.key = self._key(model, cache, seq)

    @staticmethod
    def _key(model: Model, cache: KvCache, seq: int) -> int:
        return decode_key(
            model.config.family,
            model.config.fields,
            model.values,
            model.instance_id,
            cache.alloc_id(),
            seq,
            cache.max_seq_len,
            cache.n_layers,
            cache.dtype,
        )

    def is_valid_for(self, model: Model, cache: KvCache, token_ids: Sequence[int]) -> bool:
        """Only the number of tokens in the step is structural; nothing else is read."""
        return self._key(model, cache, len(token_ids)) == self.key


# =====================================================================================
# Seed 002, ferrox-core 0.8.0: block signatures and their verification
# =====================================================================================

BLOCK_FORMAT_VERSION = 1
READABLE_FORMAT_VERSIONS: tuple[int, ...] = (1,)


class KvDtype(Enum):
    """Element type of stored K/V tensors. Only ``F32`` exists."""

    F32 = "f32"

    def as_str(self) -> str:
        return self.value


class SignatureError(Exception):
    """Why a stored block was refused. Every variant is a refusal to guess."""

    kind: ClassVar[str] = ""
    field_name: str | None = None
    layer: int | None = None

    def values(self) -> dict[str, int | str | tuple[int, ...]]:
        return {}

    def fault(self) -> Fault:
        return Fault(self.kind, self.field_name, self.layer, self.values(), str(self))


class Unmarked(SignatureError):
    kind = "unmarked"

    def __str__(self) -> str:
        return "KV block carries no cache signature; refusing to trust an unmarked block"


class EmptyPayload(SignatureError):
    kind = "empty_payload"

    def __str__(self) -> str:
        return "KV block has no layers; nothing to verify"


class DegenerateLayer(SignatureError):
    kind = "degenerate_layer"

    def __init__(self, layer: int, n_kv_heads: int, head_dim: int) -> None:
        self.layer, self.n_kv_heads, self.head_dim = layer, n_kv_heads, head_dim

    def values(self) -> dict[str, int | str | tuple[int, ...]]:
        return {"n_kv_heads": self.n_kv_heads, "head_dim": self.head_dim}

    def __str__(self) -> str:
        return (
            f"KV block layer {self.layer} is degenerate: "
            f"{self.n_kv_heads} kv heads x {self.head_dim} head dim"
        )


Value = int | str | tuple[int, ...]


def _show(value: Value) -> str:
    return "x".join(map(str, value)) if isinstance(value, tuple) else str(value)


class RaggedPayload(SignatureError):
    kind = "ragged_payload"

    def __init__(self, layer: int, field: str, expected: Value, found: Value) -> None:
        self.layer, self.field_name, self.expected, self.found = layer, field, expected, found

    def values(self) -> dict[str, Value]:
        return {"expected": self.expected, "found": self.found}

    def __str__(self) -> str:
        expected = _show(self.expected)
        if self.field_name == "k_length":
            expected = f"a multiple of {expected}"
        return (
            f"KV block payload is inconsistent at layer {self.layer}: "
            f"{self.field_name} is {_show(self.found)}, expected {expected}"
        )


class PayloadMismatch(SignatureError):
    kind = "payload_mismatch"

    def __init__(self, field: str, recorded: Value, actual: Value) -> None:
        self.field_name, self.recorded, self.actual = field, recorded, actual

    def values(self) -> dict[str, Value]:
        return {"recorded": self.recorded, "actual": self.actual}

    def __str__(self) -> str:
        f = self.field_name
        return (
            f"KV block signature vouches for {f}={_show(self.recorded)} "
            f"but its payload has {f}={_show(self.actual)}"
        )


class Incompatible(SignatureError):
    kind = "incompatible"

    def __init__(self, field: str, expected: Value, found: Value) -> None:
        self.field_name, self.expected, self.found = field, expected, found

    def values(self) -> dict[str, Value]:
        return {"expected": self.expected, "found": self.found}

    def __str__(self) -> str:
        return (
            f"KV block is incompatible: {self.field_name} is {_show(self.found)}, "
            f"this server needs {_show(self.expected)}"
        )


class UnsupportedFormat(SignatureError):
    kind = "unsupported_format"
    field_name = "format_version"

    def __init__(self, found: int, readable: tuple[int, ...]) -> None:
        self.found, self.readable = found, readable

    def values(self) -> dict[str, Value]:
        return {"found": self.found, "readable": tuple(sorted(self.readable))}

    def __str__(self) -> str:
        return (
            f"KV block format version {self.found} is not readable by this build "
            f"(readable: {list(self.readable)})"
        )


class Unrepresentable(SignatureError):
    """Decoding a stamp: it names a dtype ``KvDtype`` has no variant for (VERIFY-9)."""

    kind = "unrepresentable"
    field_name = "dtype"

    def __init__(self, found: str) -> None:
        self.found = found

    def values(self) -> dict[str, Value]:
        return {"found": self.found}

    def __str__(self) -> str:
        return (
            f"KV block signature records dtype {self.found}, which this build's KvDtype "
            f"cannot represent (it has only {', '.join(d.as_str() for d in KvDtype)})"
        )


@dataclass
class StoredKvCache:
    """ferrox-core's ``KvCache`` as a stored layer: declared shape, claim, buffers."""

    n_kv_heads: int
    head_dim: int
    seq_len: int
    k: array = field(repr=False)
    v: array = field(repr=False)


@dataclass(frozen=True)
class CacheSignature:
    format_version: int
    model: str
    n_layers: int
    n_kv_heads: int
    head_dim: int
    dtype: KvDtype
    tokens: int

    FIELDS: ClassVar[tuple[str, ...]] = (
        "format_version",
        "model",
        "n_layers",
        "n_kv_heads",
        "head_dim",
        "dtype",
        "tokens",
    )

    @classmethod
    def from_payload(cls, model: str, layers: Sequence[StoredKvCache]) -> CacheSignature:
        """Measures ``layers``; there is no parameter to fill a gap from."""
        if not layers:
            raise EmptyPayload()
        first = layers[0]
        n_kv_heads, head_dim = first.n_kv_heads, first.head_dim
        per_token = n_kv_heads * head_dim
        # The seed checks for zero; a width a usize cannot hold is as degenerate (SIG-15).
        if n_kv_heads == 0 or head_dim == 0 or per_token > U64_MAX:
            raise DegenerateLayer(0, n_kv_heads, head_dim)
        tokens = _measure_layer(0, first, per_token)
        for index, layer in enumerate(layers[1:], start=1):
            if layer.n_kv_heads != n_kv_heads or layer.head_dim != head_dim:
                raise RaggedPayload(
                    index, "layer_shape", (n_kv_heads, head_dim), (layer.n_kv_heads, layer.head_dim)
                )
            layer_tokens = _measure_layer(index, layer, per_token)
            if layer_tokens != tokens:
                raise RaggedPayload(index, "token_count", tokens, layer_tokens)
        return cls(
            BLOCK_FORMAT_VERSION, model, len(layers), n_kv_heads, head_dim, KvDtype.F32, tokens
        )

    @classmethod
    def expected(
        cls, model: str, n_layers: int, n_kv_heads: int, head_dim: int, tokens: int
    ) -> CacheSignature:
        return cls(BLOCK_FORMAT_VERSION, model, n_layers, n_kv_heads, head_dim, KvDtype.F32, tokens)

    def compare(
        self, other: CacheSignature, mismatch: type[PayloadMismatch] | type[Incompatible]
    ) -> None:
        """Field by field; the first field that differs is named with both values."""
        for name in self.FIELDS:
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                if isinstance(mine, KvDtype):
                    mine, theirs = mine.as_str(), theirs.as_str()
                raise mismatch(name, mine, theirs)


def _measure_layer(index: int, layer: StoredKvCache, per_token: int) -> int:
    """``seq_len`` is a claim, ``len(k)`` is the evidence."""
    if len(layer.k) % per_token != 0:
        raise RaggedPayload(index, "k_length", per_token, len(layer.k))
    if len(layer.v) != len(layer.k):
        raise RaggedPayload(index, "v_length", len(layer.k), len(layer.v))
    tokens = len(layer.k) // per_token
    if layer.seq_len != tokens:
        raise RaggedPayload(index, "seq_len", tokens, layer.seq_len)
    return tokens


@dataclass
class KvBlock:
    signature: CacheSignature
    layers: list[StoredKvCache]

    @classmethod
    def stamp(cls, model: str, layers: list[StoredKvCache]) -> KvBlock:
        return cls(CacheSignature.from_payload(model, layers), layers)


@dataclass
class UnverifiedBlock:
    signature: CacheSignature | None
    layers: list[StoredKvCache]

    def verify(self, expected: CacheSignature) -> KvBlock:
        """Marked, readable, coherent, honest, compatible: the seed's code order."""
        recorded = self.signature
        if recorded is None:
            raise Unmarked()
        if recorded.format_version not in READABLE_FORMAT_VERSIONS:
            raise UnsupportedFormat(recorded.format_version, READABLE_FORMAT_VERSIONS)
        actual = CacheSignature.from_payload(recorded.model, self.layers)
        recorded.compare(actual, PayloadMismatch)
        expected.compare(actual, Incompatible)
        return KvBlock(actual, self.layers)


def decode_stamp(sig: Signature) -> CacheSignature:
    """Read a stored block's stamp into the typed signature.

    The version comes first: an unreadable layout is not decoded further. A readable
    stamp whose dtype the enum lacks has no ``CacheSignature`` to become.
    """
    if sig.format_version not in READABLE_FORMAT_VERSIONS:
        raise UnsupportedFormat(sig.format_version, READABLE_FORMAT_VERSIONS)
    dtype = next((d for d in KvDtype if d.as_str() == sig.dtype), None)
    if dtype is None:
        raise Unrepresentable(sig.dtype)
    return _typed(sig, dtype)


def _typed(sig: Signature, dtype: KvDtype) -> CacheSignature:
    if not 0 <= sig.format_version <= U32_MAX:
        raise ValueError(f"format_version {sig.format_version} is not a u32")
    for name in ("n_layers", "n_kv_heads", "head_dim", "tokens"):
        _u64(getattr(sig, name), name)
    return CacheSignature(
        sig.format_version, sig.model, sig.n_layers, sig.n_kv_heads, sig.head_dim, dtype, sig.tokens
    )


def reader_expectation(sig: Signature) -> CacheSignature:
    """The reader's own requirement; a dtype it cannot name is not a requirement it has."""
    dtype = next((d for d in KvDtype if d.as_str() == sig.dtype), None)
    if dtype is None:
        raise ValueError(f"this reader cannot require dtype {sig.dtype!r}")
    return _typed(sig, dtype)


def stored_layers(payload: Payload) -> list[StoredKvCache]:
    return [_stored(layer) for layer in payload]


def _stored(layer: LayerDesc) -> StoredKvCache:
    for name in ("n_kv_heads", "head_dim", "seq_len", "k_len", "v_len"):
        _u64(getattr(layer, name), name)
    k = array("f", bytes(4 * layer.k_len))
    v = array("f", bytes(4 * layer.v_len))
    return StoredKvCache(layer.n_kv_heads, layer.head_dim, layer.seq_len, k, v)


def to_wire(sig: CacheSignature) -> Signature:
    return Signature(
        sig.format_version,
        sig.model,
        sig.n_layers,
        sig.n_kv_heads,
        sig.head_dim,
        sig.dtype.as_str(),
        sig.tokens,
    )


# =====================================================================================
# The adapter
# =====================================================================================


@variant(
    "seeds-faithful",
    "the seeds' own types and composition: private raw fold (raw_fold: false), a one-value "
    "KvDtype (dtypes: {f32}), typed per-family configs (plan_key_params: fixed), the seed's "
    "key without the cache's head layout (plan_key_cache_heads: implied)",
)
class SeedsFaithful:
    def describe(self) -> AdapterInfo:
        return AdapterInfo(
            name="seeds-faithful",
            version=__version__,
            language="python",
            classes=frozenset({"hash", "identity", "plan", "signature", "verify"}),
            format_writes=BLOCK_FORMAT_VERSION,
            format_reads=frozenset(READABLE_FORMAT_VERSIONS),
            options={"plan_key_cache_heads": "implied", "plan_key_params": "fixed"},
            raw_fold=False,
            dtypes=frozenset(d.as_str() for d in KvDtype),
            key_schema=KEY_SCHEMA,
        )

    # hash: only the public mixes exist
    def hash(self, program: Sequence[MixOp]) -> list[int]:
        h = ShapeKeyHasher()
        finishes: list[int] = []
        for op in program:
            if op.kind == "bytes":
                raise TypeError("ShapeKeyHasher's raw fold is private (mix_bytes is not pub)")
            if op.kind == "str":
                assert isinstance(op.value, str)
                h.mix_str(op.value)
            elif op.kind == "u64":
                h.mix_u64(op.value)  # type: ignore[arg-type]
            elif op.kind == "f64":
                h.mix_f64(f64_from_bits(op.value))  # type: ignore[arg-type]
            elif op.kind == "present":
                h.mix_present(op.value)  # type: ignore[arg-type]
            elif op.kind == "instance":
                h.mix_instance(ModelInstanceId(op.value))  # type: ignore[arg-type]
            elif op.kind == "finish":
                finishes.append(h.finish())
            else:
                raise ValueError(f"unknown mix {op.kind!r}")
        return finishes

    # identity
    def model_new(self, spec: ModelSpec) -> Model:
        return Model(ModelConfig.from_spec(spec))

    def model_reload(self, m: Model) -> Model:
        return Model(m.config)

    def model_set_hook(self, m: Model, hook: str, present: bool) -> None:
        m.set_hook(hook, present)

    def model_instance_id(self, m: Model) -> int:
        return m.instance_id.get()

    def cache_new(self, g: Geometry) -> KvCache:
        return KvCache.with_capacity(
            g.n_layers, g.n_kv_heads, g.head_dim, g.max_seq_len, DType.parse(g.dtype)
        )

    def cache_append(self, cache: KvCache, tokens: int) -> Fault | None:
        try:
            cache.append(tokens)
        except CacheError as exc:
            return exc.fault()
        return None

    def cache_truncate(self, cache: KvCache, length: int) -> None:
        cache.truncate_to(length)

    def cache_clear(self, cache: KvCache) -> None:
        cache.clear()

    def cache_replace_layer(
        self,
        cache: KvCache,
        layer: int,
        n_kv_heads: int | None,
        head_dim: int | None,
        max_seq_len: int | None,
    ) -> Fault | None:
        replacement = KvLayer.allocate(
            cache.n_kv_heads if n_kv_heads is None else n_kv_heads,
            cache.head_dim if head_dim is None else head_dim,
            cache.max_seq_len if max_seq_len is None else max_seq_len,
            cache.dtype,
        )
        try:
            cache.set_layer(layer, replacement)
        except CacheError as exc:
            return exc.fault()
        return None

    def cache_alloc_id(self, cache: KvCache) -> int:
        return cache.alloc_id().get()

    def cache_len(self, cache: KvCache) -> int:
        return cache.cached_len

    # plan
    def plan_key(self, identity: PlanIdentity) -> int:
        config = ModelConfig.from_spec(identity.model)
        g = identity.geometry
        return decode_key(
            config.family,
            config.fields,
            config.values,
            ModelInstanceId(identity.instance),
            KvAllocId(identity.alloc),
            identity.step_tokens,
            g.max_seq_len,
            g.n_layers,
            DType.parse(g.dtype),
        )

    def session_new(self, m: Model, cache: KvCache, step_tokens: int) -> DecodeSession:
        return DecodeSession(m, cache, step_tokens)

    def session_valid(
        self, session: DecodeSession, m: Model, cache: KvCache, step: StepInputs
    ) -> bool:
        return session.is_valid_for(m, cache, step.token_ids)

    def drop(self, handle: object) -> None:
        """Nothing is kept per handle."""

    # signature and verify
    def measure(self, model: str, payload: Payload) -> Signature | Fault:
        try:
            return to_wire(CacheSignature.from_payload(model, stored_layers(payload)))
        except SignatureError as exc:
            return exc.fault()

    def stamp(self, model: str, payload: Payload) -> Signature | Fault:
        try:
            return to_wire(KvBlock.stamp(model, stored_layers(payload)).signature)
        except SignatureError as exc:
            return exc.fault()

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        want = reader_expectation(expected)
        try:
            stamp = None if recorded is None else decode_stamp(recorded)
            block = UnverifiedBlock(stamp, stored_layers(payload)).verify(want)
        except SignatureError as exc:
            return exc.fault()
        return to_wire(block.signature)


@variant(
    "seeds-faithful-over-stdio",
    "seeds-faithful served as a separate process: its options and capabilities cross the "
    "wire in the hello answer (CONF-6, CONF-7)",
    transport="stdio",
)
class SeedsFaithfulServed(SeedsFaithful):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="seeds-faithful-served")
