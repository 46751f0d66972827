"""The generated differential checks: random programs on an adapter and on the reference.

The adapter under test is the plugin's, so one switch serves scenarios and
generated checks alike::

    pytest tests/test_generated.py                                   # the reference
    pytest tests/test_generated.py --kv-adapter mypkg.adapter:make   # in process
    pytest tests/test_generated.py --kv-adapter-cmd "./my-adapter"   # over stdio

Each property runs in process and over stdio (the same adapter behind
``python -m kvconform.serve``; with ``--kv-adapter-cmd``, that command).

Budget: ``KVCONFORM_GENERATED_EXAMPLES`` examples per property (default 40,
for CI) from ``KVCONFORM_GENERATED_SEED`` (default 0; ``random`` for a fresh
one, printed on failure). A nightly run sets a larger number.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import strategies as st

from kvconform import cli, plugin
from kvconform.adapters import DEFAULT_ADAPTER
from kvconform.adapters.reference import ReferenceAdapter
from kvconform.differential import PROPERTY_IDS, strategies
from kvconform.differential.compare import compare, relation_labels, well_formed
from kvconform.differential.engine import (
    PROPERTIES,
    PROPERTIES_BY_ID,
    Property,
    case_result,
    new_seed,
    program_source,
    run_property,
)
from kvconform.harness.generated import GeneratedCheck
from kvconform.harness.yamlsource import Document, validate
from kvconform.protocol import operations as ops
from kvconform.protocol.client import StdioDriver
from kvconform.protocol.driver import Driver, InProcessDriver
from kvconform.values import Broken, Fault, MixOp, Ok, Refused, Signature
from tests.mutants import all_mutants
from tests.variants import all_variants

EXAMPLES = int(os.environ.get("KVCONFORM_GENERATED_EXAMPLES", "40"))
_SEED = os.environ.get("KVCONFORM_GENERATED_SEED", "0")
SEED = new_seed() if _SEED == "random" else int(_SEED)
MUTANTS = {m.name: m for m in all_mutants()}


# --- the adapter under test, in process and over stdio ------------------------------


@pytest.fixture(scope="module", params=["in-process", "stdio"])
def driver(request: pytest.FixtureRequest) -> Driver:
    config = request.config
    command = config.getoption("kv_adapter_cmd")
    if request.param == "in-process":
        if command is not None:
            pytest.skip("--kv-adapter-cmd names an adapter that runs over stdio only")
        return plugin.driver_for(config)
    if command is not None:
        return plugin.driver_for(config)
    spec = config.getoption("kv_adapter") or DEFAULT_ADAPTER
    served = StdioDriver([sys.executable, "-m", "kvconform.serve", "--adapter", spec])
    request.addfinalizer(served.close)
    return served


def _run(prop: Property, driver: Driver, **kwargs: object) -> None:
    result = run_property(prop, driver, examples=EXAMPLES, seed=SEED, **kwargs)  # type: ignore[arg-type]
    if result.verdict == "not_applicable":
        pytest.skip(result.reason)
    assert result.verdict == "passed", case_result(result).report()


@pytest.mark.parametrize("prop", PROPERTIES, ids=[p.id for p in PROPERTIES])
def test_the_adapter_agrees_with_the_reference(prop: Property, driver: Driver) -> None:
    _run(prop, driver)


@pytest.mark.parametrize("variant", all_variants(), ids=[v.name for v in all_variants()])
def test_correct_variants_raise_no_alarm(variant: object) -> None:
    """Other ids, wording, storage and key composition are free (CONF-12): no disagreement."""
    driver = InProcessDriver(variant.factory())  # type: ignore[attr-defined]
    try:
        for prop in PROPERTIES:
            result = run_property(prop, driver, examples=max(10, EXAMPLES // 2), seed=SEED)
            assert result.verdict in ("passed", "not_applicable"), case_result(result).report()
    finally:
        driver.close()


@pytest.mark.parametrize("variant_name", ["cache-heads-implied-validity", "fixed-schema-defaults"])
def test_programs_stay_where_the_declaration_agrees_with_the_reference(variant_name: str) -> None:
    """What a right engine may answer otherwise under its declaration is never drawn:
    under ``plan_key_cache_heads: implied``, no three-valued validity over a cache of
    other heads (PLAN-19); under ``plan_key_params: fixed``, no model or probe that
    leaves out a field of its family's schema (PLAN-17, decision key-params)."""
    import random

    variant = next(v for v in all_variants() if v.name == variant_name)
    info = variant.factory().describe()
    scope = strategies.Scope.of(info)
    drawn = 0
    for index in range(400):
        src = strategies.RandomSource(random.Random(f"drawn-region {index}"))
        program = strategies.key_program(src, scope=scope, classes=frozenset(info.classes))
        heads: dict[str, tuple[int, int]] = {}
        baked: dict[str, tuple[int, int]] = {}
        for op in program:
            if isinstance(op, ops.CacheNew | ops.CacheNewPlaced):
                heads[op.handle] = (op.geometry.n_kv_heads, op.geometry.head_dim)
            elif isinstance(op, ops.SessionNew):
                baked[op.handle] = heads[op.cache]
            elif isinstance(op, ops.SessionValidity) and info.key_schema is None:
                drawn += 1
                assert heads[op.cache] == baked[op.session], program
            spec = (
                op.spec
                if isinstance(op, ops.ModelNew)
                else (op.identity.model if isinstance(op, ops.PlanKey) else None)
            )
            if spec is not None and info.key_schema is not None:
                drawn += 1
                assert strategies.fills_schema(spec, info.key_schema), spec
    assert drawn > 50  # the rule was exercised, not vacuous


