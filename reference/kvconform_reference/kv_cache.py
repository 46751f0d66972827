"""A KV cache whose storage carries an allocation id (spec/identity.md, ALLOC group).

The allocation id names the *buffers*, not the conversation:

- operations that replace storage mint a new id: construction (ALLOC-2),
  :meth:`KvCache.clear` (ALLOC-18), :meth:`KvCache.set_layer` (ALLOC-4);
- operations that leave storage in place keep it: :meth:`KvCache.truncate_to`
  (ALLOC-5, ALLOC-15), :meth:`KvCache.append` (ALLOC-7), and every read
  (ALLOC-12);
- a refused operation changes nothing, its id included (ALLOC-16 .. ALLOC-17).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kvconform_reference.errors import CapacityExceeded, LayerOutOfRange, LayerShapeMismatch
from kvconform_reference.identity import KvAllocId

#: Element types a cache may be built with, by their vocabulary name (SIG-14).
#: numpy has no bfloat16; its 16 bits are stored as raw ``uint16``.
STORAGE_DTYPES: dict[str, type[np.generic]] = {
    "f32": np.float32,
    "f16": np.float16,
    "bf16": np.uint16,
}


@dataclass(frozen=True)
class CacheGeometry:
    """The shape of a cache: part of a held plan's key (PLAN-15)."""

    n_layers: int
    n_kv_heads: int
    head_dim: int
    max_seq_len: int
    dtype: str = "f32"

    def __post_init__(self) -> None:
        for name in ("n_layers", "n_kv_heads", "head_dim", "max_seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.dtype not in STORAGE_DTYPES:
            raise ValueError(f"unknown dtype {self.dtype!r}")


@dataclass(frozen=True)
class KvLayer:
    """One layer's K and V storage, each ``(max_seq_len, n_kv_heads, head_dim)``."""

    k: np.ndarray
    v: np.ndarray

    @classmethod
    def allocate(cls, geometry: CacheGeometry) -> KvLayer:
        shape = (geometry.max_seq_len, geometry.n_kv_heads, geometry.head_dim)
        dtype = STORAGE_DTYPES[geometry.dtype]
        return cls(k=np.zeros(shape, dtype=dtype), v=np.zeros(shape, dtype=dtype))

    def shape_fields(self) -> tuple[tuple[str, int], ...]:
        """The fields a replacement is checked on, in the order ALLOC-17 gives."""
        capacity, heads, dim = self.k.shape
        return (("n_kv_heads", heads), ("head_dim", dim), ("max_seq_len", capacity))


class KvCache:
    """Per-layer K/V storage, a current length, and an allocation id."""

    def __init__(
        self,
        geometry: CacheGeometry,
        *,
        residency: str | None = "host",
        layer_storage: tuple[str, ...] | None = None,
    ) -> None:
        self.geometry = geometry
        self._layers = [KvLayer.allocate(geometry) for _ in range(geometry.n_layers)]
        self._length = 0
        self._alloc_id = KvAllocId.mint()  # ALLOC-2
        #: Where the storage lives; ``None`` when unknown (PLAN-21).
        self.residency = residency
        if layer_storage is None:
            layer_storage = ("host-f32",) * geometry.n_layers
        if len(layer_storage) != geometry.n_layers:
            raise ValueError("one storage label per layer")
        #: Per layer, what its K and V storage is (element type, encoding, backend,
        #: byte extent), as one label: equal labels are interchangeable (PLAN-21).
        #: Replacing a layer or clearing keeps the labels: the new storage is of the
        #: same kind and lives in the same place.
        self.layer_storage = layer_storage

    @property
    def alloc_id(self) -> KvAllocId:
        """The id of the storage in use. Reading it mints nothing (ALLOC-12)."""
        return self._alloc_id

    def __len__(self) -> int:
        return self._length

    def layer(self, index: int) -> KvLayer:
        return self._layers[index]

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        """Write positions ``len .. len+n`` of every layer in place (ALLOC-7).

        ``k`` and ``v`` have shape ``(n_layers, n, n_kv_heads, head_dim)``.
        Passing the capacity is refused and changes nothing (ALLOC-16).
        """
        g = self.geometry
        if (
            k.shape != v.shape
            or k.shape[0] != g.n_layers
            or k.shape[2:]
            != (
                g.n_kv_heads,
                g.head_dim,
            )
        ):
            raise ValueError(f"append data of shape {k.shape} does not fit {g}")
        n = k.shape[1]
        end = self._length + n
        if end > g.max_seq_len:
            raise CapacityExceeded(capacity=g.max_seq_len, requested=end)
        for index, layer in enumerate(self._layers):
            layer.k[self._length : end] = k[index]
            layer.v[self._length : end] = v[index]
        self._length = end

    def truncate_to(self, length: int) -> None:
        """Rewind to ``length`` positions; storage and id untouched (ALLOC-5).

        A length at or past the current one changes nothing (ALLOC-15).
        """
        if length < 0:
            raise ValueError("length must not be negative")
        self._length = min(self._length, length)

    def clear(self) -> None:
        """Release every layer's storage for fresh storage: a new id (ALLOC-18)."""
        self._layers = [KvLayer.allocate(self.geometry) for _ in range(self.geometry.n_layers)]
        self._length = 0
        self._alloc_id = KvAllocId.mint()

    def set_layer(self, index: int, layer: KvLayer) -> None:
        """Replace one layer's storage: a new id (ALLOC-4), length kept (ALLOC-11).

        An index the cache does not have (ALLOC-9) or a layer of another shape
        (ALLOC-17) is refused and changes nothing.
        """
        if not 0 <= index < self.geometry.n_layers:
            raise LayerOutOfRange(layer_index=index, n_layers=self.geometry.n_layers)
        current = self._layers[index]
        for (name, expected), (_, found) in zip(
            current.shape_fields(), layer.shape_fields(), strict=True
        ):
            if expected != found:
                raise LayerShapeMismatch(
                    layer_index=index, field=name, expected=expected, found=found
                )
        if (
            layer.k.dtype != current.k.dtype
            or layer.v.dtype != current.v.dtype
            or layer.v.shape != layer.k.shape
        ):
            raise ValueError(
                "replacement K and V must both have the cache's element type and shape"
            )
        self._layers[index] = layer
        self._alloc_id = KvAllocId.mint()
