"""Malformed scenario files fail loudly, naming the file, the line and the element.

And the pytest plugin shows a failing case the way a user needs to read it.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kvconform.harness.scenario import load_scenario_file
from kvconform.harness.suite import check_references
from kvconform.harness.yamlsource import SourceError

REPO = Path(__file__).resolve().parent.parent

GOOD_HEAD = """\
kvconform: scenarios/2
area: demo
scenarios:
  - id: demo.case.one
    title: A case
    class: identity
    basis: seed
    requires: [ALLOC-5]
    why: catches something specific enough
    steps:
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "demo.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    "steps, line, fragment",
    [
        (
            "      - new_cach: {as: c, n_layers: 1, n_kv_heads: 1, head_dim: 1, max_seq_len: 2}\n",
            11,
            "new_cach",
        ),
        (
            "      - cache_new: {as: c, n_layers: 0, n_kv_heads: 1, head_dim: 1, max_seq_len: 2}\n",
            11,
            "n_layers",
        ),
        (
            "      - cache_append: {cache: nowhere, tokens: 1}\n",
            11,
            "no live cache named 'nowhere'",
        ),
        (
            "      - model_new: {as: m, family: llama}\n"
            "      - cache_append: {cache: m, tokens: 1}\n",
            12,
            "'m' is a model, not a cache",
        ),
        (
            "      - model_new: {as: m, family: llama}\n"
            "      - model_new: {as: m, family: llama}\n",
            12,
            "still live",
        ),
        (
            "      - model_new: {as: m, family: llama, params: {eps: 1e-5}}\n",
            11,
            "reads as a number",
        ),
        ("      - same: [a, b]\n", 11, "no value named 'a'"),
        ("      - session_valid: {session: s, model: m, cache: c, expect: maybe}\n", 11, "maybe"),
        ("      - verify: {recorded: null, payload: p, expected: e}\n", 11, "no payload named 'p'"),
        (
            "      - prefix_new: {as: e, block_size: 4, model: m, kv_dtype: f, layout: l, "
            "shard: s, capacity: 18446744073709551616}\n",
            11,
            "prefix_new.capacity: 18446744073709551616 is greater than the maximum",
        ),
        (
            "      - prefix_new: {as: e, block_size: 4, model: m, kv_dtype: f, layout: l, "
            "shard: s, capacity: 0}\n",
            11,
            "prefix_new.capacity: 0 is less than the minimum of 1",
        ),
        (
            "      - prefix_lookup: {prefix: e, request: r, expect_one_of: [4]}\n",
            11,
            "prefix_lookup.expect_one_of: [4] is too short",
        ),
        (
            "      - prefix_lookup: {prefix: e, request: r, expect_one_of: [4, 4]}\n",
            11,
            "prefix_lookup.expect_one_of: [4, 4] has non-unique elements",
        ),
        (
            "      - prefix_lookup: {prefix: e, request: r, expect_one_of: [4, true]}\n",
            11,
            "prefix_lookup.expect_one_of[1]: True is not of type 'integer'",
        ),
    ],
)
def test_a_bad_step_names_file_line_and_element(
    tmp_path: Path, steps: str, line: int, fragment: str
) -> None:
    path = _write(tmp_path, GOOD_HEAD + steps)
    with pytest.raises(SourceError) as caught:
        load_scenario_file(path)
    message = str(caught.value)
    assert f"{path}:{line}" in message, message
    assert "steps[" in message, message
    assert fragment in message, message


def test_yaml_syntax_errors_name_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD_HEAD + "      - cache_append: {cache: c, tokens: 1\n")
    with pytest.raises(SourceError) as caught:
        load_scenario_file(path)
    assert "not valid YAML" in str(caught.value) and f"{path}:" in str(caught.value)


def test_a_file_without_the_format_marker_is_refused(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        GOOD_HEAD.replace("kvconform: scenarios/2", "kvconform: scenarios/9") + "      - drop: x\n",
    )
    with pytest.raises(SourceError, match="scenarios/2"):
        load_scenario_file(path)


