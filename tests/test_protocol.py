"""The protocol document, its schemas, its codec and the reference server, without processes
(except the replay of the document's example session)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pytest

import kvconform
from kvconform.adapters.reference import ReferenceAdapter, run_program
from kvconform.harness import suite
from kvconform.protocol import codec, schemas
from kvconform.protocol import operations as ops
from kvconform.protocol.server import Server
from kvconform.values import AdapterInfo, Broken, Fault, Layout, MixOp, Ok, Refused, Signature

SPEC = suite.spec_dir() / "protocol.md"


def schema(name: str) -> dict[str, Any]:
    return schemas.documents()[f"{name}.schema.json"]


def validate(name: str, message: object) -> list[str]:
    return schemas.errors(name, message)


def validate_result(op: str, value: object) -> list[str]:
    return schemas.errors(f"ops/{op}#/$defs/result", value)


def greeted(adapter: object | None = None) -> Server:
    server = Server(adapter or ReferenceAdapter())  # type: ignore[arg-type]
    assert "ok" in ask(server, {"op": "hello", "protocol": 1, "suite": "1.0.0"})
    return server


_SEQ = iter(range(1, 1 << 30))


def ask(server: Server, request: dict[str, Any]) -> dict[str, Any]:
    """One request through the server's line interface; the response without its seq."""
    seq = next(_SEQ)
    line = codec.encode_line(seq, request)
    response = json.loads(server.handle_line(line[:-1]))
    assert response.pop("seq") == seq
    assert not validate("response", {"seq": seq, **response}), response
    return response


# The document -----------------------------------------------------------------------


def test_protocol_requirements_are_numbered_without_gaps_and_well_formed() -> None:
    text = SPEC.read_text(encoding="utf-8")
    ids = re.findall(r"^- \*\*PROTO-(\d+)\*\* ", text, re.MULTILINE)
    assert [int(i) for i in ids] == list(range(1, len(ids) + 1))
    for req in (r for r in suite.requirements().values() if r.group == "PROTO"):
        assert req.file == "protocol.md"
        if req.withdrawn:  # its line stays, marked, naming what replaces it (CONF-5)
            continue
        assert re.search(r"\b(MUST|SHOULD|MAY)\b", req.text), req.id
        assert req.text.count("*Rationale:*") == 1, req.id


def test_informative_text_uses_no_capitalised_keywords() -> None:
    for number, line in enumerate(SPEC.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("- **PROTO-"):
            continue
        assert not re.search(r"\b(MUST|SHOULD|SHALL|REQUIRED|RECOMMENDED)\b", line), number


def test_every_protocol_requirement_is_covered_by_a_project_test() -> None:
    cited: set[str] = set()
    for path in Path(__file__).parent.glob("test_*.py"):
        for match in re.finditer(r"covers\(([^)]*)\)", path.read_text(encoding="utf-8")):
            cited.update(re.findall(r"PROTO-\d+", match.group(1)))
    defined = {
        r for r, req in suite.requirements().items() if r.startswith("PROTO-") and not req.withdrawn
    }
    assert defined and defined <= cited, sorted(defined - cited)


def test_the_operation_table_lists_every_operation() -> None:
    text = SPEC.read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.MULTILINE))
    assert {*ops.OPERATIONS, *ops.CONTROL} <= listed


def example_session() -> list[tuple[str, str]]:
    text = SPEC.read_text(encoding="utf-8")
    block = text.split("<!-- example-session -->", 1)[1].split("<!-- /example-session -->", 1)[0]
    lines = [line for line in block.splitlines() if line[:2] in ("> ", "< ")]
    return [(line[0], line[2:]) for line in lines]