# --- it finds misreadings, on its own ----------------------------------------------

#: One mutant per property and kind of misreading; sig-tokens-as-a-float was a gap of
#: the hand-written suite (Python's == took 2.0 for 2) that the typed comparison closed.
FOUND = [
    ("truncate-remints", "generated.key-state-machine"),
    ("model-id-from-address", "generated.key-state-machine"),
    ("plan-key-includes-rope", "generated.key-state-machine"),
    ("instance-ids-start-at-zero", "generated.key-state-machine"),
    ("hash-str-without-length", "generated.hash"),
    ("hash-nan-canonicalized", "generated.hash"),
    ("verify-compatibility-before-honesty", "generated.verify"),
    ("sig-tokens-as-a-float", "generated.verify"),
    # Widths at the edge of a u64 (strategies.edge_width), in blocks of both versions.
    ("sig-width-wrapping-multiply", "generated.verify"),
    ("prof-v2-writer-wraps-the-width", "generated.verify"),
    # Prefix caches: over-reuse across a discriminant, under-reuse of an equal prefix, a
    # tier read by another process (a narrow key: tests/test_generated_prefix.py).
    ("prefix-adapter-by-name", "generated.prefix"),
    ("prefix-whole-request-or-nothing", "generated.prefix"),
    ("prefix-tier-keys-per-process", "generated.prefix"),
    # A bounded cache whose lookup goes past a block the bound cut out of one store: each
    # count is one some order gives, the counts together are not (7.1.0's cut programs).
    ("prefix-capacity-counts-past-a-miss", "generated.prefix"),
    ("prefix-capacity-deepest-hit-wins", "generated.prefix"),
]


