"""Fixed-width mutants: a count, an index or a label held in fewer bits (or bytes) than
the specification gives it, at the places the fifth audit of wrong implementations found
unprobed (plan-key ids and the capacity are in ``plan.py``, a 32-bit reader's stamp
check in ``teeth.py``).

Each holds one value the way a C or Rust engine plausibly would (a ``uint32_t`` field,
an ``int32`` token count, a fixed header field for the model label); every test value
of the older scenarios fits, so only a value past the width tells them apart.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from kvconform_reference import errors, kv_cache, plan, signature
from kvconform_reference.identity import KvAllocId

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo, Fault, Layout, Payload, Signature

from . import mutant
from ._kit import (
    CacheAdapter,
    LayoutAdapter,
    LayoutMeasurer,
    PlanAdapter,
    declaring,
    moved_storage,
)

_LOW_32 = (1 << 32) - 1


# --- plan keys: PLAN-15, PLAN-16 --------------------------------------------------


@mutant(
    "plan-key-int-params-in-32-bits",
    breaks=("PLAN-16",),
    half="under",
    plausible="the key record holds an integer structural parameter in a uint32_t; no "
    "model has four billion heads, and n_heads 4 and 2^32 + 4 key alike",
)
class PlanKeyIntParamsIn32Bits(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        params = {
            name: value & _LOW_32 if type(value) is int else value  # MUTATION
            for name, value in ident.params.items()
        }
        return self.composition.key(replace(ident, params=params))


@mutant(
    "plan-key-layer-counts-in-32-bits",
    breaks=("PLAN-16", "PLAN-15"),
    half="under",
    plausible="n_layers, n_kv_heads and head_dim are uint32_t fields of the key record, "
    "as in most model configs; 2 layers and 2^32 + 2 key alike",
)
class PlanKeyLayerCountsIn32Bits(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        g = ident.geometry
        narrow = replace(  # MUTATION
            g, n_layers=g.n_layers & _LOW_32, n_kv_heads=g.n_kv_heads & _LOW_32,
            head_dim=g.head_dim & _LOW_32,
        )  # fmt: skip
        return self.composition.key(replace(ident, geometry=narrow))


@mutant(
    "plan-key-step-tokens-in-32-bits",
    breaks=("PLAN-16", "PLAN-4"),
    half="under",
    plausible="the tokens per step are an int32 n_tokens, as in a batch struct; one token "
    "and 2^32 + 1 key alike",
)
class PlanKeyStepTokensIn32Bits(PlanAdapter):
    def key(
        self, ident: plan.PlanIdentity, cache: kv_cache.KvCache | None, step: plan.StepInputs
    ) -> int:
        return self.composition.key(replace(ident, step_tokens=ident.step_tokens & _LOW_32))


# --- cache arguments: ALLOC-9, ALLOC-15, ALLOC-16 -----------------------------------


@mutant(
    "append-count-in-32-bits",
    breaks=("ALLOC-16", "ALLOC-7"),
    half="under",
    plausible="an append's token count is an int32 n_tokens: 2^32 + 1 becomes 1, which "
    "fits, and an append of four billion positions is accepted as one",
)
class AppendCountIn32Bits(ReferenceAdapter):
    def cache_append(self, cache: kv_cache.KvCache, tokens: int) -> Fault | None:
        return super().cache_append(cache, tokens & _LOW_32)  # MUTATION


@mutant(
    "replace-layer-index-in-32-bits",
    breaks=("ALLOC-9", "ALLOC-13"),
    half="under",
    plausible="the layer index is an int32 il: 2^32 becomes 0, layer 0 is replaced and the "
    "cache mints, where the index names no layer",
)
class ReplaceLayerIndexIn32Bits(ReferenceAdapter):
    def cache_replace_layer(
        self,
        cache: kv_cache.KvCache,
        layer: int,
        n_kv_heads: int | None,
        head_dim: int | None,
        max_seq_len: int | None,
    ) -> Fault | None:
        return super().cache_replace_layer(
            cache,
            layer & _LOW_32,
            n_kv_heads,
            head_dim,
            max_seq_len,  # MUTATION
        )


@mutant(
    "truncate-length-in-32-bits",
    breaks=("ALLOC-15", "ALLOC-5"),
    half="under",
    plausible="a rewind position is an int32 llama_pos: a truncate to 2^32 + 1 on a cache "
    "of 5 positions becomes a rewind to 1, dropping four positions nobody asked to drop",
)
class TruncateLengthIn32Bits(ReferenceAdapter):
    def cache_truncate(self, cache: kv_cache.KvCache, length: int) -> None:
        super().cache_truncate(cache, length & _LOW_32)  # MUTATION


class _GrowsByBumpingItsId(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        end = len(self) + k.shape[1]
        if end > self.geometry.max_seq_len:
            grown = replace(self.geometry, max_seq_len=max(end, 2 * self.geometry.max_seq_len))
            self._layers = moved_storage(self, grown)
            self.geometry = grown
            self._alloc_id = KvAllocId(self._alloc_id.value + 1)  # MUTATION: not the counter
        super().append(k, v)


@mutant(
    "append-grow-bumps-its-own-id",
    breaks=("ALLOC-16", "ALLOC-1", "ID-3"),
    half="under",
    plausible="'new storage, new id' is done as id + 1 on the cache itself instead of a "
    "mint from the process counter; the cache built right after this one already holds "
    "that id, so a plan over one is valid over the other",
)
class AppendGrowBumpsItsOwnId(CacheAdapter):
    cache_cls = _GrowsByBumpingItsId

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), append_past_capacity="grow")


# --- payloads and stamps: SIG-3, SIG-7, VERIFY-9, PROF-8 ----------------------------


def _claims_in_32_bits(payload: Payload) -> Payload:
    return tuple(replace(layer, seq_len=layer.seq_len & _LOW_32) for layer in payload)


@mutant(
    "payload-seq-len-claim-in-32-bits",
    breaks=("SIG-7",),
    half="under",
    plausible="a layer's recorded seq_len is read into a uint32_t while measuring: a claim "
    "of 2^32 + 4 positions becomes 4, agrees with the buffers, and is believed",
)
class PayloadSeqLenClaimIn32Bits(ReferenceAdapter):
    def measure(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        return super().measure(model_name, _claims_in_32_bits(payload), layout=layout)

    def stamp(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        return super().stamp(model_name, _claims_in_32_bits(payload), layout=layout)

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        return super().verify(recorded, _claims_in_32_bits(payload), expected)


def _label_field(model: str) -> str:
    """The label as a 64-byte header field holds it."""
    return model.encode("utf-8")[:64].decode("utf-8", "ignore")  # MUTATION


@mutant(
    "model-label-in-a-64-byte-field",
    breaks=("SIG-3", "SIG-13", "VERIFY-5"),
    half="under",
    plausible="the block header has a fixed char model[64]; real labels (a repository, a "
    "revision, serving flags) run longer, and two deployments whose labels share their "
    "first 64 bytes read each other's blocks",
)
class ModelLabelInA64ByteField(ReferenceAdapter):
    def measure(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        return super().measure(_label_field(model_name), payload, layout=layout)

    def stamp(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        return super().stamp(_label_field(model_name), payload, layout=layout)

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        if recorded is not None:
            recorded = replace(recorded, model=_label_field(recorded.model))
        return super().verify(
            recorded, payload, replace(expected, model=_label_field(expected.model))
        )


@mutant(
    "u32-reader-never-checks-tokens",
    breaks=("VERIFY-9", "ERR-9"),
    half="under",
    plausible="a reader with 32-bit block counts checks that the header's shape fits "
    "(layers, heads, width) but keeps tokens in a host usize, so a stamp of 2^32 tokens "
    "is read on as a dishonest stamp instead of one it cannot hold",
)
class U32ReaderNeverChecksTokens(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), uint_bits=32)

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        if recorded is not None and recorded.format_version in self.reads:
            for name in ("n_layers", "n_kv_heads", "head_dim"):  # MUTATION: not tokens
                found = getattr(recorded, name)
                if found > _LOW_32:
                    return Fault("unrepresentable", name, None, {"found": found}, f"{name} {found}")
        return super().verify(recorded, payload, expected)


class _BlockSizeIn32Bits(LayoutMeasurer):
    def check_whole_block(self, layout: signature.BlockLayout | None, tokens: int) -> None:
        if layout is not None and tokens != layout.block_size & _LOW_32:  # MUTATION
            raise errors.BlockSizeMismatch(block_size=layout.block_size, tokens=tokens)


@mutant(
    "v2-block-size-in-32-bits",
    breaks=("PROF-8",),
    half="under",
    plausible="the layout's block size is an int, as block_size is in most engines' "
    "configs; a layout of 2^32 + 4 over a 4-token payload is 'one whole block'",
)
class V2BlockSizeIn32Bits(LayoutAdapter):
    measurer = _BlockSizeIn32Bits()


# -- counts held as binary64 numbers (CONF-13, VERIFY-12, PROTO-33) -----------------


def _float_counts() -> type[ReferenceAdapter]:
    from tests.variants.float_counts import _Float53

    return _Float53


@mutant(
    "rounds-counts-past-53-bits",
    breaks=("VERIFY-12", "VERIFY-4", "ERR-9"),
    half="under",
    plausible="a JavaScript engine that declares its 53-bit counts but reads a stamp's "
    "counts into Numbers like everything else: 2^53 + 1 tokens are read as 2^53, and the "
    "refusal names a count the stamp never held",
)
class RoundsCountsPast53Bits(_float_counts()):  # type: ignore[misc]
    exact_stamps = False  # MUTATION: the stamp is rounded, not read exactly
    label = "rounds-counts-past-53-bits"


@mutant(
    "json-parse-rounds-counts",
    breaks=("PLAN-16", "SIG-15", "VERIFY-4", "PROTO-17"),
    half="under",
    plausible="a JavaScript engine on protocol 1 reading requests with the built-in "
    "JSON.parse and declaring nothing: every count above 2^53 is rounded on the way in "
    "(capacities 2^53 and 2^53 + 1 key alike, a width of 2^64 - 1 reads as 2^64)",
)
class JsonParseRoundsCounts(_float_counts()):  # type: ignore[misc]
    exact_stamps = False
    label = "json-parse-rounds-counts"

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), uint_bits=64)  # MUTATION: 53 bits, undeclared
