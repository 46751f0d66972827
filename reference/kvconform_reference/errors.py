"""The closed set of typed errors (spec/errors.md, ERR group).

Every refusal the specification defines is one variant here, carrying the
field, layer and values that identify it. A message is *derived* from those
values (ERR-13); nothing ever parses a message (ERR-7).

Two families:

- :class:`SignatureError` -- why a stored block's payload or stamp was refused
  (SIG and VERIFY groups).
- :class:`CacheError` -- why a KV-cache operation was refused (ALLOC group).
- :class:`RebindRefusal` -- why a held plan could not be rebound to another
  allocation (PLAN-21, class ``plan_validity``).
"""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from typing import Any, ClassVar

#: A value an error carries: an integer, a string, a short list of integers, or
#: ``None`` for an absent sliding window (PROF-10).
Value = int | str | tuple[int, ...] | None


@dataclass(unsafe_hash=True)
class KvError(Exception):
    """Base of every typed error. Subclasses are immutable value objects.

    Not ``frozen=True``: Python's exception machinery assigns ``__traceback__``
    and friends to a raised exception, which a frozen dataclass refuses. The
    fields are sealed after construction instead.
    """

    #: The normative kind name (ERR-8), e.g. ``"payload_mismatch"``.
    kind: ClassVar[str] = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "_sealed", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if getattr(self, "_sealed", False) and not (name.startswith("__") and name.endswith("__")):
            raise FrozenInstanceError(f"cannot assign to field {name!r}")
        super().__setattr__(name, value)

    def values(self) -> dict[str, Value]:
        """The error's normative values, keyed by their canonical names (ERR-2)."""
        return {}

    @property
    def field_name(self) -> str | None:
        """The canonical name of the field the error is about, if any (ERR-3)."""
        return None

    @property
    def layer(self) -> int | None:
        """The layer the error is about, if any."""
        return None

    def __str__(self) -> str:
        return self.message()

    def message(self) -> str:
        raise NotImplementedError


class SignatureError(KvError):
    """Why a stored block was refused. Every variant is a refusal to guess."""


class CacheError(KvError):
    """Why a KV-cache operation was refused; the cache is left unchanged."""


class RebindRefusal(KvError):
    """Why a plan was not rebound; the plan is left exactly as it was (PLAN-22)."""


def _show(value: Value) -> str:
    if value is None:  # an absent window, never shown as 0 (PROF-10)
        return "none (full causal)"
    if isinstance(value, tuple):
        return "x".join(str(part) for part in value)
    return str(value)


@dataclass(unsafe_hash=True)
class Unmarked(SignatureError):
    """The block carries no signature at all (VERIFY-2)."""

    kind: ClassVar[str] = "unmarked"

    def message(self) -> str:
        return "block carries no signature; an unmarked block is never trusted"


@dataclass(unsafe_hash=True)
class UnsupportedFormat(SignatureError):
    """The recorded format version is not in the readable set (VERIFY-3)."""

    kind: ClassVar[str] = "unsupported_format"
    found: int
    readable: tuple[int, ...]

    def values(self) -> dict[str, Value]:
        return {"found": self.found, "readable": self.readable}

    @property
    def field_name(self) -> str:
        return "format_version"

    def message(self) -> str:
        versions = ", ".join(str(v) for v in self.readable)
        return f"format_version {self.found} is not readable here (readable: {versions})"


@dataclass(unsafe_hash=True)
class Unrepresentable(SignatureError):
    """A stamp field holds a value the reader's own types cannot hold (VERIFY-9, ERR-9).

    The reference holds any dtype name as a string and any count as an
    unbounded integer, so it never raises this; an implementation whose dtype
    is an enum, or whose counts are narrower than u64, does.
    """

    kind: ClassVar[str] = "unrepresentable"
    field: str
    found: int | str

    def values(self) -> dict[str, Value]:
        return {"found": self.found}

    @property
    def field_name(self) -> str:
        return self.field

    def message(self) -> str:
        return f"the stamp's {self.field} {self.found} cannot be represented by this reader"


@dataclass(unsafe_hash=True)
class EmptyPayload(SignatureError):
    """The payload has no layers, so it can vouch for nothing (SIG-5)."""

    kind: ClassVar[str] = "empty_payload"

    def message(self) -> str:
        return "payload has no layers; there is nothing to measure"


@dataclass(unsafe_hash=True)
class DegenerateLayer(SignatureError):
    """The first layer has no KV heads or a zero head dimension (SIG-6)."""

    kind: ClassVar[str] = "degenerate_layer"
    layer_index: int
    n_kv_heads: int
    head_dim: int

    def values(self) -> dict[str, Value]:
        return {"n_kv_heads": self.n_kv_heads, "head_dim": self.head_dim}

    @property
    def layer(self) -> int:
        return self.layer_index

    def message(self) -> str:
        return (
            f"layer {self.layer_index} is degenerate: "
            f"n_kv_heads={self.n_kv_heads}, head_dim={self.head_dim}"
        )


