"""Harness steps that are no operation of the adapter interface, and the storage that
outlives an adapter process (spec/protocol.md, PROTO-36 and PROTO-37).

A scenario's ``restart`` step (:class:`Restart`) ends the implementation's process
and starts a new one; the drivers carry it out themselves and never send it. A
scenario names a tier's storage (``tier_new: {as: tier, storage: disk}``); the driver
gives each name a directory of its own for the length of one program, empty at first,
and removes it when the program ends. The same name in the same program is the same
directory, so a ``tier_new`` after a ``restart`` opens the storage the process before
wrote. Names never become paths: each directory is numbered in the order its name
first appears.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from kvconform.protocol import codec
from kvconform.protocol import operations as ops
from kvconform.values import Broken, Outcome


@dataclass(frozen=True)
class Restart(ops.Op):
    """The implementation's process ends and a new one starts (PROTO-37).

    Over stdio the harness ends the program so far with ``reset``, sends ``shutdown``,
    waits for the exit, starts the adapter command again and completes the handshake;
    in process the driver releases every handle and makes a new adapter from the same
    factory. No handle is live after it; what survives is what the implementation keeps
    outside the process (a tier's ``storage``). It is in no table: never sent.
    """

    name: ClassVar[str] = "restart"
    not_generated: ClassVar[str] = "a harness step, not an operation of the adapter"


#: Harness steps that are no operation of the table (never sent, never dispatched).
HARNESS_STEPS: tuple[type[ops.Op], ...] = (Restart,)


def shown(op: ops.Op, *, ensure_ascii: bool = True) -> str:
    """``op`` as a trace or an explanation shows it: a request in its protocol-1 wire
    form, or what the harness does for a harness step, which is never sent (PROTO-37)."""
    if isinstance(op, HARNESS_STEPS):
        return f"({op.name}: done by the harness, not a request to the adapter)"
    return json.dumps(codec.to_wire(op), ensure_ascii=ensure_ascii)


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
    duration of the ``with`` block; the directories are removed after it (PROTO-36)."""
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


def segments(program: Sequence[ops.Op]) -> list[list[ops.Op]]:
    """The program cut at each ``restart``: the operations each process runs, in order
    (one more segment than restarts; a segment may be empty)."""
    out: list[list[ops.Op]] = [[]]
    for op in program:
        if isinstance(op, Restart):
            out.append([])
        else:
            out[-1].append(op)
    return out


def run_in_parts(
    program: Sequence[ops.Op],
    run: Callable[[Sequence[ops.Op]], list[Outcome]],
    restart: Callable[[], Outcome],
) -> list[Outcome]:
    """Run ``program`` with its storage made (PROTO-36), each part between two
    ``restart`` steps by ``run`` and each restart by ``restart`` (PROTO-37): one outcome
    per operation, a failed restart breaking every operation after it."""
    with with_storage(program) as sent:
        if not any(isinstance(op, Restart) for op in sent):
            return run(sent)
        outcomes: list[Outcome] = []
        for number, part in enumerate(segments(sent)):
            if number:
                restarted = restart()
                outcomes.append(restarted)
                if isinstance(restarted, Broken):  # no process to run the rest
                    return outcomes + [restarted] * (len(sent) - len(outcomes))
            outcomes += run(part)
        return outcomes
