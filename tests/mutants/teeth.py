"""Mutants for the refusal probes, byte-exact strings, width overflow and option values.

Each is the reference with one misreading of a requirement that the scenarios
in ``hash/refusals.yaml``, ``plan/key-refusals.yaml``, ``plan/key-strings.yaml``,
``verify/model-label.yaml``, ``signature/width-overflow.yaml``,
``verify/width-overflow.yaml`` and the ``options.yaml`` files (alloc, identity,
plan) exist to catch. A mutant that misreads an option's non-default answer
declares that answer in ``describe()``, as a real implementation would, so it
is judged by the scenarios that assume it (CONF-6).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import ClassVar

import numpy as np
from kvconform_reference import errors, kv_cache, model, plan
from kvconform_reference.hasher import KeyHasher
from kvconform_reference.identity import KvAllocId, ModelInstanceId
from kvconform_reference.signature import V1, CacheSignature, StoredLayer
from kvconform_reference.verify import KvBlock, UnverifiedBlock

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo, Fault, PlanIdentity
from tests.variants import options as _variant_options
from tests.variants import upstream_v2 as _variant_upstream_v2

from . import mutant
from ._kit import (
    BlockAdapter,
    CacheAdapter,
    HasherAdapter,
    Measurer,
    ModelAdapter,
    PlanAdapter,
    compare,
    declaring,
    incompatible,
    moved_storage,
    payload_mismatch,
)

_MASK = (1 << 64) - 1


# --- HASH-12: integers outside the u64 range -----------------------------------


class _ReducedModulo(KeyHasher):
    def mix_u64(self, value: int) -> KeyHasher:
        return self.mix_bytes((value & _MASK).to_bytes(8, "little"))  # MUTATION: asUintN(64)

    def mix_instance(self, instance_id: int) -> KeyHasher:
        return self.mix_str("instance").mix_u64(instance_id)


@mutant(
    "hash-u64-reduced-mod-2-64",
    breaks=("HASH-12", "PLAN-16"),
    half="under",
    plausible="BigInt.asUintN(64, x) in JavaScript, a mask with 0xffff_ffff_ffff_ffff in "
    "Python, or a cast from an unbounded integer: the value 'fits' afterwards, and 2^64 "
    "mixes the bytes of 0",
)
class HashU64ReducedMod264(HasherAdapter):
    hasher = _ReducedModulo


class _TwosComplement(KeyHasher):
    def mix_u64(self, value: int) -> KeyHasher:
        if value > _MASK:
            raise ValueError(f"u64 out of range: {value}")
        # MUTATION: a negative value written as its signed 64-bit pattern
        return self.mix_bytes(value.to_bytes(8, "little", signed=value < 0))

    def mix_instance(self, instance_id: int) -> KeyHasher:
        return self.mix_str("instance").mix_u64(instance_id)


@mutant(
    "hash-u64-negative-as-twos-complement",
    breaks=("HASH-12",),
    half="under",
    plausible="an id or parameter held in a signed 64-bit type (a Java long, an SQLite "
    "integer) and written out as its bit pattern: -1 then mixes exactly like 2^64 - 1",
)
class HashU64NegativeAsTwosComplement(HasherAdapter):
    hasher = _TwosComplement


class _InstanceReduced(KeyHasher):
    def mix_instance(self, instance_id: int) -> KeyHasher:
        # MUTATION: the instance path writes its own bytes, without the u64 range check
        self.mix_str("instance")
        return self.mix_bytes((instance_id & _MASK).to_bytes(8, "little"))


@mutant(
    "hash-instance-reduced-mod-2-64",
    breaks=("HASH-12", "HASH-8"),
    half="under",
    plausible="an instance primitive written separately from mix_u64 (marker, then the id "
    "packed with struct or a mask) skips the range check the u64 primitive has",
)
class HashInstanceReducedMod264(HasherAdapter):
    hasher = _InstanceReduced


class _SignedRange(KeyHasher):
    def mix_u64(self, value: int) -> KeyHasher:
        if not 0 <= value < 1 << 63:  # MUTATION: the range of a signed 64-bit integer
            raise ValueError(f"u64 out of range: {value}")
        return super().mix_u64(value)

    def mix_instance(self, instance_id: int) -> KeyHasher:
        return self.mix_str("instance").mix_u64(instance_id)


@mutant(
    "hash-u64-refuses-above-int64-max",
    breaks=("HASH-12", "HASH-4"),
    half="contract",
    plausible="a range check borrowed from a signed 64-bit type (Long.MAX_VALUE, "
    "i64::MAX, an SQLite integer) refuses the upper half of the u64 range, 2^64 - 1 "
    "included",
)
class HashU64RefusesAboveInt64Max(HasherAdapter):
    hasher = _SignedRange


# --- HASH-13: strings with no UTF-8 form ----------------------------------------


class _ReplaceErrors(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        encoded = text.encode("utf-8", errors="replace")  # MUTATION: '?' for a lone surrogate
        self.mix_bytes(encoded)
        return self.mix_u64(len(encoded))


@mutant(
    "hash-str-surrogates-replaced",
    breaks=("HASH-13", "HASH-5"),
    half="under",
    plausible="errors='replace' (or 'ignore') is the usual fix for a UnicodeEncodeError "
    "seen in a log; the key of 'llama\\ud800' becomes the key of 'llama?'",
)
class HashStrSurrogatesReplaced(HasherAdapter):
    hasher = _ReplaceErrors


class _SurrogatePass(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        encoded = text.encode("utf-8", errors="surrogatepass")  # MUTATION: WTF-8 / CESU-8 bytes
        self.mix_bytes(encoded)
        return self.mix_u64(len(encoded))


@mutant(
    "hash-str-surrogatepass",
    breaks=("HASH-13",),
    half="under",
    plausible="'surrogatepass' keeps every code point and so looks lossless; it writes "
    "ED A0 80, which is not UTF-8, the encoding a Rust or Go implementation cannot "
    "even produce (WTF-8, as Windows file-name code does)",
)
class HashStrSurrogatepass(HasherAdapter):
    hasher = _SurrogatePass


class _LossyUtf16(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        # MUTATION: every lone surrogate becomes U+FFFD first (String::from_utf16_lossy,
        # JavaScript's TextEncoder), then the text is encoded
        cleaned = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text)
        return super().mix_str(cleaned)


@mutant(
    "hash-str-surrogates-as-replacement-char",
    breaks=("HASH-13", "HASH-5"),
    half="under",
    plausible="a UTF-16 language's standard encoder (TextEncoder, from_utf16_lossy) "
    "substitutes U+FFFD silently, so 'a\\udfffb' and 'a\\ufffdb' key alike",
)
class HashStrSurrogatesAsReplacementChar(HasherAdapter):
    hasher = _LossyUtf16


class _NoAstral(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        units = text.encode("utf-16-le", errors="surrogatepass")
        for i in range(0, len(units), 2):
            if 0xD800 <= int.from_bytes(units[i : i + 2], "little") <= 0xDFFF:
                # MUTATION: every surrogate code unit refused, a valid pair included
                raise ValueError("string holds a surrogate")
        return super().mix_str(text)


@mutant(
    "hash-str-refuses-astral",
    breaks=("HASH-13", "HASH-5"),
    half="contract",
    plausible="in a UTF-16 language the lone-surrogate check is written over code units "
    "('any unit in D800..DFFF is refused'), which also refuses every properly paired "
    "character above U+FFFF",
)
class HashStrRefusesAstral(HasherAdapter):
    hasher = _NoAstral


def _is_noncharacter(c: str) -> bool:
    point = ord(c)
    return 0xFDD0 <= point <= 0xFDEF or point & 0xFFFE == 0xFFFE


class _NoNoncharacters(KeyHasher):
    def mix_str(self, text: str) -> KeyHasher:
        if any(_is_noncharacter(c) for c in text):
            # MUTATION: a noncharacter refused as if it had no UTF-8 form
            raise ValueError("string holds a noncharacter")
        return super().mix_str(text)


@mutant(
    "hash-str-refuses-noncharacters",
    breaks=("HASH-13", "HASH-5"),
    half="contract",
    plausible="a strict UTF-8 encoder that also refuses noncharacters (Perl's Encode with "
    "'UTF-8' and FB_CROAK refuses U+10FFFF; some validators reject U+FFFE and U+FFFF): they "
    "are scalar values with UTF-8 forms, and a model label holding one is refused "
    "(found by a Perl trial)",
)
class HashStrRefusesNoncharacters(HasherAdapter):
    hasher = _NoNoncharacters


# --- PLAN-16: string components mixed byte for byte --------------------------------

Fold = Callable[[str], str]


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


class _FoldedKey(PlanAdapter):
    """The reference key over components some of whose strings were canonicalised."""

    family: ClassVar[Fold | None] = None
    param_names: ClassVar[Fold | None] = None
    hook_names: ClassVar[Fold | None] = None
    string_values: ClassVar[Fold | None] = None

    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        cls = type(self)
        same: Fold = lambda s: s  # noqa: E731
        fam, pname, hname, sval = (
            f if f is not None else same
            for f in (cls.family, cls.param_names, cls.hook_names, cls.string_values)
        )
        params = {
            pname(name): sval(value) if isinstance(value, str) else value
            for name, value in ident.params.items()
        }
        hooks = {hname(name): on for name, on in ident.hooks.items()}
        folded = replace(ident, family=fam(ident.family), params=params, hooks=hooks)
        return super().key(folded, cache, step)


@mutant(
    "plan-key-family-casefolded",
    breaks=("PLAN-16",),
    half="under",
    plausible="model registries often look families up case-insensitively ('Llama', "
    "'LLAMA', 'llama'), and the lookup's normalised name is what gets keyed",
)
class PlanKeyFamilyCasefolded(_FoldedKey):
    family = staticmethod(str.casefold)


@mutant(
    "plan-key-family-nfc",
    breaks=("PLAN-16",),
    half="under",
    plausible="normalising text to NFC on input is standard hygiene for names that came "
    "from a file or a web form; the family the deployment wrote decomposed is then keyed "
    "as a different, precomposed one",
)
class PlanKeyFamilyNfc(_FoldedKey):
    family = staticmethod(_nfc)


@mutant(
    "plan-key-family-stripped",
    breaks=("PLAN-16",),
    half="under",
    plausible="a config loader that strips every string value ('llama ' from a hand-edited "
    "YAML file) before it reaches the key",
)
class PlanKeyFamilyStripped(_FoldedKey):
    family = staticmethod(str.strip)


@mutant(
    "plan-key-param-names-lowercased",
    breaks=("PLAN-16",),
    half="under",
    plausible="configuration keys lower-cased on load (HF configs mix 'n_heads' and "
    "'N_HEADS' styles across forks), so two parameters the model reads by exact name key "
    "alike",
)
class PlanKeyParamNamesLowercased(_FoldedKey):
    param_names = staticmethod(str.lower)


@mutant(
    "plan-key-hook-names-nfc",
    breaks=("PLAN-16",),
    half="under",
    plausible="a hook registry keyed by a normalised name, so that the same hook "
    "registered from two sources is found either way; the normalised name is then keyed",
)
class PlanKeyHookNamesNfc(_FoldedKey):
    hook_names = staticmethod(_nfc)


@mutant(
    "plan-key-string-values-stripped",
    breaks=("PLAN-16",),
    half="under",
    plausible="string parameter values trimmed as they are parsed (' causal' read from a "
    "CLI flag), and the trimmed value is what the key sees",
)
class PlanKeyStringValuesStripped(_FoldedKey):
    string_values = staticmethod(str.strip)


@mutant(
    "plan-key-string-values-casefolded",
    breaks=("PLAN-16",),
    half="under",
    plausible="an enum-like string value ('Causal', 'causal') parsed case-insensitively and "
    "keyed in its canonical spelling; the key then decides for the engine that two "
    "spellings are one",
)
class PlanKeyStringValuesCasefolded(_FoldedKey):
    string_values = staticmethod(str.casefold)


# --- SIG-15: a per-token width no u64 holds -------------------------------------------


class _Sig15Measurer(Measurer):
    """The reference measuring, SIG-15 included: a width above 2^64 - 1 is degenerate."""

    def width(self, n_kv_heads: int, head_dim: int) -> int:
        return n_kv_heads * head_dim

    def fits(self, width: int) -> bool:
        return width <= _MASK

    def check_degenerate(self, first: StoredLayer) -> None:
        n_kv_heads, head_dim = first.n_kv_heads, first.head_dim
        if n_kv_heads < 1 or head_dim < 1 or not self.fits(self.width(n_kv_heads, head_dim)):
            raise errors.DegenerateLayer(
                layer_index=0, n_kv_heads=first.n_kv_heads, head_dim=first.head_dim
            )

    def measure(self, model_name: str, layers: Sequence[StoredLayer]) -> CacheSignature:
        if not layers:
            raise errors.EmptyPayload()
        first = layers[0]
        n_kv_heads, head_dim = first.n_kv_heads, first.head_dim
        self.check_degenerate(first)
        per_token = self.width(n_kv_heads, head_dim)
        tokens = self.measure_layer(0, first, per_token)
        for index, layer in self.later_layers(layers):
            self.check_shape(index, layer, (n_kv_heads, head_dim))
            layer_tokens = self.measure_layer(index, layer, per_token)
            self.check_tokens(index, tokens, layer_tokens)
        return self.signature(model_name, layers, n_kv_heads, head_dim, tokens)


class _WrappingWidth(_Sig15Measurer):
    def width(self, n_kv_heads: int, head_dim: int) -> int:
        return (n_kv_heads * head_dim) & _MASK  # MUTATION: u64::wrapping_mul

    def fits(self, width: int) -> bool:
        return True


@mutant(
    "sig-width-wrapping-multiply",
    breaks=("SIG-15",),
    half="under",
    plausible="the seed multiplies two usize counts unchecked, which wraps in a release "
    "build: (2^63 + 1) * 2 measures as width 2 and a bogus layer is accepted (and 2^32 * "
    "2^32 wraps to 0 and divides by zero)",
)
class SigWidthWrappingMultiply(BlockAdapter):
    measurer = _WrappingWidth()


class _SaturatingWidth(_Sig15Measurer):
    def width(self, n_kv_heads: int, head_dim: int) -> int:
        return min(n_kv_heads * head_dim, _MASK)  # MUTATION: u64::saturating_mul

    def fits(self, width: int) -> bool:
        return True


@mutant(
    "sig-width-saturating-multiply",
    breaks=("SIG-15",),
    half="under",
    plausible="saturating_mul is the usual 'safe' replacement for an overflowing multiply; "
    "a width pinned at 2^64 - 1 then measures empty buffers as a coherent block of 0 tokens",
)
class SigWidthSaturatingMultiply(BlockAdapter):
    measurer = _SaturatingWidth()


class _WidthOffByOne(_Sig15Measurer):
    def fits(self, width: int) -> bool:
        return width < _MASK  # MUTATION: checked against u64::MAX exclusively


@mutant(
    "sig-width-check-off-by-one",
    breaks=("SIG-15", "SIG-10"),
    half="contract",
    plausible="an overflow guard written as width < u64::MAX (or checked_mul(..) followed "
    "by a '< MAX' sanity check) refuses the one width that fits exactly",
)
class SigWidthCheckOffByOne(BlockAdapter):
    measurer = _WidthOffByOne()


class _DimsMustFitU32(_Sig15Measurer):
    def check_degenerate(self, first: StoredLayer) -> None:
        super().check_degenerate(first)
        if first.n_kv_heads >= 1 << 32 or first.head_dim >= 1 << 32:  # MUTATION: u32 dims
            raise errors.DegenerateLayer(
                layer_index=0, n_kv_heads=first.n_kv_heads, head_dim=first.head_dim
            )


@mutant(
    "sig-width-dims-must-fit-u32",
    breaks=("SIG-15", "SIG-10"),
    half="contract",
    plausible="'if both factors fit in 32 bits the product fits in 64' is a sufficient "
    "overflow check, and a cheap one; it is not a necessary one, and refuses coherent "
    "layers whose width fits",
)
class SigWidthDimsMustFitU32(BlockAdapter):
    measurer = _DimsMustFitU32()


# --- SIG-3: the model label compared byte for byte ----------------------------------


class _LabelFolded(BlockAdapter):
    """The reference verify with the model labels compared after a fold in step 5."""

    fold: ClassVar[Fold] = staticmethod(lambda s: s)
    measurer = _Sig15Measurer()

    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is None:
            raise errors.Unmarked()
        if recorded.format_version not in V1.readable:
            raise errors.UnsupportedFormat(found=recorded.format_version, readable=V1.readable)
        actual = replace(
            self.measure_layers(recorded.model, block.layers),
            format_version=recorded.format_version,
        )
        compare(recorded, actual, payload_mismatch)
        fold = type(self).fold
        if fold(expected.model) == fold(actual.model):  # MUTATION: folded comparison
            expected = replace(expected, model=actual.model)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-model-compared-nfc",
    breaks=("SIG-3", "VERIFY-5"),
    half="under",
    plausible="comparing labels after Unicode normalisation is the textbook way to compare "
    "user-visible strings; SIG-3 makes the label opaque, so a decomposed and a "
    "precomposed label are two labels",
)
class VerifyModelComparedNfc(_LabelFolded):
    fold = staticmethod(_nfc)


@mutant(
    "verify-model-compared-stripped",
    breaks=("SIG-3", "VERIFY-5"),
    half="under",
    plausible="labels read from a header or a file carry stray whitespace, so the reader "
    "trims both sides 'to be tolerant'; a suffix separated by a space is then ignored",
)
class VerifyModelComparedStripped(_LabelFolded):
    fold = staticmethod(str.strip)


@mutant(
    "verify-stamp-label-normalised-on-decode",
    breaks=("SIG-3", "VERIFY-5", "VERIFY-7"),
    half="over",
    plausible="the stamp is parsed from stored bytes by a decoder that normalises and "
    "trims text fields, the reader's label is not: a block whose stamp and expectation are "
    "byte-identical is then refused as incompatible",
)
class VerifyStampLabelNormalisedOnDecode(BlockAdapter):
    measurer = _Sig15Measurer()

    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is not None:
            # MUTATION: the stamp's label tidied while the stamp is decoded; the reader's not
            label = _nfc(recorded.model).strip()
            block = replace(block, signature=replace(recorded, model=label))
        return super().verify_block(block, expected)


# --- ALLOC-15 under refuse -------------------------------------------------------------


class _TruncateRefuse(CacheAdapter):
    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), truncate_past_length="refuse")


@mutant(
    "truncate-refuse-after-moving-the-length",
    breaks=("ALLOC-15", "ALLOC-14"),
    half="contract",
    plausible="the refusal is raised at the end of the method, after the length was "
    "already set ('validate, then report'), so the refused truncate exposes never-written "
    "positions",
)
class TruncateRefuseAfterMovingTheLength(_TruncateRefuse):
    def cache_truncate(self, cache: kv_cache.KvCache, length: int) -> None:
        held = len(cache)
        cache._length = length  # MUTATION: moved before the check
        if length > held:
            raise ValueError(f"cannot rewind to {length}: only {held} positions held")


@mutant(
    "truncate-refuse-at-the-current-length",
    breaks=("ALLOC-15",),
    half="contract",
    plausible="the check is written n >= len ('nothing to rewind') instead of n > len, so "
    "a truncate to exactly the current length, a no-op under both answers, is refused",
)
class TruncateRefuseAtTheCurrentLength(_TruncateRefuse):
    def cache_truncate(self, cache: kv_cache.KvCache, length: int) -> None:
        if length >= len(cache):  # MUTATION: >= instead of >
            raise ValueError(f"cannot rewind to {length}: only {len(cache)} positions held")
        cache.truncate_to(length)


@mutant(
    "truncate-refuse-declared-but-silent",
    breaks=("ALLOC-15", "CONF-6"),
    half="contract",
    plausible="the option is declared from the design document while the code still "
    "silently ignores a bound past the length; a caller relying on the declared refusal "
    "is never told",
)
class TruncateRefuseDeclaredButSilent(_TruncateRefuse):
    pass  # MUTATION: declares refuse, truncates as noop does


class _RemintsOnRefusal(kv_cache.KvCache):
    def truncate_to(self, length: int) -> None:
        if length > len(self):
            # MUTATION: the error path re-registers the storage "to be safe"
            self._alloc_id = KvAllocId.mint()
            raise ValueError(f"cannot rewind to {length}: only {len(self)} positions held")
        super().truncate_to(length)


@mutant(
    "truncate-refuse-mints-on-refusal",
    breaks=("ALLOC-15", "ALLOC-13"),
    half="over",
    plausible="a 'reset on error' path that re-registers the storage whenever an operation "
    "on the cache fails; nothing was done, yet every held plan is detached",
)
class TruncateRefuseMintsOnRefusal(_TruncateRefuse):
    cache_cls = _RemintsOnRefusal


# --- ALLOC-16 under grow -----------------------------------------------------------------


class _GrowsKeepingId(kv_cache.KvCache):
    """Storage that grows like a vector: max_seq_len is only the initial reservation."""

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        n = k.shape[1]
        end = len(self) + n
        reserved = self._layers[0].k.shape[0]
        if end > reserved:
            bigger = replace(self.geometry, max_seq_len=max(end, 2 * reserved))
            self._layers = moved_storage(self, bigger)
            # MUTATION: no new id, and the geometry still says the reserved size
        for index, layer in enumerate(self._layers):
            layer.k[len(self) : end] = k[index]
            layer.v[len(self) : end] = v[index]
        self._length = end


@mutant(
    "append-grow-keeps-alloc-id",
    breaks=("ALLOC-16", "ALLOC-13", "PLAN-10"),
    half="under",
    plausible="a cache whose storage grows like a Vec is still 'the same cache', and "
    "max_seq_len is read as an initial reservation; the id and the geometry stay, and every "
    "held plan keeps writing into the released, smaller buffers",
)
class AppendGrowKeepsAllocId(CacheAdapter):
    cache_cls = _GrowsKeepingId

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), append_past_capacity="grow")


class _GrowsMintingAlways(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        end = len(self) + k.shape[1]
        if end > self.geometry.max_seq_len:
            grown = replace(self.geometry, max_seq_len=max(end, 2 * self.geometry.max_seq_len))
            self._layers = moved_storage(self, grown)
            self.geometry = grown
        super().append(k, v)
        self._alloc_id = KvAllocId.mint()  # MUTATION: every append "may have moved" storage


@mutant(
    "append-grow-mints-on-every-append",
    breaks=("ALLOC-16", "ALLOC-7", "PLAN-7"),
    half="over",
    plausible="once storage can move, 'an append may reallocate' is taken to mean every "
    "append gets a new id, to be safe; held plans are then lost on every token, within the "
    "capacity too",
)
class AppendGrowMintsOnEveryAppend(CacheAdapter):
    cache_cls = _GrowsMintingAlways

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), append_past_capacity="grow")


class _WrappingCapacityCheck(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        end = (len(self) + k.shape[1]) & 0xFFFF_FFFF_FFFF_FFFF  # MUTATION: u64 arithmetic
        if end > self.geometry.max_seq_len:
            raise errors.CapacityExceeded(capacity=self.geometry.max_seq_len, requested=end)
        self._length = end  # what is written is past the storage; the length wraps


@mutant(
    "append-capacity-check-wraps",
    breaks=("ALLOC-16", "ALLOC-13"),
    half="under",
    plausible="'if (len + n > max_seq_len)' in uint64_t (or a Rust release build): a count "
    "near 2^64 wraps the sum to a small number that passes, and the cache accepts an "
    "append no storage can hold",
)
class AppendCapacityCheckWraps(CacheAdapter):
    cache_cls = _WrappingCapacityCheck


class _GrowsWrapping(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        end = (len(self) + k.shape[1]) & 0xFFFF_FFFF_FFFF_FFFF  # MUTATION: u64 arithmetic
        if end > self.geometry.max_seq_len:
            grown = replace(self.geometry, max_seq_len=max(end, 2 * self.geometry.max_seq_len))
            self._layers = moved_storage(self, grown)
            self.geometry = grown
            self._alloc_id = KvAllocId.mint()
        self._length = end  # a sum that wrapped "fits": the length wraps


@mutant(
    "append-grow-sum-wraps",
    breaks=("ALLOC-16",),
    half="under",
    plausible="a growing cache computes 'len + n' in uint64_t (or a Rust release build): a "
    "count near 2^64 wraps to a small length that fits, so nothing grows and the cache "
    "accepts an append no storage can hold",
)
class AppendGrowSumWraps(CacheAdapter):
    cache_cls = _GrowsWrapping

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), append_past_capacity="grow")


class _FullGuard(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        if len(self) >= self.geometry.max_seq_len:  # MUTATION: "is it full?" first
            raise errors.CapacityExceeded(
                capacity=self.geometry.max_seq_len, requested=len(self) + k.shape[1]
            )
        super().append(k, v)


@mutant(
    "append-refused-whenever-the-cache-is-full",
    breaks=("ALLOC-16", "ALLOC-7"),
    half="over",
    plausible="a ring buffer's 'if full: refuse' guard put before the capacity check; an "
    "append of nothing to a full cache, which fits, is then refused",
)
class AppendRefusedWheneverTheCacheIsFull(CacheAdapter):
    cache_cls = _FullGuard


class _NothingRefused(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        if k.shape[1] == 0:
            raise ValueError("nothing to append")  # MUTATION: an empty append is an error
        super().append(k, v)


@mutant(
    "append-of-nothing-refused",
    breaks=("ALLOC-7", "ALLOC-14"),
    half="over",
    plausible="'nothing to append' reads like a caller's mistake and is refused as a usage "
    "error; ALLOC-14 admits data of any count n, 0 included, and an empty chunk fits",
)
class AppendOfNothingRefused(CacheAdapter):
    cache_cls = _NothingRefused


class _GrowsFromTheOriginalCapacity(kv_cache.KvCache):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._initial_capacity = self.geometry.max_seq_len

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        end = len(self) + k.shape[1]
        if end > self._initial_capacity:  # MUTATION: the capacity it was made with
            grown = replace(self.geometry, max_seq_len=max(end, 2 * self.geometry.max_seq_len))
            self._layers = moved_storage(self, grown)
            self.geometry = grown
            self._alloc_id = KvAllocId.mint()
        super().append(k, v)


@mutant(
    "append-grow-checks-the-original-capacity",
    breaks=("ALLOC-16", "ALLOC-7"),
    half="over",
    plausible="the capacity check keeps reading the max_seq_len the cache was made with "
    "(a field set once in the constructor) while the storage grows; every append past the "
    "old capacity then 'grows' and mints again, and held plans are lost on every token",
)
class AppendGrowChecksTheOriginalCapacity(CacheAdapter):
    cache_cls = _GrowsFromTheOriginalCapacity

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), append_past_capacity="grow")


# --- ALLOC-18: the clear's fresh id -----------------------------------------------------


class _LazyStaleRead(kv_cache.KvCache):
    """A lazy clear whose id accessor does not allocate: it reports the old id."""

    _pending = False

    def clear(self) -> None:
        self._layers = []
        self._length = 0
        self._pending = True

    def _allocate(self) -> None:
        if self._pending:
            g = self.geometry
            self._layers = [kv_cache.KvLayer.allocate(g) for _ in range(g.n_layers)]
            self._alloc_id = KvAllocId.mint()
            self._pending = False

    # MUTATION: no alloc_id override -- reading the id does not allocate, so it is stale

    def layer(self, index: int) -> kv_cache.KvLayer:
        self._allocate()
        return super().layer(index)

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        self._allocate()
        super().append(k, v)

    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        self._allocate()
        super().set_layer(index, layer)


@mutant(
    "clear-lazy-id-read-is-stale",
    breaks=("ALLOC-18", "PLAN-10"),
    half="under",
    plausible="lazy allocation hooked into the write path only; the id getter returns the "
    "stored field, which still names the released storage, so a check right after the "
    "clear judges the old plan valid",
)
class ClearLazyIdReadIsStale(CacheAdapter):
    cache_cls = _LazyStaleRead

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), clear_mints="lazy")


class _LazyPlanReadsTheField(_LazyStaleRead):
    """A lazy clear whose public id accessor allocates, while plans read the field."""

    def public_alloc_id(self) -> KvAllocId:
        self._allocate()
        return self._alloc_id

    # MUTATION: ``alloc_id``, which plan identity reads, is still the stored field


@mutant(
    "clear-lazy-plan-reads-the-stored-id",
    breaks=("ALLOC-18", "PLAN-10"),
    half="under",
    plausible="the id getter the API exposes settles the pending allocation, but the plan "
    "code reads the cache's id field directly; a check right after the clear then judges "
    "the old plan valid over released storage (found by an audit: the scenario compiler's "
    "own read after every clear used to settle the mint before the check)",
)
class ClearLazyPlanReadsTheStoredId(CacheAdapter):
    cache_cls = _LazyPlanReadsTheField

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), clear_mints="lazy")

    def cache_alloc_id(self, cache: kv_cache.KvCache) -> int:
        assert isinstance(cache, _LazyPlanReadsTheField)
        return cache.public_alloc_id().value


class _LazyLengthAtAllocation(_LazyStaleRead):
    """A lazy clear that leaves the length to the pending allocation."""

    def clear(self) -> None:
        self._pending = True  # MUTATION: storage and length both wait for the allocation

    def _allocate(self) -> None:
        if self._pending:
            self._length = 0
        super()._allocate()

    @property
    def alloc_id(self) -> KvAllocId:
        self._allocate()
        return self._alloc_id


@mutant(
    "clear-lazy-length-reset-at-allocation",
    breaks=("ALLOC-18",),
    half="under",
    plausible="'lazy' read as deferring the whole clear to the next allocation: the length "
    "still reads the old value until then, so a caller appending after a clear writes past "
    "positions it thinks are gone",
)
class ClearLazyLengthResetAtAllocation(CacheAdapter):
    cache_cls = _LazyLengthAtAllocation

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), clear_mints="lazy")


class _ClearBumpsLocally(kv_cache.KvCache):
    def clear(self) -> None:
        self._layers = [kv_cache.KvLayer.allocate(self.geometry) for _ in self._layers]
        self._length = 0
        self._alloc_id = KvAllocId(self._alloc_id.value + 1)  # MUTATION: a local generation


@mutant(
    "clear-bumps-alloc-id-locally",
    breaks=("ALLOC-18", "ALLOC-1"),
    half="under",
    plausible="a per-cache generation counter (id + 1 on every clear) looks like a fresh "
    "id, but it is not drawn from the shared counter: the next cache constructed gets "
    "the same number",
)
class ClearBumpsAllocIdLocally(CacheAdapter):
    cache_cls = _ClearBumpsLocally


class _PooledCache(kv_cache.KvCache):
    #: Allocation ids of dropped caches, handed to the next clear() (a buffer pool).
    pool: ClassVar[list[int]] = []

    def clear(self) -> None:
        super().clear()
        if self.pool:
            self._alloc_id = KvAllocId(self.pool.pop())  # MUTATION: a recycled id


@mutant(
    "clear-takes-a-dropped-caches-id",
    breaks=("ALLOC-18", "ALLOC-1", "PLAN-14"),
    half="under",
    plausible="clear() takes its fresh storage from a pool of buffers released by dropped "
    "caches, and the id travels with the buffer; a plan built on the dropped cache is "
    "then valid for the cleared one",
)
class ClearTakesADroppedCachesId(CacheAdapter):
    cache_cls = _PooledCache

    def drop(self, handle: object) -> None:
        if isinstance(handle, _PooledCache):
            _PooledCache.pool.append(handle.alloc_id.value)


# --- ID-10 / PLAN-18 under remints_instance ----------------------------------------------


class _RemintsDeclared(ModelAdapter):
    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), hook_toggle="remints_instance")


@mutant(
    "hook-remints-declared-but-kept",
    breaks=("ID-10", "PLAN-18", "CONF-6"),
    half="contract",
    plausible="remints_instance declared because the engine rebuilds its graph on a toggle, "
    "while the model object (and its id) is kept; a plan then regains validity, which the "
    "declared answer says cannot happen",
)
class HookRemintsDeclaredButKept(_RemintsDeclared):
    pass  # MUTATION: declares remints_instance, keeps the id as keeps_instance does


class _MemoisedPerState(model.Model):
    def __init__(self, config: model.ModelConfig) -> None:
        super().__init__(config)
        self._ids: dict[tuple[tuple[str, bool], ...], ModelInstanceId] = {
            self._state(): self.instance_id
        }

    def _state(self) -> tuple[tuple[str, bool], ...]:
        return tuple(sorted(self.hooks.items()))

    def set_hook(self, name: str, present: bool) -> None:
        super().set_hook(name, present)
        # MUTATION: one id per hook state, minted the first time the state is seen
        self.instance_id = self._ids.setdefault(self._state(), ModelInstanceId.mint())

    def reload(self) -> model.Model:
        return type(self)(self.config)


@mutant(
    "hook-remints-memoised-per-state",
    breaks=("ID-10", "ID-3", "PLAN-18"),
    half="under",
    plausible="an engine that caches one compiled graph per hook configuration hands back "
    "the id it gave that configuration before; switching back then re-issues an id, and "
    "the plan built for the old instance is valid again",
)
class HookRemintsMemoisedPerState(_RemintsDeclared):
    model_cls = _MemoisedPerState


# --- PLAN-15 under implied ------------------------------------------------------------------


@mutant(
    "plan-key-implied-drops-all-geometry",
    breaks=("PLAN-15", "PLAN-16"),
    half="under",
    plausible="'the allocation id implies the geometry' read for the whole geometry, not "
    "the head layout only: n_layers, max_seq_len and dtype are then left out of the key "
    "too",
)
class PlanKeyImpliedDropsAllGeometry(PlanAdapter):
    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), plan_key_cache_heads="implied")

    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        composition = replace(self.composition, geometry=())  # MUTATION: no geometry at all
        return composition.key(ident)


# --- VERIFY-9 / SIG-14: a reader that declares narrower types ------------------------------


class _Declares32BitCounts(BlockAdapter):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), uint_bits=32)


@mutant(
    "u32-reader-wraps-stamp-counts",
    breaks=("VERIFY-9", "ERR-9", "SIG-14"),
    half="under",
    plausible="a reader that decodes a stamp's counts with `as u32` (a C cast, a "
    "`DataView.getUint32` on the low word): 2^32 layers becomes 0 and 2^32+3 becomes 3, "
    "the second stamp then agrees with a 3-layer payload and the block is used",
)
class U32ReaderWrapsStampCounts(_Declares32BitCounts):
    def verify(self, recorded, payload, expected):  # type: ignore[no-untyped-def]
        if recorded is not None:
            narrowed = {
                name: getattr(recorded, name) & 0xFFFF_FFFF  # MUTATION: wraps instead of refusing
                for name in ("n_layers", "n_kv_heads", "head_dim", "tokens")
            }
            recorded = replace(recorded, **narrowed)
        return super().verify(recorded, payload, expected)


class _NarrowReader(BlockAdapter):
    """A reader of u32 counts and an enum of f32 and f16 (CONF-7), refusing what it
    cannot hold at check 2a (VERIFY-9); a mutant overrides one part."""

    limit = 0xFFFF_FFFF
    #: The stamp's fields scanned at 2a, in the order of VERIFY-4.
    scanned: tuple[str, ...] = ("n_layers", "n_kv_heads", "head_dim", "dtype", "tokens")

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), uint_bits=32, dtypes=frozenset({"f32", "f16"}))

    def holds(self, name: str, value: object) -> bool:
        if name == "dtype":
            return value in ("f32", "f16")
        assert isinstance(value, int)
        return value <= self.limit

    def unheld(self, recorded):  # type: ignore[no-untyped-def]
        for name in self.scanned:
            if not self.holds(name, getattr(recorded, name)):
                return Fault(
                    kind="unrepresentable",
                    field=name,
                    values={"found": getattr(recorded, name)},
                    message=f"the stamp's {name} {getattr(recorded, name)} cannot be held",
                )
        return None

    def verify(self, recorded, payload, expected):  # type: ignore[no-untyped-def]
        if recorded is not None and recorded.format_version in self.reads:
            refusal = self.unheld(recorded)
            if refusal is not None:
                return refusal
        return super().verify(recorded, payload, expected)


class _NarrowReaderLimitOneLow(_NarrowReader):
    limit = 0xFFFF_FFFE  # MUTATION: "< u32::MAX", the largest value taken for an overflow


@mutant(
    "narrow-reader-refuses-the-largest-u32",
    breaks=("VERIFY-9", "ERR-9"),
    half="over",
    plausible="the range check is written '< u32::MAX' (or '>= 0xFFFFFFFF' refused), "
    "reserving the largest value as a sentinel; a stamp of 2^32 - 1 is then refused as "
    "unrepresentable though a u32 holds it",
)
class NarrowReaderRefusesTheLargestU32(_NarrowReaderLimitOneLow):
    pass


@mutant(
    "narrow-reader-scans-the-head-fields-first",
    breaks=("VERIFY-9", "ERR-9", "VERIFY-4"),
    half="contract",
    plausible="the decoder reads the head count and width first (they size every buffer) "
    "and the layer count after; a stamp too wide in two fields names the wrong one",
)
class NarrowReaderScansTheHeadFieldsFirst(_NarrowReader):
    scanned = ("n_kv_heads", "head_dim", "n_layers", "dtype", "tokens")  # MUTATION


@mutant(
    "narrow-reader-decodes-the-dtype-first",
    breaks=("VERIFY-9", "ERR-9", "VERIFY-4"),
    half="contract",
    plausible="the element type is decoded first because everything else is sized by it; "
    "a stamp with a count it cannot hold and a dtype it does not know names the dtype",
)
class NarrowReaderDecodesTheDtypeFirst(_NarrowReader):
    scanned = ("dtype", "n_layers", "n_kv_heads", "head_dim", "tokens")  # MUTATION


class _NarrowReaderAtHonesty(_NarrowReader):
    def verify(self, recorded, payload, expected):  # type: ignore[no-untyped-def]
        result = BlockAdapter.verify(self, recorded, payload, expected)
        if isinstance(result, Fault) and result.kind == "payload_mismatch":
            # MUTATION: the counts are narrowed when the stamp is compared (step 4), so a
            # torn payload's coherence error is reported first
            refusal = self.unheld(recorded)
            if refusal is not None:
                return refusal
        return result


@mutant(
    "narrow-reader-checks-at-the-honesty-step",
    breaks=("VERIFY-9",),
    half="contract",
    plausible="the stamp's fields are converted to the reader's types where they are "
    "compared with the measurement; a stamp it cannot hold over a torn payload then "
    "reports the payload's fault, not the stamp it cannot decode",
)
class NarrowReaderChecksAtTheHonestyStep(_NarrowReaderAtHonesty):
    pass


class _DeclaresDtypeEnum(BlockAdapter):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), dtypes=frozenset({"f32", "f16"}))


@mutant(
    "dtype-enum-reader-maps-unknown-to-f32",
    breaks=("SIG-14", "VERIFY-9", "ERR-9"),
    half="under",
    plausible="an enum decoder with a fallback (`_ => F32`, `?? 'f32'`) for names it does "
    "not know: a stamp saying bf16 or F32 then decodes as f32 and a block written in "
    "another element type is read as f32",
)
class DtypeEnumReaderMapsUnknownToF32(_DeclaresDtypeEnum):
    def verify(self, recorded, payload, expected):  # type: ignore[no-untyped-def]
        if recorded is not None and recorded.dtype not in ("f32", "f16"):
            recorded = replace(recorded, dtype="f32")  # MUTATION: unknown names fall back to f32
        return super().verify(recorded, payload, expected)


# --- Teeth at every option's edges (conformance/teeth.yaml) ---------------------------
# Each misreads one option value at an operation where no scenario judged that value
# before; the scenario named in its docstring is the one that kills it.


@mutant(
    "implied-still-keys-head-dim",
    breaks=("PLAN-15",),
    half="over",
    plausible="plan_key_cache_heads: implied read as 'the head count is implied': the "
    "key drops n_kv_heads but still mixes head_dim, so the declaration says one thing "
    "and the key does another (plan.cache-heads-implied.heads-left-to-alloc)",
)
class ImpliedStillKeysHeadDim(_variant_options.CacheHeadsImplied):
    def plan_key(self, identity: PlanIdentity) -> int:
        from kvconform.adapters.reference import plan_identity

        ident = plan_identity(identity)
        # MUTATION: only the head count is left to the allocation id
        return replace(ident, geometry=replace(ident.geometry, n_kv_heads=1)).key()


@mutant(
    "validity-counts-hook-toggles",
    breaks=("PLAN-18", "PLAN-19"),
    half="over",
    plausible="the three-valued check keeps a graph generation bumped on every hook "
    "toggle and calls a plan stale once it moved, even when the hook state is restored "
    "and the key is whole again (plan.validity.hook-restored-is-valid-again)",
)
class ValidityCountsHookToggles(ReferenceAdapter):
    def model_set_hook(self, m: model.Model, hook: str, present: bool) -> None:
        if m.hooks.get(hook) != present:
            m._toggles = getattr(m, "_toggles", 0) + 1  # type: ignore[attr-defined]
        super().model_set_hook(m, hook, present)

    def session_new(self, m, cache, step_tokens):  # type: ignore[no-untyped-def]
        session = super().session_new(m, cache, step_tokens)
        session._generation = getattr(m, "_toggles", 0)
        return session

    def session_validity(self, session, m, cache, step):  # type: ignore[no-untyped-def]
        found = super().session_validity(session, m, cache, step)
        if found == "valid" and getattr(m, "_toggles", 0) != session._generation:
            return "stale"  # MUTATION: any toggle since the build is a new graph
        return found


class _LineageModel(_variant_options._RemintingModel):
    """A re-minting model that remembers the instance it was first minted as."""

    def set_hook(self, name: str, present: bool) -> None:
        first = getattr(self, "lineage", self.instance_id)
        super().set_hook(name, present)
        self.lineage = first


@mutant(
    "remint-lineage-is-same-structure",
    breaks=("PLAN-18", "PLAN-19", "PLAN-24"),
    half="under",
    plausible="under hook_toggle: remints_instance the re-minted model is tracked as a "
    "successor of the one it replaced, and the three-valued check compares that lineage "
    "instead of the instance id: with the hooks restored a plan is merely "
    "allocation_changed, inviting a rebind over an instance it never baked for "
    "(plan.validity.hook-restored-under-remints-stays-stale)",
)
class RemintLineageIsSameStructure(_variant_options.HookRemints):
    def model_new(self, spec):  # type: ignore[no-untyped-def]
        m = super().model_new(spec)
        m.__class__ = _LineageModel
        return m

    def session_validity(self, session, m, cache, step):  # type: ignore[no-untyped-def]
        found = super().session_validity(session, m, cache, step)
        lineage = getattr(m, "lineage", m.instance_id)
        if found != "stale" or lineage == m.instance_id:
            return found
        real, m.instance_id = m.instance_id, lineage  # MUTATION: the lineage stands for it
        try:
            again = super().session_validity(session, m, cache, step)
        finally:
            m.instance_id = real
        return "allocation_changed" if again == "valid" else again


@mutant(
    "layout-only-measure-splits-width",
    breaks=("PROF-11",),
    half="contract",
    plausible="a writer of the layout_only line whose measure path was shared with the "
    "later line: stamping follows the declared revision, while measuring still knows a V "
    "head width and refuses a split payload as split_kv_head_width "
    "(signature.v2.layout-only-measure-split-is-ragged-v)",
)
class LayoutOnlyMeasureSplitsWidth(_variant_upstream_v2.FerroxV2LayoutOnly):
    _measuring = False

    def _tokens_of(self, index, layer, width, version):  # type: ignore[no-untyped-def]
        split = layer.v_head_dim is not None and layer.v_head_dim != layer.head_dim
        if self._measuring and split:  # MUTATION: the V head width is checked when measuring
            _variant_upstream_v2._refuse(
                "split_kv_head_width",
                layer=index,
                head_dim=layer.head_dim,
                v_head_dim=layer.v_head_dim,
            )
        return super()._tokens_of(index, layer, width, version)

    def measure(self, model_name, payload, *, layout=None):  # type: ignore[no-untyped-def]
        self._measuring = True
        try:
            return super().measure(model_name, payload, layout=layout)
        finally:
            self._measuring = False


class _CapacityRefusalRemints(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        try:
            super().append(k, v)
        except errors.CapacityExceeded:
            self._alloc_id = KvAllocId.mint()  # MUTATION: the refusal re-registers the storage
            raise


@mutant(
    "capacity-refusal-remints",
    breaks=("ALLOC-16", "ALLOC-14", "PLAN-19"),
    half="over",
    plausible="a 'reset on error' path: an append refused for capacity re-registers the "
    "storage on its way out, so every plan held over the untouched cache is sent to a "
    "rebind (plan.validity.capacity-refusal-keeps-valid; the alloc capacity scenarios "
    "catch it too)",
)
class CapacityRefusalRemints(ReferenceAdapter):
    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _CapacityRefusalRemints
        return cache

    def cache_new_placed(self, geometry, residency, layer_storage):  # type: ignore[no-untyped-def]
        cache = super().cache_new_placed(geometry, residency, layer_storage)
        cache.__class__ = _CapacityRefusalRemints
        return cache


# --- prefix_block_size: one mutant per declared size with a case of its own -----------


def _double_block_pool(size: int) -> type:
    class DoubleBlockPool(ReferenceAdapter):
        __doc__ = (
            f"Declares prefix_block_size: {size}, is made with it, and hashes in blocks "
            f"of {2 * size} (prefix.block-size.declared-{size}-reuses-whole-blocks-of-{size})."
        )

        def describe(self) -> AdapterInfo:
            info = super().describe()
            return replace(info, options={**info.options, "prefix_block_size": str(size)})

        def prefix_new(self, block_size, model_name, kv_dtype, layout, shard, **bound):  # type: ignore[no-untyped-def]
            # MUTATION: the pool's hash block size is a setting apart from the block size
            return super().prefix_new(2 * block_size, model_name, kv_dtype, layout, shard, **bound)

    DoubleBlockPool.__name__ = DoubleBlockPool.__qualname__ = f"DoubleBlockPool{size}"
    return DoubleBlockPool


for _size in (1, 8, 16, 32, 64, 128, 256):
    globals()[f"DoubleBlockPool{_size}"] = mutant(
        f"prefix-block-size-{_size}-hashes-double-blocks",
        breaks=("PREFIX-6",),
        half="over",
        plausible=f"an engine made with blocks of {_size} whose pool hashes in blocks of "
        f"{2 * _size}: the hash block size is a setting of its own (as vLLM's "
        "hash_block_size is) and was left at twice the declared size, so whole blocks "
        "of the declared size go unreused",
    )(_double_block_pool(_size))
