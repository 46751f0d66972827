"""A cache of the compiled suite, so that a run need not parse, validate and compile it again.

Loading the suite (every scenario and vector file parsed, validated against its
JSON Schema, compiled into :class:`~kvconform.harness.scenario.Case` objects and
cross-checked against the spec) takes most of a run's time, and its result is a
pure function of the suite's files and of the code that loads them. So the
result of a *successful* full load is kept in a file and reused while neither
has changed.

What is cached
    The tuple :func:`kvconform.harness.suite.all_cases` returns, nothing else. A
    load that fails (a malformed file, an unknown requirement) is never cached:
    the normal load raises the same error, with file, line and field, every time.
    Identical immutable parts of the cases are stored once (:func:`shared`), so
    reading the entry builds fewer objects; what is read compares equal, part for
    part, to what the full load gives.

Where
    ``$XDG_CACHE_HOME/kvconform/`` (``~/.cache/kvconform/`` when the variable is
    unset or not an absolute path), one file per data folder and Python
    (``suite-<hash>.pickle``), replaced atomically when it is rewritten.

The key (:func:`suite_key`), the SHA-256 of
    - the digest of the suite's files *as they are on disk now*
      (:func:`kvconform.harness.manifest.file_hashes`: every scenario, vector,
      schema and spec file, which is everything the load reads), whatever the
      shipped manifest says; so under ``--allow-modified`` an edited file gives
      another key, and is parsed and fully validated. A command passes the
      digest its manifest check has just computed from the same hashes (the
      one its reports carry), rather than hashing every file a second time:
      an entry found under it holds exactly the cases of those files; after a
      full load the key is computed afresh, so a file edited since the check
      is never cached under the old digest;
    - the resolved data folder (cases carry their files' absolute paths);
    - the code: the SHA-256 of every ``.py`` file of the ``kvconform`` package,
      by relative name and content. Content rather than version and mtime: an
      editable checkout changes its code without changing its version, and a copy
      or a checkout can carry mtimes over; hashing the ~40 files costs about 1.5 ms.
      Every module (not only the loader) is included, so that no edit that could
      change a compiled case can be missed;
    - Python's implementation and version, and this file's format;
    - the third-party modules that decide what loads (``yaml``, ``jsonschema``,
      ``referencing``, ``jsonschema_specifications``): the location, size and
      mtime of each package's ``__init__`` and of its folder, which an upgrade or
      a reinstall rewrites (asking their versions would import them or
      ``importlib.metadata``, which costs more than the whole cached load).

Invalidation
    Any change of any of these gives another key; an entry with another key is
    ignored and overwritten by the next full load. The digest is computed again
    after a full load, and the entry is written only if it has not changed, so
    files edited during a load are never cached under the old digest.

Fallback
    Every failure to read or use the cache -- no file, unreadable, not the
    user's, not a regular file (a FIFO, a device, a link: opened without
    waiting or following, then refused), larger than
    :data:`~kvconform.limits.MAX_FILE_BYTES`, another key (checked before the
    payload is read), a checksum mismatch, anything the unpickler raises, a
    result that is not a tuple of cases -- is a silent miss: the suite is
    loaded normally. Every failure to write is ignored.

Housekeeping
    Each data folder has an entry of its own, so copies of the suite in folders that
    come and go (a checkout per branch, a test's temporary copy) would leave entries
    behind for ever. The folder keeps the :data:`KEPT_ENTRIES` entries used last: an
    entry read is marked used (its modification time set to now), and after each
    write the entries beyond those, oldest first, are removed, with any temporary
    file a write left behind more than an hour ago. Only this module's own names
    (``suite-<20 hex digits>.pickle``, ``.suite-*.tmp``) are ever removed, never
    followed as links; a removed entry is a miss the next time, nothing more.

Disabling
    ``KVCONFORM_NO_CACHE=1`` in the environment (or ``kvconform run --no-cache``)
    loads every file afresh and neither reads nor writes the cache.

Why pickle, and why it is safe here
    The cases are frozen dataclasses of operations, values and checks, holding
    tuples (not lists), bytes, ints beyond 64 bits and floats whose NaN payload
    bits are part of the test, sharing objects between them. Pickle round-trips
    all of that exactly with no code per type, so it cannot drift from the
    operation classes as they change; a JSON codec would need a hand-written
    encoding of every one. Pickle's danger is that loading can call any
    importable callable. Here it cannot:

    - the unpickler (:class:`_Unpickler`) resolves only *classes* of
      already-imported ``kvconform`` modules that are dataclasses, enums or named
      tuples; any other global (``os.system``, ``builtins.eval``, a function, a
      class such as a process driver) is refused, so loading can only build
      those data objects;
    - the file starts with the format, the key and the SHA-256 of the pickled
      payload, all checked before unpickling: a stale, truncated or corrupted
      file is a miss, never a changed verdict; the result must be a tuple of
      :class:`~kvconform.harness.scenario.Case` or it is a miss too;
    - the file must belong to the user running kvconform and must not be
      writable by group or others (checked on the open file), like OpenSSH
      checks its keys. Whoever can still write it can write the user's
      installed code as well.
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import hashlib
import importlib.util
import io
import json
import operator
import os
import pickle
import re
import stat
import struct
import sys
import time
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import kvconform
from kvconform import limits
from kvconform.harness import manifest

if TYPE_CHECKING:
    from kvconform.harness.scenario import Case

FORMAT = "kvconform-suite-cache/1"
#: Set to anything but ``""`` or ``"0"`` to neither read nor write the cache.
DISABLE_ENV = "KVCONFORM_NO_CACHE"
#: The third-party packages whose code decides whether and how a file loads.
DEPENDENCIES = ("yaml", "jsonschema", "referencing", "jsonschema_specifications")
_PROTOCOL = 5
#: How many entries the cache folder keeps: those used last (Housekeeping, above).
KEPT_ENTRIES = 8
#: A write's temporary file older than this (seconds) was left by a write that died.
_ABANDONED_AFTER = 3600
_ENTRY_NAME = re.compile(r"suite-[0-9a-f]{20}\.pickle")
_TEMPORARY_NAME = re.compile(r"\.suite-.*\.tmp")


def enabled() -> bool:
    """Whether the cache is in use (``KVCONFORM_NO_CACHE`` unset, empty or ``0``)."""
    return os.environ.get(DISABLE_ENV, "") in ("", "0")


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/kvconform``, or ``~/.cache/kvconform``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    # The XDG base directory specification: a relative path is invalid, ignore it.
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".cache"
    return root / "kvconform"


def entry_path() -> Path:
    """The cache file of this data folder and this Python."""
    owner = f"{kvconform.data_root().resolve()}\0{sys.implementation.cache_tag}"
    return cache_dir() / f"suite-{hashlib.sha256(owner.encode()).hexdigest()[:20]}.pickle"


def code_fingerprint() -> str:
    """The SHA-256 of every ``.py`` file of the ``kvconform`` package, names and contents.

    The files are those ``Path.rglob("*.py")`` finds (symbolic links to folders are
    not followed), in the same order, found with :func:`os.walk` (faster).
    """
    package = os.path.dirname(os.path.realpath(kvconform.__file__))
    names: list[str] = []
    for folder, _, files in os.walk(package):
        prefix = os.path.relpath(folder, package).replace(os.sep, "/") + "/"
        names += [
            name if prefix == "./" else prefix + name for name in files if name.endswith(".py")
        ]
    digest = hashlib.sha256()
    for name in sorted(names, key=lambda name: name.split("/")):
        with open(os.path.join(package, name), "rb") as stream:
            content = stream.read()
        digest.update(f"{name}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


def _dependency_stamps() -> dict[str, list[object]]:
    stamps: dict[str, list[object]] = {}
    for name in DEPENDENCIES:
        spec = importlib.util.find_spec(name)  # finds the package without importing it
        if spec is None or spec.origin is None:
            stamps[name] = ["absent"]
            continue
        origin = Path(spec.origin)
        stamp: list[object] = [str(origin)]
        for path in (origin, origin.parent):
            st = path.stat()
            stamp += [st.st_size, st.st_mtime_ns]
        stamps[name] = stamp
    return stamps


def suite_key(suite_digest: str | None = None) -> str:
    """The key of the suite as it is now: files, data folder, code, Python, dependencies.

    ``suite_digest`` is the digest of the suite's files if the caller has just computed
    it (``manifest.check()``'s, before a run): the files are then not hashed twice.
    """
    if not suite_digest:
        suite_digest = manifest.digest_of(manifest.file_hashes())
    material = {
        "format": FORMAT,
        "suite": suite_digest,
        "data_root": str(kvconform.data_root().resolve()),
        "code": code_fingerprint(),
        "python": [sys.implementation.name, sys.version, sys.implementation.cache_tag],
        "dependencies": _dependency_stamps(),
    }
    text = json.dumps(material, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cached_cases(
    build: Callable[[], tuple[Case, ...]], suite_digest: str | None = None
) -> tuple[Case, ...]:
    """The cases of the cache entry for the current key, or ``build()``'s (then stored).

    ``build`` is the full load; whatever it raises propagates unchanged.
    ``suite_digest``: the files' digest just computed by the caller (:func:`suite_key`);
    after a full load the key is computed afresh, files hashed again, either way.
    """
    if not enabled():
        return build()
    try:
        key, path = suite_key(suite_digest), entry_path()
    except Exception:
        return build()  # e.g. a file cannot be read: the full load words the error
    found = read(path, key)
    if found is not None:
        with suppress(Exception):
            os.utime(path)  # used now: kept by the housekeeping that follows writes
        return found
    cases = build()
    with suppress(Exception):
        if suite_key() == key:  # nothing changed while the files were loaded
            write(path, key, cases)
            prune(path.parent, keep=path)
    return cases


def prune(folder: Path, keep: Path | None = None, kept: int = KEPT_ENTRIES) -> list[str]:
    """Remove all but the ``kept`` entries of ``folder`` used last, and abandoned temporaries.

    ``keep`` (the entry just written) is never removed. Only regular files and links
    with this module's names are considered, by their own modification time (a link
    is never followed); a file that cannot be removed is left. Returns the names removed.
    """
    now = time.time()
    entries: list[tuple[float, str]] = []
    doomed: list[str] = []
    with os.scandir(folder) as found:
        for item in found:
            if keep is not None and item.name == keep.name:
                continue
            try:
                st = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                continue
            if _ENTRY_NAME.fullmatch(item.name):
                entries.append((st.st_mtime, item.name))
            elif _TEMPORARY_NAME.fullmatch(item.name) and now - st.st_mtime > _ABANDONED_AFTER:
                doomed.append(item.name)
    entries.sort(reverse=True)  # the most recently used first
    room = kept - (1 if keep is not None else 0)
    doomed += [name for _, name in entries[max(room, 0) :]]
    removed: list[str] = []
    for name in doomed:
        with suppress(OSError):
            os.unlink(folder / name)
            removed.append(name)
    return removed


def read(path: Path, key: str) -> tuple[Case, ...] | None:
    """The cases stored in ``path`` under ``key``, or ``None`` for any problem at all."""
    try:
        payload = _payload(path, key)
        if payload is None:
            return None
        cases = _unpickle(payload)
    except Exception:
        return None
    from kvconform.harness.scenario import Case

    if not isinstance(cases, tuple) or not all(type(case) is Case for case in cases):
        return None
    return cases


#: Flags that make opening the entry itself safe: no wait on a FIFO or a device (the
#: type is checked on the open file before anything is read) and no link followed.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)


def _payload(path: Path, key: str) -> bytes | None:
    """The pickled cases of the entry at ``path`` if its header matches ``key`` and its
    checksum its payload; ``None`` otherwise (a miss).

    Only a regular file of the user's, of at most :data:`~kvconform.limits.MAX_FILE_BYTES`,
    is read, and its header is checked before its payload is read: a FIFO, a device or a
    link in its place is never waited on nor followed, and a large file is not read.
    """
    descriptor = os.open(path, _OPEN_FLAGS)
    with os.fdopen(descriptor, "rb") as stream:
        st = os.fstat(descriptor)
        if not stat.S_ISREG(st.st_mode) or not _private(st):
            return None
        if st.st_size > limits.MAX_FILE_BYTES:
            return None
        header = FORMAT.encode() + b"\n" + key.encode() + b"\n"
        if stream.read(len(header)) != header:
            return None
        checksum = stream.read(65)  # 64 hex digits and a newline
        if len(checksum) != 65 or not checksum.endswith(b"\n"):
            return None
        payload = stream.read(limits.MAX_FILE_BYTES + 1)
    if len(payload) > limits.MAX_FILE_BYTES:
        return None
    if checksum[:-1] != hashlib.sha256(payload).hexdigest().encode():
        return None
    return payload


def _unpickle(payload: bytes) -> object:
    """Unpickle with the cycle collector paused, as it was before afterwards.

    None of the many objects being built is garbage, and collecting while they are
    built costs more than building them (about 15 ms against 7 ms for the suite).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _Unpickler(io.BytesIO(payload)).load()
    finally:
        if was_enabled:
            gc.enable()