def test_a_scenarios_1_file_reads_with_its_verbs_renamed(tmp_path: Path) -> None:
    # Format 1 named eleven operations otherwise (new_cache for cache_new, check
    # for session_valid, ...); such a file still loads, and an error in it still
    # names its own line.
    steps = (
        "      - new_cache: {as: c, n_layers: 1, n_kv_heads: 1, head_dim: 1, max_seq_len: 8}\n"
        "      - repeat:\n"
        "          times: 2\n"
        "          steps:\n"
        "            - append: {cache: c, tokens: 1}\n"
        "      - cache_len: {cache: c, expect: 2}\n"
    )
    legacy = GOOD_HEAD.replace("scenarios/2", "scenarios/1")
    (case,) = load_scenario_file(_write(tmp_path, legacy + steps))
    assert [op.name for op in case.program][:3] == ["cache_new", "cache_alloc_id", "cache_append"]
    bad = legacy + steps.replace("tokens: 1", "tokens: -1")
    with pytest.raises(SourceError) as caught:
        load_scenario_file(_write(tmp_path, bad))
    assert ":15" in str(caught.value) and "cache_append" in str(caught.value)


def test_unknown_requirements_and_duplicate_ids_are_refused(tmp_path: Path) -> None:
    steps = "      - cache_new: {as: c, n_layers: 1, n_kv_heads: 1, head_dim: 1, max_seq_len: 2}\n"
    cases = load_scenario_file(_write(tmp_path, GOOD_HEAD.replace("ALLOC-5", "ALLOC-99") + steps))
    with pytest.raises(SourceError, match="unknown requirement ALLOC-99"):
        check_references(cases)
    twice = GOOD_HEAD + steps + GOOD_HEAD.split("scenarios:\n", 1)[1] + steps
    cases = load_scenario_file(_write(tmp_path, twice))
    with pytest.raises(SourceError, match="id already used"):
        check_references(cases)


def test_yaml_is_read_with_the_safe_loader_only(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        GOOD_HEAD.replace("title: A case", "title: !!python/object/apply:os.system [echo]")
        + "      - drop: x\n",
    )
    with pytest.raises(SourceError, match="not valid YAML"):
        load_scenario_file(path)