@dataclass(unsafe_hash=True)
class RaggedPayload(SignatureError):
    """The payload disagrees with itself at one layer (SIG-7, SIG-8)."""

    kind: ClassVar[str] = "ragged_payload"
    layer_index: int
    field: str
    expected: Value
    found: Value

    def values(self) -> dict[str, Value]:
        return {"expected": self.expected, "found": self.found}

    @property
    def field_name(self) -> str:
        return self.field

    @property
    def layer(self) -> int:
        return self.layer_index

    def message(self) -> str:
        if self.field == "k_length":
            wanted = f"a multiple of {_show(self.expected)}"
        else:
            wanted = _show(self.expected)
        return (
            f"payload is inconsistent at layer {self.layer_index}: "
            f"{self.field} is {_show(self.found)}, expected {wanted}"
        )


@dataclass(unsafe_hash=True)
class PayloadMismatch(SignatureError):
    """The recorded signature claims what the payload is not (VERIFY-4)."""

    kind: ClassVar[str] = "payload_mismatch"
    field: str
    recorded: Value
    actual: Value

    def values(self) -> dict[str, Value]:
        return {"recorded": self.recorded, "actual": self.actual}

    @property
    def field_name(self) -> str:
        return self.field

    def message(self) -> str:
        return (
            f"signature vouches for {self.field}={_show(self.recorded)} "
            f"but the payload has {self.field}={_show(self.actual)}"
        )


@dataclass(unsafe_hash=True)
class Incompatible(SignatureError):
    """An honest, coherent block that is not what this reader needs (VERIFY-5)."""

    kind: ClassVar[str] = "incompatible"
    field: str
    expected: Value
    found: Value

    def values(self) -> dict[str, Value]:
        return {"expected": self.expected, "found": self.found}

    @property
    def field_name(self) -> str:
        return self.field

    def message(self) -> str:
        return (
            f"block is incompatible: {self.field} is {_show(self.found)}, "
            f"this reader needs {_show(self.expected)}"
        )


@dataclass(unsafe_hash=True)
class CapacityExceeded(CacheError):
    """Appending would pass the cache's capacity (ALLOC-16)."""

    kind: ClassVar[str] = "capacity_exceeded"
    capacity: int
    requested: int

    def values(self) -> dict[str, Value]:
        return {"capacity": self.capacity, "requested": self.requested}

    @property
    def field_name(self) -> str:
        return "max_seq_len"

    def message(self) -> str:
        return f"append needs {self.requested} positions but max_seq_len is {self.capacity}"


@dataclass(unsafe_hash=True)
class LayerOutOfRange(CacheError):
    """A layer index that the cache does not have (ALLOC-9)."""

    kind: ClassVar[str] = "layer_out_of_range"
    layer_index: int
    n_layers: int

    def values(self) -> dict[str, Value]:
        return {"n_layers": self.n_layers}

    @property
    def layer(self) -> int:
        return self.layer_index

    def message(self) -> str:
        return f"layer {self.layer_index} does not exist; the cache has n_layers={self.n_layers}"


@dataclass(unsafe_hash=True)
class LayerShapeMismatch(CacheError):
    """A replacement layer whose shape is not the cache's (ALLOC-17)."""

    kind: ClassVar[str] = "layer_shape_mismatch"
    layer_index: int
    field: str
    expected: int
    found: int

    def values(self) -> dict[str, Value]:
        return {"expected": self.expected, "found": self.found}

    @property
    def field_name(self) -> str:
        return self.field

    @property
    def layer(self) -> int:
        return self.layer_index

    def message(self) -> str:
        return (
            f"replacement for layer {self.layer_index} has {self.field}={self.found}, "
            f"the cache needs {self.field}={self.expected}"
        )


@dataclass(unsafe_hash=True)
class BadLayout(SignatureError):
    """A layout that is not one: zero block, zero window, or a misaligned window (PROF-7)."""

    kind: ClassVar[str] = "bad_layout"
    field: str
    block_size: int
    sliding_window: int | None
    remainder: int | None = None

    def values(self) -> dict[str, Value]:
        found: dict[str, Value] = {
            "block_size": self.block_size,
            "sliding_window": self.sliding_window,
        }
        if self.remainder is not None:
            found["remainder"] = self.remainder
        return found

    @property
    def field_name(self) -> str:
        return self.field

    def message(self) -> str:
        window = _show(self.sliding_window)
        if self.remainder is not None:
            return (
                f"layout is unusable: block_size {self.block_size} does not divide "
                f"sliding_window {window} (remainder {self.remainder})"
            )
        return (
            f"layout is unusable: {self.field} must be positive "
            f"(block_size {self.block_size}, sliding_window {window})"
        )