# Shrinking runs under the engine's default budget (SHRINK_SECONDS) in these tests: it
# ends on its own within a few seconds, and the shrunk program they assert on is then the
# same on any machine. A budget of 1 s cut prefix-adapter-by-name's shrinking at 11
# steps on a quiet machine and at 22 on a loaded one, failing the bound below.
#
# A mutant whose answers depend on where the allocator puts an object
# (model-id-from-address: an id is the model's address) fails a program, or not, by the
# heap it runs on. Its first failure can be two live models whose addresses came out of
# order, which no shorter program then reproduced: once in about a dozen whole runs,
# shrinking stopped at 22 steps. A counterexample longer than the bound is sought
# again, at most twice; a deterministic mutant gives the same counterexample each time,
# so for it nothing changes.
@pytest.mark.parametrize("name, prop_id", FOUND, ids=[name for name, _ in FOUND])
def test_the_generated_checks_find_a_mutant(name: str, prop_id: str) -> None:
    if name not in MUTANTS:
        pytest.skip(f"the corpus has no mutant {name!r} any more")
    for _ in range(3):
        driver = InProcessDriver(MUTANTS[name].factory())
        result = run_property(PROPERTIES_BY_ID[prop_id], driver, examples=200, seed=SEED)
        assert result.verdict == "failed", f"{name} survived {prop_id}: {result.reason}"
        cx = result.counterexample
        assert cx is not None
        if len(cx.program) <= 12:
            break
    assert len(cx.program) <= 12, cx.listing()  # shrunk
    report = case_result(result).report()
    assert f"--seed {SEED}" in report and "reproduce" in report


def test_the_same_seed_gives_the_same_counterexample() -> None:
    mutant = MUTANTS["truncate-remints"]
    found = [
        run_property(
            PROPERTIES[0],
            InProcessDriver(mutant.factory()),
            examples=60,
            seed=11,
        ).counterexample
        for _ in range(2)
    ]
    assert found[0] is not None and found[1] is not None
    assert found[0].program == found[1].program


# --- how programs are written and shrunk ------------------------------------------


def _writers() -> list[tuple[Property, strategies.Writer[tuple[ops.Op, ...]]]]:
    info = ReferenceAdapter().describe()
    return [(p, p.writer(info)) for p in PROPERTIES if p.writer is not None]


def test_every_property_has_a_writer() -> None:
    assert [p.id for p, _ in _writers()] == list(PROPERTY_IDS)


def test_a_seed_writes_the_same_programs_and_another_seed_others() -> None:
    """repr, not ==: a NaN parameter is not equal to itself."""
    for prop, write in _writers():
        first = [repr(write(program_source(7, prop.id, i))) for i in range(30)]
        assert first == [repr(write(program_source(7, prop.id, i))) for i in range(30)]
        assert first != [repr(write(program_source(8, prop.id, i))) for i in range(30)]
        assert len(set(first)) > 20, prop.id  # hardly any repeats


def test_the_first_program_is_the_simplest() -> None:
    for prop, write in _writers():
        source = program_source(SEED, prop.id, 0)
        program = write(source)
        assert not any(source.choices), prop.id
        assert 1 <= len(program) <= 3, (prop.id, program)