def _importing_tests() -> dict[str, str]:
    """The environment, with the checkout importable (the adapters named are in tests/)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def test_the_plugin_reports_a_failing_case_with_everything_a_reader_needs(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--kv-suite",
            "--kv-adapter",
            "tests.mutants.corpus:TruncateRemints",
            "-k",
            "alloc.rewind.keeps-alloc-id",
            "-c",
            "/dev/null",
        ],
        # from a folder of its own, as a user runs it: what it collects is the installed
        # suite (run from the checkout, it would also import every test module here)
        cwd=tmp_path,
        env=_importing_tests(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout
    assert result.returncode == 1, out[-2000:] + result.stderr[-2000:]
    assert "alloc.rewind.keeps-alloc-id" in out
    assert "expected:" in out and "actual:" in out
    assert "requires: ALLOC-5" in out and "why:" in out
    assert "1 failed" in out


def test_the_plugin_skips_undeclared_classes_with_the_reason(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rs",
            "-p",
            "no:cacheprovider",
            "--kv-suite",
            "--kv-adapter",
            "tests.fixtures.hash_only_adapter:HashOnly",
            "-k",
            "alloc.rewind",
            "-c",
            "/dev/null",
        ],
        # from a folder of its own, as a user runs it: what it collects is the installed
        # suite (run from the checkout, it would also import every test module here)
        cwd=tmp_path,
        env=_importing_tests(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    assert "does not declare the class identity" in result.stdout
    assert " passed" not in result.stdout.splitlines()[-1]


@pytest.mark.parametrize(
    "text, fragment",
    [
        (  # 438 bytes that once took 12.6 s and 2.2 GB to load
            "a: &a [x, x, x, x, x, x, x, x, x]\n"
            + "".join(
                f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n"
                for p, n in zip("abcdefgh", "bcdefghi", strict=True)
            ),
            "holds more than",
        ),
        ("x: &x {y: *x}\n", "refers to the node that contains it"),
        ("kvconform: scenarios/2\narea: demo\narea: other\n", "'area' is given twice"),
        ("a: " + "[" * 100 + "]" * 100 + "\n", ":1: nested deeper than 64 levels"),
        # past libyaml's own limit: refused as deep, at once (not after the pure
        # scanner's second of work, as "nested too deeply")
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", ":1: nested deeper than 64 levels"),
        # depth is checked before the keys: the first node past it, in the file's order
        ("a: 1\na: 2\nb:\n  " + "[" * 100 + "]" * 100 + "\n", ":4: nested deeper than 64"),
    ],
)
def test_a_file_that_only_a_loader_would_accept_is_refused_with_its_line(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(SourceError) as caught:
        load_scenario_file(path)
    assert fragment in str(caught.value) and str(path) in str(caught.value)


def test_merge_keys_of_fixtures_are_not_duplicates(tmp_path: Path) -> None:
    steps = "      - cache_new: {as: c, <<: *small, max_seq_len: 4}\n"
    head = GOOD_HEAD.replace(
        "area: demo\n",
        "area: demo\nfixtures:\n  small: &small {n_layers: 1, n_kv_heads: 1, head_dim: 1}\n",
    )
    (case,) = load_scenario_file(_write(tmp_path, head + steps))
    assert case.program[0].geometry.max_seq_len == 4  # type: ignore[attr-defined]


def test_every_signature_the_suite_sends_is_well_formed_for_its_version() -> None:
    """A version-2 signature carries its layout and a version-1 one none (PROF-5, PROTO-31).

    A malformed one would judge a typed reader's parser rather than the rule the case
    names: two v1 scenarios once sent a rolling reader version-2 expectations without a
    layout (issue 29, finding 4). Generated programs may draw such stamps on purpose (a v1
    reader refuses them by their version alone), so this holds the hand-written suite.
    """
    from kvconform.harness import suite
    from kvconform.protocol import operations as ops

    bad = []
    for case in suite.all_cases():
        for op in case.program:
            if not isinstance(op, ops.Verify):
                continue
            for role, sig in (("recorded", op.recorded), ("expected", op.expected)):
                if sig is None:
                    continue
                if (sig.format_version == 2) != (sig.layout is not None) and sig.format_version in (
                    1,
                    2,
                ):
                    bad.append(f"{case.id}: {role} v{sig.format_version}, layout {sig.layout}")
    assert not bad, bad


# --- the validator reads the schema with its local references inlined ---------------


def _best(validator: Any, document: object) -> tuple[list[object], str, str] | None:
    """The error :func:`yamlsource.validate` would report, or None for a valid document."""
    import jsonschema

    errors = list(validator.iter_errors(document))
    if not errors:
        return None
    best = jsonschema.exceptions.best_match(errors)
    while best.context:
        best = jsonschema.exceptions.best_match(best.context)
    return list(best.absolute_path), best.message, str(best.validator)


def _altered(document: object, rnd: random.Random) -> object:
    """``document`` with one element replaced by a wrong value, removed or renamed."""
    altered = copy.deepcopy(document)
    places: list[tuple[Any, object]] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                places.append((node, key))
                walk(value)
        elif isinstance(node, list):
            for index, value in enumerate(node):
                places.append((node, index))
                walk(value)

    walk(altered)
    parent, key = rnd.choice(places)
    move = rnd.random()
    if move < 0.2 and isinstance(parent, dict):
        del parent[key]
    elif move < 0.35 and isinstance(parent, dict):
        parent[f"{key}_renamed"] = parent.pop(key)
    else:
        parent[key] = rnd.choice([None, -1, 7, 1.5, True, "", "x", "ABC", [], [1], {}, {"k": 1}])
    return altered


def test_inlined_references_give_the_same_verdicts_and_errors() -> None:
    """The validator reads the schema with its local references inlined (for speed); on
    altered copies of shipped scenarios (each alone in its file), the verdict and the
    error reported are those of the schema as written. Fails an inlining that changes
    what a definition means, drops one, or loops on a step's steps. (Every other test
    that loads the suite shows that the inlined schema accepts each shipped file.)"""
    import jsonschema

    from kvconform.harness import yamlsource

    written = json.loads((yamlsource.SCHEMA_DIR / "scenarios.schema.json").read_text("utf-8"))
    inlined = yamlsource.inline_local_refs(written)
    assert '"$ref": "#/$defs/step"' in json.dumps(inlined["$defs"]["step"])  # stays a reference
    outside = json.dumps({k: v for k, v in inlined.items() if k != "$defs"})
    assert '{"$ref": "#/$defs/name"}' not in outside  # inlined wherever it stands alone
    assert '{"$ref": "#/$defs/step"}' in outside  # a step's steps: the one level unrolled
    as_written = jsonschema.Draft202012Validator(written)
    fast = jsonschema.Draft202012Validator(inlined)
    documents = [
        yamlsource.load_yaml(path).data
        for path in sorted((REPO / "conformance" / "scenarios").glob("**/*.yaml"))
    ]
    rnd = random.Random(20261204)
    invalid = 0
    for _ in range(150):
        document = rnd.choice(documents)
        one = {**document, "scenarios": [rnd.choice(document["scenarios"])]}
        altered = _altered(one, rnd)
        verdict = _best(as_written, altered)
        assert _best(fast, altered) == verdict, altered
        invalid += verdict is not None
    assert invalid > 100  # most alterations are errors, so the errors chosen are compared
