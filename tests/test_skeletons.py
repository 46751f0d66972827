"""``kvconform new-adapter``: the skeletons it writes start, declare and fail cleanly.

For each language a skeleton claiming every class is generated, built (Rust, offline)
and run against the whole suite through ``python -m kvconform.cli run --adapter-cmd``:
the handshake completes, and every applicable case fails with "not implemented"
(exit status 1), never with an adapter-start error or a crash. A skeleton claiming
only ``hash`` declares exactly that in its ``hello`` answer, and answers the rest of
the protocol as spec/protocol.md says.

Needs ``cargo`` for Rust and ``node`` for JavaScript; without them those languages are
skipped, loudly.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kvconform
from kvconform import cli, skeletons
from kvconform.harness import checks, suite
from kvconform.protocol import operations as ops
from kvconform.protocol.client import StdioDriver
from kvconform.protocol.operations import TABLE
from kvconform.values import CLASSES, Ok, Refused
from tests import toolchain
from tests.test_cli import run
from tests.toolchain import tool

ALL = ",".join(CLASSES)
NO_CARGO = "cargo not found: the Rust skeleton was NOT tested (install a Rust toolchain)"
NO_NODE = "node not found: the JavaScript skeleton was NOT tested (install Node)"


def _generate(lang: str, directory: Path, classes: str | None = None) -> str:
    """Generate with the command; its standard output."""
    argv = ["new-adapter", "--lang", lang, str(directory)]
    if classes is not None:
        argv[3:3] = ["--classes", classes]
    status, out, err = run(*argv)
    assert status == cli.EXIT_OK, err
    assert not err
    return out


#: The file of each language's skeleton that holds its declaration.
SOURCE = {"python": "adapter.py", "javascript": "adapter.js", "rust": "src/main.rs"}
#: The protocol each skeleton speaks: JavaScript's is 2, so JSON.parse will do (PROTO-33).
PROTOCOL = {"python": 1, "javascript": 2, "rust": 1}
#: The capabilities each skeleton declares as generated: JavaScript's counts are Numbers.
CAPABILITIES = {"python": {}, "javascript": {"uint_bits": 53}, "rust": {}}


def _adapter(
    lang: str,
    directory: Path,
    classes: str | None = None,
    edits: dict[str, str] | None = None,
) -> list[str]:
    """A skeleton generated (and built) in ``directory``: the argv that starts it.
    ``edits``: text of the skeleton's source replaced before it is built, as its
    author would."""
    if lang == "rust":
        cargo = tool("cargo", NO_CARGO)
    if lang == "javascript":
        node = tool("node", NO_NODE)
    _generate(lang, directory, classes)
    source = directory / SOURCE[lang]
    for old, new in (edits or {}).items():
        text = source.read_text(encoding="utf-8")
        assert text.count(old) == 1, (old, source)
        source.write_text(text.replace(old, new), encoding="utf-8")
    if lang == "python":
        return [sys.executable, str(directory / "adapter.py")]
    if lang == "javascript":
        return [node, str(directory / "adapter.js")]
    done = toolchain.cargo(cargo, directory, "build")
    assert "warning" not in done.stderr, done.stderr
    binary = directory / "target" / "debug" / skeletons.adapter_name(directory)
    assert binary.is_file(), f"cargo build succeeded but {binary} is missing"
    return [str(binary)]


def _refusal_probe(case_id: str) -> bool:
    """Whether every check of a case is a must-not-succeed probe (CONF-9).

    Any refusal passes such a probe, an adapter ``failure`` included, so a skeleton
    whose every answer is "not implemented" passes it, rightly.
    """
    case = next(c for c in suite.all_cases() if c.id == case_id)
    return bool(case.checks) and all(
        isinstance(getattr(check, "expect", None), checks.Refuses) for check in case.checks
    )


@pytest.mark.parametrize("lang", skeletons.LANGUAGES)
def test_a_skeleton_claiming_every_class_fails_every_case_as_not_implemented(
    lang: str, tmp_path: Path
) -> None:
    argv = _adapter(lang, tmp_path / f"adapter-{lang}", ALL)
    report = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kvconform.cli",
            "run",
            "--adapter-cmd",
            shlex.join(argv),
            "--json",
            str(report),
            "--quiet",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == cli.EXIT_FAILED, done.stdout[-3000:] + done.stderr[-3000:]
    data = json.loads(report.read_text(encoding="utf-8"))
    assert "incomplete" not in data
    assert data["adapter"]["language"] == lang
    assert sorted(data["adapter"]["classes"]) == sorted(CLASSES)
    assert data["adapter"]["format"] == {"writes": 1, "reads": [1]}
    results = data["results"]
    failed = [r for r in results if r["verdict"] == "failed"]
    assert failed and data["summary"]["not_run"] == 0
    not_said = [r["id"] for r in failed if "not implemented" not in r["failure"]["text"]]
    assert not not_said, f"failed otherwise than 'not implemented': {not_said[:10]}"
    # Every class is asked, prefix_cache (3.0.0) included: a class whose operations the
    # skeleton left out would show here as a class with no case failed.
    unasked = sorted(set(CLASSES) - {r["class"] for r in failed})
    assert not unasked, f"no case of {unasked} failed as not implemented"
    passed = [r["id"] for r in results if r["verdict"] == "passed"]
    assert all(_refusal_probe(case_id) for case_id in passed), passed
    assert {r["verdict"] for r in results} <= {"failed", "not_applicable", "passed"}
    # No answer was judged, and the summary does not call the failures safety or policy.
    summary = done.stdout.strip().splitlines()[-1]
    assert "every one where the adapter broke instead of answering" in summary, summary
    assert "safety" not in summary and "policy" not in summary, summary
    assert "unsafe" not in summary and "lost reuse" not in summary, summary


class _Session:
    """A skeleton process spoken to one line at a time."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.seq = 0

    def ask(self, op: str, **fields: object) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        request = {"seq": self.seq, "op": op, **fields}
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        assert isinstance(answer, dict)
        assert answer.pop("seq") == self.seq, answer
        self.seq += 1
        return answer

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=10)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()


