"""The values an operation carries and returns: hash programs, model specs, geometries,
steps, plan identities, payloads, layouts, signatures, validities and faults."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Literal, TypeAlias

#: A structural parameter value: u64, binary64 float or string.
Param: TypeAlias = int | float | str
#: A value carried by an error (ERR-4).
ErrorValue: TypeAlias = int | str | tuple[int, ...] | None

MixKind = Literal["bytes", "str", "u64", "f64", "present", "instance", "finish"]


@dataclass(frozen=True)
class MixOp:
    """One step of a hash program (HASH group).

    ``value`` is ``bytes`` for ``bytes`` (with ``repeat``), ``str`` for ``str``,
    an ``int`` for ``u64``/``instance`` and for ``f64`` (its bit pattern),
    a ``bool`` for ``present`` and ``None`` for ``finish``.
    """

    kind: MixKind
    value: bytes | str | int | bool | None = None
    repeat: int = 1


@dataclass(frozen=True)
class ModelSpec:
    """A model's family, structural parameters and hook settings."""

    family: str
    params: tuple[tuple[str, Param], ...] = ()
    hooks: tuple[tuple[str, bool], ...] = ()

    def param_map(self) -> dict[str, Param]:
        return dict(self.params)

    def hook_map(self) -> dict[str, bool]:
        return dict(self.hooks)


@dataclass(frozen=True)
class Geometry:
    """A KV cache's shape (ALLOC, PLAN-15)."""

    n_layers: int
    n_kv_heads: int
    head_dim: int
    max_seq_len: int
    dtype: str = "f32"


@dataclass(frozen=True)
class StepInputs:
    """Per-step inputs a held plan rebinds every call (PLAN-6)."""

    token_ids: tuple[int, ...] = (1,)
    write_offset: int = 0
    rope_theta: float = 10000.0
    rope_scaling: float | None = None
    mask: tuple[int, ...] = ()


@dataclass(frozen=True)
class PlanIdentity:
    """The components of a plan key with explicit ids: the ``plan_key`` probe."""

    model: ModelSpec
    instance: int
    alloc: int
    geometry: Geometry
    step_tokens: int


@dataclass(frozen=True)
class LayerDesc:
    """One stored layer described by its shape, its claim and its buffer lengths.

    ``k_len``/``v_len`` count elements. The implementation builds real buffers of
    these lengths; a payload never travels as its floats.
    """

    n_kv_heads: int
    head_dim: int
    seq_len: int
    k_len: int
    v_len: int
    #: The width of the layer's V heads; ``None`` when it equals ``head_dim`` (PROF-11).
    v_head_dim: int | None = None


Payload: TypeAlias = tuple[LayerDesc, ...]


@dataclass(frozen=True)
class Layout:
    """The layout a profile-v2 block was cut under (PROF-5): ``None`` window = full causal."""

    block_size: int
    sliding_window: int | None = None


@dataclass(frozen=True)
class Signature:
    """A block signature (SIG-1)."""

    format_version: int
    model: str
    n_layers: int
    n_kv_heads: int
    head_dim: int
    dtype: str
    tokens: int
    #: The block's layout (PROF-5): a version-2 stamp has one; a v1 scenario may still
    #: give a version-2 signature without one to a v1 reader, which refuses it by version.
    layout: Layout | None = None


#: A plan's validity under the class ``plan_validity`` (PLAN-19).
VALIDITY_OUTCOMES = ("valid", "allocation_changed", "stale")


@dataclass(frozen=True)
class Fault:
    """A semantic refusal, as an implementation reports it (ERR-8 .. ERR-13).

    ``kind``, ``field``, ``layer`` and ``values`` are normative; ``message`` is
    free wording that must still name the field and the values (ERR-13).
    """

    kind: str
    field: str | None = None
    layer: int | None = None
    values: Mapping[str, ErrorValue] = _field(default_factory=dict)
    message: str = ""
