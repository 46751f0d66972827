"""The adapter process the stdio client runs: started in a process group of its own,
with its channel (:mod:`.channel`), its stderr tail and its next ``seq``; killed with
everything it started."""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from kvconform.protocol import channel


class AdapterStartError(RuntimeError):
    """The adapter process could not be started or did not complete the handshake."""

    #: Set when the adapter answered ``hello`` with a refusal (``failure``, ``unsupported``
    #: or ``error``): perhaps a version it does not speak (PROTO-11, PROTO-32).
    refused_hello: bool = False


Transport = Literal["auto", "poll", "threads"]

#: How the adapter is started on POSIX: in a process group of its own, so that killing
#: the group kills whatever it started too, and a Ctrl-C at the terminal (SIGINT to the
#: foreground group, the harness's) reaches only the harness, which then shuts the
#: adapter down. In the harness's session, not a new one (start_new_session): a new
#: session is also a new scheduling autogroup on Linux, which makes every round trip
#: slower. ``process_group`` is Python 3.11+; before it, a new session does the same.
_OWN_PROCESS_GROUP: dict[str, Any] = (
    {}
    if os.name != "posix"
    else {"process_group": 0}
    if sys.version_info >= (3, 11)
    else {"start_new_session": True}
)


class _AdapterProcess:
    """One running adapter: the process, its channel, its stderr tail, its next ``seq``."""

    def __init__(
        self,
        argv: Sequence[str],
        transport: Transport,
        max_line: int,
        env: Mapping[str, str] | None,
    ) -> None:
        self.argv = list(argv)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
                env=None if env is None else dict(env),
                **_OWN_PROCESS_GROUP,
            )
        except OSError as exc:
            raise AdapterStartError(
                f"cannot start the adapter {shlex.join(self.argv)}: {exc}"
            ) from exc
        assert self.proc.stderr is not None
        self.stderr = channel.StderrTail(self.proc.stderr)
        use_poll = transport == "poll" or (transport == "auto" and hasattr(select, "poll"))
        self.channel: channel.PollChannel | channel.ThreadChannel = (
            channel.PollChannel(self.proc, max_line)
            if use_poll
            else channel.ThreadChannel(self.proc, max_line)
        )
        self.next_seq = 0

    def exit_text(self) -> str:
        code = self.proc.poll()
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def stderr_text(self) -> str:
        lines = self.stderr.tail()
        if not lines:
            return "the adapter wrote nothing to stderr"
        return f"last {len(lines)} stderr line(s):\n" + "\n".join(f"  | {line}" for line in lines)

    def wait_exit(self, timeout: float) -> bool:
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        """Kill the process (and its process group), reap it, collect the rest of stderr."""
        if os.name == "posix":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
        self.wait_exit(5.0)
        self.finish()

    def finish(self) -> None:
        self.stderr.join(1.0)
        self.channel.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