@dataclass(unsafe_hash=True)
class SplitKvHeadWidth(SignatureError):
    """A layer whose V heads are narrower or wider than its K heads (PROF-11)."""

    kind: ClassVar[str] = "split_kv_head_width"
    layer_index: int
    head_dim: int
    v_head_dim: int

    def values(self) -> dict[str, Value]:
        return {"head_dim": self.head_dim, "v_head_dim": self.v_head_dim}

    @property
    def layer(self) -> int:
        return self.layer_index

    def message(self) -> str:
        return (
            f"layer {self.layer_index} has v_head_dim {self.v_head_dim} but head_dim "
            f"{self.head_dim}; one head_dim cannot describe it"
        )


@dataclass(unsafe_hash=True)
class BlockSizeMismatch(SignatureError):
    """The payload is not exactly one block of the layout's size (PROF-8, PROF-9)."""

    kind: ClassVar[str] = "block_size_mismatch"
    block_size: int
    tokens: int

    def values(self) -> dict[str, Value]:
        return {"block_size": self.block_size, "tokens": self.tokens}

    def message(self) -> str:
        return (
            f"block_size is {self.block_size} but the payload holds {self.tokens} tokens; "
            "a stored block is exactly one whole block"
        )


@dataclass(unsafe_hash=True)
class ResidencyUnknown(RebindRefusal):
    """The incoming or the baked residency is unknown (PLAN-21)."""

    kind: ClassVar[str] = "residency_unknown"

    def message(self) -> str:
        return "residency is unknown; a plan is rebound only to storage known to be where it was"


@dataclass(unsafe_hash=True)
class ResidencyDiffers(RebindRefusal):
    """The incoming storage lives elsewhere than the baked storage (PLAN-21)."""

    kind: ClassVar[str] = "residency_differs"
    baked: str
    incoming: str

    def values(self) -> dict[str, Value]:
        return {"baked": self.baked, "incoming": self.incoming}

    def message(self) -> str:
        return f"residency differs: the plan baked {self.baked}, the cache is on {self.incoming}"


@dataclass(unsafe_hash=True)
class MissingSlot(RebindRefusal):
    """The incoming cache has no storage for a slot the plan baked (PLAN-21)."""

    kind: ClassVar[str] = "missing_slot"
    layer_index: int
    which: str

    def values(self) -> dict[str, Value]:
        return {"which": self.which}

    @property
    def layer(self) -> int:
        return self.layer_index

    def message(self) -> str:
        return f"the cache has no {self.which} slot for layer {self.layer_index}"


@dataclass(unsafe_hash=True)
class UnbakedSlot(RebindRefusal):
    """The plan holds no storage for one of its slots (PLAN-21)."""

    kind: ClassVar[str] = "unbaked_slot"
    layer_index: int
    which: str

    def values(self) -> dict[str, Value]:
        return {"which": self.which}

    @property
    def layer(self) -> int:
        return self.layer_index

    def message(self) -> str:
        return f"the plan never baked the {self.which} slot of layer {self.layer_index}"


@dataclass(unsafe_hash=True)
class StorageDiffers(RebindRefusal):
    """A slot's incoming storage is not interchangeable with the baked one (PLAN-21)."""

    kind: ClassVar[str] = "storage_differs"
    layer_index: int
    which: str
    baked: str
    incoming: str

    def values(self) -> dict[str, Value]:
        return {"which": self.which, "baked": self.baked, "incoming": self.incoming}

    @property
    def layer(self) -> int:
        return self.layer_index

    def message(self) -> str:
        return (
            f"layer {self.layer_index} {self.which} storage differs: the plan baked "
            f"{self.baked}, the cache holds {self.incoming}"
        )


#: Every error kind the specification defines (ERR-8, ERR-10, ERR-11), by name.
ERROR_KINDS: dict[str, type[KvError]] = {
    cls.kind: cls
    for cls in (
        Unmarked,
        UnsupportedFormat,
        Unrepresentable,
        EmptyPayload,
        DegenerateLayer,
        RaggedPayload,
        PayloadMismatch,
        Incompatible,
        CapacityExceeded,
        LayerOutOfRange,
        LayerShapeMismatch,
        BadLayout,
        SplitKvHeadWidth,
        BlockSizeMismatch,
        ResidencyUnknown,
        ResidencyDiffers,
        MissingSlot,
        UnbakedSlot,
        StorageDiffers,
    )
}