@pytest.mark.covers("PROTO-9", "PROTO-15", "PROTO-20", "PROTO-24")
def test_the_example_session_is_what_the_reference_answers() -> None:
    session = example_session()
    sent = "".join(text + "\n" for who, text in session if who == ">")
    expected = [json.loads(text) for who, text in session if who == "<"]
    done = subprocess.run(
        [sys.executable, "-m", "kvconform.serve"],
        input=sent.encode(),
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answered = [json.loads(line) for line in done.stdout.splitlines()]
    expected[0]["ok"]["version"] = kvconform.__version__
    assert answered == expected


def test_the_example_session_validates_against_the_schemas() -> None:
    pending: dict[int, str] = {}
    for who, text in example_session():
        if who == ">":
            try:
                message = json.loads(text)
            except ValueError:
                continue  # the deliberate non-JSON line
            assert not validate("request", message), text
            pending[message["seq"]] = message["op"]
        else:
            message = json.loads(text)
            assert not validate("response", message), text
            if "ok" in message:
                assert not validate_result(pending[message["seq"]], message["ok"]), text


# The schemas -----------------------------------------------------------------------


def test_the_schemas_are_valid_draft_2020_12() -> None:
    for name, document in schemas.documents().items():
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema", name
        assert document["$id"] == schemas.BASE + name
        jsonschema.Draft202012Validator.check_schema(document)


def test_every_operation_has_a_request_schema_and_a_result_schema() -> None:
    names = {*ops.OPERATIONS, *ops.CONTROL}
    assert {n for n in schemas.documents() if n.startswith("ops/")} == {
        f"ops/{name}.schema.json" for name in names
    }
    assert set(schema("request")["properties"]["op"]["enum"]) == names


@pytest.mark.covers("PROTO-8")
@pytest.mark.parametrize(
    ("response", "valid"),
    [
        ({"seq": 3, "ok": None}, True),
        (
            {
                "seq": 3,
                "error": {
                    "kind": "unmarked",
                    "field": None,
                    "layer": None,
                    "values": {},
                    "message": "no stamp",
                },
            },
            True,
        ),
        ({"seq": 3, "unsupported": "no plans here"}, True),
        ({"seq": 3, "failure": "boom"}, True),
        ({"seq": None, "failure": "not JSON"}, True),
        ({"seq": None, "ok": None}, False),
        ({"seq": 3}, False),
        ({"seq": 3, "ok": None, "failure": "both"}, False),
        ({"seq": 3, "ok": None, "debug": "extra"}, False),
        ({"seq": -1, "ok": None}, False),
        ({"seq": 3, "unsupported": {"why": "not a string"}}, False),
        ({"seq": 3, "error": {"kind": "unmarked"}}, False),
    ],
)
def test_the_response_schema_admits_exactly_the_four_forms(
    response: dict[str, Any], valid: bool
) -> None:
    assert (not validate("response", response)) is valid


@pytest.mark.covers("PROTO-17", "PROTO-18")
@pytest.mark.parametrize(
    ("op", "value", "valid"),
    [
        ("cache_alloc_id", "18446744073709551615", True),
        ("cache_alloc_id", 7, False),
        ("cache_alloc_id", "007", False),
        ("hash", ["1", "2"], True),
        ("hash", [1], False),
        ("cache_len", 3, True),
        ("cache_len", "3", False),
        ("session_valid", True, True),
        ("session_valid", 1, False),
        ("hash_batch", [["1"], []], True),
        (
            "measure",
            {
                "format_version": 1,
                "model": "m",
                "n_layers": 1,
                "n_kv_heads": 2,
                "head_dim": 4,
                "dtype": "f32",
                "tokens": 3,
            },
            True,
        ),
        ("measure", {"format_version": 1}, False),
    ],
)
def test_result_schemas(op: str, value: object, valid: bool) -> None:
    assert (not validate_result(op, value)) is valid


def test_request_schemas_follow_to_wire() -> None:
    spec = ops.ModelSpec("llama", (("eps", -0.0), ("n", 3), ("act", "silu")), (("lora", True),))
    message = codec.to_wire(ops.ModelNew("m", spec))
    assert message["spec"]["params"] == {
        "eps": {"f64": "0x8000000000000000"},
        "n": {"u64": "3"},
        "act": {"str": "silu"},
    }
    assert not validate("request", {"seq": 1, **message})
    assert validate("request", {"seq": 1, **message, "extra": 1})
    assert validate("request", {"seq": 1, "op": "cache_len"})
    assert validate("request", {"seq": 1, "op": "no_such_op"})


# The codec -------------------------------------------------------------------------


@pytest.mark.covers("PROTO-17")
def test_u64_results_travel_as_decimal_strings() -> None:
    op = ops.CacheAllocId("c")
    assert codec.result_to_wire(op, (1 << 64) - 1) == {"ok": "18446744073709551615"}
    assert codec.result_from_wire(op, "18446744073709551615") == (1 << 64) - 1
    for bad in (7, "-1", "18446744073709551616", "0x10", 7.0):
        with pytest.raises(codec.WireError):
            codec.result_from_wire(op, bad)
    with pytest.raises(TypeError, match="unsigned 64-bit"):
        codec.result_to_wire(op, -1)
    assert codec.result_to_wire(ops.CacheLen("c"), 5) == {"ok": 5}


@pytest.mark.covers("PROTO-8", "PROTO-21", "PROTO-22", "PROTO-23", "PROTO-28")
def test_outcomes_of_the_four_forms_and_of_malformed_bodies() -> None:
    op = ops.Measure("m", ())
    signature = {
        "format_version": 1,
        "model": "m",
        "n_layers": 1,
        "n_kv_heads": 2,
        "head_dim": 4,
        "dtype": "f32",
        "tokens": 3,
    }
    assert codec.outcome_of(op, {"seq": 1, "ok": signature}) == Ok(
        Signature(1, "m", 1, 2, 4, "f32", 3)
    )
    error = {
        "kind": "layer_shape_mismatch",
        "field": "layer_shape",
        "layer": 1,
        "values": {"expected": [2, 4], "found": [2, 8]},
        "message": "layer_shape 2 4 2 8",
    }
    refused = codec.outcome_of(op, {"seq": 1, "error": error})
    assert isinstance(refused, Refused)
    assert refused.fault.values == {"expected": (2, 4), "found": (2, 8)}
    assert codec.outcome_of(op, {"seq": 1, "failure": "boom"}) == Broken("boom")
    unsupported = codec.outcome_of(op, {"seq": 1, "unsupported": "not here"})
    assert isinstance(unsupported, Broken) and "unsupported" in unsupported.reason
    for bad in (
        {"seq": 1},
        {"seq": 1, "ok": signature, "failure": "x"},
        {"seq": 1, "ok": signature, "debug": 1},
        {"seq": 1, "ok": "a signature"},
        {"seq": 1, "ok": {"format_version": 1}},
    ):
        outcome = codec.outcome_of(op, bad)
        assert isinstance(outcome, Broken) and "malformed response to measure" in outcome.reason


@pytest.mark.covers("CONF-9")
def test_a_malformed_ok_still_claims_success_and_fails_a_refusal_probe() -> None:
    """CONF-9: any ``ok`` answer fails a must-not-succeed probe, a malformed one too (an
    adapter that answers ``{"ok": "yes"}`` to a request with an empty salt accepted it),
    over the wire and in process alike; a crash, a ``failure`` or a garbled line cannot
    be told from a refusal and passes, as the rule's rationale says."""
    from kvconform.harness.checks import Refuses
    from kvconform.protocol.driver import InProcessDriver

    probe = Refuses()
    request = ops.RequestNew("r", "1 2", salt="")
    claims = codec.outcome_of(request, {"seq": 1, "ok": "yes"})
    assert isinstance(claims, Broken) and claims.claims_success
    assert probe.judge(claims) is not None and probe.judge(Ok(None)) is not None
    for refusing in (
        codec.outcome_of(request, {"seq": 1, "failure": "empty salt"}),
        codec.outcome_of(request, {"seq": 1, "ok": None, "failure": "x"}),  # garbled
        Broken("the adapter exited (status 1)"),
    ):
        assert isinstance(refusing, Broken) and not refusing.claims_success, refusing
        assert probe.judge(refusing) is None

    class CountsAsText(ReferenceAdapter):
        def prefix_lookup(self, prefix: object, request: object) -> object:
            return "4"  # a success, with a value of the wrong type

    program = (
        ops.PrefixNew("p", 4, "m", "bf16", "nhd", "tp0"),
        ops.RequestNew("r", "1 2 3 4"),
        ops.PrefixLookup("p", "r"),
    )
    in_process = InProcessDriver(CountsAsText()).run(program)[-1]
    assert isinstance(in_process, Broken) and in_process.claims_success
    over_the_wire = codec.outcome_of(program[-1], {"seq": 3, "ok": "4"})
    assert isinstance(over_the_wire, Broken) and over_the_wire.claims_success


@pytest.mark.covers("PROTO-10")
def test_the_handshake_description_round_trips_and_is_checked() -> None:
    info = ReferenceAdapter().describe()
    assert codec.info_from_wire(codec.info_to_wire(info)) == info
    good = codec.info_to_wire(info)
    for change, fragment in (
        ({"protocol": 2}, "protocol"),
        ({"classes": ["hash", "teleport"]}, "unknown class 'teleport'"),
        ({"name": ""}, "name"),
        ({"format": {"writes": 1}}, "reads"),
        ({"format": {"writes": "1", "reads": [1]}}, "writes"),
    ):
        with pytest.raises(codec.WireError, match=fragment):
            codec.info_from_wire({**good, **change})


# The server ---------------------------------------------------------------------------


@pytest.mark.covers("PROTO-10", "PROTO-11", "PROTO-12")
def test_the_server_handshake() -> None:
    server = Server(ReferenceAdapter())
    assert (
        "first request must be hello" in ask(server, {"op": "cache_len", "cache": "c"})["failure"]
    )
    refused = ask(server, {"op": "hello", "protocol": 3, "suite": "1.0.0"})
    assert "speaks protocol 1 and 2" in refused["failure"]
    answers = [ask(server, {"op": "hello", "protocol": 1, "suite": s}) for s in ("0.0.1", "9.9.9")]
    assert answers[0] == answers[1] == {"ok": codec.info_to_wire(server.info)}
    assert not validate_result("hello", answers[0]["ok"])
    only_1 = Server(ReferenceAdapter(), protocols=(1,))
    assert (
        "speaks protocol 1" in ask(only_1, {"op": "hello", "protocol": 2, "suite": "x"})["failure"]
    )
    second = ask(Server(ReferenceAdapter()), {"op": "hello", "protocol": 2, "suite": "x"})
    assert second == {"ok": codec.info_to_wire(server.info, 2)}


@pytest.mark.covers("PROTO-9")
def test_an_unreadable_request_is_answered_with_failure() -> None:
    server = greeted()
    for line, seq in ((b"not json", None), (b"[1, 2]", None), (b'{"op": "reset"}', None)):
        response = json.loads(server.handle_line(line))
        assert response["seq"] is seq and "failure" in response
        assert not validate("response", response)
    assert "unknown operation" in ask(server, {"op": "teleport"})["failure"]
    malformed = ask(server, {"op": "cache_append", "cache": "c", "tokens": "many"})
    assert "cache_append.tokens" in malformed["failure"]
    # A string with no UTF-8 form (HASH-13) is refused with the request's seq.
    program = b'[{"op": "str", "value": "\\ud800"}, {"op": "finish"}]'
    line = b'{"seq": 41, "op": "hash", "program": ' + program + b"}"
    response = json.loads(server.handle_line(line))
    assert response["seq"] == 41 and "failure" in response
    assert "ok" in ask(server, {"op": "reset"})  # and it goes on serving


@pytest.mark.covers("PROTO-15", "PROTO-16")
def test_handles_are_names_and_reset_releases_them_without_resetting_ids() -> None:
    server = greeted()
    geometry = {"n_layers": 1, "n_kv_heads": 1, "head_dim": 2, "max_seq_len": 4, "dtype": "f32"}
    assert ask(server, {"op": "cache_new", "handle": "c", "geometry": geometry}) == {"ok": None}
    first = int(ask(server, {"op": "cache_alloc_id", "cache": "c"})["ok"])
    assert "no live handle named 'x'" in ask(server, {"op": "cache_len", "cache": "x"})["failure"]
    assert ask(server, {"op": "reset"}) == {"ok": None}
    assert server.handles.names() == []
    assert "failure" in ask(server, {"op": "cache_len", "cache": "c"})
    assert ask(server, {"op": "cache_new", "handle": "c", "geometry": geometry}) == {"ok": None}
    assert int(ask(server, {"op": "cache_alloc_id", "cache": "c"})["ok"]) > first
    assert ask(server, {"op": "drop", "handle": "c"}) == {"ok": None}
    assert "failure" in ask(server, {"op": "cache_len", "cache": "c"})


@pytest.mark.covers("PROTO-21", "PROTO-22")
def test_refusals_are_errors_and_adapter_faults_are_failures() -> None:
    server = greeted()
    geometry = {"n_layers": 1, "n_kv_heads": 1, "head_dim": 2, "max_seq_len": 4, "dtype": "f32"}
    ask(server, {"op": "cache_new", "handle": "c", "geometry": geometry})
    error = ask(server, {"op": "cache_append", "cache": "c", "tokens": 5})["error"]
    assert error["kind"] == "capacity_exceeded"
    assert error["values"] == {"capacity": 4, "requested": 5}
    assert error["field"] == "max_seq_len" and error["layer"] is None
    spec = {"family": "llama", "params": {}, "hooks": {}}
    ask(server, {"op": "model_new", "handle": "m", "spec": spec})
    raised = ask(server, {"op": "model_set_hook", "model": "m", "hook": "nope", "present": True})
    assert raised["failure"].startswith("model_set_hook raised ")


class _Quirky:
    """Declares hash and plan; answers with values of the wrong type or raises."""

    def describe(self) -> AdapterInfo:
        return AdapterInfo("quirky", "0", "python", frozenset({"hash", "identity", "plan"}))

    def hash(self, program: Sequence[MixOp]) -> list[int]:
        if any(op.kind == "str" and op.value == "boom" for op in program):
            raise RuntimeError("boom")
        return run_program(program)

    def cache_new(self, geometry: object) -> object:
        return object()

    def cache_len(self, cache: object) -> object:
        return "three"

    def session_valid(self, *args: object) -> object:
        return 1

    def drop(self, handle: object) -> None:
        pass


@pytest.mark.covers("PROTO-22", "PROTO-23")
def test_undeclared_classes_are_unsupported_and_wrong_types_are_failures() -> None:
    server = greeted(_Quirky())
    payload = [{"n_kv_heads": 1, "head_dim": 1, "seq_len": 1, "k_len": 1, "v_len": 1}]
    answer = ask(server, {"op": "measure", "model": "m", "payload": payload})
    assert "signature" in answer["unsupported"] and "quirky" in answer["unsupported"]
    geometry = {"n_layers": 1, "n_kv_heads": 1, "head_dim": 2, "max_seq_len": 4, "dtype": "f32"}
    ask(server, {"op": "cache_new", "handle": "c", "geometry": geometry})
    assert (
        "expected a non-negative integer"
        in ask(server, {"op": "cache_len", "cache": "c"})["failure"]
    )
    boom = [{"op": "str", "value": "boom"}, {"op": "finish"}]
    assert (
        ask(server, {"op": "hash", "program": boom})["failure"] == "hash raised RuntimeError: boom"
    )
    assert "program 1" in ask(server, {"op": "hash_batch", "programs": [[], boom]})["failure"]


@pytest.mark.covers("PROTO-20")
def test_hash_batch_is_hash_per_program_and_needs_the_hash_class() -> None:
    server = greeted()
    programs = [
        [{"op": "finish"}],
        [{"op": "str", "value": "ab"}, {"op": "finish"}, {"op": "finish"}],
        [],
    ]
    batch = ask(server, {"op": "hash_batch", "programs": programs})["ok"]
    assert batch == [ask(server, {"op": "hash", "program": p})["ok"] for p in programs]
    assert batch[2] == []

    class NoHash(_Quirky):
        def describe(self) -> AdapterInfo:
            return AdapterInfo("no-hash", "0", "python", frozenset({"identity"}))

    assert "unsupported" in ask(greeted(NoHash()), {"op": "hash_batch", "programs": programs})


@pytest.mark.covers("PROTO-24")
def test_shutdown_finishes_the_server() -> None:
    server = greeted()
    assert ask(server, {"op": "shutdown"}) == {"ok": None}
    assert server.finished


def test_faults_of_python_adapters_keep_their_message() -> None:
    fault = Fault(
        "incompatible", "dtype", None, {"expected": "f32", "found": "f16"}, "dtype f16 f32"
    )
    body = codec.result_to_wire(ops.Verify(None, (), Signature(1, "m", 1, 1, 1, "f32", 0)), fault)
    assert body == {"error": codec.fault_to_wire(fault)}
    assert not validate("response", {"seq": 0, **body})


@pytest.mark.covers("PROTO-35")
@pytest.mark.parametrize(
    "extra, fragment",
    [
        ({"options": {"\x1b[2J" + "a" * 100_000: "v"}}, "no such option"),
        ({"options": {"append_past_capacity": ["grow"]}}, "options"),
        ({"options": {"append_past_capacity": "sometimes"}}, "not one of"),
        ({"capabilities": {"dtypes": "f32"}}, "capabilities.dtypes"),
        ({"capabilities": {"dtypes": ["f16"]}}, "must hold f32"),
        ({"capabilities": {"uint_bits": True}}, "uint_bits"),
        ({"capabilities": {"key_schema": {"llama": [1]}}}, "key_schema"),
        ({"capabilities": {"key_schema": {"llama": {"n": "u64"}}}}, "not fixed"),
        ({"capabilities": {"teleport": True}}, "unknown capability"),
        ({"capabilities": {"prefix_inputs": "salt"}}, "capabilities.prefix_inputs"),
        ({"capabilities": {"prefix_inputs": ["salt", "salt"]}}, "listed more than once"),
        ({"capabilities": {"prefix_inputs": ["lora"]}}, "'lora' is not one of adapter"),
        ({"capabilities": {"prefix_inputs": ["\x1b[2J" + "d" * 100_000]}}, "prefix_inputs"),
        ({"capabilities": {"prefix_capacity": "yes"}}, "capabilities.prefix_capacity"),
        ({"capabilities": {"prefix_capacity": 1}}, "capabilities.prefix_capacity"),
        ({"option": {"clear_mints": "eager"}}, "unknown member 'option'"),
        ({"\x1b[2J" + "b" * 100_000: 1}, "unknown member"),
        ({"format": {"writes": None, "reads": [], "write": 1}}, "format: unknown member 'write'"),
        ({"classes": ["hash", "hash"]}, "'hash' listed more than once"),
        ({"classes": ["\x1b[2J" + "c" * 100_000] * 2}, "listed more than once"),
        ({"format": {"writes": None, "reads": [1, 1]}}, "listed more than once"),
    ],
)
def test_a_bad_declaration_in_hello_is_one_clipped_line(extra: dict, fragment: str) -> None:
    """Declarations are validated field by field; adapter text is clipped and made inert."""
    from kvconform.protocol import codec as wire_ops
    from kvconform.protocol.codec import info_from_wire

    base = {
        "name": "x",
        "version": "1",
        "language": "c",
        "protocol": 1,
        "classes": ["hash"],
        "format": {"writes": None, "reads": []},
    }
    with pytest.raises(wire_ops.WireError) as caught:
        info_from_wire({**base, **extra})
    message = str(caught.value)
    assert fragment in message and "\n" not in message and "\x1b" not in message
    assert len(message) < 400


@pytest.mark.covers("PROTO-35")
def test_prefix_inputs_travel_in_hello_and_back() -> None:
    """A declared ``prefix_inputs`` is read from ``hello`` and written back in the table's
    order; left out, an implementation takes all five (PREFIX-23)."""
    from kvconform.protocol.codec import info_from_wire

    base = {
        "name": "x",
        "version": "1",
        "language": "c",
        "protocol": 1,
        "classes": ["prefix_cache"],
        "format": {"writes": None, "reads": []},
    }
    every = info_from_wire(base)
    assert every.prefix_inputs is None and every.takes("media")
    text = info_from_wire({**base, "capabilities": {"prefix_inputs": ["user_key", "salt"]}})
    assert text.takes("salt") and not text.takes("adapter")
    assert text.declared_capabilities() == {"prefix_inputs": ["salt", "user_key"]}
    assert not validate(
        "response", {"seq": 0, "ok": {**base, "capabilities": {"prefix_inputs": []}}}
    )


@pytest.mark.covers("PROTO-35", "PREFIX-24")
def test_prefix_capacity_travels_in_hello_and_back() -> None:
    """``prefix_capacity`` is false unless declared, and written back only when true."""
    from kvconform.protocol.codec import WireError, info_from_wire

    base = {
        "name": "x",
        "version": "1",
        "language": "c",
        "protocol": 1,
        "classes": ["prefix_cache"],
        "format": {"writes": None, "reads": []},
    }
    assert not info_from_wire(base).prefix_capacity
    assert "prefix_capacity" not in info_from_wire(base).declared_capabilities()
    bounded = info_from_wire({**base, "capabilities": {"prefix_capacity": True}})
    assert bounded.prefix_capacity
    assert bounded.declared_capabilities() == {"prefix_capacity": True}
    for value in (True, False):
        line = {"seq": 0, "ok": {**base, "capabilities": {"prefix_capacity": value}}}
        assert not validate("response", line)
    with pytest.raises(WireError, match=r"capabilities\.prefix_capacity: expected true or false"):
        info_from_wire({**base, "capabilities": {"prefix_capacity": "true"}})


@pytest.mark.parametrize("layout", [None, Layout(block_size=4, sliding_window=None)])
def test_a_signature_on_the_wire_has_every_member_of_the_value(layout: Layout | None) -> None:
    """signature_to_wire is written out by hand: it must not miss a member (protocol.md, Values)."""
    import dataclasses

    sig = Signature(2, "m", 1, 2, 3, "f32", 4, layout)
    wire = codec.signature_to_wire(sig)
    assert wire is not None
    members = {f.name for f in dataclasses.fields(Signature)} - (
        {"layout"} if layout is None else set()
    )
    assert set(wire) == members
    assert codec.signature_from_wire(wire, "sig") == sig


@pytest.mark.covers("PROTO-33")
def test_the_protocol_2_schemas_are_protocol_1s_with_counts_as_strings() -> None:
    """conformance/schema/protocol2/ is what python -m kvconform.protocol.schemas
    derives from protocol 1's folder: regenerate it after editing protocol 1's."""
    one, two = schemas.documents(1), schemas.documents(2)
    assert set(one) == set(two)
    for name, document in one.items():
        assert two[name] == schemas.v2_document(name, document), name
    count = schemas.validator("common#/$defs/count", 2)
    assert count.is_valid("18446744073709551615") and not count.is_valid(5)
    assert not count.is_valid("007") and not count.is_valid("-1")
    hello = schemas.validator("ops/hello", 2)
    assert hello.is_valid({"seq": 0, "op": "hello", "protocol": 2, "suite": "3.0.0"})
