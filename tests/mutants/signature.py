"""SIG and PROF mutants: measuring a payload with one misreading each.

Each overrides one method of :class:`~._kit.Measurer`, the reference
``measure`` cut into its rules; the broken measurer serves ``measure``,
``stamp`` and the measuring step of ``verify`` alike, as it would in an
implementation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from kvconform_reference import errors, signature, verify
from kvconform_reference.signature import CacheSignature, StoredLayer

from kvconform.values import Fault, Payload, Signature

from . import mutant
from ._kit import BlockAdapter, Measurer, compare, incompatible, payload_mismatch

# --- SIG-7: the buffers are the evidence --------------------------------------


class _SeqLenUnchecked(Measurer):
    def measure_layer(self, index: int, layer: StoredLayer, per_token: int) -> int:
        k_len, v_len = layer.k.size, layer.v.size
        if k_len % per_token != 0:
            raise errors.RaggedPayload(
                layer_index=index, field="k_length", expected=per_token, found=k_len
            )
        if v_len != k_len:
            raise errors.RaggedPayload(
                layer_index=index, field="v_length", expected=k_len, found=v_len
            )
        return k_len // per_token  # MUTATION: the seq_len claim is never checked


@mutant(
    "sig-seq-len-unchecked",
    breaks=("SIG-7", "SEC-3"),
    half="under",
    plausible="once the token count is measured from the buffers the claim looks "
    "redundant, so nobody compares it; a block whose claim and buffers disagree passes",
)
class SigSeqLenUnchecked(BlockAdapter):
    measurer = _SeqLenUnchecked()


class _TokensFromClaim(Measurer):
    def measure_layer(self, index: int, layer: StoredLayer, per_token: int) -> int:
        k_len, v_len = layer.k.size, layer.v.size
        if k_len % per_token != 0:
            raise errors.RaggedPayload(
                layer_index=index, field="k_length", expected=per_token, found=k_len
            )
        if v_len != k_len:
            raise errors.RaggedPayload(
                layer_index=index, field="v_length", expected=k_len, found=v_len
            )
        return layer.seq_len  # MUTATION: the stored count is believed


@mutant(
    "sig-tokens-from-seq-len-claim",
    breaks=("SIG-4", "SIG-7", "SEC-3"),
    half="under",
    plausible="the layer says how many positions it holds, so why divide? -- the "
    "truncated-session-file bug (llama.cpp PR 8699), where the recorded length was trusted",
)
class SigTokensFromSeqLenClaim(BlockAdapter):
    measurer = _TokensFromClaim()


class _VLengthUnchecked(Measurer):
    def measure_layer(self, index: int, layer: StoredLayer, per_token: int) -> int:
        k_len = layer.k.size
        if k_len % per_token != 0:
            raise errors.RaggedPayload(
                layer_index=index, field="k_length", expected=per_token, found=k_len
            )
        tokens = k_len // per_token  # MUTATION: v is assumed to match k
        if layer.seq_len != tokens:
            raise errors.RaggedPayload(
                layer_index=index, field="seq_len", expected=tokens, found=layer.seq_len
            )
        return tokens


@mutant(
    "sig-v-length-unchecked",
    breaks=("SIG-7",),
    half="under",
    plausible="K and V are always written together, so measuring K 'measures the layer'; "
    "a block with a short V buffer then reads past its end",
)
class SigVLengthUnchecked(BlockAdapter):
    measurer = _VLengthUnchecked()


class _KLengthFloor(Measurer):
    def measure_layer(self, index: int, layer: StoredLayer, per_token: int) -> int:
        k_len, v_len = layer.k.size, layer.v.size
        if v_len != k_len:
            raise errors.RaggedPayload(
                layer_index=index, field="v_length", expected=k_len, found=v_len
            )
        tokens = k_len // per_token  # MUTATION: floor division, no multiple check
        if layer.seq_len != tokens:
            raise errors.RaggedPayload(
                layer_index=index, field="seq_len", expected=tokens, found=layer.seq_len
            )
        return tokens


@mutant(
    "sig-k-length-not-a-multiple-accepted",
    breaks=("SIG-7",),
    half="under",
    plausible="integer division 'measures' the whole tokens and silently drops the tail "
    "of a buffer that is not a whole number of tokens",
)
class SigKLengthNotAMultipleAccepted(BlockAdapter):
    measurer = _KLengthFloor()


class _TokensAsFloat(Measurer):
    def measure_layer(self, index: int, layer: StoredLayer, per_token: int) -> int:
        super().measure_layer(index, layer, per_token)
        return layer.k.size / per_token  # type: ignore[return-value]  # MUTATION: true division


@mutant(
    "sig-tokens-as-a-float",
    breaks=("SIG-1", "SIG-4", "ERR-4"),
    half="contract",
    plausible="`/` where `//` was meant: in Python 3 the token count becomes 4.0, which "
    "compares equal to 4 and prints as '4.0'",
)
class SigTokensAsAFloat(BlockAdapter):
    measurer = _TokensAsFloat()


# --- SIG-8, SIG-9: layers against the first, in order -------------------------


class _LastLayerIsReference(Measurer):
    def measure(self, model_name: str, layers: Sequence[StoredLayer]) -> CacheSignature:
        if not layers:
            raise errors.EmptyPayload()
        last = layers[-1]  # MUTATION: the last layer defines the shape
        self.check_degenerate(last)
        shape = (last.n_kv_heads, last.head_dim)
        per_token = shape[0] * shape[1]
        tokens = self.measure_layer(len(layers) - 1, last, per_token)
        for index, layer in enumerate(layers):
            self.check_shape(index, layer, shape)
            self.check_tokens(index, tokens, self.measure_layer(index, layer, per_token))
        return self.signature(model_name, layers, shape[0], shape[1], tokens)


@mutant(
    "sig-last-layer-is-reference",
    breaks=("SIG-4", "SIG-8", "SIG-9"),
    half="contract",
    plausible="'the shape the block was left in' (layers[-1], the one written last) "
    "works for coherent blocks, and reports another layer and other values for ragged ones",
)
class SigLastLayerIsReference(BlockAdapter):
    measurer = _LastLayerIsReference()


class _IndexFromZero(Measurer):
    def later_layers(self, layers: Sequence[StoredLayer]) -> Sequence[tuple[int, StoredLayer]]:
        return list(enumerate(layers[1:]))  # MUTATION: start=1 forgotten


@mutant(
    "sig-ragged-layer-index-off-by-one",
    breaks=("SIG-9", "ERR-2"),
    half="contract",
    plausible="enumerate(layers[1:]) without start=1 reports every later layer's fault "
    "one layer too early",
)
class SigRaggedLayerIndexOffByOne(BlockAdapter):
    measurer = _IndexFromZero()


class _BuffersBeforeShape(Measurer):
    def measure(self, model_name: str, layers: Sequence[StoredLayer]) -> CacheSignature:
        if not layers:
            raise errors.EmptyPayload()
        first = layers[0]
        self.check_degenerate(first)
        shape = (first.n_kv_heads, first.head_dim)
        per_token = shape[0] * shape[1]
        tokens = self.measure_layer(0, first, per_token)
        for index, layer in self.later_layers(layers):
            layer_tokens = self.measure_layer(index, layer, per_token)  # MUTATION: first
            self.check_shape(index, layer, shape)
            self.check_tokens(index, tokens, layer_tokens)
        return self.signature(model_name, layers, shape[0], shape[1], tokens)


@mutant(
    "sig-buffers-before-shape",
    breaks=("SIG-8",),
    half="contract",
    plausible="measure each layer, then compare: the natural loop body, but SIG-8 checks "
    "the declared shape before the buffers",
)
class SigBuffersBeforeShape(BlockAdapter):
    measurer = _BuffersBeforeShape()


class _TokenCountBeforeClaim(Measurer):
    def measure(self, model_name: str, layers: Sequence[StoredLayer]) -> CacheSignature:
        if not layers:
            raise errors.EmptyPayload()
        first = layers[0]
        self.check_degenerate(first)
        shape = (first.n_kv_heads, first.head_dim)
        per_token = shape[0] * shape[1]
        tokens = self.measure_layer(0, first, per_token)
        for index, layer in self.later_layers(layers):
            self.check_shape(index, layer, shape)
            buffered = layer.k.size // per_token if layer.k.size % per_token == 0 else None
            if buffered is not None and layer.v.size == layer.k.size:
                self.check_tokens(index, tokens, buffered)  # MUTATION: before the claim
            self.measure_layer(index, layer, per_token)
        return self.signature(model_name, layers, shape[0], shape[1], tokens)


@mutant(
    "sig-token-count-before-seq-len",
    breaks=("SIG-8",),
    half="contract",
    plausible="comparing a layer's depth with the first layer's as soon as the buffers "
    "give it, before looking at the layer's own claim",
)
class SigTokenCountBeforeSeqLen(BlockAdapter):
    measurer = _TokenCountBeforeClaim()


class _ShapeByWidth(Measurer):
    def check_shape(self, index: int, layer: StoredLayer, shape: tuple[int, int]) -> None:
        if layer.n_kv_heads * layer.head_dim != shape[0] * shape[1]:  # MUTATION: width only
            raise errors.RaggedPayload(
                layer_index=index,
                field="layer_shape",
                expected=shape,
                found=(layer.n_kv_heads, layer.head_dim),
            )


@mutant(
    "sig-layer-shape-compared-by-width",
    breaks=("SIG-8", "SEC-4"),
    half="under",
    plausible="every layer is measured against the same per-token width, so comparing "
    "widths looks equivalent to comparing shapes; a 4x4 layer then passes among 2x8 ones",
)
class SigLayerShapeComparedByWidth(BlockAdapter):
    measurer = _ShapeByWidth()


# --- SIG-5, SIG-6, SIG-10: degenerate and empty payloads ----------------------


class _DegenerateAnyLayer(Measurer):
    def check_shape(self, index: int, layer: StoredLayer, shape: tuple[int, int]) -> None:
        if layer.n_kv_heads == 0 or layer.head_dim == 0:  # MUTATION: every layer
            raise errors.DegenerateLayer(
                layer_index=index, n_kv_heads=layer.n_kv_heads, head_dim=layer.head_dim
            )
        super().check_shape(index, layer, shape)


@mutant(
    "sig-degenerate-any-layer",
    breaks=("SIG-6", "SIG-8"),
    half="contract",
    plausible="checking every layer for a zero dimension looks more thorough; SIG-6 keeps "
    "degenerate_layer for the first and reports a later one as a shape disagreement",
)
class SigDegenerateAnyLayer(BlockAdapter):
    measurer = _DegenerateAnyLayer()


class _DegenerateUnchecked(Measurer):
    def check_degenerate(self, first: StoredLayer) -> None:
        return None  # MUTATION: "a layer always has heads"


@mutant(
    "sig-degenerate-unchecked",
    breaks=("SIG-6",),
    half="contract",
    plausible="a model always has heads, so the zero case is not handled; measuring then "
    "divides by zero instead of refusing with degenerate_layer",
)
class SigDegenerateUnchecked(BlockAdapter):
    measurer = _DegenerateUnchecked()


class _ZeroTokensRefused(Measurer):
    def signature(
        self,
        model_name: str,
        layers: Sequence[StoredLayer],
        n_kv_heads: int,
        head_dim: int,
        tokens: int,
    ) -> CacheSignature:
        if tokens == 0:
            raise errors.EmptyPayload()  # MUTATION: nothing stored is "empty"
        return super().signature(model_name, layers, n_kv_heads, head_dim, tokens)


@mutant(
    "sig-zero-tokens-refused",
    breaks=("SIG-10",),
    half="over",
    plausible="a block holding no positions 'is empty', so empty_payload looks right; "
    "SIG-10 decides it is a coherent statement about a shape",
)
class SigZeroTokensRefused(BlockAdapter):
    measurer = _ZeroTokensRefused()


class _EmptyMeasured(Measurer):
    def measure(self, model_name: str, layers: Sequence[StoredLayer]) -> CacheSignature:
        if not layers:  # MUTATION: an empty payload measures as all zeros
            return CacheSignature(signature.V1.version, model_name, 0, 0, 0, "f32", 0)
        return super().measure(model_name, layers)


@mutant(
    "sig-empty-payload-measured",
    breaks=("SIG-5",),
    half="under",
    plausible="zero layers, zero heads, zero tokens is a consistent description of "
    "nothing; but it then verifies against a stamp that says the same",
)
class SigEmptyPayloadMeasured(BlockAdapter):
    measurer = _EmptyMeasured()


# --- SIG-3, SIG-4, SIG-14: the fields -----------------------------------------


class _NumpyDtypeName(Measurer):
    def signature(
        self,
        model_name: str,
        layers: Sequence[StoredLayer],
        n_kv_heads: int,
        head_dim: int,
        tokens: int,
    ) -> CacheSignature:
        measured = super().signature(model_name, layers, n_kv_heads, head_dim, tokens)
        return replace(measured, dtype=str(layers[0].k.dtype))  # MUTATION: "float32"


@mutant(
    "sig-dtype-numpy-name",
    breaks=("SIG-4", "SIG-14"),
    half="contract",
    plausible="str(buffer.dtype) is right there and says 'float32'; SIG-14 fixes the "
    "vocabulary f32/f16/bf16",
)
class SigDtypeNumpyName(BlockAdapter):
    measurer = _NumpyDtypeName()


class _ModelStripped(Measurer):
    def measure(self, model_name: str, layers: Sequence[StoredLayer]) -> CacheSignature:
        return super().measure(model_name.strip(), layers)  # MUTATION: tidy the label


@mutant(
    "sig-model-stripped",
    breaks=("SIG-3",),
    half="under",
    plausible="trimming a label read from a config file is a reflex; SIG-3 makes model an "
    "opaque string whose every byte is the deployment's",
)
class SigModelStripped(BlockAdapter):
    measurer = _ModelStripped()


@mutant(
    "sig-stamp-from-declared-shape",
    breaks=("SIG-13", "SIG-2"),
    half="under",
    plausible="the writer knows what it wrote, so stamping skips the measurement and "
    "records the first layer's declared shape and seq_len; a ragged payload is then "
    "stamped instead of refused",
)
class SigStampFromDeclaredShape(BlockAdapter):
    def stamp(self, model_name: str, payload: Payload) -> Signature | Fault:
        if not payload:
            return super().stamp(model_name, payload)
        first = payload[0]  # MUTATION: the writer's own description, unmeasured
        return Signature(
            signature.V1.version,
            model_name,
            len(payload),
            first.n_kv_heads,
            first.head_dim,
            signature.V1.payload_dtype,
            first.seq_len,
        )


class _WritesV2(Measurer):
    def signature(
        self,
        model_name: str,
        layers: Sequence[StoredLayer],
        n_kv_heads: int,
        head_dim: int,
        tokens: int,
    ) -> CacheSignature:
        measured = super().signature(model_name, layers, n_kv_heads, head_dim, tokens)
        return replace(measured, format_version=2)  # MUTATION: the constant was bumped


@mutant(
    "prof-writes-undeclared-version",
    breaks=("PROF-2", "SIG-12", "CONF-2"),
    half="contract",
    plausible="BLOCK_FORMAT_VERSION bumped to 2 for an upcoming layout while the declared "
    "profile and the readable list still say 1 -- the adapter claims v1 and writes v2",
)
class ProfWritesUndeclaredVersion(BlockAdapter):
    measurer = _WritesV2()


_READS_1_AND_2 = replace(signature.V1, readable=(1, 2))


@mutant(
    "prof-reads-undeclared-version",
    breaks=("PROF-2", "PROF-3", "VERIFY-3", "CONF-2"),
    half="under",
    plausible="adding the next version to the readable list ahead of its layout, while "
    "the declaration still says reads {1}; version-2 blocks are then read as version 1",
)
class ProfReadsUndeclaredVersion(BlockAdapter):
    def verify_block(
        self, block: verify.UnverifiedBlock, expected: CacheSignature
    ) -> verify.KvBlock:
        recorded = block.signature
        if recorded is None:
            raise errors.Unmarked()
        if recorded.format_version not in _READS_1_AND_2.readable:  # MUTATION: {1, 2}
            raise errors.UnsupportedFormat(
                found=recorded.format_version, readable=tuple(sorted(_READS_1_AND_2.readable))
            )
        measured = self.measure_layers(recorded.model, block.layers)
        actual = replace(measured, format_version=recorded.format_version)
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return verify.KvBlock(signature=actual, layers=block.layers)
