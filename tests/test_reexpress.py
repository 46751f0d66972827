"""Re-expression (conformance/INTERPRETING.md §6.4): the judged share of the engines in the
real crates' shapes, and the teeth of the re-expressed cases.

A re-expression that makes a case unable to fail is worse than setting it aside, so
every rewriting here is checked against wrong engines of the same shape: each must
fail at least one re-expressed case (and the correct ones, in tests/test_variants.py,
pass every case).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import replace

import pytest
from kvconform_reference import kv_cache

from kvconform.harness import suite
from kvconform.harness.checks import ErrorIs, OutcomeCheck
from kvconform.harness.declarations import option_not_declared
from kvconform.harness.reexpress import block_of, hooks_in_turn, schema_map
from kvconform.harness.runner import CaseResult, in_declared_shape, not_applicable, run_cases
from kvconform.harness.scenario import Case
from kvconform.protocol.driver import InProcessDriver
from kvconform.protocol.operations import Verify
from kvconform.values import AdapterInfo, LayerDesc, Layout, ModelSpec, PlanIdentity, Signature
from tests.variants import all_variants, upstream_shapes, upstream_v2
from tests.variants.enum_dtypes import DtypeEnumF32F16
from tests.variants.options import FixedSchemaDefaults
from tests.variants.upstream_shapes import FuelShapedFixedSchema, V2OnlyF32

pytestmark = pytest.mark.covers("CONF-7", "CONF-14", "PLAN-17", "PROF-8")

PLAN = ("plan", "plan_validity")
BLOCKS = ("signature", "verify")


def _share(info: AdapterInfo, classes: tuple[str, ...]) -> tuple[int, int, int, int]:
    """(judged as written, judged after re-expression, set aside for another option
    answer, total) over the cases of ``classes``."""
    before = after = options = total = 0
    for case in suite.all_cases():
        if case.cls not in classes:
            continue
        total += 1
        before += not_applicable(case, info) is None
        _, reason = in_declared_shape(case, info)
        after += reason is None
        options += option_not_declared(case, info) is not None
    return before, after, options, total


#: The plan cases whose point no fixed key schema holds (INTERPRETING.md §6.4.1, after
#: rule 6): one name given two kinds, names given by the caller without a UTF-8 form,
#: and string values that spell out the case's own parameter names.
NO_FIXED_SCHEMA_HOLDS = frozenset(
    {
        "plan.param-types.zero-of-each-type",
        "plan.key-probe.param-value-type",
        "plan.key-probe.params-do-not-run-into-hooks",
        "plan.key-refusals.lone-surrogate-in-names",
        "plan.key-strings.value-carries-the-next-name",
    }
)


@pytest.mark.parametrize(
    "engine", [FuelShapedFixedSchema, FixedSchemaDefaults], ids=lambda c: c.__name__
)
def test_a_fixed_schema_engine_is_judged_on_most_plan_cases(engine: type) -> None:
    info = engine().describe()
    before, after, options, total = _share(info, PLAN)
    print(
        f"{info.name} plan cases: {before} -> {after} of {total} ({after / total:.1%}); "
        f"{after} of the {total - options} its options apply to ({after / (total - options):.1%})"
    )
    assert after > before
    # every plan case but those written for another option answer (which no one
    # declaration can take at once) and those whose point the schema cannot hold
    assert after / (total - options) >= 0.85
    set_aside = {
        case.id
        for case in suite.all_cases()
        if case.cls in PLAN
        and option_not_declared(case, info) is None
        and in_declared_shape(case, info)[1] is not None
    }
    assert set_aside == NO_FIXED_SCHEMA_HOLDS


def test_a_v2_only_engine_is_judged_on_most_block_cases() -> None:
    info = V2OnlyF32().describe()
    before, after, _, total = _share(info, BLOCKS)
    print(f"v2-only signature+verify cases: {before} -> {after} of {total}")
    assert after / total >= 0.60


#: The ``profile: 1`` cases whose point is a version outside the readable set, which any
#: readable set holding 1 or 2 but not that version keeps (INTERPRETING.md §6.4.5).
REFUSED_VERSION = frozenset(
    {
        "verify.format-version.older-zero",
        "verify.format-version.unknown-ninety-nine",
        "verify.precedence.unsupported-beats-ragged",
        "verify.precedence.unsupported-beats-empty-lie-and-miss",
        "verify.unrepresentable.after-the-version-check",
    }
)


@pytest.mark.covers("PROF-3", "VERIFY-3")
@pytest.mark.parametrize("reads", [(2,), (1, 2)], ids=["reads-2", "reads-1-2"])
def test_a_refused_version_is_judged_under_the_declared_readable_set(
    reads: tuple[int, ...],
) -> None:
    """The five refusals of an unreadable version are judged, naming the declared set; the
    three ``profile: 1`` cases holding a version-2 block are set aside, saying why."""
    info = replace(V2OnlyF32().describe(), format_reads=frozenset(reads))
    profile_one = [case for case in suite.all_cases() if case.profile == 1]
    judged = {}
    for case in profile_one:
        rewritten, reason = in_declared_shape(case, info)
        if reason is None:
            judged[case.id] = rewritten
        else:
            assert "not re-expressed: its point is" in reason, (case.id, reason)
    assert set(judged) == REFUSED_VERSION
    for case in judged.values():
        assert case.profile is None and case.format_reads == reads and case.reexpressed
        for op in case.program:
            if isinstance(op, Verify):  # only the recorded version is beyond the reader
                assert op.recorded is not None and op.recorded.format_version not in reads
                assert op.expected.format_version == (1 if 1 in reads else 2)
        refusals = [c.expect for c in case.checks if isinstance(c, OutcomeCheck)]
        assert refusals and all(
            isinstance(e, ErrorIs) and e.values["readable"] == reads for e in refusals
        )


def test_each_reexpressed_case_says_how() -> None:
    info = FuelShapedFixedSchema().describe()
    case = next(c for c in suite.all_cases() if c.id == "plan.key-probe.string-param")
    assert not_applicable(case, info) is not None
    judged, reason = in_declared_shape(case, info)
    assert reason is None and judged.reexpressed
    assert "key schema" in judged.reexpressed[0]


def test_the_schema_mapping_is_by_type_and_sorted_name() -> None:
    info = FuelShapedFixedSchema().describe()
    case = next(c for c in suite.all_cases() if c.id == "plan.key-probe.string-param")
    mapping = schema_map(case, info.key_schema or {})
    assert not isinstance(mapping, str)
    assert mapping.families == {"llama": "llama"}
    assert mapping.fields[("llama", "mask_policy")] == "hidden_act"  # the one str field
    assert mapping.fields[("llama", "n_heads")] == "n_heads"  # declared: stays
    assert mapping.fields[("llama", "logit")] == "logits_processor"


def test_a_zero_token_block_is_lifted_under_block_size_one() -> None:
    assert block_of((LayerDesc(2, 4, 3, 24, 24),)) == Layout(3, None)
    assert block_of(()) == Layout(1, None)


# -- teeth: wrong engines of the same shapes ------------------------------------


def _struct_dropping(kind: str) -> Callable[[ModelSpec], ModelSpec]:
    def struct(spec: ModelSpec) -> ModelSpec:
        full = FuelShapedFixedSchema().struct(spec)
        kinds = {"str": str, "f64": float}
        return ModelSpec(
            full.family,
            tuple((n, v) for n, v in full.params if not isinstance(v, kinds[kind])),
            full.hooks,
        )

    return struct


class KeysNoStrings(FuelShapedFixedSchema):
    struct = staticmethod(_struct_dropping("str"))  # type: ignore[assignment]


class KeysNoFloats(FuelShapedFixedSchema):
    struct = staticmethod(_struct_dropping("f64"))  # type: ignore[assignment]


class NormalisesStrings(FuelShapedFixedSchema):
    def struct(self, spec: ModelSpec) -> ModelSpec:
        full = super().struct(spec)
        return ModelSpec(
            full.family,
            tuple(
                (n, unicodedata.normalize("NFC", v).strip().lower() if isinstance(v, str) else v)
                for n, v in full.params
            ),
            full.hooks,
        )


def _family_blind_key(adapter: FuelShapedFixedSchema, identity: PlanIdentity) -> int:
    from dataclasses import replace

    from kvconform.adapters.reference import ReferenceAdapter

    model = adapter.struct(identity.model)
    return ReferenceAdapter.plan_key(
        adapter, replace(identity, model=ModelSpec("any", model.params, model.hooks))
    )


class KeysNoHooks(FuelShapedFixedSchema):
    def plan_key(self, identity: PlanIdentity) -> int:
        from dataclasses import replace

        model = self.struct(identity.model)
        quiet = tuple((n, False) for n, _ in model.hooks)
        return super().plan_key(
            replace(identity, model=ModelSpec(model.family, model.params, quiet))
        )


class UncheckedLayerIndex(FuelShapedFixedSchema):
    """``self.layers[li] = ...`` without a bound check: an index past the end panics."""

    def cache_replace_layer(  # type: ignore[override]
        self,
        cache: kv_cache.KvCache,
        layer: int,
        n_kv_heads: int | None,
        head_dim: int | None,
        max_seq_len: int | None,
    ) -> object:
        if layer >= cache.geometry.n_layers:
            raise IndexError("index out of bounds")
        return super().cache_replace_layer(cache, layer, n_kv_heads, head_dim, max_seq_len)


class WrappingWidth(V2OnlyF32):
    """The unchecked ``n_kv_heads * head_dim``: the width wraps modulo 2^64."""

    def _tokens_of(self, index: int, layer: LayerDesc, width: int, version: int) -> int:
        return super()._tokens_of(index, layer, width % (1 << 64) or 1, version)


class ClaimNamedSeqLen(V2OnlyF32):
    """split_width declared, but a layer's claim still reported as ``seq_len`` (ERR-12)."""

    revision = "split_width"

    def _tokens_of(self, index: int, layer: LayerDesc, width: int, version: int) -> int:
        try:
            return super()._tokens_of(index, layer, width, version)
        except upstream_v2._Refused as refused:
            if refused.fault.field == "positions":
                raise upstream_v2._Refused(
                    refused.fault.__class__(
                        refused.fault.kind,
                        "seq_len",
                        refused.fault.layer,
                        refused.fault.values,
                        refused.fault.message.replace("positions", "seq_len"),
                    )
                ) from None
            raise


