"""The pytest plugin: scenarios and vectors as test items (registered as ``pytest11``).

    pytest --kv-suite                                  # the suite against the reference
    pytest --kv-suite --kv-adapter mypkg.adapter:make  # against your implementation
    pytest --kv-suite --kv-adapter-cmd "./my-adapter --stdio" --kv-timeout 5
                                                       # an adapter process (spec/protocol.md)

Item names are the case ids. A failure shows the case id, the failing step,
expected against actual, the requirement ids and the ``why``. A case whose
class the adapter does not declare is skipped with that reason, never passed.
"""

from __future__ import annotations

import json
import re
import shlex
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import kvconform
from kvconform import limits
from kvconform.adapters import DEFAULT_ADAPTER, AdapterSpecError, load_adapter
from kvconform.harness import manifest, paths
from kvconform.rendering import clip
from kvconform.reports.untrusted import one_line

# pytest loads this module in every session of every project where kvconform is
# installed: what runs cases (the harness, the suite, the drivers) is imported only by a
# session that meets the suite, in the hooks below (tests/test_startup_path.py).
if TYPE_CHECKING:
    from kvconform.harness.runner import CaseResult
    from kvconform.harness.scenario import Case
    from kvconform.protocol.client import StdioDriver
    from kvconform.protocol.driver import Driver

_DRIVER = pytest.StashKey["Driver"]()
_SEEN = pytest.StashKey[dict[str, str]]()
#: ``--kv-timeout`` as read by :func:`kvconform.limits.seconds`, the command's reader.
_TIMEOUT = pytest.StashKey[float]()
#: The suite as the manifest's loader sees it: each data file it loads, by resolved path,
#: with its name in the manifest (``scenarios/...``, ``vectors/...``).
_LISTED = pytest.StashKey[dict[Path, str]]()
#: Files in the suite's folders that the suite does not hold but pytest could collect or
#: load (data files it does not list, Python files such as a ``conftest.py``), by name.
_STRAYS = pytest.StashKey[tuple[str, ...]]()

#: What pytest could collect or import from a folder: the plugin's data files and code.
_COLLECTABLE = (".yaml", ".yml", ".json", ".py", ".pyc")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kvconform", "kvconform conformance suite")
    group.addoption(
        "--kv-adapter",
        metavar="MODULE:FACTORY",
        default=None,
        help=f"in-process adapter to test (default: the reference, {DEFAULT_ADAPTER})",
    )
    group.addoption(
        "--kv-adapter-cmd",
        metavar="COMMAND",
        default=None,
        help="adapter process speaking the stdio protocol (spec/protocol.md); split like a "
        "shell command line, never run by a shell; excludes --kv-adapter",
    )
    group.addoption(
        "--kv-timeout",
        metavar="SECONDS",
        default="10",
        help="--kv-adapter-cmd: seconds to wait for each response (default 10)",
    )
    group.addoption(
        "--kv-allow-modified",
        action="store_true",
        default=False,
        help="with --kv-suite: run even if suite files differ from the shipped manifest",
    )
    group.addoption(
        "--kv-strict-messages",
        action="store_true",
        default=False,
        help="with --kv-suite: fail a case whose only fault is an error message that does "
        "not name its field or values (ERR-13); by default that is advice (CONF-12)",
    )
    group.addoption(
        "--kv-suite",
        action="store_true",
        default=False,
        help="collect the installed kvconform scenarios and vectors",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_SEEN] = {}
    if config.getoption("kv_adapter") and config.getoption("kv_adapter_cmd") is not None:
        raise pytest.UsageError(
            "--kv-adapter and --kv-adapter-cmd are mutually exclusive: "
            "give an in-process adapter or an adapter process, not both"
        )
    try:  # the command's reader of --timeout (limits.seconds), read once here
        timeout = limits.seconds(str(config.getoption("kv_timeout")), 0, limits.MAX_TIMEOUT)
    except ValueError as exc:
        raise pytest.UsageError(f"--kv-timeout {exc}") from None
    config.stash[_TIMEOUT] = timeout
    allowed = config.getoption("kv_allow_modified")
    config.stash[_STRAYS] = ()
    roots = _suite_roots()
    if config.getoption("kv_suite") or any(_inside(arg, roots, config) for arg in config.args):
        # The suite is judged as `kvconform run` judges it: the manifest's files, nothing else.
        strays = _strays(roots, _listed(config))
        config.stash[_STRAYS] = strays
        code = [name for name in strays if name.endswith((".py", ".pyc"))]
        if code:  # pytest loads a conftest.py as a plugin: no flag makes that the suite
            raise pytest.UsageError(
                f"the installed suite holds Python files it does not ship "
                f"({_named(code)}); pytest would load them as code: remove them"
            )
        if strays and not allowed:
            raise pytest.UsageError(
                f"the installed suite holds files its manifest does not list "
                f"({_named(strays)}); `kvconform run` ignores them and so does --kv-suite: "
                "remove them, or pass --kv-allow-modified"
            )
    if config.getoption("kv_suite"):
        integrity = manifest.check()
        if not integrity.intact and not allowed:
            raise pytest.UsageError(
                f"the installed suite differs from its manifest ({integrity.problems()}); "
                "reinstall kvconform, or pass --kv-allow-modified to run it anyway"
            )
        for directory in (paths.scenarios_dir(), paths.vectors_dir()):
            if str(directory) not in config.args:
                config.args.append(str(directory))


