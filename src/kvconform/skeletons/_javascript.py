"""The JavaScript skeleton: one ``adapter.js`` for Node, no packages, run as ``node adapter.js``.

It uses nothing but the globals ``process`` and ``console``, so it runs the same
whether Node treats the file as CommonJS or as an ES module.
"""

from __future__ import annotations

import json

from kvconform.skeletons._common import (
    Plan,
    classes_note,
    comment,
    describe,
    fill,
    format_note,
    header_lines,
)

TEMPLATE = """\
#!/usr/bin/env node
@@HEADER@@
'use strict';

const NAME = @@NAME@@;
const VERSION = '0.1.0';
// The protocol version this adapter speaks (spec/protocol.md).
const PROTOCOL = 1;
@@CLASSES_NOTE@@
const CLASSES = @@CLASSES@@;
@@FORMAT_NOTE@@
const FORMAT = @@FORMAT@@;
// The answers you declare where the specification admits more than one (CONF-6; the
// values are in spec/README.md), by option name, such as
// { truncate_past_length: 'refuse' }. An option left out takes its default.
const OPTIONS = {};
// What your types hold where it narrows what the suite may send (CONF-7), such as
// { uint_bits: 32 }: the table of hello in spec/protocol.md lists them.
const CAPABILITIES = {};

// The objects your implementation makes, by the handle name the harness chose
// (PROTO-15): bound by the operations with a `handle` field, released by `drop` and
// by `reset`. Answer failure to a request naming a handle not in it.
const HANDLES = new Map();

// Numbers: JSON.parse reads every number as a double. The 64-bit values travel as
// decimal strings (read them with BigInt), but the counts of the SIG-15 probes go up
// to 2^64-1 as JSON integers: a signature implementation needs a JSON reader that
// keeps them exact (spec/protocol.md, "Note on large counts").

// --- the four forms of an answer (spec/protocol.md, "Requests and responses") ---

// Success, with the operation's value (64-bit integers as decimal strings).
function ok(value = null) {
  return { ok: value };
}

// A refusal the specification defines (ERR-8 kinds; PROTO-21).
function error(kind, message, { field = null, layer = null, values = {} } = {}) {
  return { error: { kind, field, layer, values, message } };
}

// The adapter itself failed: an exception, an unknown handle, a bad request.
function failure(message) {
  return { failure: message };
}

// An operation of a class this adapter does not claim (PROTO-23).
function unsupported(message) {
  return { unsupported: message };
}

// REPLACE every use: the answer of an operation not written yet.
function notImplemented(op) {
  return failure('not implemented: ' + op);
}

// --- the operations of the claimed classes: REPLACE each body -------------------
// Each takes the decoded request (an object: seq, op and the fields) and returns one
// of the four forms above.
@@OPERATIONS@@

// The operations of the claimed classes, by wire name.
const OPERATIONS = {
@@DISPATCH@@
};

// The operations of the classes not claimed, with their class: answered unsupported.
const UNCLAIMED = @@UNCLAIMED@@;

// --- the control operations -----------------------------------------------------

// The handshake (PROTO-10, PROTO-11): the description of this adapter.
function hello(request) {
  if (request.protocol !== PROTOCOL) {
    return failure(
      `protocol ${JSON.stringify(request.protocol)} is not supported: ` +
        `${NAME} speaks protocol ${PROTOCOL}`
    );
  }
  return ok({
    name: NAME,
    version: VERSION,
    language: 'javascript',
    protocol: PROTOCOL,
    classes: CLASSES,
    format: FORMAT,
    options: OPTIONS,
    capabilities: CAPABILITIES,
  });
}

// The end of a program: release every handle as drop would (PROTO-16). Keep id
// counters and everything else: ids are never reset.
function reset(request) {
  HANDLES.clear();
  return ok(null);
}

// Many hash programs in one request (PROTO-20).
function hashBatch(request) {
@@HASH_BATCH@@
}

function owns(table, key) {
  return Object.prototype.hasOwnProperty.call(table, key);
}

function answer(request) {
  const op = request.op;
  if (typeof op !== 'string') {
    return failure("the request has no 'op' (a string)");
  }
  if (op === 'hello') return hello(request);
  if (op === 'reset') return reset(request);
  if (op === 'shutdown') return ok(null); // the adapter exits once it is written (PROTO-24)
  if (op === 'hash_batch') return hashBatch(request);
  if (owns(OPERATIONS, op)) return OPERATIONS[op](request);
  if (owns(UNCLAIMED, op)) {
    return unsupported(`${op} needs the class ${UNCLAIMED[op]}, which ${NAME} does not claim`);
  }
  return failure(`unknown operation ${JSON.stringify(op)}`);
}

// A request answered with a failure, its seq unknown (PROTO-9).
function refused(message) {
  return JSON.stringify({ seq: null, failure: message });
}

// One request line to one response line; `done` is set by an answered shutdown.
function serve(line) {
  let request;
  try {
    request = JSON.parse(line);
  } catch (err) {
    return { text: refused(`the request is not JSON: ${err.message}`) };
  }
  const seq = request !== null && typeof request === 'object' ? request.seq : undefined;
  if (!Number.isSafeInteger(seq) || seq < 0) {
    return { text: refused("the request has no 'seq' (a non-negative integer)") };
  }
  let body;
  try {
    body = answer(request);
  } catch (err) {
    // One answer per request, always (PROTO-22).
    console.error(err);
    body = failure(`${request.op} raised ${err && err.name}: ${err && err.message}`);
  }
  return {
    text: JSON.stringify({ seq, ...body }),
    done: request.op === 'shutdown' && 'ok' in body,
  };
}

// Anything logged goes to standard error: one stray line on standard output would
// put every later response out of step (PROTO-1).
console.log = console.info = console.debug = console.error;

let pending = '';
let finished = false;
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk) => {
  if (finished) return;
  const lines = (pending + chunk).split('\\n');
  pending = lines.pop();
  const out = [];
  for (const line of lines) {
    const { text, done } = serve(line);
    out.push(text + '\\n');
    if (done) {
      finished = true;
      process.stdin.pause();
      process.stdout.write(out.join(''), () => process.exit(0));
      return;
    }
  }
  // Every response owed is written before waiting for more input (PROTO-4).
  if (out.length) process.stdout.write(out.join(''));
});
// End of input: the harness is gone; Node exits once the last response is written
// (PROTO-24).
process.stdin.on('end', () => {});
"""

