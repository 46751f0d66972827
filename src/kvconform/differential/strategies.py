"""The program writers of the generated checks, and their Hypothesis strategies.

Every program stays inside the operations' preconditions (a handle is used only
while it is live, a hook toggled only if the model's configuration declares it,
shapes and counts are positive where the operations require it), so the
reference answers every operation; what varies is everything an implementation
can get wrong. Every value a program holds can be written in a scenario file
(:mod:`kvconform.differential.export`; NaN payloads by their bits), so any
counterexample can be replayed.

A program is written by a plain function of a :class:`Source` of integer
choices (``source.integer(lo, hi)``); every other value (a u64, a float's bits,
a string, a list) is made of such choices. Three sources feed the same writers:

- :class:`RandomSource`, a seeded pseudo-random source that records its choices:
  the fast path the engine uses to write programs (no Hypothesis involved);
- :class:`ReplaySource`, which replays a recorded (and edited) choice sequence:
  the engine's shrinker edits the choices of a failing program and replays them;
- :class:`HypothesisSource`, which draws every choice from Hypothesis: the
  strategies of this module (:func:`key_programs`, :func:`hash_programs`,
  :func:`block_programs`, :data:`texts`, ...) for use with ``@given``.

Choices are ordered so that smaller is simpler: the choice 0 is the first rule,
the first preset, the absence of a fault, the end of a list; a program whose
choices run out ends early and plainly. The shrinker relies on this.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import random
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar, cast

from hypothesis import strategies as st

from kvconform.differential.compare import Program
from kvconform.harness.declarations import as_u64_mixes, outside_schema
from kvconform.protocol import operations as ops
from kvconform.protocol.operations import OpSpec
from kvconform.values import (
    SHAPE_FIELDS,
    AdapterInfo,
    Geometry,
    LayerDesc,
    Layout,
    MixOp,
    ModelSpec,
    Param,
    PlanIdentity,
    Signature,
    StepInputs,
)

T = TypeVar("T")

U64_MAX = (1 << 64) - 1

# Sources of choices -------------------------------------------------------------------


class Source(Protocol):
    """Where a program writer's choices come from."""

    def integer(self, lo: int, hi: int) -> int:
        """A whole number from ``lo`` to ``hi`` inclusive; ``lo`` is the simplest."""
        ...

    def group(self, write: Callable[[], T]) -> T:
        """Run ``write`` as one unit (a step, a list element) the shrinker may delete whole."""
        ...


#: A program writer: a function of a source.
Writer = Callable[[Source], T]

#: A span of a choice sequence, ``[start, end)``, made by one :meth:`Source.group`.
Span = tuple[int, int]


