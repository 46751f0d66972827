"""The reference's outcomes for hash-only programs, folded once per process.

Hash-only programs (the known-answer vectors, among them four 1 MiB folds) are
pure functions of the hasher, so an adapter whose ``hash`` *is* the reference
adapter's own function (its class does not override it) gets the reference's
outcomes for them from a memo instead of folding the same megabytes again. An
adapter with a ``hash`` of its own (a mutant of the hasher, a variant with
another hashing code path) always folds for itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.protocol import operations as ops
from kvconform.protocol.adapter import Adapter
from kvconform.protocol.driver import InProcessDriver
from kvconform.values import Outcome

_HASH_MEMO: dict[tuple[ops.Op, ...], list[Outcome]] = {}


class MemoDriver(InProcessDriver):
    """An in-process driver that reuses the reference's results for hash-only programs.

    Only when the adapter's ``hash`` is the reference adapter's own function:
    then its results for a program made only of ``hash`` operations are
    exactly the reference's, and folding the vectors again proves nothing.
    """

    def __init__(self, adapter: Adapter) -> None:
        super().__init__(adapter)
        self._memo = type(adapter).hash is ReferenceAdapter.hash  # type: ignore[attr-defined]

    def run(self, program: Sequence[ops.Op]) -> list[Outcome]:
        if not (self._memo and program and all(isinstance(op, ops.Hash) for op in program)):
            return super().run(program)
        key = tuple(program)
        if key not in _HASH_MEMO:
            _HASH_MEMO[key] = InProcessDriver(ReferenceAdapter()).run(program)
        return list(_HASH_MEMO[key])