@pytest.mark.parametrize("lang", skeletons.LANGUAGES)
def test_a_hash_only_skeleton_declares_exactly_hash(lang: str, tmp_path: Path) -> None:
    session = _Session(_adapter(lang, tmp_path / f"hash-{lang}"))  # the default: hash
    try:
        hello = session.ask("hello", protocol=PROTOCOL[lang], suite="2.2.0")
        assert set(hello) == {"ok"}, hello
        info = hello["ok"]
        assert isinstance(info, dict)
        assert info["classes"] == ["hash"]
        assert info["format"] == {"writes": None, "reads": []}
        assert info["options"] == {} and info["capabilities"] == CAPABILITIES[lang]
        assert info["protocol"] == PROTOCOL[lang] and info["language"] == lang
        assert session.ask("hash", program=[{"op": "finish"}]) == {
            "failure": "not implemented: hash"
        }
        assert session.ask("hash_batch", programs=[]) == {"failure": "not implemented: hash_batch"}
        for op in ("model_new", "measure", "verify", "session_rebind", "prefix_lookup"):
            assert set(session.ask(op)) == {"unsupported"}, op
        assert set(session.ask("no_such_op")) == {"failure"}
        assert session.ask("reset") == {"ok": None}
        assert session.ask("shutdown") == {"ok": None}
    finally:
        status = session.close()
    assert status == 0


@pytest.mark.parametrize("lang", skeletons.LANGUAGES)
def test_a_skeleton_without_hash_answers_hash_batch_unsupported_and_refuses_other_protocols(
    lang: str, tmp_path: Path
) -> None:
    session = _Session(_adapter(lang, tmp_path / f"verify-{lang}", "verify"))
    try:
        other = 3 - PROTOCOL[lang]  # the version it does not speak
        assert set(session.ask("hello", protocol=other, suite="9.9.9")) == {"failure"}
        info = session.ask("hello", protocol=PROTOCOL[lang], suite="2.2.0")["ok"]
        assert isinstance(info, dict)
        assert info["classes"] == ["signature", "verify"]
        assert info["format"] == {"writes": 1, "reads": [1]}
        assert set(session.ask("hash_batch", programs=[])) == {"unsupported"}
        assert session.ask("stamp") == {"failure": "not implemented: stamp"}
    finally:
        assert session.proc.stdin is not None
        session.proc.stdin.close()  # end of input: the adapter exits (PROTO-24)
        status = session.close()
    assert status == 0


def test_required_classes_are_added_and_said(tmp_path: Path) -> None:
    out = _generate("python", tmp_path / "a", "plan_validity,verify")
    assert "added the class identity: plan requires it" in out
    assert "added the class plan: plan_validity requires it" in out
    assert "added the class signature: verify requires it" in out
    text = (tmp_path / "a" / "adapter.py").read_text(encoding="utf-8")
    assert 'CLASSES = ["identity", "plan", "signature", "verify", "plan_validity"]' in text
    readme = " ".join((tmp_path / "a" / "README.md").read_text(encoding="utf-8").split())
    assert 'kvconform run --adapter-cmd "python3 adapter.py"' in readme
    assert "spec/protocol.md" in readme and "identity added: plan requires it" in readme


