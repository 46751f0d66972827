"""The JavaScript skeleton: one ``adapter.js`` for Node, no packages, run as ``node adapter.js``.

It uses nothing but the globals ``process`` and ``console``, so it runs the same
whether Node treats the file as CommonJS or as an ES module. It speaks protocol 2
(every count a decimal string, PROTO-33), so the built-in ``JSON.parse`` reads every
request exactly, and declares that its counts are Numbers (``uint_bits: 53``, CONF-13).
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
// The protocol version this adapter speaks (spec/protocol.md): 2, in which every count
// travels as a decimal string (PROTO-33), so JSON.parse reads every request exactly.
const PROTOCOL = 2;
@@CLASSES_NOTE@@
const CLASSES = @@CLASSES@@;
@@FORMAT_NOTE@@
const FORMAT = @@FORMAT@@;
// The answers you declare where the specification admits more than one (CONF-6; the
// values are in spec/README.md), by option name, such as
// { truncate_past_length: 'refuse' }. An option left out takes its default.
const OPTIONS = {};
// What your types hold where it narrows what the suite may send (CONF-7), such as
// { uint_bits: 32 }: the table of hello in spec/protocol.md lists them. A JavaScript
// engine holds its counts as Numbers, exact up to 2^53 - 1: uint_bits 53 (CONF-13)
// tells the suite to send no wider count (a case that needs one is not applicable).
// Take it out only if your engine holds every count as a BigInt.
const CAPABILITIES = { uint_bits: 53 };

// The objects your implementation makes, by the handle name the harness chose
// (PROTO-15): bound by the operations with a `handle` field, released by `drop` and
// by `reset`. Answer failure to a request naming a handle not in it.
const HANDLES = new Map();

// Numbers. Under protocol 2 every count of a request (lengths, indices, shapes,
// token counts, versions, layouts) is a string of decimal digits, and the 64-bit
// values (ids, keys, u64 parameters) are strings as in protocol 1: JSON.parse loses
// nothing. Read a count with count(text), a Number; a 64-bit value with BigInt(text).
// A stamp to verify may hold a count wider than a Number (up to 2^64 - 1): read those
// with bigCount(text) and refuse one above MAX_COUNT as unrepresentable, with the
// count exactly as sent (VERIFY-12). Answer with Numbers and BigInts: every integer of
// an answer is written as a decimal string for you (see serve below).

// The widest count a Number holds exactly: 2^53 - 1.
const MAX_COUNT = Number.MAX_SAFE_INTEGER;
const DIGITS = /^(0|[1-9][0-9]{0,19})$/;

// A count as protocol 2 writes it, as a Number; an Error for anything else, or for a
// count wider than a Number (the suite sends none outside a stamp: uint_bits 53).
function count(text) {
  if (typeof text !== 'string' || !DIGITS.test(text)) {
    throw new Error(`expected a count as a string of decimal digits, got ${JSON.stringify(text)}`);
  }
  const value = Number(text);
  if (!Number.isSafeInteger(value)) {
    throw new Error(`the count ${text} is wider than a Number holds (2^53 - 1)`);
  }
  return value;
}

// A count as protocol 2 writes it, exactly, as a BigInt (a stamp's counts).
function bigCount(text) {
  if (typeof text !== 'string' || !DIGITS.test(text)) {
    throw new Error(`expected a count as a string of decimal digits, got ${JSON.stringify(text)}`);
  }
  return BigInt(text);
}

// Every integer of an answer as its decimal string (PROTO-33): Numbers and BigInts.
function countsAsStrings(key, value) {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Number.isInteger(value)) return String(value);
  return value;
}

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
// of the four forms above. Where a line below says "integer", protocol 2 sends a
// string of decimal digits: read it with count() (or bigCount() in a stamp).
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
  // Protocol 2: every integer of an answer as a decimal string; hello's answer (its
  // protocol, format and capabilities) and seq are integers in every version.
  const written =
    request.op === 'hello' ? JSON.stringify(body) : JSON.stringify(body, countsAsStrings);
  return {
    text: `{"seq":${seq},${written.slice(1)}`,
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