def _suite_roots() -> dict[str, Path]:
    """The installed suite's data folders, resolved, by their names in the manifest."""
    return {
        "scenarios": paths.scenarios_dir().resolve(),
        "vectors": paths.vectors_dir().resolve(),
    }


def _listed(config: pytest.Config) -> dict[Path, str]:
    """The data files the suite's loader reads (what the manifest lists of them), found
    once per session and only in a session that meets the suite."""
    listed = config.stash.get(_LISTED, None)
    if listed is None:
        listed = {
            path.resolve(): name
            for name, path in manifest._tracked_files().items()
            if name.startswith(("scenarios/", "vectors/"))
        }
        config.stash[_LISTED] = listed
    return listed


def _inside(arg: str, roots: dict[str, Path], config: pytest.Config) -> bool:
    """Whether the command-line argument ``arg`` names something in the suite's folders."""
    where = Path(config.invocation_params.dir, arg.split("::", 1)[0])
    try:
        resolved = where.resolve()
    except (OSError, RuntimeError):
        return False
    return any(resolved == root or root in resolved.parents for root in roots.values())


def _strays(roots: dict[str, Path], listed: dict[Path, str]) -> tuple[str, ...]:
    """Files in the suite's folders that pytest could collect or load and the suite's
    loader does not read (a README is neither)."""
    found = []
    for label, root in roots.items():
        for path in sorted(root.rglob("*")):
            if path.suffix in _COLLECTABLE and path.resolve() not in listed:
                found.append(f"{label}/{path.relative_to(root).as_posix()}")
    return tuple(found)


def _named(names: list[str] | tuple[str, ...]) -> str:
    shown = ", ".join(clip(name, 200) for name in names[:5])
    return one_line(shown + (f" and {len(names) - 5} more" if len(names) > 5 else ""))


def pytest_unconfigure(config: pytest.Config) -> None:
    driver = config.stash.get(_DRIVER, None)
    if driver is not None:
        driver.close()


