"""Counterexamples become scenarios (kvconform.differential.export).

A shrunk counterexample is written as a scenario file whose steps replay the
program and whose expectations are the reference's answers. The file must load
(schema and compiler), pass on the reference and fail on the implementation
that produced the counterexample; and any generated program, exported, must
compile back to the same operations.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential import export, strategies
from kvconform.differential.compare import Mismatch
from kvconform.differential.engine import PROPERTIES_BY_ID, Counterexample, run_property
from kvconform.harness.runner import run_case
from kvconform.harness.scenario import load_scenario_file
from kvconform.protocol import codec
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import AdapterInfo
from tests.mutants import all_mutants
from tests.mutants.corpus import ModelIdFromAddress, TruncateRemints

MUTANTS = {m.name: m for m in all_mutants()}


def _replays(path: Path, adapter: object) -> tuple[str, str]:
    """The verdicts of the exported file on the reference and on ``adapter``."""
    (case,) = load_scenario_file(path)
    on_reference = run_case(case, InProcessDriver(ReferenceAdapter()))
    on_adapter = run_case(case, InProcessDriver(adapter))  # type: ignore[arg-type]
    assert on_reference.verdict == "passed", on_reference.report()
    return on_reference.verdict, on_adapter.verdict


def test_truncate_remints_counterexample_round_trip(tmp_path: Path) -> None:
    result = run_property(
        PROPERTIES_BY_ID["generated.key-state-machine"],
        InProcessDriver(TruncateRemints()),
        examples=100,
        seed=1,
        export_dir=tmp_path,
        label="TruncateRemints",
    )
    assert result.verdict == "failed" and result.exported is not None
    assert result.exported.parent == tmp_path and result.exported.suffix == ".yaml"
    assert "passes on the reference, fails on this implementation" in result.export_note
    assert _replays(result.exported, TruncateRemints()) == ("passed", "failed")
    text = result.exported.read_text(encoding="utf-8")
    document = yaml.safe_load(text)
    assert document["kvconform"] == "scenarios/2"
    (scenario,) = document["scenarios"]
    assert scenario["id"].startswith(f"{document['area']}.generated.")
    assert "TruncateRemints" in scenario["why"] and "seed 1" in scenario["why"]
    verbs = [next(iter(step)) for step in scenario["steps"]]
    assert "cache_truncate" in verbs
    # the expectation is the reference's answer: a plan still valid, or ids still equal
    assert any(
        (verb == "session_valid" and step["session_valid"]["expect"] == "valid")
        or verb == "same"
        or verb == "increasing"
        for verb, step in zip(verbs, scenario["steps"], strict=True)
    )


class _TruncateRemintsDeclaringOptions(TruncateRemints):
    """The truncate mutant, declaring two safe answers other than the defaults."""

    def describe(self) -> AdapterInfo:
        info = super().describe()
        options = {**info.options, "clear_mints": "lazy", "hook_toggle": "remints_instance"}
        return replace(info, options=options)


def test_an_exported_counterexample_assumes_the_declared_options(tmp_path: Path) -> None:
    """The program was drawn where the declaration agrees with the reference, so the file
    assumes that declaration (CONF-6) and never judges another one; it replays on the
    reference declaring the same (passes) and on the implementation (fails)."""
    adapter = _TruncateRemintsDeclaringOptions()
    result = run_property(
        PROPERTIES_BY_ID["generated.key-state-machine"],
        InProcessDriver(adapter),
        examples=100,
        seed=1,
        export_dir=tmp_path,
    )
    assert result.verdict == "failed" and result.exported is not None
    assert "passes on the reference, fails on this implementation" in result.export_note
    (scenario,) = yaml.safe_load(result.exported.read_text(encoding="utf-8"))["scenarios"]
    assert scenario["options"] == {"clear_mints": "lazy", "hook_toggle": "remints_instance"}
    (case,) = load_scenario_file(result.exported)
    assert run_case(case, InProcessDriver(ReferenceAdapter())).verdict == "not_applicable"


def test_address_keyed_models_counterexample_round_trip(tmp_path: Path) -> None:
    result = run_property(
        PROPERTIES_BY_ID["generated.key-state-machine"],
        InProcessDriver(ModelIdFromAddress()),
        examples=100,
        seed=1,
        export_dir=tmp_path,
    )
    assert result.verdict == "failed" and result.exported is not None
    reference_verdict, _ = _replays(result.exported, ModelIdFromAddress())
    assert reference_verdict == "passed"  # on the mutant it depends on the allocator


@pytest.mark.parametrize(
    "name, prop_id",
    [
        ("hash-str-without-length", "generated.hash"),
        ("verify-compatibility-before-honesty", "generated.verify"),
        ("sig-ragged-layer-index-off-by-one", "generated.verify"),
        ("capacity-partial-write", "generated.key-state-machine"),
    ],
)
def test_every_kind_of_counterexample_round_trips(name: str, prop_id: str, tmp_path: Path) -> None:
    if name not in MUTANTS:
        pytest.skip(f"the corpus has no mutant {name!r} any more")
    factory = MUTANTS[name].factory
    result = run_property(
        PROPERTIES_BY_ID[prop_id],
        InProcessDriver(factory()),
        examples=200,
        seed=0,
        export_dir=tmp_path,
        label=name,
    )
    assert result.verdict == "failed" and result.exported is not None
    assert _replays(result.exported, factory()) == ("passed", "failed")


@pytest.mark.parametrize(
    "name",
    [
        "prof-zero-window-is-full-causal",
        "prof-split-width-measured-with-k-width",
        "prof-rolling-reader-measures-all-under-v2",
    ],
)
def test_a_version_2_counterexample_round_trips(name: str, tmp_path: Path) -> None:
    """A block program of profile v2 exports with its layouts, split widths and format
    declaration, and replays on the reference declaring that format (passes) and on the
    implementation (fails); on a reader of v1 alone it is not applicable."""
    if name not in MUTANTS:
        pytest.skip(f"the corpus has no mutant {name!r} any more")
    factory = MUTANTS[name].factory
    info = factory().describe()
    result = run_property(
        PROPERTIES_BY_ID["generated.verify"],
        InProcessDriver(factory()),
        examples=200,
        seed=0,
        export_dir=tmp_path,
        label=name,
    )
    assert result.verdict == "failed" and result.exported is not None
    assert "passes on the reference, fails on this implementation" in result.export_note
    (scenario,) = yaml.safe_load(result.exported.read_text(encoding="utf-8"))["scenarios"]
    assert scenario["format"] == {
        "writes": info.format_writes,
        "reads": sorted(info.format_reads),
    }
    # a disagreement on a version-2 block cites the version's rules, not only v1's
    v2_blocks = any(
        "block_size" in step.get("signature", {}) or "layout" in step.get(verb, {})
        for step in scenario["steps"]
        for verb in ("measure", "stamp")
    )
    if v2_blocks:
        assert {"PROF-6", "PROF-8", "VERIFY-10"} & set(scenario["requires"]), scenario["requires"]
    (case,) = load_scenario_file(result.exported)
    same_format = ReferenceAdapter(
        writes=info.format_writes or 1,
        reads=tuple(sorted(info.format_reads)),
        revision=info.option("profile_v2_revision"),
    )
    assert run_case(case, InProcessDriver(same_format)).verdict == "passed"
    assert run_case(case, InProcessDriver(factory())).verdict == "failed"
    assert run_case(case, InProcessDriver(ReferenceAdapter())).verdict == "not_applicable"


@pytest.mark.parametrize(
    "name",
    [
        "prefix-adapter-by-name",  # over-reuse through a reloaded adapter
        "prefix-whole-request-or-nothing",  # under-reuse of an equal prefix
        "prefix-tier-keys-per-process",  # a tier another process cannot read
        "prefix-content-adapter-identity-keyed-by-instance",  # declares content identity
        "prefix-text-only-user-key-ignored",  # declares prefix_inputs: salt, user_key
        "prefix-capacity-counts-past-a-miss",  # judged against every order of one store
    ],
)
def test_a_prefix_counterexample_round_trips(name: str, tmp_path: Path) -> None:
    """A prefix program exports as a scenario of the area prefix whose lookups expect the
    reference's counts under the implementation's declaration, with the options it rests
    on; it validates, passes on the reference declaring the same, fails on the mutant."""
    from kvconform.differential.declared import DeclaringAs

    if name not in MUTANTS:
        pytest.skip(f"the corpus has no mutant {name!r} any more")
    factory = MUTANTS[name].factory
    info = factory().describe()
    result = run_property(
        PROPERTIES_BY_ID["generated.prefix"],
        InProcessDriver(factory()),
        examples=200,
        seed=0,
        export_dir=tmp_path,
        label=name,
    )
    assert result.verdict == "failed" and result.exported is not None
    assert "passes on the reference, fails on this implementation" in result.export_note
    document = yaml.safe_load(result.exported.read_text(encoding="utf-8"))
    (scenario,) = document["scenarios"]
    assert document["area"] == "prefix" and scenario["class"] == "prefix_cache"
    assert scenario["id"].startswith("prefix.generated.")
    assert "prefix-observable-reuse" in scenario["basis"]
    assert all(r.startswith("PREFIX-") for r in scenario["requires"]), scenario["requires"]
    assert scenario["options"]["prefix_partial"] == "none"
    if info.option("prefix_adapter_identity") == "content":
        assert scenario["options"]["prefix_adapter_identity"] == "content"
    (case,) = load_scenario_file(result.exported)
    declared = DeclaringAs(info)  # the reference, declaring what the mutant declares
    assert declared.describe().prefix_inputs == info.prefix_inputs
    assert run_case(case, InProcessDriver(declared)).verdict == "passed"
    assert run_case(case, InProcessDriver(factory())).verdict == "failed"


def test_a_strength_program_exports_and_compiles_back(tmp_path: Path) -> None:
    """512 distinct one-block requests survive the file as they do the wire."""
    import random

    for index in range(400):
        src = strategies.RandomSource(random.Random(f"strength export {index}"))
        program = strategies.prefix_program(src)
        if sum(isinstance(op, ops.PrefixStore) for op in program) > 100:
            _round_trip(program, tmp_path)
            return
    pytest.fail("no strength program among 400")


# --- any program survives the trip --------------------------------------------------

_ID_READS = (ops.ModelInstanceId, ops.CacheAllocId)


def _wire(program: tuple[ops.Op, ...] | list[ops.Op]) -> str:
    """The program as the wire sees it, without id reads (the compiler adds one per mint)."""
    return json.dumps([codec.to_wire(op) for op in program if not isinstance(op, _ID_READS)])


def _round_trip(
    program: tuple[ops.Op, ...], directory: Path, reference: ReferenceAdapter | None = None
) -> None:
    reference = reference or ReferenceAdapter()
    info = reference.describe()
    expected = tuple(InProcessDriver(reference).run(program))
    cx = Counterexample(
        "generated.test", program, expected, expected, Mismatch(len(program) - 1, "x", "y", ())
    )
    path = export.write_counterexample(
        cx,
        directory,
        seed=0,
        examples=1,
        options=info.options,
        block_format=(info.format_writes or 1, tuple(info.format_reads)),
    )
    (case,) = load_scenario_file(path)
    assert _wire(case.program) == _wire(program), path.read_text(encoding="utf-8")
    reads = [op for op in case.program if isinstance(op, _ID_READS)]
    assert len(reads) >= sum(isinstance(op, _ID_READS) for op in program)
    verdict = run_case(case, InProcessDriver(reference))
    assert verdict.verdict == "passed", verdict.report() + "\n" + path.read_text(encoding="utf-8")
    path.unlink()


_quick = settings(
    max_examples=25,
    database=None,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def _v2_blocks(writes: int, reads: set[int]) -> st.SearchStrategy[tuple[ops.Op, ...]]:
    scope = strategies.Scope(reads=frozenset(reads), writes=writes)
    return strategies.block_programs(scope=scope)


@pytest.mark.parametrize(
    "programs, reference",
    [
        (strategies.key_programs(plan=True, max_ops=30), None),
        (
            strategies.key_programs(
                plan=True, max_ops=30, classes=frozenset({"identity", "plan", "plan_validity"})
            ),
            None,
        ),
        (strategies.hash_programs(max_programs=3), None),
        (strategies.block_programs(), None),
        (strategies.prefix_programs(strategies.PrefixScope(strength=False)), None),
        (_v2_blocks(2, {2}), ReferenceAdapter(writes=2)),
        (
            _v2_blocks(2, {1, 2}),
            ReferenceAdapter(writes=2, reads=(1, 2), revision="layout_only"),
        ),
    ],
    ids=[
        "key",
        "key-plan-validity",
        "hash",
        "blocks",
        "prefix",
        "blocks-v2",
        "blocks-rolling-layout-only",
    ],
)
def test_any_generated_program_exports_and_compiles_back(
    programs: st.SearchStrategy[tuple[ops.Op, ...]],
    reference: ReferenceAdapter | None,
    tmp_path: Path,
) -> None:
    @_quick
    @given(programs)
    def trip(program: tuple[ops.Op, ...]) -> None:
        _round_trip(program, tmp_path, reference)

    trip()


@settings(max_examples=300, database=None, deadline=None, derandomize=True)
@given(st.lists(strategies.texts, min_size=1, max_size=3))
def test_any_string_survives_the_file(texts: list[str]) -> None:
    """Line separators, NEL, a BOM, NUL, astral characters: written, read back the same."""
    exported = export.Exported({"values": texts}, "x.y", "x", 1)
    assert yaml.safe_load(export.dump(exported))["values"] == texts


def test_payload_arguments_describe_every_layer_exactly() -> None:
    from kvconform.values import LayerDesc

    layers = (
        LayerDesc(2, 3, 1, 6, 6),
        LayerDesc(3, 2, 1, 6, 6),  # transposed, same width
        LayerDesc(2, 3, 4, 5, 6),  # a claim and buffers that disagree
        LayerDesc(0, 3, 1, 0, 0),
        LayerDesc(2, 3, 1, 6, 6),
    )
    args = export.payload_args(layers)
    assert args["n_layers"] == 5 and [o["layer"] for o in args["layers"]] == [1, 2, 3]
    assert args["layers"][1] == {"layer": 2, "seq_len": 4, "k_len": 5}
    assert export.payload_args(()) == {"n_layers": 0, "n_kv_heads": 1, "head_dim": 1, "tokens": 0}