_BATCH_CLAIMED = """\
  // REPLACE once opHash works, for example:
  //   const results = [];
  //   for (const program of request.programs) {
  //     const body = opHash({ op: 'hash', program });
  //     if (!('ok' in body)) return body;
  //     results.push(body.ok);
  //   }
  //   return ok(results);
  return notImplemented('hash_batch');"""

_BATCH_UNCLAIMED = """\
  return unsupported(`hash_batch needs the class hash, which ${NAME} does not claim`);"""

_REPLACE = (
    "the body of each op<Operation> function (each answers notImplemented(...) now) "
    "with a call on your implementation, answering in one of the four forms: ok, error, "
    "failure, unsupported;",
    "hashBatch, when you claim hash (run opHash on each program);",
    "NAME and VERSION;",
    "CLASSES and FORMAT if you claim other classes (add an op function for each "
    "operation of a class you add, and take it out of UNCLAIMED).",
)


def _camel(op: str) -> str:
    return "op" + "".join(part.capitalize() for part in op.split("_"))


def _function(op: str, doc: str) -> str:
    return (
        f"\n{doc}\nfunction {_camel(op)}(request) {{\n"
        f"  return notImplemented('{op}'); // REPLACE\n}}\n"
    )


def render(chosen: Plan) -> tuple[dict[str, str], str, str]:
    header = "\n".join(f"// {line}".rstrip() for line in header_lines(chosen, _REPLACE))
    unclaimed = (
        "{\n" + "".join(f"  {s.name}: '{s.needs}',\n" for s in chosen.unclaimed) + "}"
        if chosen.unclaimed
        else "{}"
    )
    text = fill(
        TEMPLATE,
        HEADER=header,
        NAME=f"'{chosen.name}'",
        CLASSES=json.dumps(list(chosen.classes)).replace('"', "'"),
        CLASSES_NOTE=comment(
            f"The conformance classes claimed (CONF-1): {classes_note(chosen)}.", "//"
        ),
        FORMAT_NOTE=comment(format_note(chosen), "//"),
        FORMAT=f"{{ writes: {chosen.format_writes or 'null'}, "
        f"reads: {json.dumps(list(chosen.format_reads))} }}",
        OPERATIONS="".join(_function(s.name, comment(describe(s), "//")) for s in chosen.claimed),
        DISPATCH="\n".join(f"  {s.name}: {_camel(s.name)}," for s in chosen.claimed),
        UNCLAIMED=unclaimed,
        HASH_BATCH=_BATCH_CLAIMED if "hash" in chosen.classes else _BATCH_UNCLAIMED,
    )
    return {"adapter.js": text}, "", "node adapter.js"