def driver_for(config: pytest.Config) -> Driver:
    """The one driver of this run, made on first use."""
    driver = config.stash.get(_DRIVER, None)
    if driver is None:
        from kvconform.protocol.driver import InProcessDriver

        command = config.getoption("kv_adapter_cmd")
        if command is not None:
            driver = _stdio_driver(command, config.stash[_TIMEOUT])
        else:
            spec = config.getoption("kv_adapter") or DEFAULT_ADAPTER
            try:
                driver = InProcessDriver(load_adapter(spec), lambda: load_adapter(spec))
            except AdapterSpecError as exc:
                raise pytest.UsageError(str(exc)) from None
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # its import, factory or describe(); sys.exit()
                said = one_line(clip(f"{type(exc).__name__}: {exc}", 2000))
                raise pytest.UsageError(f"--kv-adapter {spec}: {said}") from None
        config.stash[_DRIVER] = driver
    return driver


def _stdio_driver(command: str, timeout: float) -> StdioDriver:
    from kvconform.protocol.client import AdapterStartError, StdioDriver

    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise pytest.UsageError(f"--kv-adapter-cmd {command!r}: {exc}") from None
    if not argv:
        raise pytest.UsageError("--kv-adapter-cmd is empty")
    try:
        return StdioDriver(argv, timeout=timeout)
    except AdapterStartError as exc:
        raise pytest.UsageError(f"--kv-adapter-cmd: the adapter could not start: {exc}") from None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the adapter once, before any case runs, so that an adapter that cannot
    start is one usage error rather than a failure per case."""
    if session.config.option.collectonly:
        return
    if any(isinstance(item, CaseItem) for item in session.items):
        driver_for(session.config)


#: How much of a ``.yaml``/``.json`` file the plugin reads to tell whether it is a
#: kvconform data file: an exported counterexample opens with a comment header of
#: several hundred characters (and the adapter's command) before its format line.
_SNIFF_BYTES = 8192


_VECTORS_HEAD = re.compile(r'\s*\{\s*"format"\s*:\s*"kvconform-vectors/1"')


def _sniff(path: Path) -> str | None:
    """``scenarios`` or ``vectors`` when ``path`` is a kvconform data file.

    Only the first :data:`_SNIFF_BYTES` of a regular file are read: this runs for every
    data file of every pytest session in which kvconform is installed."""
    if path.suffix not in (".yaml", ".yml", ".json"):
        return None
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        with path.open("rb") as file:
            head = file.read(_SNIFF_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    if path.suffix == ".json":  # its first member names the format (not a schema quoting it)
        return "vectors" if _VECTORS_HEAD.match(head) else None
    lines = (line.strip() for line in head.splitlines())
    first = next((line for line in lines if line and not line.startswith(("#", "%", "---"))), "")
    return "scenarios" if first.startswith("kvconform: scenarios/") else None


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if not _sniff(file_path):
        return None
    config = parent.config
    resolved = file_path.resolve()
    roots = _suite_roots().values()
    if any(root in resolved.parents for root in roots):
        # A file of the installed suite: only what the manifest's loader reads is the
        # suite (as for `kvconform run`), and it is judged only as shipped.
        name = _listed(config).get(resolved)
        if name is None:
            return None  # not part of the suite (pytest_configure has said so)
        if not config.getoption("kv_allow_modified"):
            recorded = _recorded(config)
            if recorded.get(name) != manifest._sha256(file_path):
                return _Refused.from_parent(parent, path=file_path, suite_name=name)
            # as shipped: its cases are those of the compiled suite `kvconform run` runs
            return CaseFile.from_parent(parent, path=file_path, as_shipped=True)
    return CaseFile.from_parent(parent, path=file_path)


_RECORDED = pytest.StashKey[dict[str, str]]()


def _recorded(config: pytest.Config) -> dict[str, str]:
    """The manifest's SHA-256 of each file, read once per session (empty if unreadable)."""
    recorded = config.stash.get(_RECORDED, None)
    if recorded is None:
        try:
            files = json.loads(manifest.manifest_path().read_text(encoding="utf-8"))["files"]
            recorded = {str(k): str(v) for k, v in files.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            recorded = {}
        config.stash[_RECORDED] = recorded
    return recorded


class _Refused(pytest.File):
    """A file of the installed suite that differs from its manifest: one collection error."""

    def __init__(self, *, suite_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.suite_name = suite_name

    def collect(self) -> Iterator[CaseItem]:
        raise self.CollectError(
            f"{self.path}: {self.suite_name} differs from the installed suite's manifest; "
            "reinstall kvconform (or, editing the suite, run python -m "
            "kvconform.harness.manifest), or pass --kv-allow-modified to run it anyway"
        )


_COMPILED = pytest.StashKey["dict[Path, list[Case]]"]()


def _compiled(config: pytest.Config) -> dict[Path, list[Case]]:
    """The installed suite's cases by resolved file, from :func:`suite.all_cases` (the
    suite cache when it is current), read once per session; empty if the suite does not
    load as a whole, and each file is then loaded alone and words its own error."""
    compiled = config.stash.get(_COMPILED, None)
    if compiled is None:
        from kvconform.harness import suite
        from kvconform.harness.yamlsource import SourceError

        compiled = {}
        try:
            everything = suite.all_cases()
        except (SourceError, OSError, ValueError):
            everything = ()
        for case in everything:
            compiled.setdefault(Path(case.file).resolve(), []).append(case)
        config.stash[_COMPILED] = compiled
    return compiled


class CaseFile(pytest.File):
    def __init__(self, *, as_shipped: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        #: A file of the installed suite whose bytes are the manifest's: its cases are
        #: taken from the compiled suite instead of parsing and validating it again.
        self.as_shipped = as_shipped

    def collect(self) -> Iterator[CaseItem]:
        cases = _compiled(self.config).get(self.path.resolve()) if self.as_shipped else None
        if cases is None:
            from kvconform.harness import suite
            from kvconform.harness.yamlsource import SourceError

            try:
                cases = suite.load_file(self.path)
                suite.check_references(cases)
            except SourceError as exc:
                raise self.CollectError(str(exc)) from None
        seen = self.config.stash[_SEEN]
        for case in cases:
            if case.id in seen and seen[case.id] != str(self.path):
                raise self.CollectError(
                    f"{self.path}: case id {case.id!r} is already used in {seen[case.id]}"
                )
            seen[case.id] = str(self.path)
            yield CaseItem.from_parent(self, name=case.id, case=case)


class CaseFailed(Exception):
    def __init__(self, result: CaseResult) -> None:
        super().__init__(result.case.id)
        self.result = result


class CaseItem(pytest.Item):
    def __init__(self, *, case: Case, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        for req in case.requires:
            self.user_properties.append(("requirement", req))

    def runtest(self) -> None:
        from kvconform.harness.runner import render_advice, run_case

        strict = bool(self.config.getoption("kv_strict_messages"))
        result = run_case(self.case, driver_for(self.config), strict_messages=strict)
        if result.verdict == "not_applicable":
            pytest.skip(f"not applicable: {result.reason}")
        if result.verdict == "failed":
            raise CaseFailed(result)
        for line in render_advice(result).splitlines()[1:] if result.advice else ():
            self.user_properties.append(("advice", line.strip()))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, CaseFailed):
            return excinfo.value.result.report()
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        line = self.case.line - 1 if self.case.line else None
        return self.path, line, f"{self.case.kind} {self.case.id}"


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The suite's version and digest, and a modified suite, at the top of the run."""
    if not config.getoption("kv_suite"):
        return []
    integrity = manifest.check()
    lines = [f"kvconform suite {kvconform.SUITE_VERSION}, digest {integrity.digest[:16]}"]
    if not integrity.intact:
        lines.append(f"kvconform: MODIFIED SUITE (--kv-allow-modified): {integrity.problems()}")
    strays = config.stash.get(_STRAYS, ())
    if strays:
        lines.append(
            f"kvconform: MODIFIED SUITE (--kv-allow-modified): not in the manifest and not "
            f"run: {_named(strays)}"
        )
    return lines
