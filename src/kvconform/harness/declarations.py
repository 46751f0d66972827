"""Judging an implementation by what it declares: options and capabilities (CONF-6, CONF-7).

An *option* is a decision of this specification with more than one safe
answer (spec/README.md, Decisions); an implementation declares its answer and
is judged by it. A *capability* is something an implementation may
legitimately not expose or not represent: the raw byte fold (HASH-14), dtype
names outside its own element-type enum (SIG-14), arbitrary named key
parameters (PLAN-17), a discriminant its prefix cache's requests cannot carry
(PREFIX-23).

Two things follow from a declaration, and both live here:

- whether a case applies at all (:func:`option_not_declared`,
  :func:`capability_missing`), with the reason shown to the user;
- how an applicable case's expectations read for this implementation
  (:func:`adapt`): a hash program written with raw bytes re-expressed as the
  u64 mixes that fold the same bytes; a replacement layer's first differing
  field taken in the declared order; a stamp whose dtype the reader cannot hold
  refused as ``unrepresentable`` at its place in the check order (VERIFY-9).

A fixed key schema's own rules (which models it keys, and an ``identity`` case's
models written within it) are :mod:`.key_schema`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kvconform.harness.checks import (
    ErrorIs,
    OutcomeCheck,
    ShapeMismatchIs,
    SignatureIs,
    ValueIs,
    ValueOneOf,
)
from kvconform.harness.key_schema import in_schema, model_spec, outside_schema, schema_models
from kvconform.harness.scenario import Case
from kvconform.protocol import codec
from kvconform.protocol import operations as ops
from kvconform.values import AdapterInfo, MixOp

#: Above this many u64 mixes a raw-bytes program is not re-expressed (a 1 MiB
#: fold would become 131,072 mixes); the case is then not applicable instead.
_MAX_REEXPRESSED = 4096


def option_not_declared(case: Case, info: AdapterInfo) -> str | None:
    """The case assumes an answer to an option that the implementation answers otherwise."""
    for name, value in case.options:
        declared = info.option(name)
        if declared != value and not _answers_alike(case, name, value, declared):
            return f"assumes {name}: {value}; {info.name} declares {name}: {declared} (CONF-6)"
    return _other_block_size(case, info)


def _answers_alike(case: Case, name: str, value: str, declared: str) -> bool:
    """Whether the case's answers are the same under both values.

    - A case written for ``prefix_partial: none`` whose every stored request fills whole
      blocks of the prefix cache it is stored in holds no partial block, so
      ``exact_tail`` answers it alike: a lookup of a request with a partial last block
      finds no such block stored, and stops where ``none`` stops (PREFIX-5; until 7.0.0,
      every request of the case had to fill whole blocks of every cache).
    - A case written for one ``prefix_block_size`` whose every prefix cache has that
      block size is answered alike by an implementation that declares ``any``, which
      makes them as asked (PREFIX-6, since 7.0.0).
    """
    if name == "prefix_block_size" and declared == "any":
        made = (op for op in case.program if isinstance(op, ops.PrefixNew))
        return all(str(op.block_size) == value for op in made)
    if (name, value, declared) != ("prefix_partial", "none", "exact_tail"):
        return False
    sizes: dict[str, int] = {}
    lengths: dict[str, int] = {}
    for op in case.program:  # in order: a handle named again after a restart is a new one
        if isinstance(op, ops.PrefixNew):
            sizes[op.handle] = op.block_size
        elif isinstance(op, ops.RequestNew):
            lengths[op.handle] = len(op.tokens.split(" "))
        elif isinstance(op, ops.PrefixStore):
            size, length = sizes.get(op.prefix), lengths.get(op.request)
            if size is None or length is None or length % size:
                return False  # a partial block stored (or a handle this reading cannot follow)
    return True


def _other_block_size(case: Case, info: AdapterInfo) -> str | None:
    """The case makes a prefix cache of a block size the implementation does not have
    (option ``prefix_block_size``, PREFIX-6)."""
    fixed = info.option("prefix_block_size")
    if fixed == "any":
        return None
    for op in case.program:
        if isinstance(op, ops.PrefixNew) and str(op.block_size) != fixed:
            return (
                f"makes a prefix cache of block size {op.block_size}; {info.name} declares "
                f"prefix_block_size: {fixed}, PREFIX-6 (CONF-6)"
            )
    return None


def capability_missing(case: Case, info: AdapterInfo) -> str | None:
    """The case needs something the implementation declares it does not expose (CONF-7)."""
    rewritable: bool | None = None  # whether schema_models can rewrite it, once asked
    for op in case.program:
        if isinstance(op, ops.Hash) and not info.raw_fold and _reexpressed(op.program) is None:
            return (
                f"folds raw bytes {_why_not_reexpressed(op.program)}; {info.name} "
                "does not expose the raw fold (capabilities.raw_fold: false, HASH-14)"
            )
        spec = model_spec(op)
        if spec is not None and info.key_schema is not None:
            reason = outside_schema(spec, info.key_schema, info.name)
            if reason and rewritable is None:
                rewritable = schema_models(case, info.key_schema) is not None
            if reason and not rewritable:
                return reason
        if (
            isinstance(op, ops.Verify)
            and info.dtypes is not None
            and op.expected.dtype not in info.dtypes
        ):
            return (
                f"the reader's expectation has dtype {op.expected.dtype!r}, which {info.name} "
                f"cannot represent (capabilities.dtypes: {sorted(info.dtypes)}, SIG-14)"
            )
        if isinstance(op, ops.PrefixNew) and op.capacity is not None and not info.prefix_capacity:
            return (
                f"makes a prefix cache of at most {op.capacity} blocks, and {info.name} does "
                "not declare that it can bound one (capabilities.prefix_capacity, PREFIX-24)"
            )
        for given in prefix_inputs_given(op):
            if info.takes(given) or (
                given == "embeds" and info.takes("prompt_embeds") and _whole_prompt(case, op)
            ):
                continue
            listed = sorted(info.prefix_inputs or ())
            declared = f"(capabilities.prefix_inputs: {listed}, PREFIX-23)"
            if given == "embeds" and info.takes("prompt_embeds"):
                return (
                    f"places embeddings over part of a request ({op.name}), and {info.name} "
                    f"takes embeddings only as a whole prompt {declared}"
                )
            return (
                f"gives a request {_INPUT_WORDS[given]} ({op.name}), which the requests "
                f"of {info.name} cannot carry {declared}"
            )
        too_wide = _too_wide_for_reader(op, info)
        if too_wide:
            return (
                f"{too_wide} does not fit the {info.uint_bits}-bit counts {info.name} holds "
                "(capabilities.uint_bits, CONF-7)"
            )
    return _beyond_53_bits(case, info)


def _whole_prompt(case: Case, op: ops.Op) -> bool:
    """Whether ``op``, a ``request_embeds``, covers every position of its request in one
    piece, the one form an engine declaring ``prompt_embeds`` takes (PREFIX-23)."""
    assert isinstance(op, ops.RequestEmbeds)
    program = case.program
    made = [o for o in program if isinstance(o, ops.RequestNew) and o.handle == op.request]
    spans = [o for o in program if isinstance(o, ops.RequestEmbeds) and o.request == op.request]
    if len(made) != 1 or len(spans) != 1:  # a name made twice, or embeddings in pieces
        return False
    return op.start == 0 and op.length == len(made[0].tokens.split())


#: How a reason names each input a step can give (``prompt_embeds`` is a form of ``embeds``).
_INPUT_WORDS = {
    "adapter": "an adapter",
    "media": "a media item",
    "embeds": "embeddings",
    "salt": "a salt",
    "user_key": "a user key",
}


def prefix_inputs_given(op: ops.Op) -> tuple[str, ...]:
    """The discriminants of PREFIX-23 that ``op`` gives a request (or loads, for one)."""
    if isinstance(op, (ops.LoraLoad, ops.RequestLora)):
        return ("adapter",)
    if isinstance(op, ops.RequestMedia):
        return ("media",)
    if isinstance(op, ops.RequestEmbeds):
        return ("embeds",)
    if isinstance(op, ops.RequestNew):
        given = (("salt", op.salt), ("user_key", op.user_key))
        return tuple(name for name, value in given if value is not None)
    return ()


#: The widest count an implementation that declares ``uint_bits: 53`` holds (CONF-13).
_LIMIT_53 = (1 << 53) - 1


def _beyond_53_bits(case: Case, info: AdapterInfo) -> str | None:
    """With ``uint_bits: 53`` (counts held as binary64 numbers, CONF-13): a count the
    case sends or expects beyond 2^53 - 1, anywhere, not only in a block.

    The counts are the JSON integers of an operation's protocol-1 request (what
    protocol 2 sends as strings; u64 values, already strings, are not counts) and of
    the answer the case expects. A stamp a reader verifies is left out: a count of it
    beyond the width is refused as ``unrepresentable`` instead (VERIFY-12), and so are
    the expectations of a ``verify``, which follow from its payload and stamps.
    """
    if info.uint_bits != 53:
        return None
    for op in case.program:
        wire = codec.to_wire(op)
        wire.pop("recorded", None)
        found = _wide_count(wire, op.name)
        if found:
            return _beyond(found, info)
    for check in case.checks:
        if not isinstance(check, OutcomeCheck):
            continue
        op = case.program[check.op_index]
        if isinstance(op, ops.Verify):
            continue
        expect = check.expect
        shown: object = None
        if isinstance(expect, ValueIs) and type(op).result == "count":
            shown = expect.value
        elif isinstance(expect, ValueOneOf):
            shown = list(expect.values)
        elif isinstance(expect, SignatureIs):
            shown = codec.signature_to_wire(expect.signature)
        elif isinstance(expect, ErrorIs):
            shown = {"layer": expect.layer, **dict(expect.values)}
        elif isinstance(expect, ShapeMismatchIs):
            shown = [list(d[1:]) for d in expect.differing]
        found = _wide_count(shown, f"the {op.name} answer expected")
        if found:
            return _beyond(found, info)
    return None


def _beyond(found: str, info: AdapterInfo) -> str:
    return (
        f"{found} is beyond 2^53 - 1, the widest count {info.name} holds "
        "(capabilities.uint_bits: 53, CONF-13)"
    )


def _wide_count(value: object, where: str) -> str | None:
    """Where in ``value`` (a wire form) an integer is above 2^53 - 1, or ``None``."""
    if type(value) is int:
        return f"{where} {value}" if value > _LIMIT_53 else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            found = None if key == "rope" else _wide_count(item, f"{where}.{key}")
            if found:
                return found
    elif isinstance(value, list | tuple):
        for item in value:
            found = _wide_count(item, where)
            if found:
                return found
    return None


def _too_wide_for_reader(op: ops.Op, info: AdapterInfo) -> str | None:
    """A count the reader cannot hold, outside the stamp (where it is refused instead)."""
    if info.uint_bits >= 64:
        return None
    limit = (1 << info.uint_bits) - 1
    payload = op.payload if isinstance(op, ops.Measure | ops.Stamp | ops.Verify) else ()
    for index, layer in enumerate(payload):
        for name in ("n_kv_heads", "head_dim", "seq_len", "k_len", "v_len"):
            if getattr(layer, name) > limit:
                return f"the payload's layer {index} {name} {getattr(layer, name)}"
    if isinstance(op, ops.Measure | ops.Stamp) and op.layout is not None:
        # A writer's layout is held like its counts; a reader's (in a stamp) must be held
        # whole, since VERIFY-10's representability check leaves the layout out.
        for name in ("block_size", "sliding_window"):
            value = getattr(op.layout, name)
            if value is not None and value > limit:
                return f"the writer's layout {name} {value}"
    if isinstance(op, ops.Verify):
        for name in _COUNT_FIELDS:
            if getattr(op.expected, name) > limit:
                return f"the reader's expected {name} {getattr(op.expected, name)}"
    return None


def adapt(case: Case, info: AdapterInfo) -> Case:
    """The case as it reads for an implementation with these declarations."""
    program = list(case.program)
    checks = list(case.checks)
    changed = False
    if info.key_schema is not None:
        models = schema_models(case, info.key_schema)
        if models is not None and any(
            (spec := model_spec(op)) is not None and outside_schema(spec, info.key_schema, "")
            for op in program
        ):
            program = [in_schema(op, *models) for op in program]
            changed = True
    for index, op in enumerate(program):
        if isinstance(op, ops.Hash) and not info.raw_fold:
            mixes = _reexpressed(op.program)
            if mixes is not None and mixes != op.program:
                program[index] = ops.Hash(program=mixes)
                changed = True
    for position, check in enumerate(checks):
        if not isinstance(check, OutcomeCheck):
            continue
        expect = check.expect
        if isinstance(expect, ShapeMismatchIs):
            order = tuple(info.option("replace_layer_order").split(","))
            checks[position] = replace(check, expect=expect.in_order(order))
            changed = True
        op = program[check.op_index]
        if isinstance(op, ops.Verify) and (info.dtypes is not None or info.uint_bits < 64):
            refusal = unrepresentable(op, info)
            if refusal is not None and _before_coherence(expect, op, info):
                checks[position] = replace(check, expect=refusal)
                changed = True
    if not changed:
        return case
    return replace(case, program=tuple(program), checks=tuple(checks))


# -- raw fold (HASH-14) ----------------------------------------------------------


def _reexpressed(program: tuple[MixOp, ...]) -> tuple[MixOp, ...] | None:
    """The same byte stream with every raw ``bytes`` op written as u64 mixes, or ``None``.

    A u64 mix folds its eight little-endian bytes (HASH-4), so raw bytes whose
    length is a multiple of eight fold identically as u64 mixes; other lengths
    have no public form.
    """
    out: list[MixOp] = []
    for mix in program:
        mixes = as_u64_mixes(mix, _MAX_REEXPRESSED - len(out))
        if mixes is None:
            return None
        out.extend(mixes)
    return tuple(out)


def _why_not_reexpressed(program: tuple[MixOp, ...]) -> str:
    """Why :func:`_reexpressed` gave up on ``program``: the words' count or a ragged length."""
    lengths = [len(m.value) * m.repeat for m in program if isinstance(m.value, bytes)]
    if all(n % 8 == 0 for n in lengths):
        return (
            f"of {sum(lengths) // 8} u64 words, more than the {_MAX_REEXPRESSED} u64 mixes "
            "the suite re-expresses a program as"
        )
    return "whose length is not a multiple of eight, which no u64 or string mix can express"


