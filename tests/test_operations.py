"""The operation table (kvconform.protocol.operations) against everything derived from it.

Each operation is declared once; these tests keep the hand-written parts that
must agree with the table in step with it: the per-operation JSON Schemas, the
typed Python adapter interface, the reference adapter, the protocol document
and the scenario compiler's verbs.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.harness import suite
from kvconform.harness.runner import run_case
from kvconform.harness.scenario import load_scenario_file, verbs
from kvconform.protocol import adapter as adapter_interface
from kvconform.protocol import codec, schemas
from kvconform.protocol import operations as ops
from kvconform.protocol.driver import Handles, InProcessDriver, call
from kvconform.protocol.server import Server
from kvconform.values import (
    Geometry,
    LayerDesc,
    Layout,
    MixOp,
    ModelSpec,
    PlanIdentity,
    Signature,
    StepInputs,
)

COMMON = "../common.schema.json#/$defs/"
#: The schema each field kind travels as (conformance/schema/protocol/common.schema.json).
FIELD_SCHEMA: dict[str, dict[str, Any]] = {
    "new_handle": {"$ref": COMMON + "handle"},
    "handle": {"$ref": COMMON + "handle"},
    "released": {"$ref": COMMON + "handle"},
    "str": {"type": "string"},
    "bool": {"type": "boolean"},
    "count": {"$ref": COMMON + "count"},
    "count_or_null": {"type": ["integer", "null"], "minimum": 0},
    "program": {"$ref": COMMON + "program"},
    "model_spec": {"$ref": COMMON + "model_spec"},
    "geometry": {"$ref": COMMON + "geometry"},
    "plan_identity": {"$ref": COMMON + "plan_identity"},
    "step": {"$ref": COMMON + "step"},
    "payload": {"$ref": COMMON + "payload"},
    "signature": {"$ref": COMMON + "signature"},
    "signature_or_null": {"oneOf": [{"$ref": COMMON + "signature"}, {"type": "null"}]},
    "layout_or_null": {"$ref": COMMON + "layout"},
    "str_or_null": {"oneOf": [{"type": "string"}, {"type": "null"}]},
    "str_list": {"type": "array", "items": {"type": "string"}},
}
RESULT_SCHEMA: dict[str, dict[str, Any]] = {
    "null": {"type": "null"},
    "u64": {"$ref": COMMON + "u64"},
    "u64_list": {"$ref": COMMON + "u64_list"},
    "count": {"$ref": COMMON + "count"},
    "bool": {"type": "boolean"},
    "signature": {"$ref": COMMON + "signature"},
    "validity": {"$ref": COMMON + "validity"},
}
NAMES = [spec.name for spec in ops.TABLE]


def test_names_are_unique_and_every_class_is_in_the_table() -> None:
    assert len(set(NAMES)) == len(NAMES)
    declared = {cls for cls in vars(ops).values() if isinstance(cls, type)}
    subclasses = {cls for cls in declared if issubclass(cls, ops.Op) and cls is not ops.Op}
    assert subclasses == set(ops.BY_CLASS)


def test_every_field_kind_and_result_kind_has_a_schema() -> None:
    assert set(FIELD_SCHEMA) == set(ops.FieldKind.__args__)  # type: ignore[attr-defined]
    assert set(RESULT_SCHEMA) == set(ops.ResultKind.__args__)  # type: ignore[attr-defined]
    assert set(FIELD_SCHEMA) == set(codec.FIELD_CODECS)


@pytest.mark.parametrize("name", NAMES)
def test_the_schema_file_of_each_operation_follows_the_table(name: str) -> None:
    spec = ops.BY_NAME[name]
    document = schemas.documents()[f"ops/{name}.schema.json"]
    request, result = document["$defs"]["request"], document["$defs"]["result"]
    fields = [f.name for f in spec.fields]
    assert list(request["properties"]) == ["seq", "op", *fields]
    assert request["properties"]["op"] == {"const": name}
    # to_wire sends every field but one added after protocol 1 at its default (PROTO-31)
    assert request["required"] == ["seq", "op", *(f.name for f in spec.fields if not f.added)]
    assert request["additionalProperties"] is False
    for field in spec.fields:
        assert request["properties"][field.name] == FIELD_SCHEMA[field.kind], field.name
    assert result == RESULT_SCHEMA[spec.result]


def test_there_is_a_schema_file_for_each_operation_and_no_other() -> None:
    files = {n for n in schemas.documents() if n.startswith("ops/")}
    assert files == {f"ops/{name}.schema.json" for name in (*NAMES, *ops.CONTROL)}
    envelope = schemas.documents()["request.schema.json"]
    assert envelope["properties"]["op"]["enum"] == [*ops.CONTROL, *NAMES]


@pytest.mark.parametrize("name", NAMES)
def test_the_python_adapter_interface_follows_the_table(name: str) -> None:
    spec = ops.BY_NAME[name]
    protocols = (
        adapter_interface.HashAdapter,
        adapter_interface.KeyAdapter,
        adapter_interface.VerifyAdapter,
        adapter_interface.PlanValidityAdapter,
        adapter_interface.PrefixCacheAdapter,
    )
    (owner,) = [p for p in protocols if name in vars(p)]
    signature = inspect.signature(getattr(owner, spec.method))
    parameters = list(signature.parameters)
    assert parameters == ["self", *(f.name for f in spec.arguments), *(f.name for f in spec.added)]
    for f in spec.added:  # passed as a keyword, only when present (PROTO-31)
        assert signature.parameters[f.name].kind is inspect.Parameter.KEYWORD_ONLY
    reference = inspect.signature(getattr(ReferenceAdapter, spec.method))
    assert len(reference.parameters) == len(parameters)


@pytest.mark.parametrize("name", NAMES)
def test_the_protocol_document_describes_each_operation(name: str) -> None:
    text = (suite.spec_dir() / "protocol.md").read_text(encoding="utf-8")
    assert re.search(rf"`{name}`", text), name


def test_scenario_verbs_are_the_operation_names() -> None:
    # Every operation is a verb of the scenario format, under its own name; the
    # other verbs define values or assert relations between them.
    assert set(NAMES) <= set(verbs())
    assert set(verbs()) - set(NAMES) == {
        "payload",
        "signature",
        "same",
        "differ",
        "nonzero",
        "increasing",
        "together",
        "repeat",
        "restart",
    }


def test_the_runners_contract_and_the_scenario_schema_list_each_verb() -> None:
    """A runner in another language reads the verbs from conformance/INTERPRETING.md and
    validates steps with the scenario schema, whose unlisted verbs pass silently (any
    object): both must name every operation of the table (a contributor's trial added
    one and nothing said these were left)."""
    schema = json.loads((suite.conformance_dir() / "schema" / "scenarios.schema.json").read_text())
    assert set(NAMES) <= set(schema["$defs"]["step"]["properties"])
    text = (suite.conformance_dir() / "INTERPRETING.md").read_text(encoding="utf-8")
    first_cells = " ".join(re.findall(r"(?m)^\| ([^|]*) \|", text))
    assert not [n for n in NAMES if f"`{n}`" not in first_cells]


class _Recorder:
    """A fake adapter: records each call and returns a fixed value per method."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    def __getattr__(self, method: str) -> Any:
        def record(*args: object) -> object:
            self.calls.append((method, args))
            spec = ops.BY_NAME[method]
            if spec.binds:
                return f"object from {method}"
            return {"u64": 7, "u64_list": [1, 2], "count": 3, "bool": True}.get(spec.result)

        return record