def test_recorded_choices_write_the_same_program_again() -> None:
    """What the shrinker relies on: a program is a function of its recorded choices."""
    for prop, write in _writers():
        for index in range(1, 40):
            source = program_source(5, prop.id, index)
            program = write(source)
            replay = strategies.ReplaySource(source.choices)
            assert repr(write(replay)) == repr(program), (prop.id, index)
            assert replay.choices == source.choices and replay.spans == source.spans
            # A cut sequence still writes a program (choices past the end are 0, which
            # ends every list), within the shrinker's limit (engine.shrink_choices).
            cut = source.choices[: len(source.choices) // 2]
            shorter = strategies.ReplaySource(cut, limit=len(source.choices) + 64)
            write(shorter)  # raises Overrun past the limit


def test_the_writers_are_hypothesis_strategies_too() -> None:
    """The same writers, every choice drawn from Hypothesis, stay in the preconditions."""
    from hypothesis import HealthCheck, given, settings

    info = ReferenceAdapter().describe()
    for prop in PROPERTIES:

        @settings(
            max_examples=15,
            database=None,
            deadline=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(prop.programs(info))
        def runs(program: tuple[ops.Op, ...]) -> None:
            assert well_formed(program), program

        runs()


def test_a_property_without_a_writer_runs_through_hypothesis() -> None:
    import dataclasses

    prop = dataclasses.replace(PROPERTIES_BY_ID["generated.hash"], writer=None)
    driver = InProcessDriver(MUTANTS["hash-str-without-length"].factory())
    result = run_property(prop, driver, examples=100, seed=SEED)
    assert result.verdict == "failed", result.reason
    assert result.counterexample is not None and len(result.counterexample.program) <= 3


def test_a_writer_that_raises_is_a_harness_error() -> None:
    def broken(source: strategies.Source) -> tuple[ops.Op, ...]:
        raise RuntimeError("the writer broke")

    bad = Property(
        described=GeneratedCheck("generated.bad", title="t", cls="identity", requires=(), why="w"),
        not_applicable=lambda info: None,
        programs=lambda info: st.just(()),
        writer=lambda info: broken,
    )
    result = run_property(bad, InProcessDriver(ReferenceAdapter()), examples=3, seed=0)
    assert result.verdict == "error" and "the writer broke" in result.reason, result


def test_shrinking_edits_choices_toward_the_simplest_failure() -> None:
    """A toy writer: a list of numbers, failing when one is at least 5; the simplest
    failure is the one-element list [5]."""
    from kvconform.differential.compare import Mismatch
    from kvconform.differential.engine import Counterexample, shrink_choices

    def write(source: strategies.Source) -> tuple[ops.Op, ...]:
        values = strategies.items(source, lambda: source.integer(0, 1000), 20)
        return tuple(ops.CacheTruncate(cache="c", length=v) for v in values)

    def judge(program: tuple[ops.Op, ...]) -> Counterexample | None:
        if not any(op.length >= 5 for op in program if isinstance(op, ops.CacheTruncate)):
            return None
        return Counterexample("t", program, (), (), Mismatch(0, "x", "y", ()))

    import random
    import time

    for seed in range(5):
        source = strategies.RandomSource(random.Random(seed))
        program = write(source)
        found = judge(program)
        if found is None:
            continue
        cx = shrink_choices(write, judge, source.choices, found, time.perf_counter() + 10)
        assert cx.program == (ops.CacheTruncate(cache="c", length=5),)


# --- how outcomes are judged -------------------------------------------------------


def _ids(*values: int) -> tuple[list[ops.Op], list[Ok]]:
    program: list[ops.Op] = [ops.CacheAllocId(cache="c") for _ in values]
    return program, [Ok(v) for v in values]


def test_ids_are_judged_by_equality_and_order_only() -> None:
    program, reference = _ids(1, 1, 2, 5)
    assert compare(program, reference, _ids(10**12, 10**12, 10**12 + 13, 10**12 + 26)[1]) is None
    swapped = compare(program, reference, _ids(7, 7, 9, 8)[1])
    assert swapped is not None and swapped.index == 3 and swapped.related_to == 2
    merged = compare(program, reference, _ids(3, 4, 4, 5)[1])
    assert merged is not None and merged.index == 1
    assert "equal to" in merged.expected and "greater than" in merged.actual


def test_an_id_of_zero_is_a_disagreement() -> None:
    program, reference = _ids(1, 2)
    mismatch = compare(program, reference, _ids(0, 1)[1])
    assert mismatch is not None and mismatch.requires == ("ALLOC-1",)


def test_plan_keys_are_judged_by_equality_only() -> None:
    program = [ops.PlanKey(identity=None) for _ in range(3)]  # type: ignore[arg-type]
    reference = [Ok(5), Ok(9), Ok(5)]
    assert compare(program, reference, [Ok(3), Ok(1), Ok(3)]) is None
    assert compare(program, reference, [Ok(3), Ok(3), Ok(3)]) is not None
    assert relation_labels(program, reference) == {
        0: "plan key A",
        1: "plan key B",
        2: "plan key A",
    }


def test_errors_are_judged_without_their_message_and_values_with_their_type() -> None:
    op = ops.CacheAppend(cache="c", tokens=9)
    fault = Fault("capacity_exceeded", "max_seq_len", None, {"capacity": 8, "requested": 9}, "x")
    reworded = Fault(
        "capacity_exceeded", "max_seq_len", None, {"requested": 9, "capacity": 8}, "no room"
    )
    assert compare([op], [Refused(fault)], [Refused(reworded)]) is None
    other = Fault("capacity_exceeded", "max_seq_len", None, {"capacity": 8, "requested": 1})
    assert compare([op], [Refused(fault)], [Refused(other)]) is not None
    floated = Fault(
        "capacity_exceeded",
        "max_seq_len",
        None,
        {"capacity": 8.0, "requested": 9},  # type: ignore[dict-item]
    )
    assert compare([op], [Refused(fault)], [Refused(floated)]) is not None


def test_signatures_and_lengths_are_judged_with_their_types() -> None:
    sig = Signature(1, "m", 1, 1, 1, "f32", 2)
    measure = ops.Measure(model="m", payload=())
    assert compare([measure], [Ok(sig)], [Ok(sig)]) is None
    floated = Signature(1, "m", 1, 1, 1, "f32", 2.0)  # type: ignore[arg-type]
    assert compare([measure], [Ok(sig)], [Ok(floated)]) is not None
    length = ops.CacheLen(cache="c")
    assert compare([length], [Ok(1)], [Ok(True)]) is not None


def test_an_adapter_failure_is_a_disagreement() -> None:
    op = ops.CacheLen(cache="c")
    assert compare([op], [Ok(1)], [Broken("crashed")]) is not None


def test_well_formed_programs_use_live_handles_and_declared_hooks() -> None:
    from kvconform.values import ModelSpec

    spec = ModelSpec("llama", (), (("lora", False),))
    made = [ops.ModelNew(handle="m1", spec=spec)]
    assert well_formed([*made, ops.ModelSetHook(model="m1", hook="lora", present=True)])
    assert not well_formed([*made, ops.ModelSetHook(model="m1", hook="other", present=True)])
    assert not well_formed([*made, ops.Drop(handle="m1"), ops.ModelInstanceId(model="m1")])
    assert well_formed([ops.Measure(model="not-a-handle", payload=())])


def test_a_program_the_reference_cannot_run_is_a_harness_error() -> None:
    """The generator's fault is never blamed on the adapter."""
    bad = Property(
        described=GeneratedCheck("generated.bad", title="t", cls="identity", requires=(), why="w"),
        not_applicable=lambda info: None,
        programs=lambda info: st.just((ops.CacheLen(cache="nowhere"),)),
    )
    result = run_property(bad, InProcessDriver(ReferenceAdapter()), examples=3, seed=0)
    assert result.verdict == "error", result
    assert "outside the preconditions" in result.reason
    assert case_result(result).verdict == "failed"


def test_hash_programs_travel_as_one_hash_batch_over_stdio() -> None:
    sent: list[str] = []

    def trace(direction: str, line: bytes) -> None:
        if direction == "send":
            sent.append(json.loads(line)["op"])

    driver = StdioDriver([sys.executable, "-m", "kvconform.serve"], trace=trace)
    try:
        result = run_property(PROPERTIES_BY_ID["generated.hash"], driver, examples=5, seed=0)
    finally:
        driver.close()
    assert result.verdict == "passed", case_result(result).report()
    assert "hash_batch" in sent and "hash" not in sent


#: An adapter that answers one failure to every hash_batch (PROTO-20 allows it) and
#: serves everything else as the reference does.
NO_BATCH = """
import sys
from kvconform.adapters.reference import ReferenceAdapter
from kvconform.protocol.server import Server
server = Server(ReferenceAdapter())
for line in sys.stdin.buffer:
    if b'"op":"hash_batch"' in line.replace(b" ", b""):
        seq = line.split(b'"seq":')[1].split(b",")[0].strip()
        sys.stdout.buffer.write(b'{"seq":' + seq + b',"failure":"no batches here"}\\n')
    else:
        sys.stdout.buffer.write(server.handle_line(line))
    sys.stdout.buffer.flush()
    if server.finished:
        break
"""


def test_a_whole_batch_failure_is_asked_program_by_program() -> None:
    """PROTO-20 lets an adapter answer one failure for a whole hash_batch; the generated
    hash checks then ask each program with hash (a third audit's false alarm: they
    failed every program)."""
    sent: list[str] = []

    def trace(direction: str, line: bytes) -> None:
        if direction == "send":
            sent.append(json.loads(line)["op"])

    driver = StdioDriver([sys.executable, "-c", NO_BATCH], trace=trace)
    try:
        result = run_property(PROPERTIES_BY_ID["generated.hash"], driver, examples=5, seed=0)
    finally:
        driver.close()
    assert result.verdict == "passed", case_result(result).report()
    assert "hash_batch" in sent and "hash" in sent


def test_a_class_the_adapter_does_not_declare_is_not_applicable() -> None:
    from tests.fixtures.hash_only_adapter import HashOnly

    driver = InProcessDriver(HashOnly())
    verdicts = {p.id: run_property(p, driver, examples=5, seed=0).verdict for p in PROPERTIES}
    assert verdicts == {
        "generated.key-state-machine": "not_applicable",
        "generated.hash": "passed",
        "generated.verify": "not_applicable",
        "generated.prefix": "not_applicable",
    }


# --- kvconform run --generated ------------------------------------------------------


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def test_run_generated_adds_cases_and_prints_the_seed(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    status, out, err = _cli(
        "run",
        "--allow-modified",
        "--quiet",
        "--generated",
        "10",
        "--seed",
        "5",
        "--id",
        "generated.*",
        "--json",
        str(report),
    )
    assert status == cli.EXIT_OK, out + err
    assert "seed 5 (reproduce with --generated 10 --seed 5)" in out
    data = json.loads(report.read_text())
    validate(Document("report.json", data, {}), "report")
    assert [(r["id"], r["kind"], r["verdict"]) for r in data["results"]] == [
        (pid, "generated", "passed") for pid in PROPERTY_IDS
    ]
    assert data["selection"]["generated"] == {"examples": 10, "seed": 5}


def test_run_generated_fails_and_exports_against_a_mutant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kvconform.differential import engine

    monkeypatch.setattr(engine, "SHRINK_SECONDS", 1.0)
    directory = tmp_path / "found"
    status, out, err = _cli(
        "run",
        "--allow-modified",
        "--quiet",
        "--adapter",
        MUTANTS["truncate-remints"].spec,
        "--generated",
        "60",
        "--seed",
        "1",
        "--id",
        "generated.key-*",
        "--export-counterexamples",
        str(directory),
    )
    assert status == cli.EXIT_FAILED, out + err
    assert "generated generated.key-state-machine failed" in out
    written = sorted(directory.glob("*.yaml"))
    assert len(written) == 1 and f"wrote counterexample scenario {written[0]}" in err


def test_a_counterexample_that_cannot_be_written_leaves_the_verdict_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FIFO at the counterexample's path (write_text would block on it for ever) is
    neither opened nor replaced: the failure is still reported, the path named, exit 2."""
    from kvconform.differential import engine

    monkeypatch.setattr(engine, "SHRINK_SECONDS", 1.0)
    directory = tmp_path / "found"
    argv = (
        "run", "--allow-modified", "--quiet", "--adapter", MUTANTS["truncate-remints"].spec,
        "--generated", "60", "--seed", "1", "--id", "generated.key-*",
        "--export-counterexamples", str(directory),
    )  # fmt: skip
    assert _cli(*argv)[0] == cli.EXIT_FAILED
    (written,) = directory.glob("*.yaml")
    written.unlink()
    os.mkfifo(written)
    status, out, err = _cli(*argv, "--json", str(tmp_path / "report.json"))
    assert status == cli.EXIT_USAGE, out + err
    assert "generated generated.key-state-machine failed" in out
    assert f"generated.key-state-machine: cannot write the counterexample to {directory}" in err
    assert "not a regular file" in err and stat.S_ISFIFO(written.lstat().st_mode)
    report = json.loads((tmp_path / "report.json").read_text())
    (result,) = report["results"]
    assert result["verdict"] == "failed"
    assert "not exported: cannot write the counterexample" in json.dumps(result)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "--allow-modified", "--seed", "3"], "--seed needs --generated N"),
        (
            ["run", "--allow-modified", "--export-counterexamples", "x"],
            "--export-counterexamples needs --generated",
        ),
        (["run", "--allow-modified", "--generated", "0"], "expected 1 .. 1000000"),
    ],
)
def test_generated_options_are_checked(
    argv: list[str], fragment: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    status, _, err = _cli(*argv)
    assert status == cli.EXIT_USAGE and fragment in err
    assert not list(tmp_path.iterdir())  # the refused export folder was not made


def test_without_generated_nothing_changes() -> None:
    """A run without --generated runs none of them; the list shows them, marked."""
    status, _, err = _cli("run", "--id", "generated.*")
    assert status == cli.EXIT_USAGE and "matches no case" in err
    status, out, _ = _cli("list", "--id", "generated.*")
    assert status == cli.EXIT_OK and out.count("(runs with --generated N)") == len(PROPERTY_IDS)


def test_hash_programs_hold_every_kind_of_mix() -> None:
    """The hash programs a run draws reach NaN payloads, signed zeros, astral strings, u64
    extremes, a finish mid-sequence and long repeated bytes: the first 300 programs of
    ``generated.hash`` at seed 0, drawn as ``kvconform run --generated 300`` draws them
    (the same writer behind Hypothesis: ``test_the_writers_are_hypothesis_strategies_too``)."""
    prop = PROPERTIES_BY_ID["generated.hash"]
    write = prop.writer(ReferenceAdapter().describe())
    seen: set[str] = set()

    def collect(program: Sequence[ops.Op]) -> None:
        for op in program:
            assert isinstance(op, ops.Hash)
            mixes: tuple[MixOp, ...] = op.program
            for i, mix in enumerate(mixes):
                seen.add(mix.kind)
                if mix.kind == "f64" and isinstance(mix.value, int):
                    if (mix.value >> 52) & 0x7FF == 0x7FF and mix.value & ((1 << 52) - 1):
                        seen.add("nan")
                    if mix.value == 1 << 63:
                        seen.add("-0.0")
                    if (mix.value >> 52) & 0x7FF == 0 and mix.value & ((1 << 52) - 1):
                        seen.add("subnormal")
                if isinstance(mix.value, str) and any(ord(c) > 0xFFFF for c in mix.value):
                    seen.add("astral")
                if mix.kind == "u64" and mix.value == (1 << 64) - 1:
                    seen.add("u64-max")
                if mix.kind == "bytes" and mix.repeat > 1:
                    seen.add("repeat")
                if mix.kind == "finish" and i < len(mixes) - 1:
                    seen.add("finish-mid")

    for index in range(300):
        collect(write(program_source(0, prop.id, index)))
    assert {
        "nan",
        "-0.0",
        "subnormal",
        "astral",
        "u64-max",
        "repeat",
        "finish-mid",
        "present",
        "instance",
        "bytes",
    } <= seen


def test_generated_checks_show_progress_per_property() -> None:
    """On a terminal a live count of programs, otherwise one line per property (issue 14)."""
    import io

    from kvconform import cli

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for err in (io.StringIO(), Terminal()):
        status = cli.main(
            ["run", "--class", "hash", "--generated", "30", "--seed", "523031069"],
            io.StringIO(),
            err,
        )
        assert status == cli.EXIT_OK
        text = err.getvalue()
        # a program drawn twice is run once, and the line says so (this seed draws 2)
        assert re.search(
            r"generated\.hash: passed \(30 programs drawn, 28 distinct, \d+\.\d s\)", text
        )
        if isinstance(err, Terminal):
            assert "\r  generated.hash: program 1 of about 30 " in text


#: The largest buffer the suite asks an adapter to build (spec/protocol.md, after PROTO-19).
BUFFER_BOUND = 1 << 16


def _buffers(program: tuple[ops.Op, ...]) -> list[int]:
    sizes = []
    for op in program:
        for value in vars(op).values():
            if isinstance(value, tuple) and value and all(hasattr(x, "k_len") for x in value):
                sizes += [n for layer in value for n in (layer.k_len, layer.v_len)]
    return sizes


def test_every_buffer_the_suite_asks_for_is_small() -> None:
    """What protocol.md promises after PROTO-19: no payload of a scenario or of the
    generated checks (blocks of both versions) asks for a buffer above 2^16 elements,
    however large its head counts, widths or token counts."""
    from kvconform.harness import suite

    sizes = [n for case in suite.all_cases() for n in _buffers(case.program)]
    assert sizes and max(sizes) <= BUFFER_BOUND
    drawn = []
    for reference in (ReferenceAdapter(), ReferenceAdapter(writes=2, reads=(1, 2))):
        info = reference.describe()
        for prop in PROPERTIES:
            if prop.writer is None:
                continue
            write = prop.writer(info)
            for index in range(300):
                drawn += _buffers(write(program_source(3, prop.id, index)))
    assert drawn and max(drawn) <= BUFFER_BOUND


def _versions(program: tuple[ops.Op, ...]) -> list[int]:
    return [
        v.format_version for op in program for v in vars(op).values() if isinstance(v, Signature)
    ]


def test_every_format_version_the_suite_sends_fits_a_u32() -> None:
    """What docs/validate-your-implementation.md promises: SIG-1 makes a signature's
    format_version a u32, and no stamp or expectation of a scenario or of the generated
    checks carries a larger one, so a reader may hold it in one."""
    from kvconform.harness import suite

    versions = [v for case in suite.all_cases() for v in _versions(case.program)]
    for reference in (ReferenceAdapter(), ReferenceAdapter(writes=2, reads=(1, 2))):
        info = reference.describe()
        for prop in PROPERTIES:
            if prop.writer is not None:
                write = prop.writer(info)
                for index in range(300):
                    versions += _versions(write(program_source(3, prop.id, index)))
    assert versions and max(versions) < 1 << 32 and min(versions) >= 0


def test_a_generated_check_rests_on_the_decisions_its_class_rests_on() -> None:
    """A generated check is reported, counted and explained on the basis of the rules it
    compares (CONF-8): decisions the specification lists, and, for a class none of whose
    scenarios rests on the seeds (prefix_cache, spec/prefix.md), never the seeds' semantics,
    which a report says to fix first."""
    from kvconform.harness import generated, suite
    from kvconform.values import DECISIONS

    # Every decision a scenario of its class rests on: since 6.5.0 a bounded cache too
    # (the programs give prefix_new a capacity where the answer is fixed, PREFIX-24).
    scenarios = [c for c in suite.all_cases() if c.kind == "scenario"]
    for check in generated.CHECKS:
        assert set(check.decisions) <= set(DECISIONS), check.id
        of_class = [c for c in scenarios if c.cls == check.cls]
        if of_class and all(c.basis for c in of_class):
            assert check.decisions, check.id
            bases = {d for c in of_class for d in c.basis}
            assert set(check.decisions) >= bases, check.id
        assert PROPERTIES_BY_ID[check.id].case.basis == check.decisions
