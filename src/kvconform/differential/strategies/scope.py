"""What an implementation's declarations let a program hold (CONF-6, CONF-7): the
:class:`Scope` of the generated programs, and models within a fixed key schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hypothesis import strategies as st

from kvconform.differential.strategies.source import Source, flag, pick, strategy
from kvconform.differential.strategies.values import U64_EDGES, U64_MAX, any_text, param_float
from kvconform.values import (
    SHAPE_FIELDS,
    AdapterInfo,
    ModelSpec,
    Param,
)


@dataclass(frozen=True)
class Scope:
    """Where the generated programs may go for one implementation.

    The reference answers every option by its default. Where an implementation
    declares another answer (CONF-6) or lacks a capability (CONF-7), programs stay
    in the region where both answers agree, so a difference is never a
    divergence of policy: no truncate past the length under ``refuse``, no append
    past the capacity under ``grow``, at most one differing field in a refused
    replacement under another check order, no replacement of another shape under
    ``regrow``, no clear under ``release``, no hook toggles under
    ``remints_instance``, no probes differing only in head geometry under
    ``implied``, only the declared schema under ``fixed``, no block expectation of
    an undeclared dtype, and no raw bytes no u64 mix can express without the raw fold.
    """

    truncate_past_length: bool = True
    append_past_capacity: bool = True
    shape_mismatch_fields: int = 3
    #: Whether a replacement of another shape may be drawn: not under ``regrow``, whose
    #: answer the reference (``refuse``) does not give (ALLOC-19).
    shape_mismatches: bool = True
    #: Whether a clear may be drawn: not under ``release``, after which the reference's
    #: appends succeed and the implementation's are refused (ALLOC-20).
    clears: bool = True
    hook_toggles: bool = True
    vary_cache_heads: bool = True
    key_schema: Mapping[str, Mapping[str, str]] | None = None
    #: The dtype names a reader declares it holds (SIG-14); ``None``: any name.
    dtypes: tuple[str, ...] | None = None
    raw_bytes: bool = True
    #: Block counts above this are not generated for a reader with narrower counts.
    uint_max: int = U64_MAX
    #: The format versions the implementation reads: a stamp or an expectation of a
    #: version it reads other than 1 is never drawn (a version-2 signature without a
    #: layout is a question no requirement settles).
    reads: frozenset[int] = frozenset({1})
    #: The format version the implementation writes (its measured and stamped blocks).
    writes: int = 1

    @classmethod
    def of(cls, info: AdapterInfo) -> Scope:
        default_order = ",".join(SHAPE_FIELDS)
        return cls(
            truncate_past_length=info.option("truncate_past_length") == "noop",
            append_past_capacity=info.option("append_past_capacity") == "refuse",
            shape_mismatch_fields=3 if info.option("replace_layer_order") == default_order else 1,
            shape_mismatches=info.option("replace_layer_shape") == "refuse",
            clears=info.option("clear_storage") == "reallocate",
            hook_toggles=info.option("hook_toggle") == "keeps_instance",
            vary_cache_heads=info.option("plan_key_cache_heads") == "keyed",
            key_schema=info.key_schema,
            dtypes=None if info.dtypes is None else tuple(sorted(info.dtypes)),
            raw_bytes=info.raw_fold,
            uint_max=(1 << info.uint_bits) - 1,
            reads=frozenset(info.format_reads),
            writes=info.format_writes or 1,
        )


def schema_spec(src: Source, schema: Mapping[str, Mapping[str, str]]) -> ModelSpec:
    """A model within a fixed per-family key schema (PLAN-17): its families, fields, hooks."""
    family = pick(src, sorted(schema))
    fields = schema[family]
    values: dict[str, Callable[[], Param]] = {
        "u64": lambda: src.integer(0, 64) if src.integer(0, 1) == 0 else pick(src, U64_EDGES),
        "f64": lambda: param_float(src),
        "str": lambda: any_text(src),
    }
    # Every field of the family, always: an engine with a fixed schema holds each of them,
    # so a model that left one out would be a question of policy (decision key-params).
    params = {name: values[kind]() for name, kind in sorted(fields.items()) if kind != "hook"}
    hooks = {name: flag(src) for name, kind in sorted(fields.items()) if kind == "hook"}
    return ModelSpec(family, tuple(params.items()), tuple(hooks.items()))


def fills_schema(spec: ModelSpec, schema: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether ``spec`` gives every field its family has in ``schema`` (PLAN-17).

    A probe that leaves a field out asks how a fixed-schema engine keys absence, which is
    policy (decision key-params): such probes are not drawn."""
    given = {name for name, _ in spec.params} | {name for name, _ in spec.hooks}
    return set(schema.get(spec.family, {})) <= given


def schema_specs(schema: Mapping[str, Mapping[str, str]]) -> st.SearchStrategy[ModelSpec]:
    """Models within a fixed per-family key schema (PLAN-17), as a strategy."""
    return strategy(lambda src: schema_spec(src, schema))
