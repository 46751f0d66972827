"""Building blocks for mutants: the reference, cut at the seams a misreading lives in.

Nothing here changes ``reference/``. Each helper is either the reference itself
behind an overridable hook, or a line-for-line copy of one reference function
with the points a mutant may change made explicit. With every hook left at its
default a kit adapter *is* the reference; ``tests/test_mutants.py`` checks that
(``test_kit_defaults_are_the_reference``), so a mutant's kill is owed to its
one misreading and nothing else.

- :class:`HasherAdapter` runs hash programs, and plan keys, on a hasher class.
- :class:`PlanAdapter` computes plan keys with :meth:`PlanAdapter.key`, which
  also sees the cache and the step, so over-keying can be expressed.
- :class:`ModelAdapter`, :class:`CacheAdapter` construct models and caches of
  a chosen class.
- :class:`BlockAdapter` measures and verifies with overridable functions.
- :class:`FaultAdapter` rewrites every refusal it reports.
- :class:`LayoutAdapter` is the reference under profile v2 (or a rolling
  upgrade), measuring with a :class:`LayoutMeasurer` and verifying with a
  :class:`LayoutVerifier`, each the reference function cut into its rules.
- :class:`ValidityAdapter` holds plans of class :attr:`ValidityAdapter.plan_cls`,
  a :class:`GuardedPlan` (the reference plan, its rebind cut into its checks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from kvconform_reference import errors, hasher, kv_cache, model, plan, signature, verify

from kvconform import values
from kvconform.adapters.reference import (
    ReferenceAdapter,
    block_layout,
    cache_geometry,
    fault_of,
    from_signature,
    model_config,
    plan_identity,
    stored_layers,
    to_signature,
)

# --- hashing ------------------------------------------------------------------


def run_program(
    h: hasher.KeyHasher,
    program: Sequence[values.MixOp],
    raw: Callable[[hasher.KeyHasher, bytes], object] | None = None,
) -> list[int]:
    """The reference adapter's ``run_program``, on a hasher the caller supplies.

    ``raw`` replaces how a ``bytes`` op reaches the fold (default: ``mix_bytes``).
    """
    finishes: list[int] = []
    for op in program:
        if op.kind == "bytes":
            assert isinstance(op.value, bytes)
            if raw is None:
                h.mix_bytes(op.value * op.repeat)
            else:
                raw(h, op.value * op.repeat)
        elif op.kind == "str":
            assert isinstance(op.value, str)
            h.mix_str(op.value)
        elif op.kind == "u64":
            assert isinstance(op.value, int)
            h.mix_u64(op.value)
        elif op.kind == "f64":
            assert isinstance(op.value, int)
            h.mix_f64_bits(op.value)
        elif op.kind == "present":
            h.mix_present(bool(op.value))
        elif op.kind == "instance":
            assert isinstance(op.value, int)
            h.mix_instance(op.value)
        elif op.kind == "finish":
            finishes.append(h.finish())
        else:
            raise ValueError(f"unknown mix op {op.kind!r}")
    return finishes


# --- plan keys ----------------------------------------------------------------

FloatMix = Callable[[hasher.KeyHasher, float], object]


@dataclass(frozen=True)
class Composition:
    """The reference key composition (reference/plan.py), one switch per component.

    Every field's default reproduces ``PlanIdentity.key()`` exactly; a mutant
    flips one of them.
    """

    hasher: type[hasher.KeyHasher] = hasher.KeyHasher
    family: bool = True
    count_params: bool = True
    type_params: bool = True
    sort_params: bool = True
    float_mix: FloatMix | None = None
    hooks: bool = True
    count_hooks: bool = True
    instance: bool = True
    alloc: bool = True
    geometry: tuple[str, ...] = ("n_layers", "n_kv_heads", "head_dim", "max_seq_len", "dtype")
    step_tokens: bool = True
    #: A string parameter value mixed as a string (bytes, then their count, HASH-5);
    #: ``False``: its bytes alone.
    delimit_str_values: bool = True
    #: The bits of the instance and allocation ids that are mixed (all 64 by default).
    instance_mask: int = (1 << 64) - 1
    alloc_mask: int = (1 << 64) - 1
    #: How the cache capacity is held before it is mixed (exactly, by default).
    capacity: Callable[[int], int] | None = None

    def key(
        self,
        ident: plan.PlanIdentity,
        extra: Callable[[hasher.KeyHasher], object] | None = None,
    ) -> int:
        """The key of ``ident``; ``extra`` mixes more just before the finish."""
        h = self.hasher().mix_str("kvconform.plan")
        if self.family:
            h.mix_str(ident.family)
        if self.count_params:
            h.mix_u64(len(ident.params))
        names = sorted(ident.params) if self.sort_params else list(ident.params)
        for name in names:
            self._mix_param(h, name, ident.params[name])
        if self.hooks:
            if self.count_hooks:
                h.mix_u64(len(ident.hooks))
            for name in sorted(ident.hooks):
                h.mix_str(name).mix_present(ident.hooks[name])
        if self.instance:
            h.mix_instance(_masked(ident.instance, self.instance_mask))
        if self.alloc:
            h.mix_str("alloc").mix_u64(_masked(ident.alloc, self.alloc_mask))
        g = ident.geometry
        for name in ("n_layers", "n_kv_heads", "head_dim", "max_seq_len"):
            if name in self.geometry:
                value = getattr(g, name)
                if name == "max_seq_len" and self.capacity is not None:
                    value = self.capacity(value)
                h.mix_u64(value)
        if "dtype" in self.geometry:
            h.mix_str(g.dtype)
        if self.step_tokens:
            h.mix_u64(ident.step_tokens)
        if extra is not None:
            extra(h)
        return h.finish()

    def _mix_param(self, h: hasher.KeyHasher, name: str, value: model.Param) -> None:
        h.mix_str(name)
        if isinstance(value, str):
            if self.type_params:
                h.mix_str("str")
            if self.delimit_str_values:
                h.mix_str(value)
            else:
                h.mix_bytes(value.encode("utf-8"))
        elif isinstance(value, float):
            if self.type_params:
                h.mix_str("f64")
            if self.float_mix is None:
                h.mix_f64(value)
            else:
                self.float_mix(h, value)
        else:
            if self.type_params:
                h.mix_str("u64")
            h.mix_u64(value)


REFERENCE_COMPOSITION = Composition()


def _masked(value: int, mask: int) -> int:
    """``value``'s bits under ``mask``, after the range check a u64 gets (HASH-12)."""
    if not 0 <= value < 1 << 64:
        raise ValueError(f"u64 out of range: {value}")
    return value & mask


