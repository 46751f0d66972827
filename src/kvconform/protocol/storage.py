"""Storage that outlives an adapter process: the directories a program's tiers keep.

A scenario names a tier's storage (``tier_new: {as: tier, storage: disk}``); the
driver gives each name a directory of its own for the length of one program, empty
at first, and removes it when the program ends (PROTO-39). The same name in the
same program is the same directory, so a ``tier_new`` after a ``restart`` (PROTO-40)
opens the storage the process before it wrote. Names never become paths: each
directory is numbered in the order its name first appears.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from kvconform.protocol import operations as ops


def storage_names(program: Sequence[ops.Op]) -> list[str]:
    """The storage names the program's ``tier_new`` steps give, in order of first use."""
    names: list[str] = []
    for op in program:
        if isinstance(op, ops.TierNew) and op.storage is not None and op.storage not in names:
            names.append(op.storage)
    return names


@contextlib.contextmanager
def with_storage(program: Sequence[ops.Op]) -> Iterator[Sequence[ops.Op]]:
    """``program`` with each storage name replaced by a directory made for it, for the
    duration of the ``with`` block; the directories are removed after it."""
    names = storage_names(program)
    if not names:
        yield program
        return
    root = Path(tempfile.mkdtemp(prefix="kvconform-tier-"))
    try:
        paths: dict[str, str] = {}
        for number, name in enumerate(names, start=1):
            directory = root / f"storage-{number}"
            directory.mkdir()
            paths[name] = str(directory)
        yield tuple(
            dataclasses.replace(op, storage=paths[op.storage])
            if isinstance(op, ops.TierNew) and op.storage is not None
            else op
            for op in program
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


def segments(program: Sequence[ops.Op]) -> list[Sequence[ops.Op]]:
    """The program cut at each ``restart``: the operations each process runs, in order
    (one more segment than restarts; a segment may be empty)."""
    out: list[Sequence[ops.Op]] = [[]]
    for op in program:
        if isinstance(op, ops.Restart):
            out.append([])
        else:
            assert isinstance(out[-1], list)
            out[-1].append(op)
    return out
