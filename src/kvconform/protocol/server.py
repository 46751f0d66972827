"""Serving a Python adapter over the stdio protocol (spec/protocol.md).

    python -m kvconform.serve                                  # the reference
    python -m kvconform.serve --adapter mypkg.adapter:make     # any Python adapter

(the command, which loads the adapter, is :mod:`kvconform.serve`; this module serves
an adapter it is given and knows none).

Requests are decoded by :mod:`.codec` and dispatched by the in-process
driver's :func:`.driver.call` (both derived from the operation table), with
handles kept by name, so an adapter behaves the same in process and over
stdio. While serving, file descriptor 1 and ``sys.stdout`` lead to stderr, so
a stray ``print`` in an adapter cannot corrupt the protocol stream.
"""

from __future__ import annotations

import io
import os
import sys
import time
import traceback
from collections.abc import Mapping
from typing import Any

from kvconform.protocol import operations as ops
from kvconform.protocol.adapter import Adapter
from kvconform.protocol.codec import (
    PROTOCOL_VERSION,
    WireError,
    decode_line,
    encode_line,
    from_wire,
    info_to_wire,
    result_to_wire,
)
from kvconform.protocol.driver import Handles, UnknownHandle, call, release
from kvconform.protocol.v2 import VERSIONS, counts_to_strings, request_from_v2

#: Responses are written at least this often while a batch of requests is worked through.
FLUSH_INTERVAL = 0.05


class Server:
    """The protocol state of one adapter: greeting, live handles, shutdown.

    :meth:`handle_line` turns one request line into one response line; it never
    raises for anything a request contains or an adapter does.
    """

    def __init__(self, adapter: Adapter, protocols: tuple[int, ...] = VERSIONS) -> None:
        self.adapter = adapter
        self.info = adapter.describe()
        self.handles = Handles()
        self.greeted = False
        #: The protocol versions served (PROTO-32), and the one ``hello`` settled on.
        self.protocols = protocols
        self.protocol = PROTOCOL_VERSION
        #: Set once ``shutdown`` has been answered: the caller exits.
        self.finished = False

    def handle_line(self, line: bytes) -> bytes:
        try:
            request = decode_line(line)
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            return encode_line_or_failure(None, {"failure": f"the request is not JSON: {exc}"})
        seq = request.get("seq") if isinstance(request, dict) else None
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
            return encode_line_or_failure(
                None, {"failure": "the request has no 'seq' (a non-negative integer)"}
            )
        body = self.handle(request)
        if self.protocol == 2 and request.get("op") != "hello":
            body = counts_to_strings(body)  # every count as a decimal string (PROTO-33)
        return encode_line_or_failure(seq, body)

    def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The response body (without ``seq``) for one decoded request."""
        name = request.get("op")
        try:
            if name == "hello":
                return self._hello(request)
            if not self.greeted:
                return {"failure": f"the first request must be hello, got {name!r}"}
            if self.protocol == 2:
                request = request_from_v2(request)
            if name == "reset":
                self.reset()
                return {"ok": None}
            if name == "shutdown":
                self.reset()
                self.finished = True
                return {"ok": None}
            if name == "hash_batch":
                return self._hash_batch(request)
            spec = ops.BY_NAME.get(name) if isinstance(name, str) else None
            if spec is None:
                return {"failure": f"unknown operation {name!r}"}
            if spec.needs not in self.info.classes:
                return {"unsupported": self._undeclared(spec.name, spec.needs)}
            op = from_wire(request)
            return result_to_wire(op, call(self.adapter, self.handles, op))
        except WireError as exc:
            return {"failure": f"malformed {name} request: {exc}"}
        except UnknownHandle as exc:
            return {"failure": str(exc)}
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            return {"failure": f"{name} raised {type(exc).__name__}: {exc}"}

    def _undeclared(self, name: str, needs: str) -> str:
        return f"{name} needs the class {needs}, which {self.info.name} does not declare"

    def _hello(self, request: Mapping[str, Any]) -> dict[str, Any]:
        wanted = request.get("protocol")
        if type(wanted) is not int or wanted not in self.protocols:
            spoken = " and ".join(map(str, self.protocols))
            return {
                "failure": f"protocol {wanted!r} is not supported: "
                f"{self.info.name} speaks protocol {spoken}"
            }
        self.greeted = True
        self.protocol = wanted
        return {"ok": info_to_wire(self.info, wanted)}

    def _hash_batch(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if "hash" not in self.info.classes:
            return {"unsupported": self._undeclared("hash_batch", "hash")}
        programs = request.get("programs")
        if not isinstance(programs, list):
            raise WireError("hash_batch.programs: expected a list of programs")
        results = []
        for index, program in enumerate(programs):
            try:
                op = from_wire({"op": "hash", "program": program})
            except WireError as exc:
                raise WireError(f"programs[{index}]: {exc}") from None
            try:
                value = call(self.adapter, self.handles, op)
            except Exception as exc:
                traceback.print_exc(file=sys.stderr)
                return {
                    "failure": f"hash_batch: program {index} raised {type(exc).__name__}: {exc}"
                }
            results.append(result_to_wire(op, value)["ok"])
        return {"ok": results}

    def reset(self) -> None:
        """Drop every live handle, newest first (the end of a program)."""
        for name in reversed(self.handles.names()):
            try:
                release(self.adapter, self.handles, name)
            except Exception:
                traceback.print_exc(file=sys.stderr)
                self.handles.release(name)


def encode_line_or_failure(seq: int | None, body: Mapping[str, Any]) -> bytes:
    """The response line; a body JSON cannot carry becomes a ``failure``."""
    try:
        return encode_line(seq, body)
    except (TypeError, ValueError) as exc:
        return encode_line(seq, {"failure": f"the result cannot be sent as JSON: {exc}"})


def serve(
    adapter: Adapter, stdin_fd: int = 0, stdout_fd: int = 1, protocols: tuple[int, ...] = VERSIONS
) -> int:
    """Answer requests from ``stdin_fd`` on ``stdout_fd`` until shutdown or end of input.

    Every complete line read is answered before the next read, so nothing is
    held back while the server waits (PROTO-4); the responses to a batch of
    pipelined requests go out in one write, or every :data:`FLUSH_INTERVAL`
    seconds while a long batch is worked through.
    """
    server = Server(adapter, protocols)
    chunk = bytearray(1 << 16)
    view = memoryview(chunk)
    source = io.FileIO(stdin_fd, "rb", closefd=False)
    pending = bytearray()  # an incomplete line carried over to the next read
    while not server.finished:
        size = source.readinto(view)
        if not size:
            break
        data = view[:size]
        if not pending and data[-1] == 10 and chunk.find(b"\n", 0, size) == size - 1:
            # The usual exchange: exactly one whole request.
            line = bytes(data[:-1])
            if line.strip():
                _write_all(stdout_fd, server.handle_line(line))
            continue
        pending += data
        out: list[bytes] = []
        start = 0
        started = time.monotonic()
        while not server.finished:
            newline = pending.find(b"\n", start)
            if newline < 0:
                break
            line = bytes(pending[start:newline])
            start = newline + 1
            if line.strip():
                out.append(server.handle_line(line))
            if out and time.monotonic() - started > FLUSH_INTERVAL:
                _write_all(stdout_fd, b"".join(out))
                out.clear()
                started = time.monotonic()
        del pending[:start]
        if out:
            _write_all(stdout_fd, b"".join(out))
    server.reset()
    return 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