def write(path: Path, key: str, cases: tuple[Case, ...]) -> None:
    """Store ``cases`` under ``key`` in ``path``, atomically (a reader sees old or new)."""
    payload = pickle.dumps(shared(cases), protocol=_PROTOCOL)
    checksum = hashlib.sha256(payload).hexdigest()
    header = f"{FORMAT}\n{key}\n{checksum}\n".encode()
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=".suite-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as stream:  # mkstemp: mode 0600
            stream.write(header)
            stream.write(payload)
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def shared(cases: tuple[Case, ...]) -> tuple[Case, ...]:
    """``cases`` with each set of identical immutable parts made one object, for pickling.

    A full load builds a new object for every repetition of the same geometry, model,
    operation or expectation (of about 50,000 objects, over a third are repeats), and
    pickle keeps each one, so reading the cache would build them all again. Only parts
    that cannot be told apart are merged: the same type and the same value, exactly --
    strings, bytes and integers by value (``1`` is not ``True``), floats by their bit
    pattern (``0.0`` is not ``-0.0``, every NaN payload kept), tuples item by item, and
    frozen dataclasses that compare by value, field by field (their whole ``__dict__``,
    as pickle stores it). Anything else -- a dict, a list, a set, any other object -- is
    kept as it is, and so is every object that holds one. The result compares equal to
    ``cases`` part for part, and pickles to a file that loads in about two thirds of
    the time (bench/README.md).
    """
    atoms: dict[object, object] = {}  # strings, bytes and integers (never equal across types)
    done: dict[int, object] = {}  # id of a part of ``cases`` -> the object it becomes
    merged: dict[tuple[object, ...], object] = {}  # identity -> the one object with it
    mergeable: dict[type, bool] = {}

    def share(value: object) -> object:
        kind = type(value)
        if kind is str or kind is int or kind is bytes:
            return atoms.setdefault(value, value)
        if value is None or kind is bool:
            return value
        result = done.get(id(value))  # ``cases`` holds every part alive: ids are unique
        if result is not None:
            return result
        if kind is tuple:
            items = tuple(map(share, cast(tuple[object, ...], value)))
            result = merged.setdefault((tuple, *map(id, items)), items)
        elif kind is float:
            result = merged.setdefault((float, struct.pack("<d", value)), value)
        elif _mergeable(kind, mergeable):
            state: dict[str, object] = value.__dict__
            parts = list(map(share, state.values()))
            identity = (kind, *state, *map(id, parts))
            result = merged.get(identity)
            if result is None:
                result = value
                if not all(map(operator.is_, parts, state.values())):
                    result = object.__new__(kind)
                    result.__dict__.update(zip(state, parts, strict=True))
                merged[identity] = result
        else:
            result = value  # kept as it is, and so is everything holding it
        done[id(value)] = result
        return result

    collecting = gc.isenabled()
    gc.disable()  # nothing built here is garbage (as in _unpickle)
    try:
        return cast("tuple[Case, ...]", tuple([share(case) for case in cases]))
    finally:
        if collecting:
            gc.enable()