@pytest.mark.parametrize("lang", skeletons.LANGUAGES)
def test_every_generated_file_has_a_header_and_every_operation_is_answered(
    lang: str, tmp_path: Path
) -> None:
    _generate(lang, tmp_path / "x", ALL)
    sources = ""
    for path in sorted(p for p in (tmp_path / "x").rglob("*") if p.is_file()):
        head = path.read_text(encoding="utf-8")[:2000]
        assert "spec/protocol.md" in head and "replace" in head.lower(), path
        sources += path.read_text(encoding="utf-8")
    # the source and the README say the protocol the adapter speaks, and the suite's version
    said = f"suite {kvconform.SUITE_VERSION}, protocol {PROTOCOL[lang]})"
    for name in (SOURCE[lang], "README.md"):
        text = (tmp_path / "x" / name).read_text(encoding="utf-8")
        assert said in " ".join(text.replace("//", " ").replace("#", " ").split()), name
    readme = (tmp_path / "x" / "README.md").read_text(encoding="utf-8")
    assert f"`hello` handshake (protocol {PROTOCOL[lang]})" in " ".join(readme.split())
    for spec in TABLE:
        answered = f"notImplemented('{spec.name}')", f'not_implemented("{spec.name}")'
        assert any(call in sources for call in answered), spec.name


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["--lang", "go"], "invalid choice: 'go'"),
        (["--lang", "python", "--classes", "hash,planning"], "unknown class 'planning'"),
        (["--lang", "python", "--classes", ","], "no class given"),
        (["--classes", "hash"], "required: --lang"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(argv: list[str], fragment: str, tmp_path: Path) -> None:
    status, out, err = run("new-adapter", *argv, str(tmp_path / "new"))
    assert status == cli.EXIT_USAGE
    assert fragment in err and err.count("\n") == 1, err
    assert not out and not (tmp_path / "new").exists()


def test_a_non_empty_directory_is_refused_and_left_alone(tmp_path: Path) -> None:
    (tmp_path / "mine.txt").write_text("keep me", encoding="utf-8")
    status, out, err = run("new-adapter", "--lang", "python", str(tmp_path))
    assert not out
    assert status == cli.EXIT_USAGE
    assert "exists and is not empty" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]
    status, _, err = run("new-adapter", "--lang", "rust", str(tmp_path / "mine.txt"))
    assert status == cli.EXIT_USAGE and "not a directory" in err and err.count("\n") == 1


def test_an_empty_directory_is_used(tmp_path: Path) -> None:
    _generate("javascript", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "adapter.js"]


def test_the_commands_languages_are_the_generators() -> None:
    parser = cli._parser()
    with pytest.raises(cli.UsageError, match="choose from 'python', 'rust', 'javascript'"):
        parser.parse_args(["new-adapter", "--lang", "cobol", "x"])
    assert skeletons.LANGUAGES == ("python", "rust", "javascript")


def test_the_rust_readers_refuse_a_name_with_no_utf8_form(tmp_path: Path) -> None:
    """Parameter and hook names are object keys: the skeleton's ``members`` refuses a
    key holding an unpaired surrogate, as ``string_value`` refuses such a value
    (HASH-13), instead of reading it as another name (a stranger's trial reused
    ``members`` for ``params`` and keyed ``"n_heads\\udc00"`` as ``"n_heads\\ufffd"``)."""
    cargo = tool("cargo", NO_CARGO)
    _generate("rust", tmp_path)
    main = tmp_path / "src" / "main.rs"
    main.write_text(
        main.read_text(encoding="utf-8")
        + textwrap.dedent(
            r"""
            #[cfg(test)]
            mod names {
                use super::*;

                #[test]
                fn keys_and_values_with_an_unpaired_surrogate_are_errors() {
                    assert!(members(r#"{"n_heads\udc00": 4}"#).is_err());
                    assert!(members(r#"{"\udc00\ud800logit": true}"#).is_err());
                    assert!(string_value(r#""llama\ud800""#).is_err());
                    let pair = members(r#"{"n_\ud83d\ude00": 4}"#).unwrap();
                    assert_eq!(pair[0].0, "n_\u{1f600}");
                    assert_eq!(members(r#"{"n_heads": 4}"#).unwrap()[0].1, "4");
                }
            }
            """
        ),
        encoding="utf-8",
    )
    done = toolchain.cargo(cargo, tmp_path, "test", "names")
    assert "1 passed" in done.stdout, done.stdout


