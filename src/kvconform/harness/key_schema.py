"""A fixed per-family key schema (capability ``key_schema``, PLAN-17): whether a model
can be keyed by the schema an implementation declares, and an ``identity`` case's models
written within it (CONF-7)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.values import ModelSpec, Param


def model_spec(op: ops.Op) -> ModelSpec | None:
    if isinstance(op, ops.ModelNew):
        return op.spec
    if isinstance(op, ops.PlanKey):
        return op.identity.model
    return None


def _type_of(value: object) -> str:
    if isinstance(value, str):
        return "str"
    return "f64" if isinstance(value, float) else "u64"


#: The values a re-expressed model's fields hold (the distinguishing field aside).
_PLAIN: dict[str, Param] = {"u64": 1, "f64": 1.0, "str": "x"}


def schema_models(
    case: Case, schema: Mapping[str, Mapping[str, str]]
) -> tuple[dict[ModelSpec, ModelSpec], dict[str, str]] | None:
    """For an ``identity`` case, its models written within a fixed ``schema``, or ``None``.

    Such a case checks instance ids only (ID group): which models are alike and which
    hooks they toggle matters, never what their parameters are. So each distinct model
    becomes a model of one family of the schema with every field given: the same
    plain values, but one field that tells the models apart (1, 2, ... in program
    order); and each hook name the case uses becomes one of that family's hooks, in
    sorted order (CONF-7: the check is the same). ``None`` when the case is of another
    class, asks for a key, or the schema has no family with enough hooks and a field to
    tell its models apart (the case is then not applicable, PLAN-17). Returns the new
    model per original one, and the new hook name per original one.
    """
    if case.cls != "identity" or any(
        isinstance(op, ops.PlanKey | ops.SessionNew) for op in case.program
    ):
        return None
    specs = list(dict.fromkeys(op.spec for op in case.program if isinstance(op, ops.ModelNew)))
    hooks = sorted(
        {h for spec in specs for h, _ in spec.hooks}
        | {op.hook for op in case.program if isinstance(op, ops.ModelSetHook)}
    )
    for family in sorted(schema):
        fields = sorted(schema[family].items())
        family_hooks = [name for name, kind in fields if kind == "hook"]
        params = [(name, kind) for name, kind in fields if kind != "hook"]
        if len(family_hooks) < len(hooks) or (len(specs) > 1 and not params):
            continue
        renamed = dict(zip(hooks, family_hooks, strict=False))
        models = {}
        for number, spec in enumerate(specs, 1):
            values: dict[str, Param] = {name: _PLAIN[kind] for name, kind in params}
            if params:
                name, kind = params[0]
                distinct: dict[str, Param] = {
                    "u64": number,
                    "f64": float(number),
                    "str": f"m{number}",
                }
                values[name] = distinct[kind]
            present = {renamed[h]: p for h, p in spec.hooks}
            models[spec] = ModelSpec(
                family,
                tuple(values.items()),
                tuple((h, present.get(h, False)) for h in family_hooks),
            )
        return models, renamed
    return None


def in_schema(
    op: ops.Op, models: Mapping[ModelSpec, ModelSpec], hooks: Mapping[str, str]
) -> ops.Op:
    """``op`` with its model and hook written within the schema (:func:`schema_models`)."""
    if isinstance(op, ops.ModelNew):
        return replace(op, spec=models[op.spec])
    if isinstance(op, ops.ModelSetHook):
        return replace(op, hook=hooks[op.hook])
    return op


def outside_schema(
    spec: ModelSpec, schema: Mapping[str, Mapping[str, str]], name: str
) -> str | None:
    """Why ``spec`` cannot be keyed by the fixed schema ``name`` declares (PLAN-17), or ``None``."""
    fields = schema.get(spec.family)
    if fields is None:
        return (
            f"uses the model family {spec.family!r}, which {name}'s fixed key schema "
            "does not have (capabilities.key_schema, PLAN-17)"
        )
    for param, value in spec.params:
        if fields.get(param) != _type_of(value):
            return (
                f"uses the {spec.family} parameter {param!r} as {_type_of(value)}, which "
                f"{name}'s fixed key schema does not key that way (PLAN-17)"
            )
    for hook, _ in spec.hooks:
        if fields.get(hook) != "hook":
            return (
                f"uses the {spec.family} hook {hook!r}, which {name}'s fixed key "
                "schema does not have (PLAN-17)"
            )
    return None
