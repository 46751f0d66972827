"""The Python skeleton: one ``adapter.py``, standard library only, run as ``python3 adapter.py``."""

from __future__ import annotations

import json
import textwrap

from kvconform.skeletons._common import (
    Plan,
    classes_note,
    comment,
    describe,
    fill,
    format_note,
    header_lines,
    not_implemented,
)

TEMPLATE = '''\
#!/usr/bin/env python3
@@HEADER@@
"""@@NAME@@: a kvconform stdio adapter (spec/protocol.md), standard library only.

Run as ``python3 adapter.py``: JSON requests, one a line, on standard input; one
JSON response a line, in order, on standard output (flushed after each);
anything else (logs, print) goes to standard error.
"""

import json
import sys
import traceback

NAME = "@@NAME@@"
VERSION = "0.1.0"
#: The protocol version this adapter speaks (spec/protocol.md).
PROTOCOL = 1
@@CLASSES_NOTE@@
CLASSES = @@CLASSES@@
@@FORMAT_NOTE@@
FORMAT = @@FORMAT@@
#: The answers you declare where the specification admits more than one (CONF-6; the
#: values are in spec/README.md), by option name, such as
#: {"truncate_past_length": "refuse"}. An option left out takes its default.
OPTIONS = {}
#: What your types hold where it narrows what the suite may send (CONF-7), such as
#: {"uint_bits": 32}: the table of hello in spec/protocol.md lists them.
CAPABILITIES = {}

#: The objects your implementation makes, by the handle name the harness chose
#: (PROTO-15): bound by the operations with a ``handle`` field, released by ``drop``
#: and by ``reset``. Answer ``failure`` to a request naming a handle not in it.
HANDLES = {}


# --- the four forms of an answer (spec/protocol.md, "Requests and responses") ---


def ok(value=None):
    """Success, with the operation's value (64-bit integers as decimal strings)."""
    return {"ok": value}


def error(kind, message, field=None, layer=None, values=None):
    """A refusal the specification defines (ERR-8 kinds; PROTO-21)."""
    return {
        "error": {
            "kind": kind,
            "field": field,
            "layer": layer,
            "values": values or {},
            "message": message,
        }
    }


def failure(message):
    """The adapter itself failed: an exception, an unknown handle, a bad request."""
    return {"failure": message}


def unsupported(message):
    """An operation of a class this adapter does not claim (PROTO-23)."""
    return {"unsupported": message}


def not_implemented(op):
    """REPLACE every use: the answer of an operation not written yet."""
    return failure("not implemented: " + op)


# --- the operations of the claimed classes: REPLACE each body ------------------
# Each takes the decoded request (a dict: "seq", "op" and the fields) and returns
# one of the four forms above.
@@OPERATIONS@@

#: The operations of the claimed classes, by wire name.
OPERATIONS = {
@@DISPATCH@@
}

#: The operations of the classes not claimed, with their class: answered unsupported.
UNCLAIMED = @@UNCLAIMED@@


# --- the control operations ---------------------------------------------------


def hello(request):
    """The handshake (PROTO-10, PROTO-11): the description of this adapter."""
    wanted = request.get("protocol")
    if wanted != PROTOCOL or isinstance(wanted, bool):
        return failure(
            f"protocol {wanted!r} is not supported: {NAME} speaks protocol {PROTOCOL}"
        )
    return ok(
        {
            "name": NAME,
            "version": VERSION,
            "language": "python",
            "protocol": PROTOCOL,
            "classes": CLASSES,
            "format": FORMAT,
            "options": OPTIONS,
            "capabilities": CAPABILITIES,
        }
    )


def reset(request):
    """The end of a program: release every handle as drop would (PROTO-16).

    Keep id counters and everything else: ids are never reset.
    """
    HANDLES.clear()
    return ok(None)


def hash_batch(request):
    """Many hash programs in one request (PROTO-20)."""
@@HASH_BATCH@@


def answer(request):
    op = request.get("op")
    if not isinstance(op, str):
        return failure("the request has no 'op' (a string)")
    if op == "hello":
        return hello(request)
    if op == "reset":
        return reset(request)
    if op == "shutdown":
        return ok(None)  # main() exits once it is written (PROTO-24)
    if op == "hash_batch":
        return hash_batch(request)
    if op in OPERATIONS:
        return OPERATIONS[op](request)
    if op in UNCLAIMED:
        return unsupported(
            f"{op} needs the class {UNCLAIMED[op]}, which {NAME} does not claim"
        )
    return failure(f"unknown operation {op!r}")


def main():
    # Nothing but responses goes to standard output (PROTO-1): a stray print
    # goes to standard error instead.
    protocol_out = sys.stdout
    sys.stdout = sys.stderr
    for line in sys.stdin.buffer:
        seq, op = None, None
        try:
            request = json.loads(line)
        except ValueError as exc:  # not JSON, or not UTF-8 (PROTO-9)
            body = failure(f"the request is not JSON: {exc}")
        else:
            if isinstance(request, dict):
                seq, op = request.get("seq"), request.get("op")
            if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
                seq = None
                body = failure("the request has no 'seq' (a non-negative integer)")
            else:
                try:
                    body = answer(request)
                except Exception as exc:  # one answer per request, always (PROTO-22)
                    traceback.print_exc(file=sys.stderr)
                    body = failure(f"{op} raised {type(exc).__name__}: {exc}")
        response = {"seq": seq}
        response.update(body)
        protocol_out.write(json.dumps(response) + "\\n")
        protocol_out.flush()  # never hold a response back (PROTO-4)
        if op == "shutdown" and "ok" in body:
            return 0
    return 0  # end of input: the harness is gone (PROTO-24)


if __name__ == "__main__":
    sys.exit(main())
'''