#: The most token ids a built step holds: a probe may ask for a step of 2^32 + 1 tokens
#: (plan.key-refusals.high-bits-of-every-count), whose width the key reads from the
#: identity; only over-keying mutants read the ids themselves.
_STEP_IDS = 1 << 16


def build_step(step_tokens: int) -> plan.StepInputs:
    """The step a plan is built for: the harness's default step of that width."""
    return plan.StepInputs(token_ids=(1,) * min(step_tokens, _STEP_IDS))


def reference_step(step: values.StepInputs) -> plan.StepInputs:
    """The reference adapter's conversion of a conformance step."""
    return plan.StepInputs(
        token_ids=step.token_ids,
        write_offset=step.write_offset,
        rope=plan.RopeSpec(step.rope_theta, step.rope_scaling),
        mask=step.mask,
    )


KeyFn = Callable[[plan.PlanIdentity, "kv_cache.KvCache | None", plan.StepInputs], int]


class KeyedPlan(plan.DecodePlan):
    """``DecodePlan`` whose key function also sees the cache and the step.

    Built, it records ``key_fn`` over the build step; checked, it recomputes
    ``key_fn`` over the step it is asked about -- exactly the reference's
    predicate (PLAN-4) when ``key_fn`` ignores both.
    """

    def __init__(
        self, key_fn: KeyFn, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> None:
        if step_tokens < 1:
            raise ValueError("a step has at least one token")
        self._key_fn = key_fn
        self.step_tokens = step_tokens
        ident = plan.PlanIdentity.of(m, cache, step_tokens)
        self.key = key_fn(ident, cache, build_step(step_tokens))

    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        ident = plan.PlanIdentity.of(m, cache, len(step.token_ids))
        return self._key_fn(ident, cache, step) == self.key


def probe_identity(identity: values.PlanIdentity) -> plan.PlanIdentity:
    """The reference adapter's conversion of a ``plan_key`` probe."""
    return plan_identity(identity)


class PlanAdapter(ReferenceAdapter):
    """The reference with its plan key computed by :meth:`key`."""

    #: Its plans are its own, with a boolean validity only.
    classes = ReferenceAdapter.classes - {"plan_validity"}

    composition: Composition = REFERENCE_COMPOSITION

    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        """The validity key; ``cache`` is ``None`` for a ``plan_key`` probe."""
        return self.composition.key(ident)

    def plan_key(self, identity: values.PlanIdentity) -> int:
        return self.key(probe_identity(identity), None, build_step(identity.step_tokens))

    def session_new(
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> plan.DecodePlan:
        return KeyedPlan(self.key, m, cache, step_tokens)


class HasherAdapter(PlanAdapter):
    """The reference with every hash -- programs and plan keys -- on :attr:`hasher`."""

    hasher: type[hasher.KeyHasher] = hasher.KeyHasher

    def hash(self, program: Sequence[values.MixOp]) -> list[int]:
        return run_program(self.hasher(), program)

    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        return replace(self.composition, hasher=self.hasher).key(ident)


# --- models and caches --------------------------------------------------------


class ModelAdapter(ReferenceAdapter):
    """The reference with models of class :attr:`model_cls` (whose ``reload`` keeps it)."""

    model_cls: type[model.Model] = model.Model

    def model_new(self, spec: values.ModelSpec) -> model.Model:
        return self.model_cls(model_config(spec))


def moved_storage(
    cache: kv_cache.KvCache, geometry: kv_cache.CacheGeometry
) -> list[kv_cache.KvLayer]:
    """New storage of ``geometry`` holding the cache's positions so far (a growth's copy)."""
    layers = [kv_cache.KvLayer.allocate(geometry) for _ in cache._layers]
    for new, layer in zip(layers, cache._layers, strict=True):
        new.k[: len(cache)] = layer.k[: len(cache)]
        new.v[: len(cache)] = layer.v[: len(cache)]
    return layers


def declaring(info: values.AdapterInfo, **options: str) -> values.AdapterInfo:
    """``info`` declaring ``options`` too (CONF-6)."""
    return replace(info, options={**info.options, **options})


class CacheAdapter(ReferenceAdapter):
    """The reference with caches of class :attr:`cache_cls`."""

    cache_cls: type[kv_cache.KvCache] = kv_cache.KvCache

    def cache_new(self, geometry: values.Geometry) -> kv_cache.KvCache:
        return self.cache_cls(cache_geometry(geometry))


# --- blocks -------------------------------------------------------------------

Measure = Callable[[str, Sequence[signature.StoredLayer]], signature.CacheSignature]


class Measurer:
    """``reference.signature.measure``, one method per rule (SIG-4 .. SIG-9).

    ``Measurer().measure`` is the reference function; a mutant overrides one method.
    """

    def measure(
        self, model_name: str, layers: Sequence[signature.StoredLayer]
    ) -> signature.CacheSignature:
        if not layers:
            raise errors.EmptyPayload()
        first = layers[0]
        n_kv_heads, head_dim = first.n_kv_heads, first.head_dim
        self.check_degenerate(first)
        per_token = n_kv_heads * head_dim
        tokens = self.measure_layer(0, first, per_token)
        for index, layer in self.later_layers(layers):
            self.check_shape(index, layer, (n_kv_heads, head_dim))
            layer_tokens = self.measure_layer(index, layer, per_token)
            self.check_tokens(index, tokens, layer_tokens)
        return self.signature(model_name, layers, n_kv_heads, head_dim, tokens)

    def check_degenerate(self, first: signature.StoredLayer) -> None:
        width = first.n_kv_heads * first.head_dim
        if first.n_kv_heads < 1 or first.head_dim < 1 or width > signature.U64_MAX:
            raise errors.DegenerateLayer(
                layer_index=0, n_kv_heads=first.n_kv_heads, head_dim=first.head_dim
            )

    def later_layers(
        self, layers: Sequence[signature.StoredLayer]
    ) -> Sequence[tuple[int, signature.StoredLayer]]:
        return list(enumerate(layers[1:], start=1))

    def check_shape(self, index: int, layer: signature.StoredLayer, shape: tuple[int, int]) -> None:
        if (layer.n_kv_heads, layer.head_dim) != shape:
            raise errors.RaggedPayload(
                layer_index=index,
                field="layer_shape",
                expected=shape,
                found=(layer.n_kv_heads, layer.head_dim),
            )

    def measure_layer(self, index: int, layer: signature.StoredLayer, per_token: int) -> int:
        k_len, v_len = layer.k.size, layer.v.size
        if k_len % per_token != 0:
            raise errors.RaggedPayload(
                layer_index=index, field="k_length", expected=per_token, found=k_len
            )
        if v_len != k_len:
            raise errors.RaggedPayload(
                layer_index=index, field="v_length", expected=k_len, found=v_len
            )
        tokens = k_len // per_token
        if layer.seq_len != tokens:
            raise errors.RaggedPayload(
                layer_index=index, field="seq_len", expected=tokens, found=layer.seq_len
            )
        return tokens

    def check_tokens(self, index: int, tokens: int, layer_tokens: int) -> None:
        if layer_tokens != tokens:
            raise errors.RaggedPayload(
                layer_index=index, field="token_count", expected=tokens, found=layer_tokens
            )

    def signature(
        self,
        model_name: str,
        layers: Sequence[signature.StoredLayer],
        n_kv_heads: int,
        head_dim: int,
        tokens: int,
    ) -> signature.CacheSignature:
        first = layers[0]
        return signature.CacheSignature(
            format_version=signature.V1.version,
            model=model_name,
            n_layers=len(layers),
            n_kv_heads=n_kv_heads,
            head_dim=head_dim,
            dtype=BUFFER_DTYPES.get(first.k.dtype, str(first.k.dtype)),
            tokens=tokens,
        )


#: reference/signature.py's names of buffer element types (SIG-4).
BUFFER_DTYPES: dict[np.dtype[Any], str] = {
    np.dtype(np.float32): "f32",
    np.dtype(np.float16): "f16",
    np.dtype(np.uint16): "bf16",
}


def reference_verify(
    block: verify.UnverifiedBlock,
    expected: signature.CacheSignature,
    measure: Measure = signature.measure,
    profile: signature.FormatProfile = signature.V1,
) -> verify.KvBlock:
    """``reference.verify.verify``, line for line, measuring with ``measure``."""
    recorded = block.signature
    if recorded is None:
        raise errors.Unmarked()
    if recorded.format_version not in profile.readable:
        raise errors.UnsupportedFormat(
            found=recorded.format_version, readable=tuple(sorted(profile.readable))
        )
    actual = replace(measure(recorded.model, block.layers), format_version=recorded.format_version)
    compare(recorded, actual, payload_mismatch)
    compare(expected, actual, incompatible)
    return verify.KvBlock(signature=actual, layers=block.layers)


def payload_mismatch(field: str, recorded: Any, actual: Any) -> errors.SignatureError:
    return errors.PayloadMismatch(field=field, recorded=recorded, actual=actual)


def incompatible(field: str, expected: Any, found: Any) -> errors.SignatureError:
    return errors.Incompatible(field=field, expected=expected, found=found)


def compare(
    claim: signature.CacheSignature,
    actual: signature.CacheSignature,
    error: Callable[[str, Any, Any], errors.SignatureError],
    fields: Sequence[str] = signature.SIGNATURE_FIELDS,
) -> None:
    """``reference.verify._compare``, over ``fields`` in the order given."""
    for name in fields:
        claimed, measured = claim.field_value(name), actual.field_value(name)
        if claimed != measured:
            raise error(name, claimed, measured)


class BlockAdapter(ReferenceAdapter):
    """The reference with measuring and verifying done by overridable methods.

    Measuring uses :attr:`measurer`, a :class:`Measurer` unless a mutant says
    otherwise, for ``measure``, ``stamp`` and the measuring step of ``verify``.
    """

    measurer: Measurer = Measurer()

    def measure_layers(
        self, model_name: str, layers: Sequence[signature.StoredLayer]
    ) -> signature.CacheSignature:
        return self.measurer.measure(model_name, layers)

    def verify_block(
        self, block: verify.UnverifiedBlock, expected: signature.CacheSignature
    ) -> verify.KvBlock:
        return reference_verify(block, expected, self.measure_layers)

    def measure(self, model_name: str, payload: values.Payload) -> values.Signature | values.Fault:
        try:
            return to_signature(self.measure_layers(model_name, stored_layers(payload)))
        except errors.SignatureError as exc:
            return fault_of(exc)

    def stamp(self, model_name: str, payload: values.Payload) -> values.Signature | values.Fault:
        # SIG-13: stamping is measuring.
        return self.measure(model_name, payload)

    def verify(
        self, recorded: values.Signature | None, payload: values.Payload, expected: values.Signature
    ) -> values.Signature | values.Fault:
        block = verify.UnverifiedBlock(
            None if recorded is None else from_signature(recorded),
            tuple(stored_layers(payload)),
        )
        try:
            return to_signature(self.verify_block(block, from_signature(expected)).signature)
        except errors.SignatureError as exc:
            return fault_of(exc)


# --- reporting ----------------------------------------------------------------


class FaultAdapter(ReferenceAdapter):
    """The reference with every refusal passed through :meth:`report`."""

    def report(self, fault: values.Fault) -> values.Fault:
        return fault

    def _reported(self, result: Any) -> Any:
        return self.report(result) if isinstance(result, values.Fault) else result

    def cache_append(self, cache: kv_cache.KvCache, tokens: int) -> values.Fault | None:
        return self._reported(super().cache_append(cache, tokens))

    def cache_replace_layer(
        self,
        cache: kv_cache.KvCache,
        layer: int,
        n_kv_heads: int | None,
        head_dim: int | None,
        max_seq_len: int | None,
    ) -> values.Fault | None:
        return self._reported(
            super().cache_replace_layer(cache, layer, n_kv_heads, head_dim, max_seq_len)
        )

    def measure(self, model_name: str, payload: values.Payload) -> values.Signature | values.Fault:
        return self._reported(super().measure(model_name, payload))

    def stamp(self, model_name: str, payload: values.Payload) -> values.Signature | values.Fault:
        return self._reported(super().stamp(model_name, payload))

    def verify(
        self, recorded: values.Signature | None, payload: values.Payload, expected: values.Signature
    ) -> values.Signature | values.Fault:
        return self._reported(super().verify(recorded, payload, expected))


# --- profile v2 blocks ----------------------------------------------------------

MeasureUnder = Callable[
    [str, Sequence[signature.StoredLayer], signature.FormatProfile, "signature.BlockLayout | None"],
    signature.CacheSignature,
]


class LayoutMeasurer:
    """``reference.signature.measure`` under any profile, one method per rule.

    ``LayoutMeasurer().measure`` is the reference function (PROF-7, PROF-8,
    PROF-11, SIG-5 .. SIG-9); a mutant overrides one method.
    """

    def measure(
        self,
        model_name: str,
        layers: Sequence[signature.StoredLayer],
        profile: signature.FormatProfile,
        layout: signature.BlockLayout | None,
    ) -> signature.CacheSignature:
        self.check_layout(profile, layout)
        if not layers:
            raise errors.EmptyPayload()
        first = layers[0]
        n_kv_heads, head_dim = first.n_kv_heads, first.head_dim
        per_token = n_kv_heads * head_dim
        if n_kv_heads < 1 or head_dim < 1 or per_token > signature.U64_MAX:
            raise errors.DegenerateLayer(layer_index=0, n_kv_heads=n_kv_heads, head_dim=head_dim)
        tokens = self.measure_layer(0, first, per_token, profile)
        for index, layer in enumerate(layers[1:], start=1):
            if (layer.n_kv_heads, layer.head_dim) != (n_kv_heads, head_dim):
                raise errors.RaggedPayload(
                    layer_index=index,
                    field="layer_shape",
                    expected=(n_kv_heads, head_dim),
                    found=(layer.n_kv_heads, layer.head_dim),
                )
            layer_tokens = self.measure_layer(index, layer, per_token, profile)
            if layer_tokens != tokens:
                raise errors.RaggedPayload(
                    layer_index=index, field="token_count", expected=tokens, found=layer_tokens
                )
        self.check_whole_block(layout, tokens)
        return signature.CacheSignature(
            format_version=profile.version,
            model=model_name,
            n_layers=len(layers),
            n_kv_heads=n_kv_heads,
            head_dim=head_dim,
            dtype=BUFFER_DTYPES.get(first.k.dtype, str(first.k.dtype)),
            tokens=tokens,
            layout=layout,
        )

    def check_layout(
        self, profile: signature.FormatProfile, layout: signature.BlockLayout | None
    ) -> None:
        """The layout first (PROF-7, PROF-8); v1 has none (PROF-2)."""
        if profile.has_layout:
            if layout is None:
                raise ValueError("profile v2 measures under a layout the writer supplies (PROF-6)")
            self.check_layout_fields(layout)
        elif layout is not None:
            raise ValueError("profile v1 has no layout (PROF-2)")

    def check_layout_fields(self, layout: signature.BlockLayout) -> None:
        """``BlockLayout.check``: block size, zero window, alignment (PROF-7)."""
        layout.check()

    def measure_layer(
        self,
        index: int,
        layer: signature.StoredLayer,
        per_token: int,
        profile: signature.FormatProfile,
    ) -> int:
        """One layer's tokens, split width included (SIG-7, PROF-11)."""
        return signature._measure_layer(index, layer, per_token, profile)

    def check_whole_block(self, layout: signature.BlockLayout | None, tokens: int) -> None:
        """After every layer: exactly one whole block (PROF-8, PROF-9)."""
        if layout is not None and tokens != layout.block_size:
            raise errors.BlockSizeMismatch(block_size=layout.block_size, tokens=tokens)


class LayoutVerifier:
    """``reference.verify.verify``, one method per step (VERIFY-10, PROF-12).

    ``LayoutVerifier().verify`` is the reference function; a mutant overrides one
    method.
    """

    def verify(
        self,
        block: verify.UnverifiedBlock,
        expected: signature.CacheSignature,
        profile: signature.FormatProfile,
        readable: tuple[int, ...],
        measure: MeasureUnder,
    ) -> verify.KvBlock:
        recorded = block.signature
        if recorded is None:  # 1.
            raise errors.Unmarked()
        if not self.readable(recorded.format_version, profile, readable):  # 2.
            raise errors.UnsupportedFormat(
                found=recorded.format_version, readable=tuple(sorted(readable))
            )
        rules = self.rules(recorded, profile)
        layout = self.layout(recorded, expected, rules)
        actual = self.measured(measure, recorded, block.layers, rules, layout)  # 2b, 3.
        self.compare(recorded, actual, self.fields(rules), payload_mismatch)  # 4.
        self.compare(expected, actual, self.fields(rules), incompatible)  # 5.
        return verify.KvBlock(signature=actual, layers=block.layers)

    def readable(
        self, version: int, profile: signature.FormatProfile, readable: tuple[int, ...]
    ) -> bool:
        """The readable set is a list, not a range (VERIFY-3)."""
        return version in readable

    def rules(
        self, recorded: signature.CacheSignature, profile: signature.FormatProfile
    ) -> signature.FormatProfile:
        """The rules of the recorded version (SIG-12, PROF-12)."""
        return signature.profile_for(recorded.format_version, profile.revision)

    def layout(
        self,
        recorded: signature.CacheSignature,
        expected: signature.CacheSignature,
        rules: signature.FormatProfile,
    ) -> signature.BlockLayout | None:
        """The stamp's layout, never the expectation's (PROF-6)."""
        layout = recorded.layout if rules.has_layout else None
        if rules.has_layout and layout is None:
            raise ValueError("a version-2 stamp carries a layout (PROF-5)")
        return layout

    def measured(
        self,
        measure: MeasureUnder,
        recorded: signature.CacheSignature,
        layers: Sequence[signature.StoredLayer],
        rules: signature.FormatProfile,
        layout: signature.BlockLayout | None,
    ) -> signature.CacheSignature:
        """The payload measured under the recorded model, rules and layout."""
        return measure(recorded.model, layers, rules, layout)

    def fields(self, rules: signature.FormatProfile) -> Sequence[str]:
        """The fields compared, in order (VERIFY-4, PROF-10)."""
        return rules.fields

    def compare(
        self,
        claim: signature.CacheSignature,
        actual: signature.CacheSignature,
        fields: Sequence[str],
        error: Callable[[str, Any, Any], errors.SignatureError],
    ) -> None:
        """``reference.verify._compare``: ``None`` is a value of its own (PROF-10)."""
        for name in fields:
            claimed, measured = claim.field_value(name), actual.field_value(name)
            if claimed != measured or type(claimed) is not type(measured):
                raise error(name, claimed, measured)


class LayoutAdapter(ReferenceAdapter):
    """The reference writing version 2 unless told otherwise, its blocks by overridable parts.

    Measuring and stamping use :attr:`measurer`; verifying uses :attr:`verifier`
    measuring with :attr:`measurer`; a layout crosses the interface through
    :meth:`layout_of`. Constructed like the reference (``writes``, ``reads``,
    ``revision``), with ``writes=2`` by default.
    """

    measurer: LayoutMeasurer = LayoutMeasurer()
    verifier: LayoutVerifier = LayoutVerifier()

    def __init__(
        self,
        writes: int = 2,
        reads: tuple[int, ...] | None = None,
        revision: str = "split_width",
    ) -> None:
        super().__init__(writes, reads, revision)

    def layout_of(self, layout: values.Layout | None) -> signature.BlockLayout | None:
        """The adapter's conversion of a layout (stamp's, writer's or expectation's)."""
        return block_layout(layout)

    def signature_of(self, sig: values.Signature) -> signature.CacheSignature:
        return replace(from_signature(sig), layout=self.layout_of(sig.layout))

    def measure_layers(
        self,
        model_name: str,
        layers: Sequence[signature.StoredLayer],
        profile: signature.FormatProfile,
        layout: signature.BlockLayout | None,
    ) -> signature.CacheSignature:
        return self.measurer.measure(model_name, layers, profile, layout)

    def measure(
        self, model_name: str, payload: values.Payload, *, layout: values.Layout | None = None
    ) -> values.Signature | values.Fault:
        try:
            measured = self.measure_layers(
                model_name, stored_layers(payload), self.profile, self.layout_of(layout)
            )
        except errors.SignatureError as exc:
            return fault_of(exc)
        return to_signature(measured)

    def stamp(
        self, model_name: str, payload: values.Payload, *, layout: values.Layout | None = None
    ) -> values.Signature | values.Fault:
        # SIG-13: stamping is measuring.
        return self.measure(model_name, payload, layout=layout)

    def verify(
        self,
        recorded: values.Signature | None,
        payload: values.Payload,
        expected: values.Signature,
    ) -> values.Signature | values.Fault:
        block = verify.UnverifiedBlock(
            None if recorded is None else self.signature_of(recorded),
            tuple(stored_layers(payload)),
        )
        try:
            verified = self.verifier.verify(
                block, self.signature_of(expected), self.profile, self.reads, self.measure_layers
            )
        except errors.SignatureError as exc:
            return fault_of(exc)
        return to_signature(verified.signature)


# --- plan validity ----------------------------------------------------------------


class GuardedPlan(plan.DecodePlan):
    """``reference.plan.DecodePlan`` with its rebind cut into its checks (PLAN-21).

    ``rebind`` checks the residency, then each slot the plan baked, then commits;
    with no method overridden it is the reference's.
    """

    def rebind(self, cache: kv_cache.KvCache) -> None:
        self.check_residency(cache.residency)
        incoming = cache.layer_storage
        for layer, baked_slots in enumerate(self._slots):
            for which, baked in zip(("k", "v"), baked_slots, strict=True):
                self.check_slot(cache, layer, which, baked, incoming)
        self.commit(cache)

    def check_residency(self, incoming: str | None) -> None:
        if incoming is None or self._residency is None:
            raise errors.ResidencyUnknown()
        if incoming != self._residency:
            raise errors.ResidencyDiffers(baked=self._residency, incoming=incoming)

    def check_slot(
        self,
        cache: kv_cache.KvCache,
        layer: int,
        which: str,
        baked: str,
        incoming: tuple[str, ...],
    ) -> None:
        if layer >= len(incoming):
            raise errors.MissingSlot(layer_index=layer, which=which)
        self.check_storage(layer, which, baked, incoming[layer])

    def check_storage(self, layer: int, which: str, baked: str, incoming: str) -> None:
        if incoming != baked:
            raise errors.StorageDiffers(
                layer_index=layer, which=which, baked=baked, incoming=incoming
            )

    def commit(self, cache: kv_cache.KvCache) -> None:
        """Adopt ``cache``'s allocation, all at once (PLAN-22, PLAN-26)."""
        self._identity = replace(self._identity, alloc=cache.alloc_id.value)
        self.key = self._identity.key()
        self._slots = tuple((label, label) for label in cache.layer_storage[: len(self._slots)])


class ValidityAdapter(ReferenceAdapter):
    """The reference with plans of class :attr:`plan_cls`."""

    plan_cls: type[plan.DecodePlan] = GuardedPlan

    def session_new(
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> plan.DecodePlan:
        return self.plan_cls(m, cache, step_tokens)


#: Every kit adapter with all hooks at their defaults: each must pass the whole suite.
KIT_ADAPTERS: tuple[type[ReferenceAdapter], ...] = (
    PlanAdapter,
    HasherAdapter,
    ModelAdapter,
    CacheAdapter,
    BlockAdapter,
    FaultAdapter,
    LayoutAdapter,
    ValidityAdapter,
)