#: Each language's spelling of a declaration: an option and a capability.
DECLARED = {
    "python": {
        "OPTIONS = {}": 'OPTIONS = {"truncate_past_length": "refuse", "clear_mints": "lazy"}',
        "CAPABILITIES = {}": 'CAPABILITIES = {"uint_bits": 32}',
    },
    "javascript": {
        "const OPTIONS = {};": (
            "const OPTIONS = { truncate_past_length: 'refuse', clear_mints: 'lazy' };"
        ),
        "const CAPABILITIES = { uint_bits: 53 };": "const CAPABILITIES = { uint_bits: 32 };",
    },
    "rust": {
        "const OPTIONS: &[(&str, &str)] = &[];": (
            "const OPTIONS: &[(&str, &str)] = "
            '&[("truncate_past_length", "refuse"), ("clear_mints", "lazy")];'
        ),
        'const CAPABILITIES: &str = "{}";': 'const CAPABILITIES: &str = r#"{"uint_bits":32}"#;',
    },
}


@pytest.mark.parametrize("lang", skeletons.LANGUAGES)
def test_options_and_capabilities_are_declared_where_the_skeleton_says(
    lang: str, tmp_path: Path
) -> None:
    """A stranger's trial found no place in the skeleton to declare an option: each now
    has ``OPTIONS`` and ``CAPABILITIES``, sent in its ``hello`` answer (CONF-6, CONF-7)."""
    argv = _adapter(lang, tmp_path / lang, "signature", edits=DECLARED[lang])
    with StdioDriver(argv, timeout=30.0) as driver:
        info = driver.info
    assert info.option("truncate_past_length") == "refuse"
    assert info.option("clear_mints") == "lazy"
    assert info.declared_capabilities() == {"uint_bits": 32}


#: A JavaScript author's first two operations, written with the skeleton's helpers:
#: a stamp that takes its counts from the payload's first layer, and a verify that
#: refuses a stamp wider than a Number (VERIFY-12) and otherwise answers the stamp.
_JS_STAMP = """function opStamp(request) {
  const first = request.payload[0];
  return ok({
    format_version: 1, model: request.model, n_layers: request.payload.length,
    n_kv_heads: count(first.n_kv_heads), head_dim: count(first.head_dim), dtype: 'f32',
    tokens: count(first.seq_len),
  });
}"""
_JS_VERIFY = """function opVerify(request) {
  const stamp = request.recorded;
  for (const field of ['n_layers', 'n_kv_heads', 'head_dim', 'tokens']) {
    const found = bigCount(stamp[field]);
    if (found > BigInt(MAX_COUNT)) {
      return error('unrepresentable', `the stamp's ${field} ${found} is wider than a Number`, {
        field, values: { found },
      });
    }
  }
  return ok({ ...stamp, format_version: count(stamp.format_version),
    n_layers: count(stamp.n_layers), n_kv_heads: count(stamp.n_kv_heads),
    head_dim: count(stamp.head_dim), tokens: count(stamp.tokens) });
}"""


def test_the_javascript_skeleton_speaks_protocol_2_with_json_parse(tmp_path: Path) -> None:
    """Counts up to 2^53 - 1 go to a JavaScript adapter and back exactly, and a stamp's
    count of 2^53 + 1 is refused with that exact count: JSON.parse, protocol 2
    (PROTO-32, PROTO-33), a 53-bit declaration (CONF-13, VERIFY-12)."""
    from kvconform.values import LayerDesc, Signature

    edits = {
        "function opStamp(request) {\n  return notImplemented('stamp'); // REPLACE\n}": _JS_STAMP,
        "function opVerify(request) {\n  return notImplemented('verify'); // REPLACE\n}": (
            _JS_VERIFY
        ),
    }
    argv = _adapter("javascript", tmp_path / "js", "verify", edits=edits)
    widest = (1 << 53) - 1
    layer = LayerDesc(n_kv_heads=widest, head_dim=widest - 1, seq_len=0, k_len=0, v_len=0)
    with StdioDriver(argv, timeout=30.0) as driver:
        assert driver.protocol == 2 and driver.info.uint_bits == 53
        stamped = driver.call(ops.Stamp(model="m", payload=(layer, layer)))
        assert isinstance(stamped, Ok), stamped
        assert stamped.value == Signature(1, "m", 2, widest, widest - 1, "f32", 0)
        wide = Signature(1, "m", 2, 2, 4, "f32", (1 << 53) + 1)
        refused = driver.call(ops.Verify(recorded=wide, payload=(), expected=wide))
        assert isinstance(refused, Refused), refused
        assert (refused.fault.kind, refused.fault.field) == ("unrepresentable", "tokens")
        assert refused.fault.values == {"found": (1 << 53) + 1}  # exact, not 2^53
