"""One program's pipelined exchange with an adapter process: its requests encoded once
and given each ``seq`` (:meth:`_Exchanging._tail`), every request and a closing
``reset`` written before any answer is read, each answer judged on the short path where
it can be (:func:`.codec.quick_outcome`), and every fault the stream can meet worded,
quoting the adapter's stderr (:meth:`_Exchanging._explain`). :class:`~.client.StdioDriver`
is built on it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from kvconform.protocol import channel, codec, v2
from kvconform.protocol import operations as ops
from kvconform.protocol.process import _AdapterProcess
from kvconform.values import Broken, Outcome

Trace = Callable[[Literal["send", "recv"], bytes], None]

#: A request line from its ``seq`` and its tail (:func:`.codec.request_line`).
_REQUEST_LINE = codec.REQUEST_LINE
#: The bytes of a ``reset`` request after its ``seq``.
_RESET_TAIL = codec.request_tail({"op": "reset"})
#: The usual spellings of the answer to ``reset``, compact or with a space after each
#: separator, read without decoding: ``_RESET_OK[i] % seq``.
_RESET_OK = (b'{"seq":%d,"ok":null}', b'{"seq": %d, "ok": null}')
#: Most operations whose request bytes a driver keeps, and the longest such request.
_TAIL_CACHE_ENTRIES = 1024
_TAIL_CACHE_BYTES = 4096
#: Operations whose fields are all names (handles, strings): two equal ones (same
#: type, equal strings) have the same request bytes, so they are kept by value as well.
_NAMED_ONLY = frozenset(
    spec.cls
    for spec in ops.TABLE
    if all(f.kind in ("handle", "released", "new_handle", "str") for f in spec.fields)
)


@dataclass(frozen=True)
class _Exchange:
    """What one exchange of a program (plus its ``reset``) produced."""

    outcomes: list[Outcome]
    #: Why the adapter had to be killed, if it had to.
    fault: str | None = None
    #: The first line read was an answer to a request of an earlier program (a stray
    #: line the adapter wrote after that program ended): nothing of this one was judged.
    stale: bool = False


def _answers_before(line: bytes, first: int) -> bool:
    """Whether ``line`` is a response to a request before ``first`` (already answered)."""
    try:
        response = codec.decode_line(line)
    except ValueError:
        return False
    got = response.get("seq") if type(response) is dict else None
    return type(got) is int and got < first


class _Exchanging:
    """The exchanges of a stdio driver (:class:`~.client.StdioDriver`, which sets every
    attribute named here)."""

    timeout: float
    max_line_bytes: int
    max_timeouts_in_a_row: int
    trace: Trace | None
    protocol: int
    incidents: list[str]
    _timeouts_in_a_row: int
    _given_up: str | None
    _tails: dict[int, tuple[ops.Op, bytes]]
    _named_tails: dict[ops.Op, bytes]

    def _tail(self, op: ops.Op) -> bytes:
        """The bytes of ``op``'s request after its ``seq``: encoded once while it is sent."""
        tails = self._tails
        known = tails.get(id(op))
        if known is not None and known[0] is op:
            return known[1]
        if type(op) in _NAMED_ONLY:
            named = self._named_tails
            remembered = named.get(op)
            if remembered is not None:
                return remembered
            tail = self._encode(op)
            if len(tail) <= _TAIL_CACHE_BYTES:
                if len(named) >= _TAIL_CACHE_ENTRIES:
                    named.clear()
                named[op] = tail
            return tail
        tail = self._encode(op)
        if len(tail) <= _TAIL_CACHE_BYTES:
            if len(tails) >= _TAIL_CACHE_ENTRIES:
                tails.clear()
            tails[id(op)] = (op, tail)
        return tail

    def _encode(self, op: ops.Op) -> bytes:
        """The bytes of ``op``'s request after its ``seq``, in the protocol spoken."""
        if self.protocol == 2:
            return codec.request_tail(v2.counts_to_strings(codec.to_wire(op)))
        return codec.request_tail(op)

    def _outcome(self, op: ops.Op, response: dict[str, Any]) -> Outcome:
        """The outcome of a well-sequenced ``response`` to ``op``, in the protocol spoken."""
        if self.protocol == 2:
            try:
                response = v2.response_from_v2(op, response)
            except codec.WireError as exc:
                only_ok = set(response) - {"seq"} == {"ok"}  # not a garbled line (CONF-9)
                return Broken(f"malformed response to {op.name}: {exc}", claims_success=only_ok)
        return codec.outcome_of(op, response)

    def _quick(self, op: ops.Op, line: bytes, seq: int) -> Outcome | None:
        """:func:`.codec.quick_outcome` where protocol 2 reads the same: a count is a
        string there, so a count's answer is always decoded in full."""
        if self.protocol == 2 and type(op).result == "count":
            return None
        return codec.quick_outcome(op, line, seq)

    def _exchange(self, proc: _AdapterProcess, program: Sequence[ops.Op]) -> _Exchange:
        first = proc.next_seq
        tail = self._tail
        lines = [_REQUEST_LINE % (seq, tail(op)) for seq, op in enumerate(program, first)]
        lines.append(_REQUEST_LINE % (first + len(program), _RESET_TAIL))
        proc.next_seq = first + len(lines)
        if self.trace is not None:
            for line in lines:
                self.trace("send", line[:-1])
        proc.channel.send(b"".join(lines))
        outcomes: list[Outcome] = []
        read_line, quick, trace, timeout = (
            proc.channel.read_line,
            self._quick,
            self.trace,
            self.timeout,
        )
        seq = first
        try:
            for op in program:
                line = read_line(timeout)
                if trace is not None:
                    trace("recv", line)
                outcome = quick(op, line, seq)
                if outcome is None:
                    outcome = self._outcome(op, self._response(line, seq))
                outcomes.append(outcome)
                seq += 1
        except channel.StreamFault as fault:
            index = seq - first
            if index == 0 and fault.what == "seq" and _answers_before(line, first):
                proc.kill()
                what = (
                    f"the adapter wrote a line after the program before had ended: "
                    f"{codec.clip(repr(line), 300)}; it was restarted and the next program "
                    "sent again (one response per request, PROTO-6)"
                )
                self.incidents.append(what)
                return _Exchange([], what, stale=True)
            reason = self._explain(proc, fault, seq, program[index].name, self.timeout)
            outcomes += [Broken(reason, fault.raw)] * (len(program) - index)
            return _Exchange(outcomes, reason)
        reset_seq = first + len(program)
        try:
            line = proc.channel.read_line(self.timeout)
            if self.trace is not None:
                self.trace("recv", line)
            if line == _RESET_OK[1] % reset_seq or line == _RESET_OK[0] % reset_seq:
                extra = proc.channel.stray()
                if extra is None:
                    return _Exchange(outcomes)
                return self._after_reset(proc, outcomes, extra, reset_seq)
            response = self._response(line, reset_seq)
        except channel.StreamFault as fault:
            return _Exchange(outcomes, self._explain(proc, fault, reset_seq, "reset", self.timeout))
        if response != {"seq": reset_seq, "ok": None}:
            proc.kill()
            what = f"the adapter answered reset with {codec.clip(str(response))}; it was restarted"
            self.incidents.append(what)
            return _Exchange(outcomes, what)
        return _Exchange(outcomes)

    def _after_reset(
        self, proc: _AdapterProcess, outcomes: list[Outcome], extra: bytes, reset_seq: int
    ) -> _Exchange:
        """The adapter wrote more after its answer to ``reset``: an incident of this
        program's exchange (its answers were all read and stand, as after a malformed
        answer to ``reset``), never a failure of the next program's first step. Whether
        the extra line has come by now or comes later (then the next exchange finds it,
        sends its program again to a new process and notes it), the verdict is the same."""
        what = (
            f"the adapter wrote a line after its answer to request {reset_seq} (reset), "
            f"where the harness awaited nothing: {codec.clip(repr(extra), 300)} (one "
            "response per request, PROTO-6); the adapter was killed and will be restarted"
        )
        proc.kill()
        self.incidents.append(what)
        return _Exchange(outcomes, what)

    def _send(self, proc: _AdapterProcess, messages: Sequence[Mapping[str, Any]]) -> None:
        first = proc.next_seq
        lines = [codec.encode_line(seq, message) for seq, message in enumerate(messages, first)]
        proc.next_seq = first + len(lines)
        if self.trace is not None:
            for line in lines:
                self.trace("send", line[:-1])
        proc.channel.send(b"".join(lines))

    def _receive(self, proc: _AdapterProcess, seq: int, op: str, timeout: float) -> dict[str, Any]:
        """The response to request ``seq``, or a :class:`~.channel.StreamFault`."""
        line = proc.channel.read_line(timeout)
        if self.trace is not None:
            self.trace("recv", line)
        return self._response(line, seq)

    @staticmethod
    def _response(line: bytes, seq: int) -> dict[str, Any]:
        """The response ``line`` to request ``seq``, or a :class:`~.channel.StreamFault`."""
        try:
            response = codec.decode_line(line)
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            raise channel.StreamFault("garbage", str(exc), codec.clip(repr(line), 2000)) from None
        if type(response) is dict:
            got = response.get("seq")
            if got == seq and type(got) is int:
                return response  # the usual case
        if not isinstance(response, dict) or "seq" not in response:
            raise channel.StreamFault("no-seq", "", codec.clip(repr(line), 2000))
        got = response["seq"]
        if got is None and set(response) == {"seq", "failure"}:
            # An adapter that could not read a request at all answers it with seq null.
            return response
        if got != seq or type(got) is not int:  # 1.0 and true are not the integer 1
            raise channel.StreamFault(
                "seq", codec.clip(repr(got), 60), codec.clip(repr(line), 2000)
            )
        return response

    def _explain(
        self,
        proc: _AdapterProcess,
        fault: channel.StreamFault,
        seq: int,
        op: str,
        timeout: float,
        *,
        restart: bool = True,
    ) -> str:
        """Kill the process and say what happened, quoting the end of its stderr."""
        waiting = f"the response to request {seq} ({op})"
        if fault.what == "timeout":
            self._timeouts_in_a_row += 1
            if self._timeouts_in_a_row >= self.max_timeouts_in_a_row and restart:
                self._given_up = (
                    f"the adapter is unresponsive: {self._timeouts_in_a_row} programs in a row "
                    f"timed out ({timeout:g} s each); it is not started again"
                )
        if fault.what == "eof":
            proc.wait_exit(1.0)
            status = proc.exit_text()
            if status == "still running":
                what = f"the adapter closed its stdout while the harness awaited {waiting}"
            else:
                what = f"the adapter exited ({status}) while the harness awaited {waiting}"
        elif fault.what == "timeout" and (status := proc.exit_text()) != "still running":
            what = (
                f"the adapter exited ({status}) but its standard output stayed open (a process "
                f"it started holds it?) and no answer came within {timeout:g} s: the harness "
                f"awaited {waiting}"
            )
        elif fault.what == "timeout":
            what = (
                f"the adapter did not answer within {timeout:g} s: the harness awaited {waiting}"
                " (an adapter that buffers its standard output must flush it before it waits"
                " for input, PROTO-4)"
            )
        elif fault.what == "oversized":
            what = (
                f"the adapter wrote a line longer than the limit of {self.max_line_bytes} bytes "
                f"({fault.info}) where the harness awaited {waiting}"
            )
        elif fault.what == "garbage":
            what = (
                f"the adapter wrote a line that is not JSON ({fault.info}) where the harness "
                f"awaited {waiting}: {codec.clip(fault.raw, 300)}"
            )
        elif fault.what == "no-seq":
            what = (
                f"the adapter wrote a line that is not a response object with a 'seq' where "
                f"the harness awaited {waiting}: {codec.clip(fault.raw, 300)}"
            )
        else:
            what = (
                f"the adapter answered with seq {fault.info} where the harness awaited "
                f"{waiting} (responses must come one per request, in request order)"
            )
        proc.kill()
        then = "; the adapter was killed and will be restarted" if restart else ""
        self.incidents.append(what)
        return f"{what}{then}\n{proc.stderr_text()}"
