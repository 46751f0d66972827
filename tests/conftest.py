"""Shared pytest setup.

Lets the tests run from a source checkout whether or not the package is
installed: ``src/`` goes on ``sys.path``, and ``kvconform/__init__.py`` then
extends the package path to the checkout's top-level folders.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import pickle
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


#: Where compiled modules are kept when the environment asks for none beside the sources.
BYTECODE = REPO_ROOT / ".bytecode"


def _keep_bytecode_with_the_checkout() -> None:
    """Under ``PYTHONDONTWRITEBYTECODE``, keep compiled modules in one folder of the checkout.

    The test run starts hundreds of Python processes (adapters served over stdio, the
    command run as a user runs it, the workers of pytest-xdist); with no bytecode kept,
    each one compiles every module it imports again, and pytest rewrites the asserts of
    every test module again in each worker. An environment that asks for no bytecode
    asks that nothing be written beside the sources: it is kept in :data:`BYTECODE`
    (``.bytecode/``, ignored by git) instead, through ``PYTHONPYCACHEPREFIX``, which
    every process the run starts inherits. It goes when the checkout goes, so
    checkouts that come and go leave nothing behind in the user's home. Only in a
    folder that is the user's own and that no one else may write: compiled code found
    there is run as it stands. A checkout that cannot be written keeps nothing.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.pycache_prefix:
        return  # bytecode is written as usual, or a prefix is set (a worker inherits it)
    prefix = str(BYTECODE)
    try:
        os.makedirs(prefix, mode=0o700, exist_ok=True)
        st = os.lstat(prefix)
    except OSError:
        return
    own = not hasattr(os, "getuid") or st.st_uid == os.getuid()
    if not (stat.S_ISDIR(st.st_mode) and own and not st.st_mode & 0o022):
        return
    _link_installed_bytecode(prefix)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


def _link_installed_bytecode(prefix: str) -> None:
    """Once per checkout, link the compiled modules Python and the installed packages
    already have into ``prefix``, where the run's processes will look for them.

    Under ``PYTHONPYCACHEPREFIX`` Python looks for every module's bytecode under the
    prefix only, the standard library's and numpy's as much as the project's: in a new
    checkout each of the first processes (the workers start together) compiled them all
    again, about 2 s of CPU each here. Hard links cost no space and are made in under a
    second; a stale one is recompiled and replaced (never written through), as in
    ``__pycache__``. Where links cannot be made (another file system, files of another
    user) nothing more is tried and modules compile as before. Only folders this Python
    searches are linked: from a virtual environment, the base interpreter's own
    site-packages (12,000 compiled modules here, none of them importable) took 0.7 s of
    the 1.1 s the links took, before the workers could start.
    """
    done = os.path.join(prefix, ".linked")
    if os.path.exists(done):
        return
    import sysconfig

    tag = sys.implementation.cache_tag
    paths = sysconfig.get_paths()
    roots = sorted({os.path.abspath(paths[key]) for key in ("stdlib", "purelib", "platlib")})
    roots = [r for r in roots if not any(r.startswith(o + os.sep) for o in roots if o != r)]
    searched = {os.path.abspath(entry) for entry in sys.path if entry}
    try:
        for top in roots:
            for folder, subfolders, files in os.walk(top):
                # A folder of installed packages this Python does not search (the base
                # interpreter's own site-packages, inside its standard library, seen from a
                # virtual environment) holds nothing the run imports: not walked.
                subfolders[:] = [
                    name
                    for name in subfolders
                    if name not in ("site-packages", "dist-packages")
                    or os.path.join(folder, name) in searched
                ]
                if os.path.basename(folder) != "__pycache__":
                    continue
                mirror = prefix + os.path.dirname(folder)  # the prefix's layout: source dir
                for name in files:
                    parts = name.split(".")  # module.cpython-311.pyc, not the .opt-N ones
                    if len(parts) != 3 or parts[1] != tag or parts[2] != "pyc":
                        continue
                    os.makedirs(mirror, mode=0o700, exist_ok=True)
                    with contextlib.suppress(FileExistsError):
                        os.link(os.path.join(folder, name), os.path.join(mirror, name))
        Path(done).touch()
    except OSError:
        return


_keep_bytecode_with_the_checkout()