def _mergeable(kind: type, known: dict[type, bool]) -> bool:
    """A frozen dataclass compared by value, pickled as its ``__dict__`` (no hooks of its own)."""
    found = known.get(kind)
    if found is not None:
        return found
    params = getattr(kind, "__dataclass_params__", None)
    known[kind] = found = (
        params is not None
        and params.frozen
        and params.eq
        and "__slots__" not in vars(kind)
        and all(
            getattr(kind, hook, None) is getattr(object, hook, None)
            for hook in ("__reduce__", "__reduce_ex__", "__getstate__", "__setstate__")
        )
    )
    return found


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by nobody else (POSIX; elsewhere, always)."""
    getuid = getattr(os, "getuid", None)
    if getuid is None:
        return True
    return st.st_uid == getuid() and not st.st_mode & 0o022


class _Unpickler(pickle.Unpickler):
    """Resolves only data classes of loaded ``kvconform`` modules; refuses every other global."""

    def find_class(self, module: str, name: str) -> Any:
        found: object = None
        if module == "kvconform" or module.startswith("kvconform."):
            found = sys.modules.get(module)
            for part in name.split("."):
                found = getattr(found, part, None)
        if isinstance(found, type) and (
            dataclasses.is_dataclass(found)
            or issubclass(found, enum.Enum)
            or (issubclass(found, tuple) and hasattr(found, "_fields"))
        ):
            return found
        raise pickle.UnpicklingError(f"{module}.{name} may not appear in the suite cache")
