"""What makes a warm ``kvconform run`` start fast changes nothing it reports (bench/README.md).

The suite cache stores identical parts once, is looked up by the digest the manifest
check has just computed, and fingerprints the code without ``rglob``; the requirement
index is read with a pattern that starts with a literal; text is made visible without
compiling a pattern when there is nothing to escape; and a warm run over stdio imports
none of the modules only other paths need. Each is held here to the plain form it
replaces. No test here measures time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import pickle
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

import kvconform
from kvconform.harness import cache, manifest, suite
from kvconform.harness.checks import Succeeds, ValueIs
from kvconform.harness.scenario import Case
from kvconform.reports import untrusted
from kvconform.values import Fault, Geometry, MixOp
from tests.test_suite_cache import canonical


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own empty cache folder, with the cache enabled."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv(cache.DISABLE_ENV, raising=False)
    return tmp_path / "xdg-cache" / "kvconform"


@pytest.fixture(scope="module")
def fresh(fresh_suite: tuple[Case, ...]) -> tuple[Case, ...]:
    return fresh_suite


def _objects(root: object) -> dict[int, object]:
    """Every distinct object reachable through tuples, dicts and dataclass fields."""
    seen: dict[int, object] = {}
    stack = [root]
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen[id(value)] = value
        if isinstance(value, tuple | list):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            stack.extend(vars(value).values())
    return seen


# The suite cache: identical parts stored once ------------------------------------


@pytest.mark.xdist_group("suite-fresh-load")
def test_shared_cases_are_the_same_cases_with_fewer_objects(fresh: tuple[Case, ...]) -> None:
    shared = cache.shared(fresh)
    assert canonical(shared) == canonical(fresh)
    assert [type(c) for c in shared] == [Case] * len(fresh)
    assert len(_objects(shared)) < len(_objects(fresh)) * 3 // 4
    back = pickle.loads(pickle.dumps(shared, protocol=5))
    assert canonical(back) == canonical(fresh)


def test_only_parts_that_cannot_be_told_apart_are_merged() -> None:
    nan_a = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]
    nan_b = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000002))[0]
    values = (
        ValueIs(1),
        ValueIs(1),
        ValueIs(True),  # equal to ValueIs(1) by ==, but another value
        ValueIs(1.0),
        ValueIs(0.0),
        ValueIs(-0.0),
        ValueIs(nan_a),
        ValueIs(nan_b),
        ValueIs((1, 2)),
        ValueIs((1, 2)),
        ValueIs([1, 2]),  # a list is never merged
        ValueIs([1, 2]),
        Geometry(1, 2, 3, 4),
        Geometry(1, 2, 3, 4),
        Fault("k", values={"a": 1}),  # holds a dict: kept as it is
        Fault("k", values={"a": 1}),
        Succeeds(),
        Succeeds(),
        MixOp("bytes", b"ab"),
        MixOp("bytes", b"ab"),
        MixOp("str", "ab"),
    )
    shared = _share(values)
    assert canonical(shared) == canonical(values)
    one, one_again, true, one_float, zero, minus_zero, na, nb = shared[:8]
    assert one is one_again
    assert true is not one and true.value is True
    assert one_float is not one and type(one_float.value) is float
    assert zero is not minus_zero and math.copysign(1, minus_zero.value) == -1
    assert na is not nb
    bits = {struct.pack("<d", v.value) for v in (na, nb)}
    assert bits == {struct.pack("<d", nan_a), struct.pack("<d", nan_b)}
    assert shared[8] is shared[9]
    assert shared[10] is values[10] and shared[11] is values[11]
    assert shared[12] is shared[13]
    assert shared[14] is values[14] and shared[15] is values[15]
    assert shared[16] is shared[17]
    assert shared[18] is shared[19] and shared[20] is not shared[18]


def _share(values: tuple[object, ...]) -> tuple[object, ...]:
    """:func:`cache.shared` on any parts (it takes cases; it works on any tree)."""
    return cache.shared(values)


@pytest.mark.xdist_group("suite-fresh-load")
def test_the_entry_written_loads_to_the_same_cases(fresh: tuple[Case, ...]) -> None:
    cache.write(cache.entry_path(), cache.suite_key(), fresh)
    loaded = cache.read(cache.entry_path(), cache.suite_key())
    assert loaded is not None
    assert canonical(loaded) == canonical(fresh)


# The key: the manifest check's digest, the code's fingerprint ---------------------


def test_the_key_from_the_manifest_digest_is_the_key_from_the_files() -> None:
    integrity = manifest.check()
    assert integrity.digest == manifest.digest_of(manifest.file_hashes())
    assert cache.suite_key(integrity.digest) == cache.suite_key()
    assert cache.suite_key("0" * 64) != cache.suite_key()
    assert cache.suite_key("") == cache.suite_key()  # no digest: the files are hashed


@pytest.mark.xdist_group("suite-fresh-load")
def test_an_entry_is_never_written_under_a_digest_the_files_do_not_have(
    fresh: tuple[Case, ...], private_cache: Path
) -> None:
    calls: list[int] = []

    def build() -> tuple[Case, ...]:
        calls.append(1)
        return fresh

    assert cache.cached_cases(build, "0" * 64) is fresh
    assert not cache.entry_path().exists()
    assert cache.cached_cases(build, "0" * 64) is fresh and len(calls) == 2
    cache.cached_cases(build, manifest.check().digest)  # the true digest: stored
    assert cache.entry_path().exists()
    got = cache.cached_cases(build)
    assert len(calls) == 3 and canonical(got) == canonical(fresh)


def test_the_code_fingerprint_is_that_of_every_module_found_by_rglob() -> None:
    package = Path(kvconform.__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        content = path.read_bytes()
        digest.update(f"{path.relative_to(package).as_posix()}\0{len(content)}\0".encode())
        digest.update(content)
    assert cache.code_fingerprint() == digest.hexdigest()


# The requirement index ------------------------------------------------------------


def _plain_requirements(folder: Path) -> list[tuple[str, str, int, str]]:
    """The index as the pattern anchored at line starts reads it (the former code)."""
    found = []
    for path in sorted(folder.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        for match in suite.REQUIREMENT_LINE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            end = text.find("\n", match.end())
            found.append((match.group(1), path.name, line, text[match.end() : end].strip()))
    return found


def test_the_requirement_index_reads_spec_as_the_anchored_pattern_does() -> None:
    got = [(r.id, r.file, r.line, r.text) for r in suite.requirements().values()]
    assert got == _plain_requirements(suite.spec_dir())


def test_the_requirement_index_finds_a_first_line_and_neighbouring_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "spec"
    spec.mkdir()
    (spec / "a.md").write_text(
        "- **AA-1** first line of the file\n- **AA-2** the next line\n"
        "text\n\n  - **AA-3** indented: not a definition\n- **AA-4**no space: not one\n"
        "- **AA-5** \n- **AA-6** last, no newline",
        encoding="utf-8",
    )
    (spec / "b.md").write_text("intro\r\n- **BB-1** after a CRLF line\r\n", encoding="utf-8")
    (spec / "c.md").write_text("", encoding="utf-8")
    monkeypatch.setattr(suite, "spec_dir", lambda: spec)
    suite.requirements.cache_clear()
    try:
        got = [(r.id, r.file, r.line, r.text) for r in suite.requirements().values()]
    finally:
        suite.requirements.cache_clear()
    assert got == _plain_requirements(spec)
    assert [g[0] for g in got] == ["AA-1", "AA-2", "AA-5", "AA-6", "BB-1"]


# Text made visible ----------------------------------------------------------------


_UNSHOWABLE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
    r"\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"  # bidi controls, separators
    r"\ufdd0-\ufdef]"  # noncharacters; those at the end of planes 1 to 16 below
)


def _plain_visible(text: str) -> str:
    def escape(match: re.Match[str]) -> str:
        code = ord(match.group())
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

    def astral(char: str) -> str:
        plane_end = ord(char) > 0xFFFF and ord(char) & 0xFFFE == 0xFFFE
        return f"\\U{ord(char):08x}" if plane_end else char

    return "".join(map(astral, _UNSHOWABLE.sub(escape, text)))


def test_visible_escapes_what_the_pattern_escapes() -> None:
    for code in [*range(0x3000), *range(0xD7F0, 0x10000), 0x10000, 0x1F600, 0x1FFFE, 0x10FFFF]:
        for text in (chr(code), f"a{chr(code)}\n\tb", f"{chr(code)}{chr(code)}"):
            assert untrusted.visible(text) == _plain_visible(text), hex(code)
    for text in ("", "plain", "tab\tand\nnewline", "cr\r", "esc\x1b[31m", "del\x7f", "é\x85"):
        assert untrusted.visible(text) == _plain_visible(text)


# What a warm run imports ----------------------------------------------------------


_PROBE = """
import io, json, sys
from kvconform import cli
from kvconform.harness import cache
hit = cache.read(cache.entry_path(), cache.suite_key()) is not None
status = cli.main(sys.argv[1:], out=io.StringIO(), err=io.StringIO())
print(json.dumps({"hit": hit, "status": status, "modules": sorted(sys.modules)}))
"""

#: Modules only a cold load, a report, an in-process adapter or --generated needs.
NOT_ON_A_WARM_RUN = (
    "yaml",
    "jsonschema",
    "referencing",
    "hypothesis",
    "numpy",
    "kvconform_reference",
    "kvconform.adapters.reference",
    "kvconform.differential",
    "kvconform.reports.html",
    "kvconform.reports.junit",
    "kvconform.reports.markdown",
    "kvconform.harness.expectations",
    "kvconform.differential.export",
    "datetime",
)


@pytest.mark.xdist_group("suite-fresh-load")
def test_a_warm_run_over_stdio_imports_only_what_it_needs(
    tmp_path: Path, fresh: tuple[Case, ...]
) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg-cache")}
    env.pop(cache.DISABLE_ENV, None)
    # The private cache holds the entry a first run would write: the run below is warm.
    cache.write(cache.entry_path(), cache.suite_key(), fresh)
    argv = [
        "run",
        "--quiet",
        "--area",
        "hash",
        "--adapter-cmd",
        f"{sys.executable} -m kvconform.serve",
    ]
    for _ in range(3):  # a run fills the cache where it missed; an edit of the code empties it
        probe = _probed(_PROBE, *argv, env=env)
        if probe["hit"]:
            break
    else:
        pytest.skip("the suite cache missed three times in a row (the code is being edited)")
    unexpected = _among(probe["modules"], NOT_ON_A_WARM_RUN)
    assert not unexpected, f"a warm run over stdio imported {unexpected}"


def _probed(script: str, *argv: str, **options: object) -> dict[str, object]:
    """The JSON line a probe script prints last, after checking that it ran to status 0."""
    done = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        **options,  # type: ignore[call-overload]
    )
    probe: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    assert probe["status"] == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return probe


def _among(modules: object, packages: tuple[str, ...]) -> list[str]:
    """The names in ``modules`` that are one of ``packages`` or inside one, sorted."""
    assert isinstance(modules, list)
    return sorted(n for n in modules if any(n == p or n.startswith(p + ".") for p in packages))


#: What a pytest session that never meets the suite must not import (the plugin is
#: loaded in every session of every project where kvconform is installed).
NOT_IN_AN_UNRELATED_SESSION = (
    "kvconform.harness.suite",
    "kvconform.harness.scenario",
    "kvconform.harness.runner",
    "kvconform.protocol",
    "kvconform.values",
    "kvconform_reference",
)

_SESSION_PROBE = """
import json, sys
import pytest
class Probe:
    def pytest_sessionfinish(self):
        self.modules = sorted(sys.modules)
probe = Probe()
status = pytest.main(["-q", "-p", "no:cacheprovider", sys.argv[1]], plugins=[probe])
print(json.dumps({"status": int(status), "modules": probe.modules}))
"""


def test_a_session_that_never_meets_the_suite_loads_only_the_plugin(tmp_path: Path) -> None:
    """Fails a plugin that imports the harness, the drivers or the reference when pytest
    loads it: every test run of a project with kvconform installed would pay for them
    (about 70 ms a process before). Passes any plugin that imports them when a session
    collects or runs a case."""
    (tmp_path / "test_theirs.py").write_text("def test_theirs():\n    assert True\n")
    (tmp_path / "settings.yaml").write_text("name: not a kvconform file\n")
    probe = _probed(_SESSION_PROBE, str(tmp_path), cwd=tmp_path)
    assert "kvconform.plugin" in _among(probe["modules"], ("kvconform.plugin",))
    loaded = _among(probe["modules"], NOT_IN_AN_UNRELATED_SESSION)
    assert not loaded, f"a session that never met the suite imported {loaded}"