def _one_blas_thread() -> None:
    """numpy's OpenBLAS with one thread, in this process and every process it starts.

    Imported, OpenBLAS starts a thread per core, and that start costs about 0.1 s of
    CPU time in each of the few hundred processes of a test run that import numpy
    (adapters served over stdio, the command run as a user runs it, the workers):
    nothing here multiplies a matrix. A value the environment sets is kept.
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


_one_blas_thread()


def _collect_garbage_less_often() -> None:
    """The cyclic garbage collector run less often in the test processes.

    A worker's heap holds the suite several times over (module fixtures, the memos
    below, cases loaded from copies), and each full collection walks all of it. With
    the interpreter's thresholds, the collector took 23 s of a run's 287 s of CPU time
    (measured with ``gc.callbacks``), two thirds of it in about a hundred full
    collections; with these, 10 s. Fewer, later collections free the same cycles. A
    test that needs a collection at a given point makes it itself (``gc.collect``), and
    the in-process driver still collects the youngest generation after each drop.
    """
    gc.set_threshold(20_000, 50, 1000)


_collect_garbage_less_often()


#: Raw bytes at least this long make a long fold (the four 1 MiB known-answer vectors):
#: worth remembering.
LONG_FOLD = 64 * 1024


def _fold_long_bytes_once() -> None:
    """The reference hasher's long folds, computed once per test process.

    ``KeyHasher.mix_bytes`` folds byte by byte in Python, about 0.09 s a MiB. A test
    process meets the four 1 MiB known-answer vectors dozens of times, through every
    road to the fold: the suite run in process (``kvconform run`` through the command's
    own driver, the applicability and report checks, each correct variant and mutant
    whose ``hash`` is the reference's), the vector generator's command, the mutants'
    programs. The fold is a pure function of the state it starts from, the bytes, and
    the hasher module's prime and mask; so from :data:`LONG_FOLD` bytes on, the state it
    ends in is remembered under those four, computed by the real method the first time,
    and set as that method would set it after. Shorter inputs, inputs that are not
    ``bytes``, and hashers whose state slot is their own (a subclass that redefines
    ``_state``) always fold anew; a subclass with a ``mix_bytes`` of its own (a mutant
    of the fold) never reaches this one. Processes the tests start fold everything
    themselves.
    """
    from kvconform_reference import hasher

    real = hasher.KeyHasher.mix_bytes
    slot = hasher.KeyHasher.__dict__["_state"]
    folded: dict[tuple[int, bytes, object, object], int] = {}

    def mix_bytes(self: hasher.KeyHasher, data: bytes) -> hasher.KeyHasher:
        if type(data) is not bytes or len(data) < LONG_FOLD or type(self)._state is not slot:
            return real(self, data)
        key = (self._state, data, hasher.PRIME, getattr(hasher, "_MASK", None))
        end = folded.get(key)
        if end is None:
            real(self, data)
            folded[key] = self._state
        else:
            self._state = end
        return self

    mix_bytes.__doc__ = real.__doc__
    hasher.KeyHasher.mix_bytes = mix_bytes  # type: ignore[method-assign]


class _RememberingValidator:
    """A schema's validator that validates each distinct document once per process.

    ``iter_errors`` of the same data under the same schema gives the same errors: the
    data of a document that had none are kept (pickled: exact types, ``1`` is not
    ``True``, ``{1: ...}`` is not ``{"1": ...}``, every float bit kept) and answered
    with none the next time. A document with errors, or data that cannot be pickled,
    is validated every time. Everything else is the real validator's.
    """

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._valid: set[bytes] = set()

    def iter_errors(self, instance: object) -> Iterator[Any]:
        try:
            key: bytes | None = pickle.dumps(instance, protocol=5)
        except Exception:
            key = None
        if key is not None and key in self._valid:
            return iter(())
        errors = list(self._inner.iter_errors(instance))
        if not errors and key is not None:
            self._valid.add(key)
        return iter(errors)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _validate_each_document_once() -> None:
    """Each shipped file's schema validation, done once per test process.

    A full load of the suite (the cache bypassed or missed: each test that compares a
    fresh load with a cached one, or loads a modified copy) spends most of its time
    validating the same documents against their schemas again. Validation is a pure
    function of the schema and the data, so a document already found valid in this
    process is valid again (:class:`_RememberingValidator`);
    a changed document, and any document with an error, is validated in full. The
    schemas themselves are cached by name in the command as well
    (``yamlsource.schema``). Processes the tests start validate everything themselves.
    """
    from kvconform.harness import yamlsource

    compute = yamlsource.schema

    @functools.cache
    def schema(name: str) -> Any:
        return _RememberingValidator(compute(name))

    yamlsource.schema = schema


try:
    import kvconform  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO_ROOT / "src"))

_fold_long_bytes_once()
_validate_each_document_once()


#: What :func:`pytest_unconfigure` stops: the reference service of this test process, and
#: the controller's warm-up if it is still running.
_STOPS: list[Callable[[], None]] = []


def pytest_configure(config: pytest.Config) -> None:
    """The suite cache filled once, before any worker starts.

    In a new checkout the suite cache (:mod:`kvconform.harness.cache`) has no entry for
    it: every worker, and every command the first tests start, would find none and
    load the whole suite at the same moment, each writing the same entry. The
    controlling process loads it first, so they all read it instead. A suite that does
    not load is left to the tests that load it, which say why.
    """
    if hasattr(config, "workerinput") or os.environ.get(WARMING):
        return  # a worker of pytest-xdist, or the warm-up: the controller did it
    from kvconform.harness import cache, suite

    if cache.enabled():
        if not cache.entry_path().is_file() and getattr(config.option, "numprocesses", None):
            _compile_the_test_modules_meanwhile(config)
        with contextlib.suppress(Exception):
            suite.all_cases()


#: Set in the environment of the warm-up of :func:`_compile_the_test_modules_meanwhile`.
WARMING = "KVCONFORM_TESTS_WARMING_UP"


def _compile_the_test_modules_meanwhile(config: pytest.Config) -> None:
    """In a new checkout, the test modules compiled on the core the controller leaves idle.

    pytest rewrites the asserts of every test module, and of every module of a pytest
    plugin's distribution (all of Hypothesis), as it imports them, and keeps the result
    beside the bytecode. In a new checkout there is none yet, and each worker of
    pytest-xdist, starting at the same moment, rewrote them all again: about 2 s of CPU
    each, while the controller had just spent its first seconds alone, one core idle,
    loading the suite. So while it loads, a process of its own collects the same test
    modules (``pytest --collect-only -n 0``, nothing run), which rewrites and keeps
    them, and the workers find them done. Only the paths given under ``tests/`` are
    collected (the scenarios and vectors are the suite the controller is loading).
    Nothing depends on it: a module not yet done when a worker imports it is rewritten
    by the worker, as before, and a warm-up still running at the end is stopped.
    Then it builds what Hypothesis's ``st.text()`` draws from
    (:func:`pytest_collection_finish`).
    """
    if sys.dont_write_bytecode:
        return  # nothing would be kept
    tests = REPO_ROOT / "tests"
    given = config.args_source != pytest.Config.ArgsSource.TESTPATHS
    base = config.invocation_params.dir if given else config.rootpath
    paths = []
    for arg in config.args:
        path = Path(base, arg.split("::")[0]).resolve()
        if path == tests or tests in path.parents:
            paths.append(str(path))
    if not paths:
        return
    import subprocess

    try:
        warming = subprocess.Popen(
            [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", *paths],
            cwd=REPO_ROOT,
            env={**os.environ, WARMING: "1"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        return

    def stop() -> None:
        if warming.poll() is None:
            warming.kill()
        warming.wait()

    _STOPS.append(stop)


def pytest_collection_finish(session: pytest.Session) -> None:
    """In the warm-up alone: the table of characters ``st.text()`` draws from, built once.

    Its default alphabet is every character UTF-8 encodes; Hypothesis finds them by
    encoding each of the 1,114,112 code points once (1.4 s of CPU) and keeps the result
    under ``.hypothesis/`` in the current folder. In a new checkout two or three workers
    built it at the same moment, each at its first ``st.text()`` (in
    ``tests/test_fuzz.py`` and the reference's tests), 1.9 to 2.4 s of CPU each while
    the other workers ran. The warm-up builds it once, after its collection, before the
    workers run their first test; a worker that gets there first builds it as before.
    """
    if os.environ.get(WARMING):
        import hypothesis.strategies as st

        with contextlib.suppress(Exception):
            st.text().validate()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Every cyclic garbage collected, then the survivors set aside, before pytest's last check.

    After the last hook, pytest collects the whole heap again, to report an exception
    raised in a finalizer (its ``unraisableexception`` plugin: five times over in pytest
    8.4; in 9.1 once in its own ``pytest_unconfigure``, before this one, and once after
    the last hook). A worker's heap holds the suite several times over: the five walks
    took 1.75 to 3.7 s of each worker, at the very end of the run. Here the collector runs
    until a collection finds nothing (two walks, as a rule), under pytest's hook, so
    every finalizer those walks would have run runs now and is reported the same way;
    then ``gc.freeze`` sets the survivors aside, and pytest's walks after the last hook
    look only at what is made after this point.
    First, the reference service this process offered its fixture adapters stops.
    """
    del config
    while _STOPS:
        _STOPS.pop()()
    while gc.collect():
        pass
    gc.freeze()


def pytest_sessionstart(session: pytest.Session) -> None:
    """In each process that runs tests (a worker, or the one process of ``-n 0``): the
    reference's answers remembered, and served to the fixture adapters the tests start
    (``tests/reference_service.py``)."""
    config = session.config
    if os.environ.get(WARMING):
        return  # it runs nothing
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        _answer_each_reference_program_once()
        from tests import reference_service

        _STOPS.append(reference_service.start())  # for the fixture adapters it starts


def _answer_each_reference_program_once() -> None:
    """The reference's answers to each generated program, computed once per test process.

    The generated checks run every program on the implementation and on the reference
    (``engine.reference_driver``), and the tests run the same properties with the same
    seeds against many implementations (the correct variants, the mutants): in
    ``tests/test_generated.py`` and ``tests/test_generated_prefix.py`` the reference ran
    7,009 programs, 4,117 of them again. Its answers are a pure function of the
    program but for the ids it mints, which are never recycled, so another run gives
    other numbers; and ids, and the plan keys made of them, are judged by equality and
    order within one program only (``differential.compare``,
    ``test_ids_are_judged_by_equality_and_order_only``). So answers remembered from an
    earlier run judge an implementation as fresh ones would. The key is the program
    pickled (exact types: ``1`` is not ``True`` nor ``1.0``, ``0.0`` is not ``-0.0``); a
    program that cannot be pickled runs every time, and so does the implementation's
    side of every program. A reference the property declares for the implementation
    (``reference_for``) is not this one, and is not remembered.
    """
    from kvconform.adapters.reference import ReferenceAdapter
    from kvconform.differential import engine, matrix
    from kvconform.protocol.driver import InProcessDriver

    answers: dict[bytes, list[Any]] = {}

    class RememberingReference(InProcessDriver):
        def run(self, program: Sequence[Any]) -> list[Any]:
            try:
                key: bytes | None = pickle.dumps(tuple(program), protocol=5)
            except Exception:
                key = None
            if key is None:
                return super().run(program)
            if key not in answers:
                answers[key] = super().run(program)
            return list(answers[key])

    def reference_driver() -> Any:
        return RememberingReference(ReferenceAdapter())

    engine.reference_driver = reference_driver
    matrix.reference_driver = reference_driver  # type: ignore[attr-defined]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per core and one more.

    Many tests wait on a process of their own (an adapter started over stdio, its
    timeouts, the command run as a user runs it); with one worker per core, a core
    sits idle while its worker waits (on 2 cores, 2 workers: 112 s for the loop, about
    29 s of it spent waiting). Each worker also costs CPU of its own (its start, its
    collection, the fixtures it makes for itself, and more switching between them): on
    2 cores, 4 workers took 107 s and 208 s of CPU where 3 took 103 s and 193 s
    (bench/README.md). One worker more than the cores fills the waits. ``-n N`` still
    sets the number.
    """
    if hasattr(os, "sched_getaffinity"):
        cores: int | None = len(os.sched_getaffinity(0))  # the cores this process may use
    else:
        cores = os.cpu_count()
    return (cores or 1) + 1


@pytest.fixture(scope="session")
def fresh_suite() -> tuple[Any, ...]:
    """The suite loaded in full from its files, the cache bypassed, once per process.

    The tests that hold a cached or shared suite against a full load (tests/test_suite_cache.py,
    tests/test_startup_path.py) compare with this one load; their tests share an
    ``xdist_group``, so one worker loads it. Its canonical form is computed once too
    (``tests.test_suite_cache.known``): it is frozen dataclasses and tuples all through.
    """
    from kvconform.harness import suite
    from tests.test_suite_cache import known

    return known(suite.load_all_cases())


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The root of the checkout (the folder holding ``spec/`` and ``vectors/``)."""
    return REPO_ROOT
