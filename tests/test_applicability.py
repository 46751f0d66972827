"""Classes, profiles and options decide what an implementation is judged on (CONF-1 .. CONF-3,
CONF-6, PROF-3)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvconform.adapters import reference as reference_adapters
from kvconform.adapters.reference import ReferenceAdapter
from kvconform.harness import suite
from kvconform.harness.checks import ErrorIs
from kvconform.harness.runner import run_cases
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import CLASS_REQUIRES, CLASSES, AdapterInfo, Fault, Refused
from tests.fixtures.hash_only_adapter import HashOnly
from tests.verdicts import for_another_option, not_passing

pytestmark = pytest.mark.covers("CONF-1", "CONF-2", "CONF-3", "CONF-6", "PROF-3", "PROTO-35")


class Declaring(ReferenceAdapter):
    """The reference, declaring less than it implements."""

    def __init__(self, **changes: object) -> None:
        self.changes = changes

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), **self.changes)  # type: ignore[arg-type]


def test_the_classes_and_their_dependencies_are_the_specified_ones() -> None:
    assert CLASSES == (
        "hash",
        "identity",
        "plan",
        "signature",
        "verify",
        "plan_validity",
        "prefix_cache",
    )
    assert dict(CLASS_REQUIRES) == {
        "plan": ("identity",),
        "verify": ("signature",),
        "plan_validity": ("plan",),
    }


def test_a_hash_only_implementation_is_judged_on_hash_cases_alone() -> None:
    results = run_cases(suite.all_cases(), InProcessDriver(HashOnly()))
    for r in results:
        if r.case.cls == "hash":
            assert r.verdict == "passed", r.report()
        else:
            assert r.verdict == "not_applicable", r.case.id
            assert "does not declare the class" in r.reason
    assert any(r.case.cls == "hash" for r in results)


@pytest.mark.covers("CONF-1")
@pytest.mark.parametrize(
    "classes, reason",
    [
        ({"plan", "signature", "verify", "hash"}, "plan requires identity"),
        ({"verify", "hash"}, "verify requires signature"),
        (set(), "none declared"),
    ],
)
def test_a_declaration_that_breaks_conf_1_does_not_start(classes: set[str], reason: str) -> None:
    """plan requires identity, verify requires signature, and a run claims something (CONF-1).

    Such a declaration would otherwise run a fraction of its classes' cases and
    call the rest not applicable, or run nothing and report a conformant run.
    """
    with pytest.raises(ValueError, match=reason):
        InProcessDriver(Declaring(classes=frozenset(classes)))
    from kvconform.protocol.codec import WireError, info_from_wire, info_to_wire

    wire = info_to_wire(Declaring().describe())
    with pytest.raises(WireError, match=reason):
        info_from_wire({**wire, "classes": sorted(classes)})


def test_profile_scenarios_are_not_applicable_to_another_profile() -> None:
    """A reader of format 2 only is not judged by scenarios that assume profile v1 (PROF-3).

    Nor by the scenarios of signature and verify that state no profile: they are
    written for v1 (CONF-11). Everything else it passes.
    """
    results = run_cases(suite.all_cases(), InProcessDriver(reference_adapters.v2()))
    profiled = [r for r in results if r.case.profile == 1]
    assert profiled, "no scenario declares the profile it assumes"
    assert all(r.verdict == "not_applicable" and "profile v1" in r.reason for r in profiled)
    implicit = [
        r
        for r in results
        if r.case.profile is None
        and r.case.format_writes is None
        and r.case.format_reads is None
        and not r.case.format_reads_include
        and r.case.cls in ("signature", "verify")
    ]
    assert implicit and all(
        r.verdict == "not_applicable" and "written for profile v1" in r.reason for r in implicit
    )
    assert not not_passing(results)
    v2_cases = [r for r in results if r.case.format_writes == 2]
    assert v2_cases and all(r.verdict == "passed" or "(CONF-6)" in r.reason for r in v2_cases)


def test_a_v2_engine_declaring_v1_fails_the_v2_cases_it_cannot_hear_of() -> None:
    """Declaring a profile is a claim: the v1 reference declaring v2 is caught (PROF-3)."""
    adapter = Declaring(format_writes=2, format_reads=frozenset({2}))
    results = run_cases(suite.all_cases(), InProcessDriver(adapter))
    assert any(r.verdict == "failed" and r.case.format_writes == 2 for r in results)


def test_option_scenarios_follow_the_declared_answer() -> None:
    """A case written for one answer to an option is not applicable to the other (CONF-6)."""
    default = run_cases(suite.all_cases(), InProcessDriver(Declaring()))
    grow = run_cases(
        suite.all_cases(), InProcessDriver(Declaring(options={"append_past_capacity": "grow"}))
    )
    for_grow = [r for r in default if ("append_past_capacity", "grow") in r.case.options]
    for_refuse = [r for r in grow if ("append_past_capacity", "refuse") in r.case.options]
    assert for_grow and for_refuse
    assert all(r.verdict == "not_applicable" and "(CONF-6)" in r.reason for r in for_grow)
    assert all(r.verdict == "not_applicable" and "(CONF-6)" in r.reason for r in for_refuse)


@pytest.mark.covers("PREFIX-5")
def test_a_case_for_none_applies_under_exact_tail_only_where_no_block_is_partial() -> None:
    """Under ``prefix_partial: exact_tail`` a case written for ``none`` is judged as
    written when every request it stores fills whole blocks, and set aside when one does
    not: fails a harness that sets every ``none`` case aside (judging less than it may),
    one that still asks every request to fill whole blocks (6.3.0 to 6.5.0: a request
    only looked up holds no block), and one that judges a case that stores a partial
    block, whose answer differs."""
    from kvconform.harness.declarations import option_not_declared

    info = replace(
        ReferenceAdapter().describe(),
        options={**ReferenceAdapter().describe().options, "prefix_partial": "exact_tail"},
    )
    for_none = {
        c.id: option_not_declared(c, info)
        for c in suite.all_cases()
        if ("prefix_partial", "none") in c.options
    }
    assert for_none["prefix.reuse.token-change-in-the-last-block"] is None  # 12 tokens, blocks of 4
    assert for_none["prefix.partial.divergence-inside-a-block-under-none"] is None
    # stores whole blocks only, looks up requests of 10 and 6 tokens (since 7.0.0)
    assert for_none["prefix.reuse.branching-requests-each-keep-their-branch"] is None
    assert "(CONF-6)" in str(for_none["prefix.partial.tail-is-not-stored-in-whole-blocks"])
    assert "(CONF-6)" in str(for_none["prefix.reuse.block-size-two"])
    tokens = replace(info, options={**info.options, "prefix_partial": "tokens"})
    assert all(option_not_declared(c, tokens) for c in suite.all_cases() if c.id in for_none)


@pytest.mark.covers("PREFIX-6")
def test_a_case_for_one_block_size_applies_to_an_implementation_of_any() -> None:
    """A case written for one ``prefix_block_size`` whose prefix caches all have that size
    is judged as written for an implementation declaring ``any`` (since 7.0.0), which
    makes them as asked; one with a cache of another size is set aside, and so is every
    such case for an implementation of one other size (unless re-expressed, §6.4.4).
    Fails a harness that sets the cases of one size aside for ``any`` (judging less than
    it may) and one that judges a case whose caches differ from the size it assumes."""
    from kvconform.harness.declarations import option_not_declared

    info = ReferenceAdapter().describe()
    assert info.option("prefix_block_size") == "any"
    sized = [c for c in suite.all_cases() if any(k == "prefix_block_size" for k, _ in c.options)]
    assert len(sized) >= 7 and all(option_not_declared(c, info) is None for c in sized)
    case = next(c for c in sized if ("prefix_block_size", "16") in c.options)
    other = replace(
        case,
        program=tuple(
            replace(op, block_size=4) if isinstance(op, ops.PrefixNew) else op
            for op in case.program
        ),
    )
    assert "assumes prefix_block_size: 16" in str(option_not_declared(other, info))
    eight = replace(info, options={**info.options, "prefix_block_size": "8"})
    assert "assumes prefix_block_size: 16" in str(option_not_declared(case, eight))


@pytest.mark.parametrize(
    "writes, reads, reason",
    [(None, frozenset(), "format.writes: null"), (None, frozenset({1}), "format.writes: null")],
)
def test_a_block_class_without_a_written_version_does_not_start(
    writes: int | None, reads: frozenset[int], reason: str
) -> None:
    """Claiming ``signature`` declares the version written (PROF-3, CONF-2).

    Without it every signature and verify case would be not applicable and the run
    would call the claim conformant having judged none of it.
    """
    with pytest.raises(ValueError, match=reason):
        InProcessDriver(Declaring(format_writes=writes, format_reads=reads))
    from kvconform.protocol.codec import WireError, info_from_wire, info_to_wire

    wire = info_to_wire(Declaring().describe())
    with pytest.raises(WireError, match=reason):
        info_from_wire({**wire, "format": {"writes": writes, "reads": sorted(reads)}})
    # without a block class, no version is written and none is asked for
    InProcessDriver(
        Declaring(
            classes=frozenset({"hash", "identity", "plan"}),
            format_writes=None,
            format_reads=frozenset(),
        )
    )


def test_an_undeclared_option_value_is_refused() -> None:
    """An option value the specification does not list is an adapter-start error (PROTO-35)."""
    with pytest.raises(ValueError, match=r"options\.append_past_capacity"):
        InProcessDriver(Declaring(options={"append_past_capacity": "truncate"}))
    with pytest.raises(ValueError, match="no such option"):
        InProcessDriver(Declaring(options={"grow_on_append": "yes"}))


@pytest.mark.parametrize(
    "changes, reason",
    [
        ({"classes": ["hash", 3]}, r"classes: expected a set of class names, got \['hash', 3\]"),
        ({"classes": frozenset({"hash", "bogus"})}, "classes: unknown class 'bogus'"),
        ({"name": None}, "name: expected a string, got None"),
        ({"format_writes": "1"}, "format.writes: expected an integer or None"),
        ({"format_reads": frozenset({True})}, "format.reads: expected a set of integers"),
        ({"options": {"append_past_capacity": 1}}, "options: expected a mapping"),
        ({"uint_bits": 32.0}, "capabilities.uint_bits: expected an integer"),
        ({"dtypes": "f32"}, "capabilities.dtypes: expected None or a set of dtype names"),
    ],
)
def test_an_in_process_description_of_the_wrong_types_names_its_field(
    changes: dict[str, object], reason: str
) -> None:
    """An in-process describe() is checked as a hello answer is: a value of the wrong type
    is one line naming its field (a CI trial got a TypeError from sorting [3, 'hash'])."""
    with pytest.raises(ValueError, match=reason):
        InProcessDriver(Declaring(**changes))


def test_every_readable_set_scenario_declares_its_profile() -> None:
    """A case expecting unsupported_format depends on the readable set: it names it (PROF-3).

    With ``profile: 1`` or with ``format.reads``, the exact set its error lists.
    """
    from kvconform.harness.checks import ErrorIs, OutcomeCheck

    for case in suite.all_cases():
        for check in case.checks:
            if (
                isinstance(check, OutcomeCheck)
                and isinstance(check.expect, ErrorIs)
                and check.expect.kind == "unsupported_format"
            ):
                assert case.profile == 1 or case.format_reads is not None, (
                    f"{case.id} expects unsupported_format without stating the readable set"
                )


@pytest.mark.parametrize(
    "fault",
    [
        Fault("payload_mismatch", "head_dim", None, {"recorded": 16, "actual": 8}, "m 16 8"),
        Fault("ragged_payload", "seq_len", 2, {"expected": 4, "found": 7}, "seq_len 4 7"),
        Fault("ragged_payload", "k_length", 1, {"expected": 4, "found": 7}, "k_length 4 7"),
    ],
    ids=["wrong-kind", "wrong-layer", "wrong-field"],
)
def test_a_wrong_error_reads_as_the_expected_kind_field_layer_and_values(fault: Fault) -> None:
    """The failure shows what was expected in full, never the values dict alone (issue 10)."""
    expect = ErrorIs("ragged_payload", "seq_len", 1, {"expected": 4, "found": 7})
    verdict = expect.judge(Refused(fault))
    assert verdict is not None
    expected, actual, _ = verdict
    assert expected == "error ragged_payload (field=seq_len, layer=1, expected=4, found=7)"
    assert actual.startswith(f"error {fault.kind} (field={fault.field}")


#: A narrow fixed schema: no parameter any scenario names, two hooks.
_NARROW = {"gpt": {"layers": "u64", "a": "hook", "b": "hook"}}


def _narrow(adapter: ReferenceAdapter) -> ReferenceAdapter:
    base = type(adapter).describe

    def describe(self: ReferenceAdapter) -> AdapterInfo:
        info = base(self)
        options = {**info.options, "plan_key_params": "fixed"}
        return replace(info, options=options, key_schema=_NARROW)

    return type(f"Narrow{type(adapter).__name__}", (type(adapter),), {"describe": describe})()


@pytest.mark.covers("PLAN-17", "CONF-7")
def test_identity_cases_are_rewritten_into_a_fixed_schema_not_skipped() -> None:
    """A fixed schema that names none of the scenarios' parameters still gets every
    identity case: they check instance ids, which no parameter value changes, so their
    models are rewritten into the schema (alike stay alike, distinct stay distinct,
    hooks renamed) instead of being not applicable (a trial found 9 of 14 skipped)."""
    identity_cases = [c for c in suite.all_cases() if c.cls == "identity"]
    results = run_cases(identity_cases, InProcessDriver(_narrow(ReferenceAdapter())))
    assert not [r.report() for r in results if r.verdict == "failed"]
    assert not [r.reason for r in results if "PLAN-17" in r.reason]
    rewritten = [c for c in identity_cases if any(isinstance(op, ops.ModelNew) for op in c.program)]
    assert len(rewritten) >= 9
    from tests.mutants.corpus import ModelIdFromAddress

    caught = run_cases(rewritten, InProcessDriver(_narrow(ModelIdFromAddress())))
    assert any(r.verdict == "failed" for r in caught), "a recycled instance id still fails"


def test_key_cases_are_rewritten_into_a_fixed_schema_where_their_point_survives() -> None:
    """Key probes are written into the schema where it holds what they vary (a field of
    each type they vary, INTERPRETING.md 6.4.1, CONF-14) and judged, saying how; the
    others stay not applicable, with the reason the schema cannot hold their point."""
    plan_cases = [c for c in suite.all_cases() if c.id.startswith("plan.key-probe.")]
    results = run_cases(plan_cases, InProcessDriver(_narrow(ReferenceAdapter())))
    judged = [r for r in results if r.verdict != "not_applicable"]
    assert judged and all(r.verdict == "passed" and r.case.reexpressed for r in judged)
    skipped = [r for r in results if r.verdict == "not_applicable"]
    assert all("PLAN-17" in r.reason or "plan_key_params: named" in r.reason for r in skipped)
    assert all("not re-expressed" in r.reason for r in skipped if "PLAN-17" in r.reason)


@pytest.mark.covers("PREFIX-23", "CONF-7")
@pytest.mark.parametrize(
    "inputs",
    [
        frozenset(),
        frozenset({"salt", "user_key"}),
        frozenset({"adapter", "media", "embeds", "salt"}),
    ],
)
def test_a_case_of_an_input_not_declared_is_set_aside_naming_it(inputs: frozenset[str]) -> None:
    """PREFIX-23: under ``prefix_inputs``, exactly the prefix cases that give a request an
    input the list leaves out are not applicable, each reason naming that input; every
    other prefix case is judged (and passes, the reference being right). Fails a harness
    that sets aside too much (a salt case under ``salt``) or too little."""
    from kvconform.harness.declarations import prefix_inputs_given

    cases = [c for c in suite.all_cases() if c.cls == "prefix_cache"]
    results = run_cases(cases, InProcessDriver(Declaring(prefix_inputs=inputs)))
    words = {"adapter": "an adapter", "media": "a media item", "embeds": "embeddings",
             "salt": "a salt", "user_key": "a user key"}  # fmt: skip
    for r in results:
        missing = {g for op in r.case.program for g in prefix_inputs_given(op)} - inputs
        if missing:
            assert r.verdict == "not_applicable", r.case.id
            if not r.reason.endswith("(CONF-6)"):  # an option the case assumes comes first
                assert "PREFIX-23" in r.reason and any(words[m] in r.reason for m in missing)
        else:
            assert r.verdict in ("passed", "not_applicable"), r.report()
            assert "PREFIX-23" not in r.reason
    assert sum(r.verdict == "passed" for r in results) >= 20


@pytest.mark.covers("PREFIX-23")
def test_embeddings_of_a_whole_prompt_only_set_aside_every_other_placement() -> None:
    """Under ``prompt_embeds`` without ``embeds``, a case whose embeddings cover a whole
    request in one piece is judged (and passes), every other embeddings case is set aside
    saying so; under ``embeds`` both are judged. Fails a harness that sets aside the
    whole-prompt case, or sends a partial placement to an engine that cannot take it."""
    cases = [
        c
        for c in suite.all_cases()
        if c.cls == "prefix_cache" and any(isinstance(op, ops.RequestEmbeds) for op in c.program)
    ]
    whole = "prefix.embeds.whole-prompt-of-embeddings"
    assert whole in {c.id for c in cases} and len(cases) >= 6
    for inputs, judged in (
        (frozenset({"prompt_embeds"}), {whole}),
        (frozenset({"adapter", "media", "embeds", "salt", "user_key"}), {c.id for c in cases}),
    ):
        results = run_cases(cases, InProcessDriver(Declaring(prefix_inputs=inputs)))
        passed = {r.case.id for r in results if r.verdict == "passed"}
        assert passed == judged - {r.case.id for r in results if "(CONF-6)" in r.reason}
        for r in results:
            if r.verdict == "not_applicable" and "prompt_embeds" in inputs:
                with_words = "embeddings only as a whole prompt" in r.reason
                assert with_words or "salt" in r.reason or "user key" in r.reason, r.reason


@pytest.mark.covers("PREFIX-24", "CONF-7")
@pytest.mark.parametrize("bounded", [True, False])
def test_a_case_of_a_bounded_cache_needs_the_capability(bounded: bool) -> None:
    """PREFIX-24: without ``prefix_capacity`` exactly the cases whose ``prefix_new`` gives a
    capacity are not applicable, the reason naming the capability; with it they are
    judged (and pass, the reference being right). Fails a harness that sends a capacity
    to an engine that cannot bound its cache, or sets aside a case without one."""
    cases = [c for c in suite.all_cases() if c.cls == "prefix_cache"]
    results = run_cases(cases, InProcessDriver(Declaring(prefix_capacity=bounded)))
    capped = 0
    for r in results:
        gives = any(isinstance(op, ops.PrefixNew) and op.capacity for op in r.case.program)
        if for_another_option(r):
            assert "PREFIX-24" not in r.reason  # the option is named, not the capability
            continue  # written for another value of an option (a kept tail, PREFIX-5)
        capped += gives
        if gives and not bounded:
            assert r.verdict == "not_applicable", r.case.id
            assert "capabilities.prefix_capacity" in r.reason and "PREFIX-24" in r.reason
        else:
            assert r.verdict in ("passed", "not_applicable"), r.report()
            assert "PREFIX-24" not in r.reason
            assert r.verdict == "passed" or not gives, r.case.id
    assert capped >= 4


class _NoImages(ReferenceAdapter):
    """The reference without an image encoder, declaring nothing about it."""

    def request_media(self, *args: object) -> None:
        raise NotImplementedError("no image encoder")

    def prefix_lookup(self, prefix: object, request: object) -> int:
        return 0  # and a wrong answer where no input is involved


@pytest.mark.covers("PREFIX-23")
def test_a_failure_at_an_input_points_to_the_declaration() -> None:
    """An engine that lacks an input and does not declare it fails those cases; the
    report says how to declare what it lacks, and says it only for cases that give an
    input (a token-only failure gets no such hint)."""
    cases = [
        c
        for c in suite.all_cases()
        if c.id in ("prefix.media.same-image-is-reused", "prefix.reuse.same-request-fully-reused")
    ]
    results = {r.case.id: r for r in run_cases(cases, InProcessDriver(_NoImages()))}
    media = results["prefix.media.same-image-is-reused"]
    tokens = results["prefix.reuse.same-request-fully-reused"]
    assert media.verdict == tokens.verdict == "failed"
    assert "cannot carry media declares capabilities.prefix_inputs" in media.report()
    assert "prefix_inputs" not in tokens.report()


def test_a_reader_of_version_2_alone_is_never_sent_a_version_1_expectation() -> None:
    """spec/protocol.md: the ``expected`` of a ``verify`` is a configuration the reader
    could run under, so a reader of ``[2]`` alone gets version-2 expectations only (a
    version-1 case is lifted or set aside, INTERPRETING.md §6.1, §6.4.2): an adapter may
    build upstream ferrox's expectation type, which has a layout, from every one."""
    from tests.variants import all_variants

    (variant,) = [v for v in all_variants() if v.name == "v2-only-f32"]
    adapter = variant.factory()
    assert list(adapter.describe().format_reads) == [2]
    versions: list[int] = []
    verify = adapter.verify

    def recording(recorded: object, payload: object, expected: object, **kw: object) -> object:
        versions.append(expected.format_version)  # type: ignore[attr-defined]
        return verify(recorded, payload, expected, **kw)

    adapter.verify = recording
    results = run_cases(suite.all_cases(), InProcessDriver(adapter))
    assert not [r.report() for r in results if r.verdict == "failed"]
    assert len(versions) > 50 and set(versions) == {2}, sorted(set(versions))
