"""Values exchanged between the harness and an implementation (spec/conformance.md).

They are language-neutral on purpose: each has a JSON form on the wire
(:mod:`.ops`), and nothing here refers to the reference implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from typing import Literal, TypeAlias

#: The conformance classes (CONF-1).
CLASSES = ("hash", "identity", "plan", "signature", "verify")
#: Classes that a class depends on (CONF-1).
CLASS_REQUIRES: Mapping[str, tuple[str, ...]] = {"plan": ("identity",), "verify": ("signature",)}

#: A structural parameter value: u64, binary64 float or string.
Param: TypeAlias = int | float | str
#: A value carried by an error (ERR-4).
ErrorValue: TypeAlias = int | str | tuple[int, ...]

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
    """A KV cache's shape (ALLOC, PLAN-2)."""

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


Payload: TypeAlias = tuple[LayerDesc, ...]


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


@dataclass(frozen=True)
class Fault:
    """A semantic refusal, as an implementation reports it (ERR-1 .. ERR-6).

    ``kind``, ``field``, ``layer`` and ``values`` are normative; ``message`` is
    free wording that must still name the field and the values (ERR-6).
    """

    kind: str
    field: str | None = None
    layer: int | None = None
    values: Mapping[str, ErrorValue] = _field(default_factory=dict)
    message: str = ""


@dataclass(frozen=True)
class AdapterInfo:
    """What an implementation says about itself (CONF-2)."""

    name: str
    version: str
    language: str
    classes: frozenset[str]
    format_writes: int | None = 1
    format_reads: frozenset[int] = frozenset({1})


# Outcomes of one operation -------------------------------------------------


@dataclass(frozen=True)
class Ok:
    """The operation succeeded, with its value (``None`` for operations without one)."""

    value: object = None


@dataclass(frozen=True)
class Refused:
    """The operation was refused with a semantic error."""

    fault: Fault


@dataclass(frozen=True)
class Broken:
    """The adapter failed: an exception, a crash, a timeout, a malformed reply.

    Never a conformance answer: a step that gets one fails, whatever it expected.
    """

    reason: str
    detail: str = ""


Outcome: TypeAlias = Ok | Refused | Broken