def test_dispatch_binds_resolves_and_releases_handles_as_the_table_says() -> None:
    adapter, handles = _Recorder(), Handles()
    geometry = Geometry(2, 2, 4, 16)
    assert call(adapter, handles, ops.CacheNew("c", geometry)) is None
    assert handles["c"] == "object from cache_new"
    assert call(adapter, handles, ops.CacheReplaceLayer("c", 1, None, 8, None)) is None
    assert adapter.calls[-1] == ("cache_replace_layer", ("object from cache_new", 1, None, 8, None))
    assert call(adapter, handles, ops.Hash(())) == (1, 2)
    assert call(adapter, handles, ops.Drop("c")) is None
    assert adapter.calls[-1] == ("drop", ("object from cache_new",))
    assert handles.names() == []


@pytest.mark.parametrize("name", NAMES)
def test_every_operation_survives_the_wire(name: str) -> None:
    samples: dict[str, object] = {
        "new_handle": "n",
        "handle": "h",
        "released": "r",
        "str": "llama",
        "bool": True,
        "count": 3,
        "count_or_null": None,
        "program": (MixOp("u64", 5), MixOp("finish")),
        "model_spec": ModelSpec("llama", (("n", 3),), (("lora", True),)),
        "geometry": Geometry(2, 2, 4, 16),
        "plan_identity": PlanIdentity(ModelSpec("llama", (), ()), 1, 2, Geometry(2, 2, 4, 16), 1),
        "step": StepInputs((1, 2), 0, 10000.0, None, ()),
        "payload": (LayerDesc(2, 4, 3, 24, 24),),
        "signature": Signature(1, "m", 1, 2, 4, "f32", 3),
        "signature_or_null": None,
        "layout_or_null": Layout(4, None),
        "str_or_null": None,
        "str_list": ("kv-f32", "kv-q8"),
    }
    spec = ops.BY_NAME[name]
    op = spec.cls(**{f.name: samples[f.kind] for f in spec.fields})
    wire = codec.to_wire(op)
    assert not schemas.errors(f"ops/{name}", {"seq": 1, **wire}), wire
    assert codec.from_wire(wire) == op