def _failed(adapter: object) -> list[CaseResult]:
    results = run_cases(suite.all_cases(), InProcessDriver(adapter))  # type: ignore[arg-type]
    return [r for r in results if r.verdict == "failed"]


def _reexpressed(results: list[CaseResult]) -> list[Case]:
    return [r.case for r in results if r.case.reexpressed]


@pytest.mark.parametrize(
    "wrong",
    [KeysNoStrings, KeysNoFloats, NormalisesStrings, KeysNoHooks],
    ids=lambda c: c.__name__,
)
def test_a_wrong_fixed_schema_engine_fails_a_reexpressed_case(wrong: type) -> None:
    failed = _failed(wrong())
    assert _reexpressed(failed), f"{wrong.__name__} passes every re-expressed case"


def test_a_family_blind_key_fails_a_reexpressed_case(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the family tells two structs with the same fields apart; with fuel's own
    structs, whose fields differ, a key without the family stays injective (and is safe)."""
    same = upstream_shapes.FUEL_FAMILIES["llama"]
    monkeypatch.setattr(upstream_shapes, "FUEL_FAMILIES", {"llama": same, "mistral": same})
    assert not _failed(FuelShapedFixedSchema())  # the correct engine of that shape passes
    monkeypatch.setattr(FuelShapedFixedSchema, "plan_key", _family_blind_key)
    failed = _reexpressed(_failed(FuelShapedFixedSchema()))
    assert any(c.id == "plan.key-probe.family" for c in failed)


def test_an_unchecked_layer_index_is_still_caught() -> None:
    failed = _failed(UncheckedLayerIndex())
    assert any("replace-layer" in r.case.id for r in failed)


def test_a_misnamed_claim_fails_a_lifted_case() -> None:
    failed = _reexpressed(_failed(ClaimNamedSeqLen()))
    assert any(c.id.startswith("signature.") for c in failed)


def test_the_unchecked_width_multiply_is_caught_on_a_lifted_case(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(upstream_v2, "_U64", 1 << 200)  # no width check: it wraps instead
    failed = _reexpressed(_failed(WrappingWidth()))
    assert any("width-overflow" in c.id for c in failed)


class ReaderIgnoresDtype(DtypeEnumF32F16):
    """Compares every field of the expectation but its dtype."""

    def verify(self, recorded: object, payload: object, expected: object) -> object:  # type: ignore[override]
        if isinstance(recorded, Signature) and isinstance(expected, Signature):
            expected = replace(expected, dtype=recorded.dtype)
        return super().verify(recorded, payload, expected)  # type: ignore[arg-type]


def test_dtypes_outside_an_enum_are_renamed_within_one_verification() -> None:
    info = DtypeEnumF32F16().describe()
    case = next(c for c in suite.all_cases() if c.id == "verify.incompatible.dtype")
    assert not_applicable(case, info) is not None
    judged, reason = in_declared_shape(case, info)
    assert reason is None and "bf16->f16" in judged.reexpressed[0]
    # a one-value enum cannot tell the reader's f16 from the stamp's f32 apart
    _, reason = in_declared_shape(case, V2OnlyF32().describe())
    assert reason is not None and "not re-expressed" in reason


def test_a_reader_ignoring_the_dtype_fails_a_renamed_case() -> None:
    failed = _reexpressed(_failed(ReaderIgnoresDtype()))
    assert any(c.id == "verify.incompatible.dtype" for c in failed)


def test_a_spec_spelled_as_a_string_is_the_documented_one() -> None:
    """The example of INTERPRETING.md 6.4.1 rule 5, which another runner must match."""
    from kvconform.harness.reexpress import _spelling

    spec = ModelSpec("llama", (("n", 4),), (("h", True),))
    assert _spelling(spec) == "5:llama1:n5:u64 41:h9:hook true"
    assert _spelling(ModelSpec("llama", (("e", -0.0),))) == "5:llama1:e20:f64 0000000000000080"


# -- hooks in turn (§6.4.1 rule 6): one declared hook for a case's toggled hooks ----------


def _case(case_id: str) -> Case:
    return next(c for c in suite.all_cases() if c.id == case_id)


def test_toggled_hooks_are_carried_by_the_one_declared_hook() -> None:
    """fuel's families have one hook each; a case toggling logit on and then sampler
    off is judged with that hook attached and then detached again."""
    from kvconform.protocol import operations as ops

    info = FuelShapedFixedSchema().describe()
    case = _case("plan.under-keying.hook-attach-invalidates")
    judged, reason = in_declared_shape(case, info)
    assert reason is None
    assert any("carried by" in line for line in judged.reexpressed)
    new = next(op for op in judged.program if isinstance(op, ops.ModelNew))
    assert new.spec.hooks == (("logits_processor", False),)
    toggles = [(op.hook, op.present) for op in judged.program if isinstance(op, ops.ModelSetHook)]
    assert toggles == [("logits_processor", True), ("logits_processor", False)]


def test_hook_states_one_hook_cannot_tell_apart_are_set_aside() -> None:
    """Checking the plan built with (logit off, sampler on) after both hooks changed
    compares two different states that one hook, flipped twice, sees as equal."""
    from kvconform.protocol import operations as ops

    info = FuelShapedFixedSchema().describe()
    case = _case("plan.under-keying.hook-attach-invalidates")
    first = next(op for op in case.program if isinstance(op, ops.SessionNew))
    last = max(i for i, op in enumerate(case.program) if isinstance(op, ops.SessionValid))
    program = list(case.program)
    program[last] = replace(program[last], session=first.handle)
    changed = replace(case, program=tuple(program))
    outcome = hooks_in_turn(changed, info.key_schema or {})
    assert isinstance(outcome, str) and "one hook cannot tell apart" in outcome
    _, reason = in_declared_shape(changed, info)
    assert reason is not None and "not re-expressed" in reason


class RemintsOnToggle(FuelShapedFixedSchema):
    """Declares hook_toggle: keeps_instance, but a toggle mints a new instance id."""

    def model_set_hook(self, m: object, hook: str, present: bool) -> None:  # type: ignore[override]
        from kvconform_reference.identity import ModelInstanceId

        super().model_set_hook(m, hook, present)  # type: ignore[arg-type]
        m.instance_id = ModelInstanceId.mint()  # type: ignore[attr-defined]


class DetachNotKeyed(FuelShapedFixedSchema):
    """Keys a hook once attached, and lets a detach through unkeyed (the hook table is
    only ever set, never cleared): presence mixed in one direction of the toggle."""

    def model_set_hook(self, m: object, hook: str, present: bool) -> None:  # type: ignore[override]
        if present:
            super().model_set_hook(m, hook, present)  # type: ignore[arg-type]


@pytest.mark.parametrize("wrong", [RemintsOnToggle, DetachNotKeyed], ids=lambda c: c.__name__)
def test_a_wrong_hook_toggle_fails_a_case_carried_by_one_hook(wrong: type) -> None:
    failed = _reexpressed(_failed(wrong()))
    assert any(any("carried by" in line for line in c.reexpressed) for c in failed), (
        f"{wrong.__name__} passes every case whose hooks one declared hook carries"
    )


# -- narrower types (§6.4.3): set aside only where the point is the width itself -------

#: Cases whose point is a count, a claim or a product of counts beyond a narrower width.
WIDTH_POINTS = frozenset(
    {
        "signature.ragged.seq-len-claim-above-u32",
        "signature.v2.block-size-above-u32",
        "signature.v2.degenerate-and-overflowing-width",
        "signature.width-overflow.two-to-the-64-empty",
        "signature.width-overflow.wraps-to-a-small-width",
        "signature.width-overflow.fits-exactly",
        "verify.width-overflow.claimed-shape-is-still-degenerate",
        "verify.width-overflow.widest-fitting-verifies",
        "alloc.capacity.append-past-u64-is-refused",
        "plan.key-refusals.high-bits-key-apart",
    }
)
#: Cases whose point is two distinct dtypes besides f32 in one verification.
DTYPE_POINTS = frozenset(
    {
        "verify.incompatible.dtype",
        "verify.lying-stamp.dtype-half",
        "verify.precedence.mismatch-field-order",
        "verify.precedence.incompatible-field-order",
    }
)


def test_narrower_types_set_aside_only_where_the_point_is_the_width() -> None:
    narrower = [
        v
        for v in all_variants()
        if (info := v.factory().describe()).uint_bits < 64 or info.dtypes is not None
    ]
    assert len(narrower) >= 6
    for variant in narrower:
        info = variant.factory().describe()
        for case in suite.all_cases():
            _, reason = in_declared_shape(case, info)
            if reason is None:
                continue
            if "uint_bits" in reason:
                assert case.id in WIDTH_POINTS, f"{variant.name}: {case.id}: {reason}"
            if "declared dtypes" in reason:
                assert case.id in DTYPE_POINTS, f"{variant.name}: {case.id}: {reason}"


# -- a string value with no UTF-8 form, for an engine whose names are its own ----------


def _pairs_any_two_surrogates(text: str) -> str:
    """A lenient transcoder: a high and a low surrogate side by side, in either order,
    become the character they would pair to."""
    out: list[str] = []
    index = 0
    while index < len(text):
        two = sorted(text[index : index + 2])
        if len(two) == 2 and "\ud800" <= two[0] <= "\udbff" and "\udc00" <= two[1] <= "\udfff":
            out.append(chr(0x10000 + ((ord(two[0]) - 0xD800) << 10) + (ord(two[1]) - 0xDC00)))
            index += 2
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


class PairsSurrogatesInEitherOrder(FuelShapedFixedSchema):
    def struct(self, spec: ModelSpec) -> ModelSpec:
        full = super().struct(spec)
        return replace(
            full,
            params=tuple(
                (n, _pairs_any_two_surrogates(v) if isinstance(v, str) else v)
                for n, v in full.params
            ),
        )


def test_a_reversed_surrogate_pair_in_a_value_is_refused_by_a_fixed_schema_engine() -> None:
    """The names' probe (plan.key-refusals.lone-surrogate-in-names) is set aside for an
    engine whose names are its own; its reversed pair is probed in a string value."""
    assert _pairs_any_two_surrogates("\udc00\ud800") == "\U00010000"
    failed = {r.case.id for r in _failed(PairsSurrogatesInEitherOrder())}
    assert "plan.key-refusals.lone-surrogate-in-string-value" in failed


@pytest.mark.covers("PROF-3")
@pytest.mark.parametrize("reads", [(), (3,)], ids=["no-reader", "reads-3"])
def test_a_declaration_reading_no_version_the_suite_writes_keeps_its_reason_alone(
    reads: tuple[int, ...],
) -> None:
    """§6.4.5 is not meant for a declaration that reads neither 1 nor 2: the reason of
    §6.1 stands alone, with no re-expression to explain."""
    info = replace(V2OnlyF32().describe(), format_reads=frozenset(reads))
    for case in suite.all_cases():
        if case.profile == 1:
            _, reason = in_declared_shape(case, info)
            assert reason is not None and "not re-expressed" not in reason, (case.id, reason)
