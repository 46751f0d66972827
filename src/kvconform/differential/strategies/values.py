"""Values a program holds, whatever the operation class: integers at the edges of their
widths, floats of every kind, texts, bytes, parameter values, model specs, geometries and
per-step inputs.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from kvconform.differential.strategies.source import Source, T, flag, items, pick, strategy
from kvconform.values import (
    Geometry,
    ModelSpec,
    Param,
    StepInputs,
)

U64_MAX = (1 << 64) - 1

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


#: Added to a small count, a value equal to it in the low 32 bits.
_ABOVE_32_BITS = 1 << 32
