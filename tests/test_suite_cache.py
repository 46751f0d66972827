"""The cache of the compiled suite (kvconform.harness.cache) never changes what runs.

A current entry gives exactly the cases a full load gives; a stale, corrupt,
foreign or hostile entry is a silent miss; a modified suite is loaded (and
validated) afresh; the cache can be turned off. And the fast YAML path gives
the pure loader's data, lines and errors. No test here measures time.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import pickle
import shutil
import struct
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import kvconform
from kvconform import cli
from kvconform.harness import cache, manifest, suite, yamlsource
from kvconform.harness.scenario import Case
from kvconform.harness.yamlsource import SourceError

pytestmark = pytest.mark.covers("CONF-3")


#: The canonical form of a case tree a module fixture holds for the whole module (frozen
#: dataclasses of tuples: it cannot change), by identity, with the tree itself kept alive.
_KNOWN: dict[int, tuple[object, object]] = {}


def known(cases: tuple[Case, ...]) -> tuple[Case, ...]:
    """``cases``, whose canonical form is then computed once instead of at every comparison."""
    _KNOWN[id(cases)] = (cases, _canonical(cases))
    return cases


def canonical(value: object) -> object:
    """A form that compares equal exactly when two case trees are the same, NaN bits included."""
    held = _KNOWN.get(id(value))
    if held is not None and held[0] is value:
        return held[1]
    return _canonical(value)


def _canonical(value: object, seen: dict[int, object] | None = None) -> object:
    """The canonical form of ``value``; an object met twice in one tree (the cache shares
    equal values) is put in form once, by its identity, while the whole tree is alive."""
    if seen is None:
        seen = {}
    done = seen.get(id(value))
    if done is not None:
        return done
    form: object
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        form = (
            type(value).__module__,
            type(value).__qualname__,
            tuple(
                (f.name, _canonical(getattr(value, f.name), seen))
                for f in dataclasses.fields(value)
            ),
        )
    elif isinstance(value, float):
        form = ("float", struct.pack("<d", value))
    elif isinstance(value, (tuple, list)):
        form = (type(value).__name__, tuple(_canonical(v, seen) for v in value))
    elif isinstance(value, dict):
        form = ("dict", tuple((_canonical(k, seen), _canonical(v, seen)) for k, v in value.items()))
    else:
        return (type(value).__name__, value)
    seen[id(value)] = form
    return form


@pytest.fixture(scope="module")
def fresh(fresh_suite: tuple[Case, ...]) -> tuple[Case, ...]:
    """The suite loaded in full (tests/conftest.py: once for this module and
    tests/test_startup_path.py, which share a worker)."""
    return fresh_suite


@pytest.fixture(scope="module")
def sample(fresh: tuple[Case, ...]) -> tuple[Case, ...]:
    """One case of every area and kind of the suite, in its order.

    What the tests of an entry's mechanics check (its checksum, key and permissions, a
    corrupt or hostile entry, a folder that cannot be written) does not depend on how
    many cases the entry holds, and each of them writes an entry (sharing and pickling
    its cases: about 0.3 s of CPU for the whole suite); they write this one. That the
    whole suite goes through an entry unchanged is
    ``test_a_current_entry_gives_exactly_the_cases_of_a_full_load``'s to show.
    """
    firsts: dict[tuple[str, str], Case] = {}
    for case in fresh:
        firsts.setdefault((case.area, case.kind), case)
    return known(tuple(firsts.values()))


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own empty cache folder, with the cache enabled."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv(cache.DISABLE_ENV, raising=False)
    return tmp_path / "xdg-cache" / "kvconform"


class Counting:
    """A stand-in for the full load that counts how often it is asked."""

    def __init__(self, cases: tuple[Case, ...]) -> None:
        self.cases, self.calls = cases, 0

    def __call__(self) -> tuple[Case, ...]:
        self.calls += 1
        return self.cases


def test_the_cache_lives_under_xdg_cache_home(private_cache: Path) -> None:
    assert cache.cache_dir() == private_cache
    assert cache.entry_path().parent == private_cache


def test_without_xdg_cache_home_it_is_under_the_home_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache.cache_dir() == tmp_path / ".cache" / "kvconform"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/is/invalid")
    assert cache.cache_dir() == tmp_path / ".cache" / "kvconform"


@pytest.mark.xdist_group("suite-fresh-load")
def test_a_current_entry_gives_exactly_the_cases_of_a_full_load(
    fresh: tuple[Case, ...], private_cache: Path
) -> None:
    build = Counting(fresh)
    first = cache.cached_cases(build)
    assert build.calls == 1 and first is fresh
    assert cache.entry_path().is_file()
    assert cache.entry_path().stat().st_mode & 0o077 == 0
    second = cache.cached_cases(build)
    assert build.calls == 1, "a current entry was not used"
    assert second is not fresh
    assert canonical(second) == canonical(fresh)
    assert [c.id for c in second] == [c.id for c in fresh]


@pytest.mark.xdist_group("suite-fresh-load")
def test_suite_all_cases_goes_through_the_cache(
    sample: tuple[Case, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    build = Counting(sample)
    monkeypatch.setattr(suite, "load_all_cases", build)
    suite.all_cases.cache_clear()
    try:
        suite.all_cases()
        suite.all_cases.cache_clear()
        cached = suite.all_cases()
    finally:
        suite.all_cases.cache_clear()
    assert build.calls == 1
    assert canonical(cached) == canonical(sample)


@pytest.mark.xdist_group("suite-fresh-load")
def test_an_entry_for_another_digest_is_not_used(
    sample: tuple[Case, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry written for other file contents (a stale cache) is ignored and replaced."""
    real = manifest.file_hashes()
    other = dict(real)
    name = next(iter(other))
    other[name] = "0" * 64
    monkeypatch.setattr(manifest, "file_hashes", lambda: other)
    stale_key = cache.suite_key()
    monkeypatch.setattr(manifest, "file_hashes", lambda: real)
    assert cache.suite_key() != stale_key
    cache.write(cache.entry_path(), stale_key, sample[:3])  # what the stale files compiled to

    build = Counting(sample)
    assert cache.cached_cases(build) is sample
    assert build.calls == 1
    assert len(cache.cached_cases(build)) == len(sample) and build.calls == 1  # replaced


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda m: m.setattr(cache, "code_fingerprint", lambda: "edited"), id="code"),
        pytest.param(lambda m: m.setattr(kvconform, "data_root", lambda: Path("/x")), id="root"),
        pytest.param(lambda m: m.setattr(sys, "version", "9.9.9"), id="python"),
        pytest.param(
            lambda m: m.setattr(cache, "_dependency_stamps", lambda: {"yaml": ["other"]}),
            id="dependencies",
        ),
    ],
)
def test_the_key_changes_with_the_code_the_data_folder_python_and_dependencies(
    change: Callable[[pytest.MonkeyPatch], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = cache.suite_key()
    assert cache.suite_key() == before
    change(monkeypatch)
    assert cache.suite_key() != before


def test_the_code_fingerprint_covers_every_module_of_the_package() -> None:
    package = Path(kvconform.__file__).resolve().parent
    modules = {p.relative_to(package).as_posix() for p in package.rglob("*.py")}
    assert {
        "harness/scenario.py",
        "protocol/operations.py",
        "values/options.py",
        "cli/run.py",
    } <= modules
    assert len(cache.code_fingerprint()) == 64


def _corruptions() -> list[tuple[str, Callable[[bytes], bytes]]]:
    def flip_last(blob: bytes) -> bytes:
        return blob[:-1] + bytes([blob[-1] ^ 0x01])

    def flip_inside(blob: bytes) -> bytes:
        at = len(blob) // 2
        return blob[:at] + bytes([blob[at] ^ 0x40]) + blob[at + 1 :]

    return [
        ("truncated", lambda blob: blob[: len(blob) // 2]),
        ("last byte flipped", flip_last),
        ("a payload byte flipped", flip_inside),
        ("empty", lambda blob: b""),
        ("garbage", lambda blob: os.urandom(4096)),
        ("no payload", lambda blob: b"\n".join(blob.split(b"\n", 3)[:3])),
        ("other format", lambda blob: blob.replace(b"suite-cache/1", b"suite-cache/0", 1)),
    ]


@pytest.fixture(scope="module")
def entry(sample: tuple[Case, ...], tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a current entry for :func:`sample`, as the cache writes it."""
    path = tmp_path_factory.mktemp("entry") / "entry"
    cache.write(path, cache.suite_key(), sample)
    return path.read_bytes()


@pytest.mark.xdist_group("suite-fresh-load")
def test_the_module_entry_is_what_the_cache_writes_and_reads(
    sample: tuple[Case, ...], entry: bytes
) -> None:
    build = Counting(sample)
    cache.cached_cases(build)
    assert cache.entry_path().read_bytes() == entry  # the corruptions below start from it
    assert canonical(cache.cached_cases(build)) == canonical(sample) and build.calls == 1


@pytest.mark.parametrize("name, corrupt", _corruptions(), ids=[n for n, _ in _corruptions()])
@pytest.mark.xdist_group("suite-fresh-load")
def test_a_corrupt_entry_falls_back_silently_to_the_same_cases(
    sample: tuple[Case, ...], entry: bytes, name: str, corrupt: Callable[[bytes], bytes]
) -> None:
    build = Counting(sample)
    path = cache.entry_path()
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(corrupt(entry))
    got = cache.cached_cases(build)
    assert build.calls == 1, f"a {name} entry was used"
    assert canonical(got) == canonical(sample)
    # ... and the entry is rewritten, so the next run is fast again
    assert canonical(cache.cached_cases(build)) == canonical(sample) and build.calls == 1


def _with_header(payload: bytes) -> bytes:
    """A cache file around ``payload`` whose format, key and checksum are all right."""
    import hashlib

    checksum = hashlib.sha256(payload).hexdigest()
    return f"{cache.FORMAT}\n{cache.suite_key()}\n{checksum}\n".encode() + payload


class _Call:
    """Pickles as a call of ``target(*args)``."""

    def __init__(self, target: Callable[..., object], *args: object) -> None:
        self.target, self.args = target, args

    def __reduce__(self) -> tuple[Callable[..., object], tuple[object, ...]]:
        return self.target, self.args


CALLED: list[object] = []


def record_call(*args: object) -> tuple[Case, ...]:
    CALLED.append(args)
    return ()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(lambda: pickle.dumps(_Call(os.system, "echo pwned")), id="os.system"),
        pytest.param(lambda: pickle.dumps(_Call(record_call, "x")), id="a test function"),
        pytest.param(lambda: pickle.dumps(_Call(cache.write, "a", "b", ())), id="a kvconform func"),
        pytest.param(lambda: pickle.dumps(_Call(eval, "()")), id="builtins.eval"),
        pytest.param(lambda: pickle.dumps([1, 2]), id="not a tuple of cases"),
        pytest.param(lambda: pickle.dumps(("a case id",)), id="a tuple of strings"),
    ],
)
@pytest.mark.xdist_group("suite-fresh-load")
def test_a_hostile_or_foreign_entry_with_a_valid_checksum_runs_nothing(
    sample: tuple[Case, ...], payload: Callable[[], bytes]
) -> None:
    CALLED.clear()
    path = cache.entry_path()
    path.parent.mkdir(parents=True)
    path.write_bytes(_with_header(payload()))
    path.chmod(0o600)
    build = Counting(sample)
    assert canonical(cache.cached_cases(build)) == canonical(sample)
    assert build.calls == 1 and CALLED == []


def test_the_unpickler_admits_only_data_classes_of_kvconform() -> None:
    from kvconform.values import Geometry

    unpickler = cache._Unpickler(io.BytesIO(b""))
    assert unpickler.find_class("kvconform.values", "Geometry") is Geometry
    for module, name in [
        ("os", "system"),
        ("builtins", "eval"),
        ("kvconform.harness.cache", "write"),
        ("kvconform.protocol.driver", "InProcessDriver"),  # a class, but not data
        ("kvconform.no_such_module", "Thing"),
    ]:
        with pytest.raises(pickle.UnpicklingError):
            unpickler.find_class(module, name)


@pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")
@pytest.mark.xdist_group("suite-fresh-load")
def test_an_entry_others_can_write_is_not_used(sample: tuple[Case, ...]) -> None:
    build = Counting(sample)
    cache.cached_cases(build)
    cache.entry_path().chmod(0o666)
    cache.cached_cases(build)
    assert build.calls == 2


@pytest.mark.xdist_group("suite-fresh-load")
def test_an_unwritable_cache_folder_is_ignored(
    sample: tuple[Case, ...], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file-not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    build = Counting(sample)
    assert cache.cached_cases(build) is sample
    assert cache.cached_cases(build) is sample and build.calls == 2


def test_a_load_that_fails_is_raised_and_never_cached(private_cache: Path) -> None:
    def broken() -> tuple[Case, ...]:
        raise SourceError("demo.yaml", 3, "scenarios[0]", "broken on purpose")

    for _ in range(2):
        with pytest.raises(SourceError, match=r"demo\.yaml:3 at scenarios"):
            cache.cached_cases(broken)
    assert not private_cache.exists() or not any(private_cache.iterdir())


@pytest.mark.xdist_group("suite-fresh-load")
def test_files_that_change_during_the_load_are_not_cached(
    fresh: tuple[Case, ...], monkeypatch: pytest.MonkeyPatch, private_cache: Path
) -> None:
    real = manifest.file_hashes()

    def build() -> tuple[Case, ...]:
        edited = {**real, next(iter(real)): "1" * 64}
        monkeypatch.setattr(manifest, "file_hashes", lambda: edited)
        return fresh

    assert cache.cached_cases(build) is fresh
    assert not cache.entry_path().exists()


@pytest.mark.xdist_group("suite-fresh-load")
def test_the_cache_can_be_disabled_by_the_environment(
    fresh: tuple[Case, ...], monkeypatch: pytest.MonkeyPatch, private_cache: Path
) -> None:
    monkeypatch.setenv(cache.DISABLE_ENV, "1")
    assert not cache.enabled()
    build = Counting(fresh)
    cache.cached_cases(build)
    cache.cached_cases(build)
    assert build.calls == 2
    assert not private_cache.exists()
    monkeypatch.setenv(cache.DISABLE_ENV, "0")
    assert cache.enabled()


@pytest.mark.xdist_group("suite-fresh-load")
def test_the_cache_can_be_disabled_on_the_command_line(
    fresh: tuple[Case, ...], monkeypatch: pytest.MonkeyPatch, private_cache: Path
) -> None:
    build = Counting(fresh)
    monkeypatch.setattr(suite, "load_all_cases", build)
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["list", "--no-cache", "--id", fresh[0].id], out, err) == cli.EXIT_OK
    assert fresh[0].id in out.getvalue()
    assert build.calls == 1
    assert not private_cache.exists()


@pytest.mark.parametrize("command", ["run", "list"])
def test_the_help_documents_the_cache_and_how_to_turn_it_off(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        cli.main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--no-cache" in text and "KVCONFORM_NO_CACHE=1" in text
    assert "~/.cache/kvconform" in text and "XDG_CACHE_HOME" in text
    assert f"the {cache.KEPT_ENTRIES} entries used last kept" in text


# A modified suite ---------------------------------------------------------------


@pytest.fixture
def suite_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the suite's data, with a current manifest, as the installed suite: every
    file but the scenarios outside ``alloc`` and ``hash`` (what these tests modify is a
    scenario and a vector; each of their loads of the copy is then a seventh of a full
    load, and the manifest is rewritten for the copy as it stands)."""
    root = tmp_path / "data"
    source = kvconform.data_root()
    scenarios = source / "conformance" / "scenarios"
    kept = {scenarios / "alloc", scenarios / "hash"}

    def left_out(folder: str, names: list[str]) -> set[str]:
        if Path(folder) != scenarios:
            return set()
        return {
            name for name in names if (scenarios / name).is_dir() and scenarios / name not in kept
        }

    for name in ("conformance", "vectors", "spec"):
        shutil.copytree(source / name, root / name, ignore=left_out)
    monkeypatch.setattr(kvconform, "data_root", lambda: root)
    manifest.manifest_path().write_text(manifest.render(), encoding="utf-8")
    suite.all_cases.cache_clear()
    suite.requirements.cache_clear()
    yield root
    suite.all_cases.cache_clear()
    suite.requirements.cache_clear()


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), out, err)
    return status, out.getvalue(), err.getvalue()


def _replace_field(path: Path, case: Case, field: str, value: str) -> int:
    """Set a top-level field of ``case`` (found by its line, not by any step verb); its line."""
    assert case.line is not None
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(
        i for i in range(case.line - 1, len(lines)) if lines[i].lstrip().startswith(f"{field}:")
    )
    indent = lines[at][: len(lines[at]) - len(lines[at].lstrip())]
    lines[at] = f"{indent}{field}: {value}\n"
    path.write_text("".join(lines), encoding="utf-8")
    return at + 1


def test_under_allow_modified_the_modified_scenario_is_what_runs(
    suite_copy: Path, tmp_path: Path, private_cache: Path
) -> None:
    first = next(c for c in suite.all_cases() if c.kind == "scenario")  # loads and caches
    assert cache.entry_path().is_file(), "the unmodified copy was not cached"
    suite.all_cases.cache_clear()
    report = tmp_path / "report.json"
    status, _, err = _run("run", "--quiet", "--id", first.id, "--json", str(report))
    assert status == cli.EXIT_OK, err
    assert json.loads(report.read_text())["results"][0]["title"] == first.title

    _replace_field(Path(first.file), first, "title", "Retitled by test_suite_cache")
    suite.all_cases.cache_clear()
    status, _, err = _run("run", "--quiet", "--id", first.id)
    assert status == cli.EXIT_USAGE and "altered: scenarios/" in err
    status, _, err = _run(
        "run", "--quiet", "--allow-modified", "--id", first.id, "--json", str(report)
    )
    assert status == cli.EXIT_OK, err
    data = json.loads(report.read_text())
    assert data["results"][0]["title"] == "Retitled by test_suite_cache"
    assert "altered" in data["suite"]["modified"]


def test_under_allow_modified_a_changed_expectation_changes_the_verdict(
    suite_copy: Path, private_cache: Path
) -> None:
    vector = next(c for c in suite.all_cases() if c.kind == "vector")  # loads and caches
    suite.all_cases.cache_clear()
    status, _, err = _run("run", "--quiet", "--id", vector.id)
    assert status == cli.EXIT_OK, err
    path = Path(vector.file)
    document = json.loads(path.read_text(encoding="utf-8"))
    entry = next(v for v in document["vectors"] if v["id"] == vector.id)
    entry["expect"] = [f"0x{(int(entry['expect'][0], 16) ^ 1):016x}", *entry["expect"][1:]]
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    suite.all_cases.cache_clear()
    status, out, _ = _run("run", "--quiet", "--allow-modified", "--id", vector.id)
    assert status == cli.EXIT_FAILED and vector.id in out


def test_under_allow_modified_a_malformed_scenario_is_still_refused_with_its_line(
    suite_copy: Path, private_cache: Path
) -> None:
    first = next(c for c in suite.all_cases() if c.kind == "scenario")  # loads and caches
    assert cache.entry_path().is_file()
    path = Path(first.file)
    line = _replace_field(path, first, "class", "no-such-class")
    suite.all_cases.cache_clear()
    status, _, err = _run("run", "--quiet", "--allow-modified")
    assert status == cli.EXIT_USAGE
    assert f"{path}:{line} at scenarios[" in err and ".class: " in err, err
    assert "no-such-class" in err


# The fast YAML path -------------------------------------------------------------


needs_libyaml = pytest.mark.skipif(
    yamlsource._fast_loader() is None, reason="PyYAML built without libyaml"
)


@needs_libyaml
def test_the_fast_and_the_pure_yaml_loader_agree_on_every_shipped_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = suite.scenario_files()
    assert files
    fast = [yamlsource.load_yaml(p) for p in files]
    monkeypatch.setattr(yamlsource, "_fast_loader", lambda: None)
    pure = [yamlsource.load_yaml(p) for p in files]
    for a, b in zip(fast, pure, strict=True):
        assert canonical(a.data) == canonical(b.data), a.file
        assert a.lines == b.lines, a.file


@needs_libyaml
@pytest.mark.parametrize(
    "text",
    [
        "kvconform: scenarios/1\nscenarios: [\n",
        "a: 1\n  b: 2\n",
        "a: !!python/object/apply:os.system [echo]\n",
        "",
        "a: \x07bell\n",
        'a: "\\ud800"\nb: [\n',
        "a: " + "[" * 5000 + "]" * 5000 + "\n",
        "a: " + "[" * 20_000 + "]" * 20_000 + "\n",
        "a: 1\na: 2\nb:\n  " + "[" * 100 + "]" * 100 + "\n",
        "b: " + "[" * 64 + "x" + "]" * 64 + "\n",
        "a:\n" + "".join("  " * i + "-\n" for i in range(1, 70)),
        "a: [\nb: " + "[" * 100 + "]" * 100 + "\n",
    ],
    ids=[
        "unclosed",
        "indent",
        "python-tag",
        "empty",
        "non-printable",
        "surrogate-then-bad",
        "past-libyaml-depth",
        "long-and-deep",
        "duplicate-then-deep",
        "scalar-past-depth",
        "block-deep",
        "unclosed-then-deep",
    ],
)
def test_a_malformed_file_gives_the_pure_loaders_error_word_for_word(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SourceError) as fast:
        yamlsource.load_yaml(path)
    monkeypatch.setattr(yamlsource, "_fast_loader", lambda: None)
    with pytest.raises(SourceError) as pure:
        yamlsource.load_yaml(path)
    assert str(fast.value) == str(pure.value)
    assert str(path) in str(fast.value)


@needs_libyaml
@pytest.mark.parametrize(
    "text",
    [
        "b: " + "[" * 63 + "x" + "]" * 63 + "\n",
        "a: &a [x]\nb: " + "[" * 64 + "*a" + "]" * 64 + "\n",
        "a: &a [x]\nb: " + "[" * 63 + "*a" + "]" * 63 + "\n",
    ],
    ids=["scalar-at-depth", "alias-past-depth", "alias-at-depth"],
)
def test_the_depth_is_counted_where_the_composer_meets_a_node(
    text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node at the deepest level allowed loads, and an alias is the node it names,
    met where its anchor stands: both loaders load these alike. Catches a depth counted
    one level off, and an alias counted where it stands (the pure loader's guard and
    the check after libyaml's parse must both skip it)."""
    path = tmp_path / "deep.yaml"
    path.write_text(text, encoding="utf-8")
    fast = yamlsource.load_yaml(path)
    monkeypatch.setattr(yamlsource, "_fast_loader", lambda: None)
    pure = yamlsource.load_yaml(path)
    assert canonical(fast.data) == canonical(pure.data)


def _entries(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("suite-"))


def _aged(path: Path, seconds_ago: float) -> Path:
    when = time.time() - seconds_ago
    os.utime(path, (when, when), follow_symlinks=False)
    return path


@pytest.mark.xdist_group("suite-fresh-load")
def test_the_folder_keeps_the_entries_used_last(
    fresh: tuple[Case, ...], private_cache: Path
) -> None:
    """Copies of the suite in folders that come and go leave no entry behind for ever:
    after a write, the entries used last are kept and the others removed. Catches a
    cache that never prunes, and one that prunes by write time (a read marks it used)."""
    private_cache.mkdir(parents=True)
    old = [private_cache / f"suite-{i:020x}.pickle" for i in range(12)]
    for age, path in enumerate(old):
        path.write_bytes(b"another data folder's entry")
        _aged(path, 1000 + age)
    _aged(old[11], 1)  # the oldest written, but read a second ago
    cache.cached_cases(Counting(fresh[:2]))  # a miss: written, then the folder pruned
    kept = _entries(private_cache)
    assert len(kept) == cache.KEPT_ENTRIES and cache.entry_path().name in kept
    assert old[11].name in kept, "an entry read a second ago was removed"
    assert kept == sorted([cache.entry_path().name, old[11].name, *(p.name for p in old[:6])])
    # a hit marks the entry used: it outlives entries written after it
    _aged(cache.entry_path(), 5000)
    cache.cached_cases(Counting(fresh[:2]))
    assert time.time() - cache.entry_path().stat().st_mtime < 60


def test_pruning_removes_only_the_caches_own_files(tmp_path: Path) -> None:
    """Never a file of another name, a folder, a link's target, or a write in progress."""
    folder = tmp_path / "kvconform"
    folder.mkdir()
    outside = tmp_path / "precious"
    outside.write_text("not the cache's")
    (folder / "pycache").mkdir()
    (folder / "notes.txt").write_text("mine")
    (folder / "suite-short.pickle").write_text("not an entry name")
    entries = [folder / f"suite-{i:020x}.pickle" for i in range(3)]
    for age, path in enumerate(entries):
        path.write_bytes(b"entry")
        _aged(path, 100 * (age + 1))
    link = folder / f"suite-{'f' * 20}.pickle"
    link.symlink_to(outside)
    _aged(link, 9e5)
    young = folder / ".suite-abc.tmp"
    young.write_bytes(b"being written")
    abandoned = folder / ".suite-def.tmp"
    abandoned.write_bytes(b"left by a write that died")
    _aged(abandoned, 2 * 3600)
    removed = cache.prune(folder, kept=2)
    assert sorted(removed) == sorted([link.name, entries[2].name, abandoned.name])
    assert outside.read_text() == "not the cache's", "a link was followed"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [".suite-abc.tmp", "notes.txt", "pycache", "suite-short.pickle",
         entries[0].name, entries[1].name]
    )  # fmt: skip


def test_the_module_and_the_readme_say_how_many_entries_are_kept() -> None:
    """The help says it too (test_the_help_documents_the_cache_and_how_to_turn_it_off)."""
    assert f"the {cache.KEPT_ENTRIES} entries used last kept" in " ".join(cli.__doc__.split())
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    assert f"the {cache.KEPT_ENTRIES} entries used last" in " ".join(readme.split())