_BATCH_CLAIMED = """\
    # REPLACE once op_hash works, for example:
    #     results = []
    #     for program in request["programs"]:
    #         body = op_hash({"op": "hash", "program": program})
    #         if "ok" not in body:
    #             return body
    #         results.append(body["ok"])
    #     return ok(results)
    return not_implemented("hash_batch")"""

_BATCH_UNCLAIMED = """\
    return unsupported(f"hash_batch needs the class hash, which {NAME} does not claim")"""


def _function(op: str, doc: str) -> str:
    return (
        f"\n\ndef op_{op}(request):\n"
        f'    """{doc}"""\n'
        f"    return not_implemented({json.dumps(op)})  # REPLACE\n"
    )


def render(chosen: Plan) -> tuple[dict[str, str], str, str]:
    header = "\n".join(f"# {line}".rstrip() for line in header_lines(chosen, _REPLACE))
    assert all(not_implemented(s.name) == f"not implemented: {s.name}" for s in chosen.claimed)
    text = fill(
        TEMPLATE,
        HEADER=header,
        NAME=chosen.name,
        CLASSES=json.dumps(list(chosen.classes)),
        CLASSES_NOTE=comment(
            f"The conformance classes claimed (CONF-1): {classes_note(chosen)}.", "#:"
        ),
        FORMAT="{" + f'"writes": {chosen.format_writes or "None"}, '
        f'"reads": {list(chosen.format_reads)}' + "}",
        FORMAT_NOTE=comment(format_note(chosen), "#:"),
        OPERATIONS="".join(_function(s.name, _wrap_doc(describe(s))) for s in chosen.claimed),
        DISPATCH="\n".join(f'    "{s.name}": op_{s.name},' for s in chosen.claimed),
        UNCLAIMED=_unclaimed(chosen),
        HASH_BATCH=_BATCH_CLAIMED if "hash" in chosen.classes else _BATCH_UNCLAIMED,
    )
    return {"adapter.py": text}, "", "python3 adapter.py"


_REPLACE = (
    "the body of each op_<operation> function (each answers not_implemented(...) now) "
    "with a call on your implementation, answering in one of the four forms: ok, error, "
    "failure, unsupported;",
    "hash_batch, when you claim hash (run op_hash on each program);",
    "NAME and VERSION;",
    "CLASSES and FORMAT if you claim other classes (add an op_ function for each "
    "operation of a class you add, and take it out of UNCLAIMED).",
)


def _unclaimed(chosen: Plan) -> str:
    if not chosen.unclaimed:
        return "{}"
    rows = "".join(f'\n    "{s.name}": "{s.needs}",' for s in chosen.unclaimed)
    return "{" + rows + "\n}"


def _wrap_doc(text: str) -> str:
    """A docstring body that keeps its function within 88 columns."""
    lines = textwrap.wrap(text, 78)
    if len(lines) == 1:
        return lines[0]
    return "\n    ".join(lines) + "\n    "