def as_u64_mixes(mix: MixOp, limit: int = _MAX_REEXPRESSED) -> tuple[MixOp, ...] | None:
    """``mix`` without the raw fold: a ``bytes`` op as the u64 mixes folding the same bytes.

    ``None`` when no public mix folds those bytes (a length that is not a
    multiple of eight) or when it would take more than ``limit`` mixes.
    """
    if mix.kind != "bytes":
        return (mix,)
    assert isinstance(mix.value, bytes)
    data = mix.value * mix.repeat
    if len(data) % 8 or len(data) // 8 > limit:
        return None
    return tuple(
        MixOp("u64", int.from_bytes(data[i : i + 8], "little")) for i in range(0, len(data), 8)
    )


# -- dtype names a reader cannot hold (SIG-14, VERIFY-9) ---------------------------


#: The stamp's count fields, in the comparison order of SIG-1.
_COUNT_FIELDS = ("n_layers", "n_kv_heads", "head_dim", "tokens")


def unrepresentable(op: ops.Verify, info: AdapterInfo) -> ErrorIs | None:
    """The refusal a reader owes a stamp it cannot hold (VERIFY-9, ERR-9), or ``None``.

    The first such field in the field order of SIG-1 is the one reported.
    """
    recorded = op.recorded
    if recorded is None:
        return None
    limit = (1 << info.uint_bits) - 1
    for name in ("n_layers", "n_kv_heads", "head_dim", "dtype", "tokens"):
        value = getattr(recorded, name)
        if name == "dtype":
            if info.dtypes is not None and value not in info.dtypes:
                return ErrorIs("unrepresentable", "dtype", None, {"found": value})
        elif value > limit:
            return ErrorIs("unrepresentable", name, None, {"found": value})
    return None


def _before_coherence(expect: object, op: ops.Verify, info: AdapterInfo) -> bool:
    """Whether the representability check comes first for this block (VERIFY-9).

    It runs after the marked and format-version checks: an unreadable version
    stays ``unsupported_format``, whatever the stamp's dtype.
    """
    assert op.recorded is not None
    return op.recorded.format_version in info.format_reads and not (
        isinstance(expect, ErrorIs) and expect.kind == "unsupported_format"
    )
