"""The scenario verb ``restart`` (conformance/INTERPRETING.md §4.13, PROTO-37).

``restart: {}`` ends the implementation's process and starts a new one: after it no
handle is live, and only what the process kept outside itself (a tier's ``storage``,
PROTO-36) is there for the steps that follow. The compiler emits a
:class:`~kvconform.protocol.steps.Restart`, which the drivers carry out and never send.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvconform.harness.checks import Where
from kvconform.harness.yamlsource import PathKey
from kvconform.protocol.steps import Restart


class _RestartVerbs:
    """The ``restart`` verb of the scenario compiler (a part of its class)."""

    def _v_restart(self, args: Any, at: PathKey, where: Where, it: int | None) -> None:
        compiler: Any = self
        if not isinstance(args, Mapping) or args:
            raise compiler._fail(at, "restart takes no arguments: write 'restart: {}'")
        for cleared in list(compiler.unread_clears):  # the ids a clear owes, read before
            compiler._read_cleared(cleared)
        compiler.scope.handles.clear()  # no handle outlives its process
        compiler._emit(Restart(), where)
