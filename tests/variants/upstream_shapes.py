"""Engines in the shapes the real crates declare, judged on the cases re-expressed for them
(conformance/INTERPRETING.md §6.4).

- ``fuel-shaped-fixed-schema``: one fixed struct per model family, as fuel's later
  per-family model keys are (llama, phi, deepseek2), each with integer, float and
  string fields and one optional hook (``plan_key_params: fixed``, PLAN-17); the raw
  fold is private (``raw_fold: false``). A model outside the declared structs cannot
  even be built here: an operation naming one is an adapter error, so every case the
  suite sends must have been written into the schema. A field a spec leaves out holds
  its type's zero, as a struct's default would.
- ``v2-only-f32``: a writer and reader of profile v2 only, whose element type is an
  enum of one value (``dtypes: [f32]``): the v1 signature and verify scenarios reach
  it lifted under a layout (its other classes are the reference's).

The field names are this module's own, in the shape of those crates: what matters to
the suite is the number and types of the fields, which is what re-expression reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kvconform_reference import model

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import (
    AdapterInfo,
    Fault,
    MixOp,
    ModelSpec,
    Param,
    Payload,
    PlanIdentity,
    Signature,
)

from . import variant
from .upstream_v2 import _UpstreamV2

#: Each family's struct: its fields and their types, hooks last.
FUEL_FAMILIES: Mapping[str, Mapping[str, str]] = {
    "llama": {
        "n_layers": "u64",
        "n_heads": "u64",
        "n_kv_heads": "u64",
        "head_dim": "u64",
        "rms_norm_eps": "f64",
        "rope_theta": "f64",
        "hidden_act": "str",
        "logits_processor": "hook",
    },
    "phi": {
        "n_layers": "u64",
        "n_heads": "u64",
        "head_dim": "u64",
        "layer_norm_eps": "f64",
        "partial_rotary_factor": "f64",
        "hidden_act": "str",
        "logits_processor": "hook",
    },
    "deepseek2": {
        "n_layers": "u64",
        "n_heads": "u64",
        "kv_lora_rank": "u64",
        "qk_rope_head_dim": "u64",
        "rms_norm_eps": "f64",
        "routed_scaling_factor": "f64",
        "topk_method": "str",
        "logits_processor": "hook",
    },
}
_ZERO: Mapping[str, Param] = {"u64": 0, "f64": 0.0, "str": ""}


def _kind(value: Param) -> str:
    if isinstance(value, str):
        return "str"
    return "f64" if isinstance(value, float) else "u64"


def as_struct(spec: ModelSpec) -> ModelSpec:
    """The family's struct built from ``spec``: every field set, a left-out one at zero.

    Raises for a family or field the engine has no struct field for, as a Rust
    engine could not even construct such a model.
    """
    fields = FUEL_FAMILIES.get(spec.family)
    if fields is None:
        raise TypeError(f"no model struct for the family {spec.family!r}")
    params = dict(spec.params)
    hooks = dict(spec.hooks)
    for name, value in params.items():
        if fields.get(name) != _kind(value):
            raise TypeError(f"{spec.family} has no {_kind(value)} field {name!r}")
    for name in hooks:
        if fields.get(name) != "hook":
            raise TypeError(f"{spec.family} has no hook {name!r}")
    return ModelSpec(
        spec.family,
        tuple((n, params.get(n, _ZERO[k])) for n, k in fields.items() if k != "hook"),
        tuple((n, hooks.get(n, False)) for n, k in fields.items() if k == "hook"),
    )


@variant(
    "fuel-shaped-fixed-schema",
    "fuel's shape: a fixed struct per family (llama, phi, deepseek2) with u64, f64, str "
    "fields and a hook (plan_key_params: fixed), a private raw fold; judged on the plan "
    "cases re-expressed into that schema",
)
class FuelShapedFixedSchema(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        info = super().describe()
        return replace(
            info,
            name="fuel-shaped-fixed-schema",
            options={"plan_key_params": "fixed"},
            raw_fold=False,
            key_schema=FUEL_FAMILIES,
        )

    def struct(self, spec: ModelSpec) -> ModelSpec:
        return as_struct(spec)

    def hash(self, program: Sequence[MixOp]) -> list[int]:
        if any(op.kind == "bytes" for op in program):
            raise TypeError("the raw byte fold is private")
        return super().hash(program)

    def model_new(self, spec: ModelSpec) -> model.Model:
        return super().model_new(self.struct(spec))

    def model_set_hook(self, m: model.Model, hook: str, present: bool) -> None:
        if FUEL_FAMILIES[m.config.family].get(hook) != "hook":
            raise TypeError(f"{m.config.family} has no hook {hook!r}")
        super().model_set_hook(m, hook, present)

    def plan_key(self, identity: PlanIdentity) -> int:
        return super().plan_key(replace(identity, model=self.struct(identity.model)))


@variant(
    "v2-only-f32",
    "profile v2 only (writes 2, reads [2]) with a one-value element enum (dtypes: [f32]), "
    "judged on the v1 signature and verify scenarios lifted under a layout",
)
class V2OnlyF32(_UpstreamV2):
    label = "v2-only-f32"

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), dtypes=frozenset({"f32"}))

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        if expected.dtype != "f32":
            raise ValueError(f"a reader cannot require dtype {expected.dtype!r}")
        if recorded is not None and recorded.format_version == 2 and recorded.dtype != "f32":
            return Fault(
                kind="unrepresentable",
                field="dtype",
                values={"found": recorded.dtype},
                message=f"dtype {recorded.dtype} is not an element type here (only f32)",
            )
        return super().verify(recorded, payload, expected)