class RecordedSource:
    """A source that records the choices made (as offsets from ``lo``) and the spans of
    groups, so that a program can be written again from its choices, or from edited ones."""

    def __init__(self) -> None:
        self.choices: list[int] = []
        self.spans: list[Span] = []

    def integer(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def group(self, write: Callable[[], T]) -> T:
        start = len(self.choices)
        value = write()
        if len(self.choices) > start:
            self.spans.append((start, len(self.choices)))
        return value


class RandomSource(RecordedSource):
    """Pseudo-random choices from a seeded :class:`random.Random`, recorded.

    Only ``getrandbits`` is used (its output is fixed for a seed across Python
    versions), so a seed writes the same program everywhere.
    """

    def __init__(self, rng: random.Random) -> None:
        super().__init__()
        self._bits = rng.getrandbits

    def integer(self, lo: int, hi: int) -> int:
        span = hi - lo
        if span <= 0:
            self.choices.append(0)
            return lo
        width = span.bit_length()
        offset = self._bits(width)
        while offset > span:
            offset = self._bits(width)
        self.choices.append(offset)
        return lo + offset


class Overrun(Exception):
    """A replayed choice sequence asked for more choices than any program needs."""


class ReplaySource(RecordedSource):
    """Replays ``prefix`` (offsets from ``lo``, clamped to each range), then chooses 0.

    What was actually chosen is recorded, so an edited sequence reads back normalized.
    """

    def __init__(self, prefix: Sequence[int], limit: int = 100_000) -> None:
        super().__init__()
        self._prefix = prefix
        self._limit = limit

    def integer(self, lo: int, hi: int) -> int:
        index = len(self.choices)
        if index >= self._limit:
            raise Overrun(f"more than {self._limit} choices")
        wanted = self._prefix[index] if index < len(self._prefix) else 0
        offset = min(wanted, max(0, hi - lo))
        self.choices.append(offset)
        return lo + offset


@functools.lru_cache(maxsize=4096)
def _integers(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.integers(lo, hi)


class HypothesisSource:
    """Every choice drawn from Hypothesis (inside a ``@st.composite`` or ``st.data()``)."""

    def __init__(self, draw: Callable[[st.SearchStrategy[Any]], Any]) -> None:
        self._draw = draw

    def integer(self, lo: int, hi: int) -> int:
        value: int = self._draw(_integers(lo, hi))
        return value

    def group(self, write: Callable[[], T]) -> T:
        """One Hypothesis span, so that Hypothesis's shrinker can delete it whole."""

        def inner(draw: Callable[[st.SearchStrategy[Any]], Any]) -> T:
            outer, self._draw = self._draw, draw
            try:
                return write()
            finally:
                self._draw = outer

        value: T = self._draw(st.composite(inner)())
        return value


def strategy(write: Writer[T]) -> st.SearchStrategy[T]:
    """``write`` as a Hypothesis strategy (each choice one Hypothesis draw)."""

    def inner(draw: Callable[[st.SearchStrategy[Any]], Any]) -> T:
        return write(HypothesisSource(draw))

    return st.composite(inner)()


# Choices made of integers ----------------------------------------------------------------


def pick(src: Source, options: Sequence[T]) -> T:
    """One of ``options`` (the first is the simplest)."""
    return options[src.integer(0, len(options) - 1)]


def flag(src: Source) -> bool:
    return src.integer(0, 1) == 1


def items(
    src: Source, write: Callable[[], T], max_size: int, min_size: int = 0, mean_extra: int = 5
) -> list[T]:
    """A list of ``min_size`` to ``max_size`` elements, about ``mean_extra`` more than the
    minimum on average; each element is a group, and the choice 0 ends the list."""
    out: list[T] = []
    while len(out) < max_size and (len(out) < min_size or src.integer(0, mean_extra) != 0):
        out.append(src.group(write))
    return out


#: Bit widths of a wide integer, small first: most wide draws are small, as Hypothesis's are.
_WIDTHS = (8, 16, 32, 64)


def wide(src: Source, lo: int, hi: int) -> int:
    """A whole number of a wide range, biased toward ``lo`` and the range's ends."""
    how = src.integer(0, 7)
    if how == 7:
        return pick(src, (lo, hi, lo + 1, hi - 1)) if hi - lo > 1 else pick(src, (lo, hi))
    width = _WIDTHS[min(how // 2, len(_WIDTHS) - 1)]
    return lo + src.integer(0, min(hi - lo, (1 << width) - 1))


def u64(src: Source) -> int:
    branch = src.integer(0, 2)
    if branch == 0:
        return pick(src, U64_EDGES)
    if branch == 1:
        return wide(src, 0, U64_MAX)
    return src.integer(0, 1000)


def f64_bits(value: float) -> int:
    return int.from_bytes(struct.pack("<d", value), "little")


def f64_from_bits(bits: int) -> float:
    return float(struct.unpack("<d", bits.to_bytes(8, "little"))[0])


#: Floats that break naive code (after Hypothesis's own list); each is drawn with either sign.
_NASTY_FLOATS = (
    0.0,
    0.5,
    1.1,
    1.5,
    1.9,
    1 / 3,
    10e6,
    10e-6,
    1.175494351e-38,
    5e-324,
    2.2250738585072014e-308,
    1.7976931348623157e308,
    3.402823466e38,
    9007199254740992.0,
    1 - 10e-6,
    2 + 10e-6,
    1.192092896e-07,
    2.2204460492503131e-016,
    math.inf,
    math.nan,
)


def any_float(src: Source) -> float:
    """Any binary64 value: nasty ones (NaNs, infinities, signed zeros, subnormals), small
    whole numbers, fractions and any bit pattern at all."""
    how = src.integer(0, 3)
    if how == 0:
        value = pick(src, _NASTY_FLOATS)
    elif how == 1:
        value = float(src.integer(0, 1000))
    elif how == 2:
        value = src.integer(0, 1 << 20) / (1 << src.integer(0, 40))
    else:
        return f64_from_bits(wide(src, 0, U64_MAX))
    return -value if flag(src) else value


def bounded_float(src: Source, lo: float, hi: float) -> float:
    """A float from ``lo`` to ``hi``: an end, or a point between."""
    how = src.integer(0, 3)
    if how == 0:
        return lo
    if how == 1:
        return hi
    if how == 2 and math.floor(hi) >= math.ceil(lo):
        return float(src.integer(math.ceil(lo), math.floor(hi)))
    return lo + (hi - lo) * (src.integer(0, 1 << 24) / (1 << 24))


#: Unicode code points but the surrogates (HASH-13 refuses unpaired surrogates).
_BMP_GAP = 0xE000 - 0xD800


def code_point(src: Source) -> int:
    how = src.integer(0, 3)
    if how == 0:
        return 0x20 + src.integer(0, 0x5E)  # printable ASCII
    if how == 1:
        return src.integer(0, 0xFF)  # controls, NUL, Latin-1
    if how == 2:
        cp = src.integer(0x100, 0xFFFF - _BMP_GAP)
        return cp + _BMP_GAP if cp >= 0xD800 else cp
    return src.integer(0x10000, 0x10FFFF)  # astral


def text(src: Source, max_size: int = 10) -> str:
    return "".join(chr(c) for c in items(src, lambda: code_point(src), max_size))


def binary(src: Source, min_size: int, max_size: int) -> bytes:
    return bytes(items(src, lambda: src.integer(0, 255), max_size, min_size))


# Values ----------------------------------------------------------------------------

#: u64 values where byte order, sign and width mistakes show.
U64_EDGES = (
    0,
    1,
    2,
    0xFF,
    0x100,
    0xFFFF_FFFF,
    1 << 32,
    (1 << 63) - 1,
    1 << 63,
    U64_MAX - 1,
    U64_MAX,
)

#: binary64 bit patterns: signed zeros, subnormals, infinities, quiet and
#: signalling NaNs with payloads and signs, ordinary numbers.
F64_EDGES = (
    0x0000_0000_0000_0000,  # +0.0
    0x8000_0000_0000_0000,  # -0.0
    0x0000_0000_0000_0001,  # smallest subnormal
    0x8000_0000_0000_0001,  # smallest negative subnormal
    0x000F_FFFF_FFFF_FFFF,  # largest subnormal
    0x0010_0000_0000_0000,  # smallest normal
    0x7FF0_0000_0000_0000,  # +inf
    0xFFF0_0000_0000_0000,  # -inf
    0x7FF8_0000_0000_0000,  # the canonical quiet NaN
    0xFFF8_0000_0000_0000,  # negative quiet NaN
    0x7FF0_0000_0000_0001,  # signalling NaN, payload 1
    0x7FF4_0000_0000_0000,  # signalling NaN
    0x7FF8_0000_0000_0001,  # quiet NaN with a payload
    0x7FFF_FFFF_FFFF_FFFF,  # NaN, all payload bits
    0xFFFF_FFFF_FFFF_FFFF,  # negative NaN, all payload bits
    0x3FF0_0000_0000_0000,  # 1.0
    0x7FEF_FFFF_FFFF_FFFF,  # largest finite
)


def f64_pattern(src: Source) -> int:
    branch = src.integer(0, 2)
    if branch == 0:
        return pick(src, F64_EDGES)
    if branch == 1:
        return wide(src, 0, U64_MAX)
    return f64_bits(any_float(src))


#: Strings where encoding mistakes show: empty, NUL, combining marks, a BOM,
#: 2-, 3- and 4-byte UTF-8 sequences, the last code point.
SPECIAL_STRINGS = (
    "",
    "a",
    "ab",
    "\x00",
    "é",
    "e\u0301",
    "\ufeff",
    "日本語",
    "𝄞",
    "\U0001f600\U0001f600",
    "\U0010ffff",
    "a\x00b",
    "\u2028\x85",
)


def any_text(src: Source) -> str:
    """Any text a string primitive accepts: no unpaired surrogates (HASH-13 refuses those)."""
    return pick(src, SPECIAL_STRINGS) if src.integer(0, 1) == 0 else text(src)


_FLOAT_EDGES = (
    1e-5,
    1e-6,
    0.0,
    -0.0,
    5e-324,
    2.2250738585072014e-308,
    math.inf,
    -math.inf,
    math.nan,
    0.5,
    10000.0,
    500000.0,
    1e300,
)


def param_float(src: Source) -> float:
    """Float parameters, NaN payloads and signed zeros included (PLAN-16 names both)."""
    branch = src.integer(0, 2)
    if branch == 0:
        return pick(src, _FLOAT_EDGES)
    if branch == 1:
        return any_float(src)
    return f64_from_bits(pick(src, F64_EDGES))


def param_value(src: Source) -> Param:
    branch = src.integer(0, 3)
    if branch == 0:
        return src.integer(0, 64)
    if branch == 1:
        return pick(src, U64_EDGES)
    if branch == 2:
        return param_float(src)
    return any_text(src)


#: Hypothesis strategies of the values above.
u64s: st.SearchStrategy[int] = strategy(u64)
f64_patterns: st.SearchStrategy[int] = strategy(f64_pattern)
texts: st.SearchStrategy[str] = strategy(any_text)
param_floats: st.SearchStrategy[float] = strategy(param_float)
param_values: st.SearchStrategy[Param] = strategy(param_value)

# Models, caches, step inputs ----------------------------------------------------------

_FAMILIES = ("llama", "mistral", "Llama", "qwen2", "gemma-2", "模型", "𝄞", "")
_PARAM_NAMES = ("n_heads", "rope_theta", "rms_norm_eps", "mask_policy", "vocab_size", "ε")
_HOOK_NAMES = ("lora", "logit_bias", "sampler", "steering")

#: A few fixed models, so that a dropped model's configuration is often built again.
PRESET_MODELS = (
    ModelSpec("llama", (("n_heads", 32), ("rms_norm_eps", 1e-5)), (("lora", False),)),
    ModelSpec("llama", (("n_heads", 32), ("rms_norm_eps", 1e-5)), (("lora", True),)),
    ModelSpec(
        "mistral",
        (("mask_policy", "sliding"), ("rope_theta", 1e6)),
        (("lora", True), ("logit_bias", False)),
    ),
    ModelSpec("qwen2", (("rms_norm_eps", -0.0),), ()),
)


def _mapping(src: Source, names: Sequence[str], value: Callable[[], T]) -> dict[str, T]:
    """Up to three named values (a name drawn twice keeps its last value)."""
    out: dict[str, T] = {}
    for _ in range(src.integer(0, 3)):
        name = pick(src, names)
        out[name] = value()
    return out


def model_spec(src: Source) -> ModelSpec:
    if src.integer(0, 1) == 0:
        return pick(src, PRESET_MODELS)
    family = pick(src, _FAMILIES)
    params = _mapping(src, _PARAM_NAMES, lambda: param_value(src))
    hooks = _mapping(src, _HOOK_NAMES, lambda: flag(src))
    return ModelSpec(family, tuple(params.items()), tuple(hooks.items()))


DTYPES = ("f32", "f16", "bf16")

#: A few fixed geometries, so that two caches of identical geometry are common.
PRESET_GEOMETRIES = (
    Geometry(2, 2, 4, 8),
    Geometry(1, 1, 1, 3),
    Geometry(3, 2, 2, 6, "f16"),
)


def geometry(src: Source) -> Geometry:
    if src.integer(0, 1) == 0:
        return pick(src, PRESET_GEOMETRIES)
    return Geometry(
        n_layers=src.integer(1, 3),
        n_kv_heads=src.integer(1, 3),
        head_dim=src.integer(1, 4),
        max_seq_len=src.integer(1, 8),
        dtype=pick(src, DTYPES),
    )


model_specs: st.SearchStrategy[ModelSpec] = strategy(model_spec)
geometries: st.SearchStrategy[Geometry] = strategy(geometry)


def step_inputs(src: Source, step_tokens: int) -> StepInputs:
    """Random per-step inputs; usually ``step_tokens`` tokens, one time in four any count
    (another count makes any plan invalid, which would hide what else the check sees)."""
    count = step_tokens if src.integer(0, 3) < 3 else src.integer(1, 4)
    token_ids = tuple(wide(src, 0, 2**31 - 1) for _ in range(count))
    write_offset = 0 if src.integer(0, 1) == 0 else src.integer(0, 4096)
    if src.integer(0, 1) == 0:
        theta = pick(src, (10000.0, 500000.0, 1e6))
    else:
        theta = bounded_float(src, 1.0, 1e7)
    scaling_branch = src.integer(0, 2)
    scaling = (
        None
        if scaling_branch == 0
        else pick(src, (8.0, 1.0, 0.25))
        if scaling_branch == 1
        else bounded_float(src, 0.01, 64.0)
    )
    mask = tuple(items(src, lambda: src.integer(0, 1), 6, mean_extra=3))
    return StepInputs(
        token_ids=token_ids,
        write_offset=write_offset,
        rope_theta=theta,
        rope_scaling=scaling,
        mask=mask,
    )


# What an implementation's declarations let a program hold (CONF-6, CONF-7) ------------


@dataclass(frozen=True)
class Scope:
    """Where the generated programs may go for one implementation.

    The reference answers every option by its default. Where an implementation
    declares another answer (CONF-6) or lacks a capability (CONF-7), programs stay
    in the region where both answers agree, so a difference is never a
    divergence of policy: no truncate past the length under ``refuse``, no append
    past the capacity under ``grow``, at most one differing field in a refused
    replacement under another check order, no hook toggles under
    ``remints_instance``, no probes differing only in head geometry under
    ``implied``, only the declared schema under ``fixed``, no block expectation of
    an undeclared dtype, and no raw bytes no u64 mix can express without the raw fold.
    """

    truncate_past_length: bool = True
    append_past_capacity: bool = True
    shape_mismatch_fields: int = 3
    hook_toggles: bool = True
    vary_cache_heads: bool = True
    key_schema: Mapping[str, Mapping[str, str]] | None = None
    #: The dtype names a reader declares it holds (SIG-14); ``None``: any name.
    dtypes: tuple[str, ...] | None = None
    raw_bytes: bool = True
    #: Block counts above this are not generated for a reader with narrower counts.
    uint_max: int = U64_MAX
    #: The format versions the implementation reads: a stamp or an expectation of a
    #: version it reads other than 1 is never drawn (a version-2 signature without a
    #: layout is a question no requirement settles).
    reads: frozenset[int] = frozenset({1})
    #: The format version the implementation writes (its measured and stamped blocks).
    writes: int = 1

    @classmethod
    def of(cls, info: AdapterInfo) -> Scope:
        default_order = ",".join(SHAPE_FIELDS)
        return cls(
            truncate_past_length=info.option("truncate_past_length") == "noop",
            append_past_capacity=info.option("append_past_capacity") == "refuse",
            shape_mismatch_fields=3 if info.option("replace_layer_order") == default_order else 1,
            hook_toggles=info.option("hook_toggle") == "keeps_instance",
            vary_cache_heads=info.option("plan_key_cache_heads") == "keyed",
            key_schema=info.key_schema,
            dtypes=None if info.dtypes is None else tuple(sorted(info.dtypes)),
            raw_bytes=info.raw_fold,
            uint_max=(1 << info.uint_bits) - 1,
            reads=frozenset(info.format_reads),
            writes=info.format_writes or 1,
        )


def schema_spec(src: Source, schema: Mapping[str, Mapping[str, str]]) -> ModelSpec:
    """A model within a fixed per-family key schema (PLAN-17): its families, fields, hooks."""
    family = pick(src, sorted(schema))
    fields = schema[family]
    values: dict[str, Callable[[], Param]] = {
        "u64": lambda: src.integer(0, 64) if src.integer(0, 1) == 0 else pick(src, U64_EDGES),
        "f64": lambda: param_float(src),
        "str": lambda: any_text(src),
    }
    # Every field of the family, always: an engine with a fixed schema holds each of them,
    # so a model that left one out would be a question of policy (decision key-params).
    params = {name: values[kind]() for name, kind in sorted(fields.items()) if kind != "hook"}
    hooks = {name: flag(src) for name, kind in sorted(fields.items()) if kind == "hook"}
    return ModelSpec(family, tuple(params.items()), tuple(hooks.items()))


def fills_schema(spec: ModelSpec, schema: Mapping[str, Mapping[str, str]]) -> bool:
    """Whether ``spec`` gives every field its family has in ``schema`` (PLAN-17).

    A probe that leaves a field out asks how a fixed-schema engine keys absence, which is
    policy (decision key-params): such probes are not drawn."""
    given = {name for name, _ in spec.params} | {name for name, _ in spec.hooks}
    return set(schema.get(spec.family, {})) <= given


def schema_specs(schema: Mapping[str, Mapping[str, str]]) -> st.SearchStrategy[ModelSpec]:
    """Models within a fixed per-family key schema (PLAN-17), as a strategy."""
    return strategy(lambda src: schema_spec(src, schema))


# The key-side program ---------------------------------------------------------------


@dataclass
class _Model:
    spec: ModelSpec
    #: A hook was toggled in place. Such a model is never reloaded: whether a reload
    #: starts from the configuration or from the current hook state is a point no
    #: requirement settles, so the generated checks do not compare it.
    toggled: bool = False


@dataclass
class _Cache:
    geometry: Geometry
    #: The length the specification gives the cache (used only to aim appends and truncations).
    length: int = 0


@dataclass
class _Session:
    model: str
    cache: str
    step_tokens: int
    #: The ``n_kv_heads`` and ``head_dim`` of the cache the plan was built over.
    heads: tuple[int, int] = (0, 0)


@dataclass
class _KeyBuilder:
    """One program under construction and what is live in it."""

    src: Source
    plan: bool
    scope: Scope = field(default_factory=Scope)
    #: The classes the implementation declares: besides the rules above, the table's
    #: other operations of these classes are drawn (:meth:`table_rules`).
    classes: frozenset[str] = frozenset()
    ops: list[ops.Op] = field(default_factory=list)
    models: dict[str, _Model] = field(default_factory=dict)
    caches: dict[str, _Cache] = field(default_factory=dict)
    sessions: dict[str, _Session] = field(default_factory=dict)
    keys: list[PlanIdentity] = field(default_factory=list)
    #: Live objects of kinds the builder keeps no state for, by kind (:meth:`plain`).
    others: dict[str, dict[str, object]] = field(default_factory=dict)
    serial: int = 0

    def fresh(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def pick(self, names: Mapping[str, object]) -> str:
        return pick(self.src, sorted(names, key=_handle_order))

    def rules(self) -> list[Callable[[], None]]:
        """Every rule, in a fixed order whatever is live (so a step means the same thing
        after shrinking deleted an earlier one); a rule whose preconditions fail adds nothing.
        Rules listed twice are drawn twice as often."""
        rules: list[Callable[[], None]] = [
            self.new_model,
            self.new_cache,
            self.append,
            self.append,
            self.truncate,
            self.truncate,
            self.alloc_id,
            self.alloc_id,
            self.instance_id,
            self.instance_id,
            self.cache_len,
            self.clear,
            self.replace_layer,
            self.replace_layer,
            self.reload_model,
            self.set_hook,
            self.set_hook,
            self.drop_model,
            self.drop_cache,
            self.story_restore,
        ]
        if self.plan:
            rules += [
                self.new_session,
                self.check,
                self.check,
                self.check,
                self.drop_session,
                self.plan_key,
                self.plan_key,
                self.story_rewind,
                self.story_rebuild,
                self.story_hooks,
            ]
        return rules + self.table_rules()

    def table_rules(self) -> list[Callable[[], None]]:
        """A rule for each operation of the table the rules above do not write: every
        operation of a declared class that no property's writer draws and whose table
        entry gives no reason not to (``not_generated``), in the table's order.

        An operation with a writer of its own (:data:`_OPERATION_WRITERS`: fields that
        depend on each other or on what is live) is written by it; any other is filled
        field by field from its kinds (:meth:`plain`). So a new operation takes part in
        the generated checks from its table entry alone.
        """
        rules: list[Callable[[], None]] = []
        for spec in ops.TABLE:
            if (
                spec.name in DRAWN_BY_WRITERS
                or spec.not_generated
                or spec.needs not in self.classes
            ):
                continue
            own = _OPERATION_WRITERS.get(spec.name)
            rules.append(
                functools.partial(own, self) if own else functools.partial(self.plain, spec)
            )
        return rules

    def live(self, kind: str) -> Mapping[str, object] | None:
        """The live objects of a kind of object (a handle field's name), if the builder knows it."""
        pools: dict[str, Mapping[str, object]] = {
            "model": self.models,
            "cache": self.caches,
            "session": self.sessions,
        }
        return pools.get(kind, self.others.get(kind))

    def plain(self, spec: OpSpec) -> None:
        """An operation filled from its field kinds: a live handle of the kind each handle
        field names, small counts, flags, texts. Adds nothing when something it needs is
        not live, or when it makes an object whose state the builder follows (a model, a
        cache, a session: their own rules write those)."""
        if spec.makes in ("model", "cache", "session"):
            return
        src = self.src
        values: dict[str, object] = {}
        for f in spec.fields:
            if f.kind == "new_handle":
                values[f.name] = self.fresh(spec.makes[0] if spec.makes else "h")
            elif f.kind in ("handle", "released"):
                pool = self.live(f.name) if f.kind == "handle" else self.all_live()
                if not pool:
                    return
                values[f.name] = self.pick(pool)
            elif f.kind in _PLAIN_FIELD_WRITERS:
                values[f.name] = _PLAIN_FIELD_WRITERS[f.kind](src)
            else:
                return  # a structured field: the operation needs a writer of its own
        op = spec.cls(**values)
        for name in spec.releases:
            self.forget(str(values[name]))
        if spec.makes is not None and spec.binds is not None:
            self.others.setdefault(spec.makes, {})[str(values[spec.binds])] = None
        self.ops.append(op)

    def all_live(self) -> dict[str, object]:
        every: dict[str, object] = {**self.models, **self.caches, **self.sessions}
        for pool in self.others.values():
            every.update(pool)
        return every

    def forget(self, handle: str) -> None:
        for pool in (self.models, self.caches, self.sessions, *self.others.values()):
            pool.pop(handle, None)  # type: ignore[attr-defined]

    def placed_cache(self) -> None:
        """``cache_new_placed``: a cache with a residency (or none) and a storage label per
        layer, drawn from small sets so that equal placements occur (PLAN-19, PLAN-21)."""
        g = self.geometry()
        residency = pick(self.src, _RESIDENCIES)
        storage = tuple(pick(self.src, _STORAGE_LABELS) for _ in range(g.n_layers))
        name = self.fresh("c")
        self.caches[name] = _Cache(g)
        self.ops.append(
            ops.CacheNewPlaced(handle=name, geometry=g, residency=residency, layer_storage=storage)
        )
        self.read(name)

    def validity(self) -> None:
        """``session_validity``: a held plan judged for a model, a cache and a step, mostly
        its own (PLAN-19: ``valid``, ``allocation_changed`` or ``stale``)."""
        if not (self.sessions and self.models and self.caches):
            return
        name = self.pick(self.sessions)
        session = self.sessions[name]
        own = self.src.integer(0, 3) < 3
        model = session.model if own and session.model in self.models else None
        cache = session.cache if own and session.cache in self.caches else None
        step = step_inputs(self.src, session.step_tokens)
        model = model or self.pick(self.models)
        cache = cache or self.pick(self.caches)
        if self.validity_is_policy(name, cache):
            self.ops.append(ops.SessionValid(session=name, model=model, cache=cache, step=step))
            return
        self.ops.append(ops.SessionValidity(session=name, model=model, cache=cache, step=step))

    def validity_is_policy(self, session: str, cache: str) -> bool:
        """Whether the outcome of ``session`` over ``cache`` depends on a declared option:
        under ``plan_key_cache_heads: implied`` a cache of other heads is
        ``allocation_changed`` (the heads are no component, PLAN-15, PLAN-19), under the
        reference's ``keyed`` it is ``stale``. The boolean validity agrees under both."""
        if self.scope.vary_cache_heads:
            return False
        g = self.caches[cache].geometry
        return (g.n_kv_heads, g.head_dim) != self.sessions[session].heads

    def step(self, rules: Sequence[Callable[[], None]]) -> bool:
        """Add one operation (``True``), or end the program (``False``).

        The flag is chosen even for the first step (which always happens), so that
        every step has the same layout and deleting one leaves the next intact.
        """
        if self.src.integer(0, 39) == 0 and self.ops:
            return False
        pick(self.src, rules)()
        return True

    def maybe_read(self, handle: str) -> None:
        """Sometimes read a handle's id right after an operation that may (or must not) mint."""
        if self.src.integer(0, 2) != 0:
            self.read(handle)

    def read(self, handle: str) -> None:
        """Read a handle's id; done after every operation that must mint (as the scenario
        compiler does), since a counter starting at 0 shows only on the first mint."""
        if handle in self.models:
            self.ops.append(ops.ModelInstanceId(model=handle))
        elif handle in self.caches:
            self.ops.append(ops.CacheAllocId(cache=handle))

    def epilogue(self) -> None:
        """Read every live model's and cache's id, and every cache's length (no choices)."""
        for name in sorted(self.models, key=_handle_order):
            self.ops.append(ops.ModelInstanceId(model=name))
        for name in sorted(self.caches, key=_handle_order):
            self.ops.append(ops.CacheAllocId(cache=name))
            self.ops.append(ops.CacheLen(cache=name))

    # models

    def model_spec(self) -> ModelSpec:
        schema = self.scope.key_schema
        return model_spec(self.src) if schema is None else schema_spec(self.src, schema)

    def geometry(self) -> Geometry:
        return geometry(self.src)

    def new_model(self) -> None:
        self.add_model(self.model_spec())

    def reload_model(self) -> None:
        untouched = {n: m for n, m in self.models.items() if not m.toggled}
        if not untouched:
            return
        self.reload_from(self.pick(untouched))

    def set_hook(self) -> None:
        if not self.scope.hook_toggles or not any(m.spec.hooks for m in self.models.values()):
            return
        name = self.pick({n: m for n, m in self.models.items() if m.spec.hooks})
        hook = pick(self.src, [h for h, _ in self.models[name].spec.hooks])
        self.models[name].toggled = True
        self.ops.append(ops.ModelSetHook(model=name, hook=hook, present=flag(self.src)))
        self.maybe_read(name)

    def instance_id(self) -> None:
        if not self.models:
            return
        self.ops.append(ops.ModelInstanceId(model=self.pick(self.models)))

    def drop_model(self) -> None:
        if self.models:
            self.drop(self.pick(self.models))

    # caches

    def new_cache(self) -> None:
        self.add_cache(self.geometry())

    def append(self) -> None:
        if self.caches:
            self.append_to(self.pick(self.caches))

    def truncate(self) -> None:
        if self.caches:
            self.truncate_to(self.pick(self.caches))

    def clear(self) -> None:
        if not self.caches:
            return
        name = self.pick(self.caches)
        self.caches[name].length = 0
        self.ops.append(ops.CacheClear(cache=name))
        self.read(name)

    def replace_layer(self) -> None:
        if self.caches:
            self.replace_in(self.pick(self.caches), fits=flag(self.src))

    def replace_in(self, name: str, fits: bool) -> None:
        """Replace a layer: one that fits, or maybe out of range or of another shape."""
        g = self.caches[name].geometry
        src = self.src

        # Under another declared check order, at most one field may differ (ALLOC-17).
        changeable = set(SHAPE_FIELDS)
        if not fits and self.scope.shape_mismatch_fields < len(SHAPE_FIELDS):
            changeable = {pick(src, SHAPE_FIELDS)}

        def shape(field_name: str, own: int) -> int | None:
            if fits or field_name not in changeable:
                return pick(src, (None, own))
            branch = src.integer(0, 2)
            return None if branch == 0 else own if branch == 1 else src.integer(1, own + 3)

        if fits or src.integer(0, 1) == 0:
            layer = src.integer(0, g.n_layers - 1)
        elif src.integer(0, 3) == 0:  # out of range, not one of the layers (ALLOC-9)
            layer = _ABOVE_32_BITS + src.integer(0, g.n_layers - 1)
        else:
            layer = src.integer(g.n_layers, g.n_layers + 2)
        self.ops.append(
            ops.CacheReplaceLayer(
                cache=name,
                layer=layer,
                n_kv_heads=shape("n_kv_heads", g.n_kv_heads),
                head_dim=shape("head_dim", g.head_dim),
                max_seq_len=shape("max_seq_len", g.max_seq_len),
            )
        )
        self.maybe_read(name)

    def alloc_id(self) -> None:
        if not self.caches:
            return
        self.ops.append(ops.CacheAllocId(cache=self.pick(self.caches)))

    def cache_len(self) -> None:
        if not self.caches:
            return
        self.ops.append(ops.CacheLen(cache=self.pick(self.caches)))

    def drop_cache(self) -> None:
        if self.caches:
            self.drop(self.pick(self.caches))

    # plans

    def new_session(self) -> None:
        if not (self.models and self.caches):
            return
        self.session_on(self.pick(self.models), self.pick(self.caches))

    def session_on(self, model: str, cache: str) -> str:
        name = self.fresh("s")
        step_tokens = self.src.integer(1, 3)
        g = self.caches[cache].geometry
        self.sessions[name] = _Session(model, cache, step_tokens, (g.n_kv_heads, g.head_dim))
        self.ops.append(
            ops.SessionNew(handle=name, model=model, cache=cache, step_tokens=step_tokens)
        )
        return name

    def check_with(self, session: str, model: str, cache: str) -> None:
        """Ask whether a held plan is valid; for an implementation of ``plan_validity``,
        half the time ask for its outcome instead (PLAN-19)."""
        step = step_inputs(self.src, self.sessions[session].step_tokens)
        if (
            "plan_validity" in self.classes
            and flag(self.src)
            and not self.validity_is_policy(session, cache)
        ):
            self.ops.append(
                ops.SessionValidity(session=session, model=model, cache=cache, step=step)
            )
            return
        self.ops.append(ops.SessionValid(session=session, model=model, cache=cache, step=step))

    def check(self) -> None:
        if not (self.sessions and self.models and self.caches):
            return
        name = self.pick(self.sessions)
        session = self.sessions[name]
        own = self.src.integer(0, 3) < 3  # mostly the plan's own model and cache
        model = session.model if own and session.model in self.models else None
        cache = session.cache if own and session.cache in self.caches else None
        self.check_with(name, model or self.pick(self.models), cache or self.pick(self.caches))

    # stories: short sequences real engines run, with random parts

    def story_rewind(self) -> None:
        """A plan, its cache grown and rewound (speculative decoding), the plan checked."""
        if not (self.models and self.caches):
            return
        model, cache = self.pick(self.models), self.pick(self.caches)
        session = self.session_on(model, cache)
        for _ in range(self.src.integer(1, 3)):
            pick(self.src, (self.append_to, self.truncate_to))(cache)
            if flag(self.src):
                self.check_with(session, model, cache)
        self.check_with(session, model, cache)

    def story_rebuild(self) -> None:
        """A plan, its model and/or cache dropped and built again alike, the plan checked
        against the new ones (the slot-pooling and reload stories, PLAN-14)."""
        if not (self.models and self.caches):
            return
        model, cache = self.pick(self.models), self.pick(self.caches)
        session = self.session_on(model, cache)
        which = pick(self.src, ("model", "cache", "both", "reload"))
        if which == "reload" and self.models[model].toggled:
            which = "model"
        if which == "reload":
            model = self.reload_from(model)
        if which in ("model", "both"):
            spec = self.models[model].spec
            self.drop(model)
            model = self.add_model(spec)
        if which in ("cache", "both"):
            cache_geometry = self.caches[cache].geometry
            self.drop(cache)
            cache = self.add_cache(cache_geometry)
        self.check_with(session, model, cache)

    def story_hooks(self) -> None:
        """A plan, its model's hook toggled and restored, the plan checked each time (PLAN-18)."""
        with_hooks = {n: m for n, m in self.models.items() if m.spec.hooks}
        if not (with_hooks and self.caches and self.scope.hook_toggles):
            return
        model = self.pick(with_hooks)
        cache = self.pick(self.caches)
        session = self.session_on(model, cache)
        hook, initially = pick(self.src, self.models[model].spec.hooks)
        self.models[model].toggled = True
        for present in (not initially, initially):
            self.ops.append(ops.ModelSetHook(model=model, hook=hook, present=present))
            self.maybe_read(model)
            self.check_with(session, model, cache)

    def story_restore(self) -> None:
        """A layer restored from an offload tier: a plan on a cache, the cache grown, one
        layer replaced in place, its length read and the plan checked (ALLOC-4, ALLOC-11,
        PLAN-10)."""
        if not self.caches:
            return
        cache = self.pick(self.caches)
        model = self.pick(self.models) if self.models else None
        session = self.session_on(model, cache) if model and self.plan else None
        self.append_to(cache)
        self.replace_in(cache, fits=True)
        self.ops.append(ops.CacheLen(cache=cache))
        if session is not None and model is not None:
            self.check_with(session, model, cache)

    def drop(self, handle: str) -> None:
        self.maybe_read(handle)
        self.forget(handle)
        self.ops.append(ops.Drop(handle=handle))

    def add_model(self, spec: ModelSpec) -> str:
        name = self.fresh("m")
        self.models[name] = _Model(spec)
        self.ops.append(ops.ModelNew(handle=name, spec=spec))
        self.read(name)
        return name

    def add_cache(self, cache_geometry: Geometry) -> str:
        name = self.fresh("c")
        self.caches[name] = _Cache(cache_geometry)
        self.ops.append(ops.CacheNew(handle=name, geometry=cache_geometry))
        self.read(name)
        return name

    def reload_from(self, source: str) -> str:
        name = self.fresh("m")
        self.models[name] = _Model(self.models[source].spec)
        self.ops.append(ops.ModelReload(model=source, handle=name))
        self.read(name)
        return name

    def append_to(self, name: str) -> None:
        cache = self.caches[name]
        room = cache.geometry.max_seq_len - cache.length
        if room < 1 and not self.scope.append_past_capacity:
            return
        if self.scope.append_past_capacity and self.src.integer(0, 1) == 1:
            if self.src.integer(0, 3) == 0:  # refused whole, not taken as 1 to 3 (ALLOC-16)
                tokens = _ABOVE_32_BITS + self.src.integer(1, 3)
            else:
                tokens = self.src.integer(room + 1, room + 3)
        else:
            tokens = self.src.integer(1, max(1, room))
        tokens = max(1, tokens)
        if cache.length + tokens <= cache.geometry.max_seq_len:
            cache.length += tokens
        self.ops.append(ops.CacheAppend(cache=name, tokens=tokens))
        self.maybe_read(name)

    def truncate_to(self, name: str) -> None:
        cache = self.caches[name]
        past = 3 if self.scope.truncate_past_length else 0
        length = self.src.integer(0, cache.length + past)
        if past and self.src.integer(0, 7) == 0:  # past the length, not a rewind (ALLOC-15)
            length = _ABOVE_32_BITS + self.src.integer(0, cache.length)
        cache.length = min(cache.length, length)
        self.ops.append(ops.CacheTruncate(cache=name, length=length))
        self.maybe_read(name)

    def drop_session(self) -> None:
        if self.sessions:
            self.drop(self.pick(self.sessions))

    def plan_key(self) -> None:
        """A probe: a base identity (new, or one probed before) and 1-3 variations of it."""
        src = self.src
        if self.keys and flag(src):
            base = pick(src, self.keys)
        else:
            base = PlanIdentity(
                model=self.model_spec(),
                instance=plan_id(src),
                alloc=plan_id(src),
                geometry=self.geometry(),
                step_tokens=src.integer(1, 3),
            )
            self.probe(base)
        for _ in range(src.integer(1, 3)):
            for identity in src.group(lambda: vary_identity(src, base)):
                self.probe(identity)

    def probe(self, identity: PlanIdentity) -> None:
        scope = self.scope
        if not scope.vary_cache_heads:  # PLAN-15 `implied`: heads never tell two probes apart
            identity = dataclasses.replace(
                identity, geometry=dataclasses.replace(identity.geometry, n_kv_heads=1, head_dim=1)
            )
        if scope.key_schema is not None and (
            outside_schema(identity.model, scope.key_schema, "")
            or not fills_schema(identity.model, scope.key_schema)
        ):
            return
        self.keys.append(identity)
        self.ops.append(ops.PlanKey(identity=identity))


#: Every operation a property's writer draws by a rule of its own: the key-state
#: machine's rules above, the hash programs and the block programs.
DRAWN_BY_WRITERS = frozenset(
    {
        "model_new",
        "model_reload",
        "model_set_hook",
        "model_instance_id",
        "cache_new",
        "cache_append",
        "cache_truncate",
        "cache_clear",
        "cache_replace_layer",
        "cache_alloc_id",
        "cache_len",
        "drop",
        "session_new",
        "session_valid",
        "plan_key",
        "hash",
        "measure",
        "stamp",
        "verify",
    }
)

#: Writers of table operations whose fields depend on each other or on what is live.
_OPERATION_WRITERS: dict[str, Callable[[_KeyBuilder], None]] = {
    "cache_new_placed": _KeyBuilder.placed_cache,
    "session_validity": _KeyBuilder.validity,
}

_RESIDENCIES = (None, "gpu0", "gpu1", "host")
_STORAGE_LABELS = ("kv-f32", "kv-f16", "kv-f32-paged")


def _small_count(src: Source) -> int:
    return src.integer(0, 8)


def _count_or_null(src: Source) -> int | None:
    return None if src.integer(0, 2) == 0 else src.integer(0, 8)


def _text_or_null(src: Source) -> str | None:
    return None if src.integer(0, 2) == 0 else any_text(src)


#: How a field of a plain kind is written when an operation has no writer of its own.
_PLAIN_FIELD_WRITERS: dict[str, Callable[[Source], object]] = {
    "count": _small_count,
    "count_or_null": _count_or_null,
    "bool": flag,
    "str": any_text,
    "str_or_null": _text_or_null,
    "str_list": lambda src: tuple(items(src, lambda: any_text(src), 3)),
}


def _handle_order(name: str) -> tuple[int, str]:
    return (int(name[1:]), name) if name[1:].isdigit() else (0, name)


_ID_EDGES = (1, 2, 3, 1 << 32, 1 << 63, U64_MAX)


def plan_id(src: Source) -> int:
    """An explicit id value for a plan-key probe (any u64 of at least 1)."""
    return pick(src, _ID_EDGES) if src.integer(0, 1) == 0 else wide(src, 1, U64_MAX)


ids: st.SearchStrategy[int] = strategy(plan_id)


#: Parameter values that encode to the same bytes without their type name:
#: u64(0), f64(+0.0) and str("") are eight zero bytes; u64(bits(x)) and f64(x) agree;
#: and the same number as u64, f64 and str.
_RETYPED: tuple[tuple[Param, Param], ...] = (
    (0, 0.0),
    (0, ""),
    (0.0, ""),
    (0x3FF0_0000_0000_0000, 1.0),
    (0x4040_0000_0000_0000, 32.0),
    (32, 32.0),
    (32, "32"),
)

#: Added to a small count, a value equal to it in the low 32 bits.
_ABOVE_32_BITS = 1 << 32

_VARIATIONS = (
    "same",
    "family",
    "param",
    "float-sign",
    "retype",
    "hook",
    "rename-hook",
    "reorder",
    "instance",
    "alloc",
    "geometry",
    "dtype",
    "step",
    "high-bits",
)


def _other(value: int, not_this: int) -> int:
    """``value``, moved off ``not_this`` (a choice that must differ, without a filter)."""
    return value if value != not_this else (value + 1 if value < U64_MAX else value - 1)


def vary_identity(src: Source, base: PlanIdentity) -> list[PlanIdentity]:
    """``base`` with one component changed, or written differently but equal (then the key
    must not change): the probe of PLAN-16 (under-keying) and of over-keying on form.

    Usually one identity; a retyped parameter gives the two members of a pair whose
    encodings coincide without the type name.
    """
    what = pick(src, _VARIATIONS)
    model, g = base.model, base.geometry
    params, hooks = dict(model.params), dict(model.hooks)

    def with_model(**changes: Any) -> list[PlanIdentity]:
        return [replace(base, model=replace(model, **changes))]

    if what == "family":
        return with_model(family=pick(src, _FAMILIES))
    if what == "param":
        name = pick(src, _PARAM_NAMES)
        if name in params and flag(src):
            del params[name]
        else:
            params[name] = param_value(src)
        return with_model(params=tuple(params.items()))
    if what == "float-sign":  # only the sign bit differs (PLAN-16)
        floats = [n for n, v in params.items() if isinstance(v, float) and not math.isnan(v)]
        if floats:
            name = pick(src, floats)
            params[name] = -params[name]  # type: ignore[operator]
        else:
            params[pick(src, _PARAM_NAMES)] = pick(src, (0.0, -0.0))
        return with_model(params=tuple(params.items()))
    if what == "retype":  # the same bytes but another type: untyped, these keys collide
        a, b = pick(src, _RETYPED)
        name = pick(src, _PARAM_NAMES)
        return [with_model(params=tuple({**params, name: v}.items()))[0] for v in (a, b)]
    if what == "hook":
        name = pick(src, _HOOK_NAMES)
        present = hooks[name] if name in hooks else flag(src)
        hooks[name] = not present
        return with_model(hooks=tuple(hooks.items()))
    if what == "rename-hook":  # the same presence under another name
        old = pick(src, sorted(hooks)) if hooks else None
        free = [h for h in _HOOK_NAMES if h not in hooks]
        if not free:  # every name taken: rename onto a name no list holds
            free = [f"{old}_renamed"]
        kept = hooks.pop(old) if old is not None else flag(src)
        hooks[pick(src, free)] = kept
        return with_model(hooks=tuple(hooks.items()))
    if what == "reorder":  # the same parameters and hooks listed in another order
        return with_model(params=tuple(reversed(model.params)), hooks=tuple(reversed(model.hooks)))
    if what == "instance":
        return [replace(base, instance=_other(plan_id(src), base.instance))]
    if what == "alloc":
        return [replace(base, alloc=_other(plan_id(src), base.alloc))]
    if what == "geometry":
        name = pick(src, ("n_layers", "n_kv_heads", "head_dim", "max_seq_len"))
        changed: dict[str, Any] = {name: _other(src.integer(1, 9), getattr(g, name))}
        return [replace(base, geometry=replace(g, **changed))]
    if what == "dtype":
        dtype = pick(src, [d for d in DTYPES if d != g.dtype])
        return [replace(base, geometry=replace(g, dtype=dtype))]
    if what == "step":
        return [replace(base, step_tokens=src.integer(1, 4))]
    if what == "high-bits":  # equal in the low 32 bits: a count held in 32 bits (PLAN-16)
        target = pick(src, ("param", "geometry", "step"))
        ints = [n for n, v in params.items() if type(v) is int and v <= U64_MAX - _ABOVE_32_BITS]
        if target == "param" and ints:
            name = pick(src, ints)
            params[name] = cast(int, params[name]) + _ABOVE_32_BITS
            return with_model(params=tuple(params.items()))
        if target == "geometry":
            name = pick(src, ("n_layers", "n_kv_heads", "head_dim"))
            return [replace(base, geometry=replace(g, **{name: getattr(g, name) + _ABOVE_32_BITS}))]
        return [replace(base, step_tokens=base.step_tokens + _ABOVE_32_BITS)]
    return [base]


def key_program(
    src: Source,
    plan: bool = True,
    max_ops: int = 60,
    scope: Scope | None = None,
    classes: frozenset[str] | None = None,
) -> Program:
    """A program over models, caches and (with ``plan``) held plans and key probes, and
    the table's other operations of ``classes`` (by default ``identity`` and, with
    ``plan``, ``plan``: the class ``plan_validity`` only when given).

    Each step is one group, so the shrinker can delete a step whole.
    """
    if classes is None:
        classes = frozenset({"identity", "plan"} if plan else {"identity"})
    builder = _KeyBuilder(src, plan, scope or Scope(), classes)
    rules = builder.rules()
    while len(builder.ops) < max_ops and src.group(lambda: builder.step(rules)):
        pass
    builder.epilogue()
    return tuple(builder.ops)


def key_programs(
    plan: bool = True,
    max_ops: int = 60,
    scope: Scope | None = None,
    classes: frozenset[str] | None = None,
) -> st.SearchStrategy[Program]:
    """:func:`key_program` as a Hypothesis strategy."""
    return strategy(lambda src: key_program(src, plan, max_ops, scope, classes))


# Hash programs -------------------------------------------------------------------------


def mix_op(src: Source) -> MixOp:
    branch = src.integer(0, 7)
    if branch == 0:
        return MixOp("u64", u64(src))
    if branch == 1:
        return MixOp("str", any_text(src))
    if branch == 2:
        return MixOp("bytes", binary(src, 0, 16), src.integer(1, 3))
    if branch == 3:
        return MixOp("f64", f64_pattern(src))
    if branch == 4:
        return MixOp("present", flag(src))
    if branch == 5:
        return MixOp("instance", u64(src))
    if branch == 6:
        return MixOp("finish")
    return MixOp("bytes", binary(src, 1, 32), src.integer(2, 1000))


def mix_program(src: Source) -> tuple[MixOp, ...]:
    """One mix program; it always ends with a finish, and may finish mid-way too."""
    return (*items(src, lambda: mix_op(src), 10), MixOp("finish"))


mix_ops: st.SearchStrategy[MixOp] = strategy(mix_op)
hash_program: st.SearchStrategy[tuple[MixOp, ...]] = strategy(mix_program)


def hash_program_list(src: Source, max_programs: int = 6, scope: Scope | None = None) -> Program:
    """Several mix programs, one ``hash`` operation each (one ``hash_batch`` over stdio).

    Without the raw fold (HASH-14), raw bytes whose length is a multiple of eight are
    mixed as the u64s that fold the same bytes, and other raw bytes are left out.
    """
    public = scope is not None and not scope.raw_bytes
    programs = items(src, lambda: mix_program(src), max_programs, min_size=1, mean_extra=3)
    return tuple(ops.Hash(program=_without_raw(p) if public else p) for p in programs)


def hash_programs(max_programs: int = 6, scope: Scope | None = None) -> st.SearchStrategy[Program]:
    """:func:`hash_program_list` as a Hypothesis strategy."""
    return strategy(lambda src: hash_program_list(src, max_programs, scope))


def _without_raw(program: tuple[MixOp, ...]) -> tuple[MixOp, ...]:
    """``program`` with raw bytes as u64 mixes where they can be, and left out elsewhere."""
    return tuple(m for mix in program for m in (as_u64_mixes(mix, 64) or ()))


# Blocks: payloads, stamps, expectations ---------------------------------------------------

_U64_LIMIT = 1 << 64
#: Per-token widths ``n_kv_heads * head_dim`` at the edge of a u64 (SIG-15): two that no
#: u64 holds ((2^63 + 1) * 2 wraps to 2, 2^32 * 2^32 to 0) and two of exactly 2^64 - 1.
_EDGE_SHAPES = ((2**63 + 1, 2), (1 << 32, 1 << 32), (2**64 - 1, 1), (2**32 - 1, 2**32 + 1))


_BLOCK_MODELS = ("llama-3-8b", "Llama-3-8B", "mistral-7b", "", "模型-ä", "𝄞")
#: Stamp and expectation dtypes: the vocabulary and names outside it (SIG-14).
_LYING_DTYPES = ("f16", "bf16", "F32", "F32", "f64")
_FORMAT_LIES = (0, 2, 99)


@dataclass(frozen=True)
class Block:
    """A coherent block's truth: the payload it had and the signature measuring it gives."""

    layers: tuple[LayerDesc, ...]
    truth: Signature


def coherent_block(src: Source) -> Block:
    model = pick(src, _BLOCK_MODELS) if src.integer(0, 1) == 0 else any_text(src)
    n_layers, heads, dim = src.integer(1, 6), src.integer(1, 4), src.integer(1, 4)
    tokens = src.integer(0, 5)
    size = heads * dim * tokens
    layer = LayerDesc(heads, dim, tokens, size, size)
    return Block((layer,) * n_layers, Signature(1, model, n_layers, heads, dim, "f32", tokens))


def coherent_block_v2(src: Source) -> Block:
    """A whole version-2 block (PROF-5, PROF-8): a valid layout, exactly ``block_size``
    tokens in every layer, never empty (PROF-9)."""
    model = pick(src, _BLOCK_MODELS) if src.integer(0, 1) == 0 else any_text(src)
    n_layers, heads, dim = src.integer(1, 6), src.integer(1, 4), src.integer(1, 4)
    layout = valid_layout(src)
    size = heads * dim * layout.block_size
    layer = LayerDesc(heads, dim, layout.block_size, size, size)
    truth = Signature(2, model, n_layers, heads, dim, "f32", layout.block_size, layout)
    return Block((layer,) * n_layers, truth)


def valid_layout(src: Source, block_size: int | None = None) -> Layout:
    """A layout PROF-7 accepts: a window absent or a whole multiple of the block size."""
    size = src.integer(1, 4) if block_size is None else block_size
    return Layout(size, None if flag(src) else size * src.integer(1, 3))


def layout_lie(src: Source, layout: Layout, valid: bool) -> Layout:
    """``layout`` changed in one way: another valid layout, or (unless ``valid``) one
    PROF-7 refuses (a zero block size or window, a window not a multiple of it)."""
    kinds = ("block_size", "window", "window-absent") + (() if valid else ("bad",))
    kind = pick(src, kinds)
    if kind == "block_size":
        size = max(1, layout.block_size + pick(src, (1, -1, 2)))
        window = layout.sliding_window
        return Layout(size, None if window is None else size * max(1, window // layout.block_size))
    if kind == "window":
        multiple = src.integer(1, 4)
        window = layout.block_size * multiple
        if window == layout.sliding_window:
            window += layout.block_size
        return Layout(layout.block_size, window)
    if kind == "window-absent":
        if layout.sliding_window is None:
            return Layout(layout.block_size, layout.block_size * src.integer(1, 3))
        return Layout(layout.block_size, None)
    bad = pick(src, ("block_size", "window", "misaligned"))
    if bad == "block_size":
        return Layout(0, layout.sliding_window)
    if bad == "window":
        return Layout(layout.block_size, 0)
    return Layout(layout.block_size + 1, (layout.block_size + 1) * 2 + 1)


def lie_v2(src: Source, sig: Signature, fields: int, valid_layout_only: bool) -> Signature:
    """:func:`lie` for a version-2 signature, its layout included; a signature that ends
    as version 1 carries no layout, one of version 2 always one (protocol.md, Values)."""
    changed = lie(src, sig, fields)
    if flag(src):
        assert changed.layout is not None
        changed = replace(changed, layout=layout_lie(src, changed.layout, valid_layout_only))
    if changed.format_version == 1:
        return replace(changed, layout=None)
    return changed


def split_width(src: Source, layers: tuple[LayerDesc, ...]) -> tuple[LayerDesc, ...]:
    """Now and then one layer whose V heads are of another width, its V buffer sized to
    them (PROF-11: refused as split_kv_head_width or, under layout_only, on v_length)."""
    if not layers or src.integer(0, 3) != 0:
        return layers
    index = src.integer(0, len(layers) - 1)
    layer = layers[index]
    v_dim = layer.head_dim + pick(src, (1, 2))
    v_len = layer.n_kv_heads * v_dim * layer.seq_len
    if v_len >= _U64_LIMIT:  # a layer of edge_width's: a V buffer no payload can carry
        return layers
    split = replace(layer, v_head_dim=v_dim, v_len=v_len)
    return (*layers[:index], split, *layers[index + 1 :])


def verify_op_v2(src: Source) -> ops.Verify:
    """A verification of a version-2 block: honest or lying stamps (layout included, a
    stamp's layout possibly one PROF-7 refuses), faulty payloads, another expectation
    (always a valid layout: only the recorded one is checked, VERIFY-10)."""
    block = coherent_block_v2(src)
    truth = block.truth
    payload = split_width(src, faulty_payload(src, block, 2))
    mode = pick(src, ("honest", "lying", "faulty", "stamp-is-expected", "unmarked"))
    recorded: Signature | None = truth
    expected = truth
    if mode == "honest":
        payload = block.layers
        expected = lie_v2(src, truth, 2, valid_layout_only=True)
    elif mode == "lying":
        payload = block.layers
        recorded = lie_v2(src, truth, 2, valid_layout_only=False)
        expected = pick(src, (truth, recorded))
    elif mode == "faulty":
        recorded = pick(src, (truth, lie_v2(src, truth, 1, valid_layout_only=False)))
        expected = pick(src, (truth, lie_v2(src, truth, 1, valid_layout_only=True)))
    elif mode == "stamp-is-expected":
        recorded = lie_v2(src, truth, 1, valid_layout_only=True)
        expected = recorded
    else:
        recorded = None
        expected = lie_v2(src, truth, 1, valid_layout_only=True)
    if expected.layout is None and expected.format_version == 2:  # never a v2 one without
        expected = replace(expected, layout=truth.layout)
    return ops.Verify(recorded=recorded, payload=payload, expected=expected)


def measuring_op_v2(src: Source) -> ops.Op:
    """A version-2 writer measures or stamps under a layout it supplies (PROF-6): the
    block's own, another valid one, or one PROF-7 refuses."""
    block = coherent_block_v2(src)
    payload = split_width(src, faulty_payload(src, block, 3))
    assert block.truth.layout is not None
    layout = block.truth.layout
    if src.integer(0, 2) == 0:
        layout = layout_lie(src, layout, valid=False)
    cls = pick(src, (ops.Measure, ops.Stamp))
    return cls(model=block.truth.model, payload=payload, layout=layout)


def coherent_blocks() -> st.SearchStrategy[Block]:
    return strategy(coherent_block)


_PAYLOAD_FAULTS = (
    "seq_len",
    "k_len",
    "v_len",
    "tokens",
    "shape",
    "transpose",
    "depth",
    "add",
    "drop",
    "empty",
    "zero",
)


def payload_fault(
    src: Source, layers: list[LayerDesc], last: int | None = None
) -> tuple[list[LayerDesc], int | None]:
    """One fault in a payload; returns the layers and the index of the layer it touched.

    Faults: a layer added or dropped, or every layer gone; a layer's shape
    changed (its buffers resized to match, or not), or transposed to the same
    width, or given a zero dimension; its depth changed consistently; k or v cut
    or extended (by elements, or both by whole tokens); a false ``seq_len``. A fault often hits
    the layer the previous one hit, so faults combine within one layer too.
    """
    kind = pick(src, _PAYLOAD_FAULTS)
    layers = list(layers)
    if kind == "empty":  # every layer gone: a block that can vouch for nothing (SIG-5)
        return [], None
    if kind == "add" or not layers:
        if layers and flag(src):
            extra = pick(src, layers)
        else:
            h, d, t = src.integer(0, 4), src.integer(0, 4), src.integer(0, 5)
            extra = LayerDesc(h, d, t, h * d * t, h * d * t)
        at = src.integer(0, len(layers))
        layers.insert(at, extra)
        return layers, at
    if last is not None and last < len(layers) and flag(src):
        index = last
    else:
        index = src.integer(0, len(layers) - 1)
    layer = layers[index]
    per_token = max(1, layer.n_kv_heads * layer.head_dim)
    if kind == "drop":
        del layers[index]
        return layers, None
    if kind == "seq_len":
        layers[index] = replace(layer, seq_len=src.integer(0, 8))
    elif kind in ("k_len", "v_len"):
        delta = _other(src.integer(-per_token - 1, per_token + 1), 0)
        layers[index] = replace(layer, **{kind: max(0, getattr(layer, kind) + delta)})
    elif kind == "tokens":  # whole tokens cut from or added to k and v; the claim kept
        size = (
            layer.n_kv_heads
            * layer.head_dim
            * max(0, layer.seq_len + _other(src.integer(-2, 2), 0))
        )
        layers[index] = replace(layer, k_len=size, v_len=size)
    elif kind == "depth":  # another token count, told consistently
        tokens = src.integer(0, 6)
        size = layer.n_kv_heads * layer.head_dim * tokens
        layers[index] = replace(layer, seq_len=tokens, k_len=size, v_len=size)
    elif kind == "zero":  # a degenerate layer: no heads or a zero head_dim, buffers kept
        which = pick(src, ("n_kv_heads", "head_dim"))
        layers[index] = replace(layer, **{which: 0})
    elif kind == "transpose":  # the same width, another shape
        layers[index] = replace(layer, n_kv_heads=layer.head_dim, head_dim=layer.n_kv_heads)
    else:
        heads = _kept_zero_or_any(src, layer.n_kv_heads)
        dim = _kept_zero_or_any(src, layer.head_dim)
        if flag(src):  # buffers resized to the new shape, or left as they were
            size = heads * dim * layer.seq_len
            layers[index] = LayerDesc(heads, dim, layer.seq_len, size, size)
        else:
            layers[index] = replace(layer, n_kv_heads=heads, head_dim=dim)
    return layers, index


def _kept_zero_or_any(src: Source, own: int) -> int:
    branch = src.integer(0, 2)
    return own if branch == 0 else 0 if branch == 1 else src.integer(0, 5)


def faulty_payload(src: Source, block: Block, max_faults: int) -> tuple[LayerDesc, ...]:
    layers, last = list(block.layers), None
    for _ in range(src.integer(0, max_faults)):
        layers, last = payload_fault(src, layers, last)
    return edge_width(src, tuple(layers))


def edge_width(src: Source, layers: tuple[LayerDesc, ...]) -> tuple[LayerDesc, ...]:
    """Now and then one layer, most often the first, whose width is at the edge of a u64
    (SIG-15). A width that overflows keeps its tokens, its buffers sized by what a
    wrapping multiply gives, so that only the width check can refuse it; a width that
    fits exactly has no tokens and empty buffers, a coherent layer (SIG-10)."""
    if not layers or src.integer(0, 7) != 7:  # 0, the simplest choice, changes nothing
        return layers
    index = 0 if flag(src) else src.integer(0, len(layers) - 1)
    heads, dim = pick(src, _EDGE_SHAPES)
    layer = layers[index]
    wrapped = heads * dim % _U64_LIMIT
    tokens = layer.seq_len if heads * dim >= _U64_LIMIT else 0
    size = wrapped * tokens
    if size >= _U64_LIMIT:  # pragma: no cover - the shapes above wrap to 0 or 2
        tokens, size = 0, 0
    edge = LayerDesc(heads, dim, tokens, size, size)
    return (*layers[:index], edge, *layers[index + 1 :])


_LIES = (
    "tokens",
    "n_layers",
    "n_kv_heads",
    "head_dim",
    "dtype",
    "model",
    "format_version",
    "transpose",
)


def lie(src: Source, sig: Signature, fields: int) -> Signature:
    """``sig`` with up to ``fields`` fields changed: the stamp lying, or another expectation.

    As many single changes as double ones: a change behind an earlier one in the
    comparison order is masked, so the field a check is about must often be alone.
    """
    pool = list(_LIES)
    names = [pool.pop(src.integer(0, len(pool) - 1)) for _ in range(src.integer(0, fields))]
    changes: dict[str, Any] = {}
    for name in names:
        if name == "transpose":  # heads and head_dim swapped: the same width
            changes.update(n_kv_heads=sig.head_dim, head_dim=sig.n_kv_heads)
            continue
        value = getattr(sig, name)
        if name == "format_version":
            changes[name] = pick(src, _FORMAT_LIES)
        elif name == "dtype":
            changes[name] = pick(src, _LYING_DTYPES)
        elif name == "model":
            changes[name] = pick(
                src, (value.swapcase(), value.upper(), value + " ", "", "other-model")
            )
        else:
            changes[name] = max(0, value + pick(src, (1, -1, 2, 7)))
    return replace(sig, **changes)


def respell(src: Source, sig: Signature) -> Signature:
    """``sig`` with its model or dtype spelled otherwise: the same to a person, not a byte."""
    if flag(src):
        model = pick(
            src,
            (
                sig.model.upper(),
                sig.model.swapcase(),
                sig.model + " ",
                " " + sig.model,
                sig.model.title(),
            ),
        )
        return replace(sig, model=model)
    return replace(sig, dtype=pick(src, (sig.dtype.upper(), " " + sig.dtype, sig.dtype + "\x00")))


_VERIFY_MODES = (
    "honest",
    "lying",
    "faulty",
    "stamp-is-expected",
    "respelled",
    "unreadable",
    "free",
)


def verify_op(src: Source) -> ops.Verify:
    """One verification, in one of several shapes so that each check is reached often:
    an honest stamp and payload read by another expectation (compatibility, VERIFY-5);
    a lying stamp over an honest payload (honesty, VERIFY-4), possibly equal to the
    expectation; a faulty payload (coherence, SIG-7..9); the stamp equal to the
    expectation over a payload that differs (VERIFY-4's "even when"); a model or
    dtype spelled otherwise (compared byte for byte, SIG-3 and SIG-14); a stamp of
    an unreadable format over a payload that may be broken (VERIFY-3 before
    coherence); anything at all.
    """
    block = coherent_block(src)
    truth = block.truth
    mode = pick(src, _VERIFY_MODES)
    payload = block.layers
    recorded: Signature | None
    if mode == "unreadable":  # another format's stamp over a payload that may be broken
        payload = faulty_payload(src, block, 2)
        recorded = replace(truth, format_version=pick(src, _FORMAT_LIES))
        expected = pick(src, (truth, recorded))
    elif mode == "respelled":  # one field spelled otherwise, in the stamp or the expectation
        other = respell(src, truth)
        recorded, expected = pick(src, ((other, truth), (truth, other)))
    elif mode == "honest":
        recorded, expected = truth, lie(src, truth, 2)
    elif mode == "lying":
        recorded = lie(src, truth, 2)
        expected = pick(src, (truth, recorded))
    elif mode == "faulty":  # the stamp honest, or with one lie the order must put first
        payload = faulty_payload(src, block, 3)
        recorded = pick(src, (truth, lie(src, truth, 1)))
        expected = pick(src, (truth, lie(src, truth, 1)))
    elif mode == "stamp-is-expected":
        payload = faulty_payload(src, block, 2)
        recorded = lie(src, truth, 1)
        expected = recorded
    else:
        payload = faulty_payload(src, block, 3)
        recorded = None if src.integer(0, 9) == 0 else lie(src, truth, 3)
        expected = lie(src, truth, 3)
    return ops.Verify(recorded=recorded, payload=payload, expected=expected)


def measuring_op(src: Source) -> ops.Op:
    block = coherent_block(src)
    payload = faulty_payload(src, block, 3)
    cls = pick(src, (ops.Measure, ops.Stamp))
    return cls(model=block.truth.model, payload=payload)


def verify_ops() -> st.SearchStrategy[ops.Verify]:
    return strategy(verify_op)


def measuring_ops() -> st.SearchStrategy[ops.Op]:
    return strategy(measuring_op)


#: Attempts at an operation within a reader's narrower counts before the slot is left empty.
_WITHIN_ATTEMPTS = 20


def block_program(
    src: Source, verify: bool = True, signature: bool = True, scope: Scope | None = None
) -> Program:
    """Independent verify, measure and stamp operations (only the classes given).

    A reader that declares its dtypes (SIG-14) is never handed an expectation of
    another dtype: that is its own requirement, which it could not even hold.
    """
    reads = frozenset({1}) if scope is None else scope.reads
    writes = 1 if scope is None else scope.writes
    verifiers: list[Writer[ops.Op]] = []
    if 1 in reads:
        verifiers.append(verify_op)
    if 2 in reads:
        verifiers.append(verify_op_v2)
    if len(verifiers) == 1:
        verifiers *= 2
    choices: list[Writer[ops.Op]] = (verifiers if verify else []) + (
        [measuring_op if writes == 1 else measuring_op_v2] if signature else []
    )
    if not choices:
        raise ValueError("block_programs needs verify or signature")
    limit = U64_MAX if scope is None else scope.uint_max

    def one() -> ops.Op | None:
        for _ in range(_WITHIN_ATTEMPTS):
            op = pick(src, choices)(src)
            if limit >= U64_MAX or _counts_within(op, limit):
                return op
        return None

    program = tuple(op for op in items(src, one, 6, min_size=1, mean_extra=3) if op is not None)
    if scope is None:
        return program
    if scope.reads != {1}:
        program = _versions_within(program, scope.reads)
    if scope.dtypes is None:  # a reader of any name: every expectation is one it holds
        return program
    return _expectations_within(program, scope.dtypes)


def _versions_within(program: Program, reads: frozenset[int]) -> Program:
    """Every version-1 signature lying that it is of another version the reader reads
    becomes version 99: still unreadable, never a version-2 signature without a layout
    (no requirement says how that reads)."""

    def plain(sig: Signature) -> Signature:
        if sig.format_version == 1 or sig.format_version not in reads or sig.layout is not None:
            return sig
        return dataclasses.replace(sig, format_version=99)

    return tuple(
        dataclasses.replace(
            op,
            recorded=None if op.recorded is None else plain(op.recorded),
            expected=plain(op.expected),
        )
        if isinstance(op, ops.Verify)
        else op
        for op in program
    )


def block_programs(
    verify: bool = True, signature: bool = True, scope: Scope | None = None
) -> st.SearchStrategy[Program]:
    """:func:`block_program` as a Hypothesis strategy."""
    if not (verify or signature):
        raise ValueError("block_programs needs verify or signature")
    return strategy(lambda src: block_program(src, verify, signature, scope))


def _counts_within(op: ops.Op, limit: int) -> bool:
    """No count of the payload, the stamp or the expectation above ``limit`` (SIG-14)."""
    payload = getattr(op, "payload", ())
    sigs = [s for s in (getattr(op, "recorded", None), getattr(op, "expected", None)) if s]
    return all(
        max(layer.n_kv_heads, layer.head_dim, layer.seq_len, layer.k_len, layer.v_len) <= limit
        for layer in payload
    ) and all(max(s.n_layers, s.n_kv_heads, s.head_dim, s.tokens) <= limit for s in sigs)


def _expectations_within(program: Program, dtypes: tuple[str, ...]) -> Program:
    return tuple(
        dataclasses.replace(op, expected=dataclasses.replace(op.expected, dtype="f32"))
        if isinstance(op, ops.Verify) and op.expected.dtype not in dtypes
        else op
        for op in program
    )