# Adding an operation --------------------------------------------------------------


@dataclass(frozen=True)
class CacheRoom(ops.Op):
    """A made-up operation, as a contributor would add it: one table entry."""

    name: ClassVar[str] = "cache_room"
    needs: ClassVar[str] = "identity"
    result: ClassVar[ops.ResultKind] = "count"
    cache: ops.Handle


class _WithRoom(ReferenceAdapter):
    """The reference with the new operation's method: the positions left."""

    def cache_room(self, cache: Any) -> int:
        room: int = cache.geometry.max_seq_len - len(cache)
        return room


def test_a_new_operation_needs_only_its_table_entry_and_the_adapter_method(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/operations.md: a new operation is a table entry, a schema file, a spec
    # row and the reference's method. Everything the harness does with it --
    # compiling a scenario step, dispatch in process and in the stdio server, the
    # wire codec, judging the result -- follows from the entry alone.
    spec = ops.OpSpec(
        CacheRoom,
        "cache_room",
        "identity",
        "count",
        (ops.FieldSpec("cache", "handle", False),),
    )
    monkeypatch.setitem(ops.BY_NAME, spec.name, spec)
    monkeypatch.setitem(ops.BY_CLASS, CacheRoom, spec)
    scenario = tmp_path / "room.yaml"
    scenario.write_text(
        "kvconform: scenarios/2\n"
        "area: alloc\n"
        "scenarios:\n"
        "  - id: alloc.room.capacity-less-length\n"
        "    title: A cache's room is its max_seq_len less its length\n"
        "    class: identity\n"
        "    basis: seed\n"
        "    requires: [ALLOC-5]\n"
        "    why: catches a room read as the length\n"
        "    steps:\n"
        "      - cache_new: {as: c, n_layers: 1, n_kv_heads: 1, head_dim: 2, max_seq_len: 16}\n"
        "      - cache_append: {cache: c, tokens: 3}\n"
        "      - cache_room: {cache: c, expect: 13}\n",
        encoding="utf-8",
    )
    (case,) = load_scenario_file(scenario)
    assert CacheRoom("c") in case.program
    assert run_case(case, InProcessDriver(_WithRoom())).verdict == "passed"

    wrong = scenario.read_text(encoding="utf-8").replace("expect: 13", "expect: 3")
    scenario.write_text(wrong, encoding="utf-8")
    (case,) = load_scenario_file(scenario)
    assert run_case(case, InProcessDriver(_WithRoom())).verdict == "failed"

    assert codec.from_wire(codec.to_wire(CacheRoom("c"))) == CacheRoom("c")
    server = Server(_WithRoom())
    server.handle({"op": "hello", "protocol": codec.PROTOCOL_VERSION, "suite": "2.0.0"})
    server.handle(
        {
            "op": "cache_new",
            "handle": "c",
            "geometry": codec.to_wire(ops.CacheNew("c", Geometry(1, 1, 2, 16)))["geometry"],
        }
    )
    assert server.handle({"op": "cache_room", "cache": "c"}) == {"ok": 16}


@pytest.mark.covers("PROTO-17", "PROTO-18")
def test_in_process_results_are_held_to_the_wire_types() -> None:
    # A numpy integer, a float or a negative number is not an id, in process as over
    # stdio: an adapter cannot pass in process what it would fail over the protocol.
    import numpy as np

    class NumpyIds(ReferenceAdapter):
        def cache_alloc_id(self, cache: Any) -> Any:
            return np.uint64(super().cache_alloc_id(cache))

        def cache_len(self, cache: Any) -> Any:
            return float(super().cache_len(cache))

        def cache_clear(self, cache: Any) -> Any:
            super().cache_clear(cache)
            return "ignored: a null result carries nothing"

    driver = InProcessDriver(NumpyIds())
    geometry = Geometry(1, 1, 2, 8)
    outcomes = driver.run(
        [ops.CacheNew("c", geometry), ops.CacheAllocId("c"), ops.CacheLen("c"), ops.CacheClear("c")]
    )
    assert [type(o).__name__ for o in outcomes] == ["Ok", "Broken", "Broken", "Ok"]
    assert "expected an unsigned 64-bit integer" in outcomes[1].reason  # type: ignore[union-attr]
    assert outcomes[3].value is None  # type: ignore[union-attr]


# Fields added after protocol 1 (PROTO-31) ------------------------------------------


class _FirstProtocolOneAdapter(ReferenceAdapter):
    """An adapter written before ``layout`` existed: its methods take no such keyword."""

    def measure(self, model_name: str, payload: Any) -> Any:  # type: ignore[override]
        return super().measure(model_name, payload)

    def stamp(self, model_name: str, payload: Any) -> Any:  # type: ignore[override]
        return super().stamp(model_name, payload)


@pytest.mark.covers("PROTO-31")
def test_a_field_added_later_is_left_out_at_its_default() -> None:
    payload = (LayerDesc(2, 4, 3, 24, 24),)
    v1 = codec.to_wire(ops.Stamp("m", payload))
    assert "layout" not in v1 and "v_head_dim" not in v1["payload"][0]
    v2 = codec.to_wire(ops.Stamp("m", (LayerDesc(2, 4, 3, 24, 12, v_head_dim=2),), Layout(3, None)))
    assert v2["layout"] == {"block_size": 3, "sliding_window": None}
    assert v2["payload"][0]["v_head_dim"] == 2
    # In process, a method without the keyword is called exactly as before.
    handles = Handles()
    sig = call(_FirstProtocolOneAdapter(), handles, ops.Stamp("m", payload))
    assert sig == Signature(1, "m", 1, 2, 4, "f32", 3)
    # A v1 signature has no layout member on the wire; a v2 one always has both members.
    assert "layout" not in codec.to_wire(ops.Verify(sig, payload, sig))["recorded"]
    with pytest.raises(codec.WireError, match="sliding_window: missing"):
        codec.layout_from_wire({"block_size": 3}, "layout")


# The generated differential checks, from the table ------------------------------------


def _drawn_operations(classes: frozenset[str], programs: int = 150) -> set[str]:
    """The operations the generated checks' writers put in their first programs."""
    import random

    from kvconform.differential import strategies

    drawn: set[str] = set()
    for index in range(programs):
        rng = random.Random(index)
        for program in (
            strategies.key_program(strategies.RandomSource(rng), classes=classes),
            tuple(strategies.hash_program_list(strategies.RandomSource(rng))),
            strategies.block_program(strategies.RandomSource(rng), verify=True, signature=True),
            strategies.prefix_program(strategies.RandomSource(rng)),
        ):
            drawn.update(op.name for op in program)
    return drawn


def test_every_operation_takes_part_in_the_generated_checks_or_says_why_not() -> None:
    from kvconform.differential import strategies
    from kvconform.values import CLASSES

    drawn = _drawn_operations(frozenset(CLASSES))
    for spec in ops.TABLE:
        if spec.not_generated:
            assert spec.name not in drawn, f"{spec.name} is drawn though its entry says why not"
        else:
            assert spec.name in drawn, f"{spec.name}: no writer draws it and no reason is given"
    assert set(ops.BY_NAME) >= strategies.DRAWN_BY_WRITERS


def test_the_table_gives_the_generated_checks_what_they_judge_by() -> None:
    # A disagreement cites requirements that exist; an id or a key is compared by a
    # declared relation (never by value: CONF-12); handle fields name a kind some
    # operation makes, the first word of its name.
    known = set(suite.requirements())
    makes = {spec.makes for spec in ops.TABLE if spec.makes}
    assert makes == {"model", "cache", "session", "prefix", "tier", "lora", "request"}
    for spec in ops.TABLE:
        assert spec.cites and set(spec.cites) <= known, spec.name
        assert (spec.result == "u64") == (spec.relation is not None), spec.name
        assert not spec.nonzero or spec.nonzero in known
        for name in spec.handles:
            assert name in makes, f"{spec.name}.{name} names no kind of object an operation makes"


@dataclass(frozen=True)
class CheckedRoom(CacheRoom):
    """The made-up operation, citing what a disagreement on it bears on."""

    cites: ClassVar[tuple[str, ...]] = ("ALLOC-5",)


class _RoomFromLength(_WithRoom):
    """A wrong implementation of it: the length, not the room left."""

    def cache_room(self, cache: Any) -> int:
        return len(cache)


def test_a_new_operation_takes_part_in_the_generated_checks_from_its_table_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/operations.md: a plain operation is drawn, judged, cited, shrunk and
    # exported by the generated checks with no code of its own there.
    from kvconform.differential import engine

    spec = ops._spec(CheckedRoom)
    monkeypatch.setattr(ops, "TABLE", (*ops.TABLE, spec))
    monkeypatch.setitem(ops.BY_NAME, spec.name, spec)
    monkeypatch.setitem(ops.BY_CLASS, CheckedRoom, spec)
    assert "cache_room" in _drawn_operations(frozenset({"identity"}), programs=40)

    prop = engine.PROPERTIES_BY_ID["generated.key-state-machine"]
    reference = InProcessDriver(_WithRoom())
    right = engine.run_property(
        prop, InProcessDriver(_WithRoom()), examples=60, seed=1, reference=reference
    )
    assert right.verdict == "passed"
    wrong = engine.run_property(
        prop,
        InProcessDriver(_RoomFromLength()),
        examples=60,
        seed=1,
        reference=reference,
        export_dir=tmp_path,
    )
    assert wrong.verdict == "failed" and wrong.counterexample is not None
    cx = wrong.counterexample
    assert isinstance(cx.program[cx.mismatch.index], CheckedRoom)
    assert cx.mismatch.requires == ("ALLOC-5",)
    assert wrong.exported is not None
    text = wrong.exported.read_text(encoding="utf-8")
    assert "cache_room: {cache: c1, expect: " in text
    (case,) = load_scenario_file(wrong.exported)
    assert run_case(case, InProcessDriver(_WithRoom())).verdict == "passed"
    assert run_case(case, InProcessDriver(_RoomFromLength())).verdict == "failed"
