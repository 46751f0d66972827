"""PROF (v2) mutants: blocks with a layout, stamped and verified with one misreading each.

Each is :class:`~._kit.LayoutAdapter` -- the reference under profile v2, or in a
rolling upgrade where the misreading is a rolling reader's -- with one method
of its :class:`~._kit.LayoutMeasurer`, its :class:`~._kit.LayoutVerifier` or
its layout conversion overridden; the changed line is marked ``MUTATION``. A
broken measurer serves ``measure``, ``stamp`` and the measuring step of
``verify`` alike, as it would in an implementation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from kvconform_reference import errors, signature
from kvconform_reference.signature import BlockLayout, CacheSignature, FormatProfile, StoredLayer

from kvconform import values
from kvconform.adapters.reference import ReferenceAdapter

from . import mutant
from ._kit import LayoutAdapter, LayoutMeasurer, LayoutVerifier, MeasureUnder, incompatible

# --- PROF-5 .. PROF-7: the layout ---------------------------------------------------


@mutant(
    "prof-zero-window-is-full-causal",
    breaks=("PROF-7", "PROF-10"),
    half="under",
    plausible="the window is held as a plain integer with 0 for 'no window', as in the "
    "upstream disk header; a zero window then reads as full causal and is stamped and "
    "measured instead of refused",
)
class ProfZeroWindowIsFullCausal(LayoutAdapter):
    def layout_of(self, layout: values.Layout | None) -> BlockLayout | None:
        if layout is None:
            return None
        # MUTATION: an Option collapsed into an integer, 0 standing for None
        return BlockLayout(layout.block_size, layout.sliding_window or None)


@mutant(
    "prof-stamp-drops-the-window",
    breaks=("PROF-6", "PROF-5", "SIG-13"),
    half="under",
    plausible="the writer path predates windows and stamps the block size it is given "
    "with the default layout's window (full causal); a windowed block is then stamped as "
    "a full-causal one",
)
class ProfStampDropsTheWindow(LayoutAdapter):
    def stamp(
        self, model_name: str, payload: values.Payload, *, layout: values.Layout | None = None
    ) -> values.Signature | values.Fault:
        if layout is not None:
            layout = values.Layout(layout.block_size, None)  # MUTATION: the default window
        return super().stamp(model_name, payload, layout=layout)


class _WindowUnaligned(LayoutMeasurer):
    def check_layout_fields(self, layout: BlockLayout) -> None:
        bs, window = layout.block_size, layout.sliding_window
        if bs < 1:
            raise errors.BadLayout(field="block_size", block_size=bs, sliding_window=window)
        if window is not None and window < 1:
            raise errors.BadLayout(field="sliding_window", block_size=bs, sliding_window=window)
        # MUTATION: no alignment check


@mutant(
    "prof-misaligned-window-accepted",
    breaks=("PROF-7",),
    half="under",
    plausible="both numbers are positive, so the layout 'looks valid'; that the block size "
    "must divide the window is a consequence of how blocks are evicted, easy to leave out",
)
class ProfMisalignedWindowAccepted(LayoutAdapter):
    measurer = _WindowUnaligned()


class _WindowFirst(LayoutMeasurer):
    def check_layout_fields(self, layout: BlockLayout) -> None:
        bs, window = layout.block_size, layout.sliding_window
        if window is not None:  # MUTATION: the window's checks before the block size's
            if window < 1:
                raise errors.BadLayout(field="sliding_window", block_size=bs, sliding_window=window)
            if window % bs:
                raise errors.BadLayout(
                    field="sliding_window",
                    block_size=bs,
                    sliding_window=window,
                    remainder=window % bs,
                )
        if bs < 1:
            raise errors.BadLayout(field="block_size", block_size=bs, sliding_window=window)


@mutant(
    "prof-zero-block-size-checked-after-the-window",
    breaks=("PROF-7", "ERR-10"),
    half="contract",
    plausible="the window is the new field, so its checks are written first and the block "
    "size check appended; a zero block size with a window then divides by zero (or is "
    "reported as a bad window)",
)
class ProfZeroBlockSizeCheckedAfterTheWindow(LayoutAdapter):
    measurer = _WindowFirst()


class _RemainderToTheNextMultiple(LayoutMeasurer):
    def check_layout_fields(self, layout: BlockLayout) -> None:
        bs, window = layout.block_size, layout.sliding_window
        if bs < 1:
            raise errors.BadLayout(field="block_size", block_size=bs, sliding_window=window)
        if window is not None and window < 1:
            raise errors.BadLayout(field="sliding_window", block_size=bs, sliding_window=window)
        if window is not None and window % bs:
            raise errors.BadLayout(
                field="sliding_window",
                block_size=bs,
                sliding_window=window,
                remainder=bs - window % bs,  # MUTATION: what is missing, not what is left
            )


@mutant(
    "prof-remainder-to-the-next-multiple",
    breaks=("PROF-7", "ERR-10", "ERR-2"),
    half="contract",
    plausible="an error that helps the writer round up reports how far the window is from "
    "the next multiple of the block size; for window 6 over blocks of 4 that is 2 as well, "
    "so only an asymmetric case tells it from the remainder",
)
class ProfRemainderToTheNextMultiple(LayoutAdapter):
    measurer = _RemainderToTheNextMultiple()


class _SplitCheckedOnLayerZero(LayoutMeasurer):
    def measure_layer(
        self, index: int, layer: StoredLayer, per_token: int, profile: FormatProfile
    ) -> int:
        if index > 0:  # MUTATION: the V width is looked at on the first layer only
            layer = replace(layer, v_head_dim=None)
        return super().measure_layer(index, layer, per_token, profile)


@mutant(
    "prof-v2-split-width-checked-on-layer-0-only",
    breaks=("PROF-11",),
    half="contract",
    plausible="the V head width is read once, from the first layer, as the head width is; "
    "a later layer of narrower V heads is then reported as a V buffer of the wrong length",
)
class ProfV2SplitWidthCheckedOnLayer0Only(LayoutAdapter):
    measurer = _SplitCheckedOnLayerZero()


class _SplitBeforeFirstLayerChecks(LayoutMeasurer):
    def measure(
        self,
        model_name: str,
        layers: Sequence[StoredLayer],
        profile: FormatProfile,
        layout: BlockLayout | None,
    ) -> CacheSignature:
        self.check_layout(profile, layout)
        if layers and profile.has_layout and profile.revision == "split_width":
            first = layers[0]  # MUTATION: the width before SIG-6's checks of the first layer
            if first.v_head_dim is not None and first.v_head_dim != first.head_dim:
                raise errors.SplitKvHeadWidth(
                    layer_index=0, head_dim=first.head_dim, v_head_dim=first.v_head_dim
                )
        return super().measure(model_name, layers, profile, layout)


@mutant(
    "prof-v2-split-width-before-the-first-layer-checks",
    breaks=("PROF-11", "SIG-6"),
    half="contract",
    plausible="the V width is validated with the shape on decoding, before the layer is "
    "measured; a first layer with no heads and a split width names the width, not the "
    "degenerate layer",
)
class ProfV2SplitWidthBeforeTheFirstLayerChecks(LayoutAdapter):
    measurer = _SplitBeforeFirstLayerChecks()


@mutant(
    "prof-v2-reader-names-the-claim-seq-len",
    breaks=("PROF-11", "ERR-12"),
    half="contract",
    plausible="the writer's error was renamed to positions with the later upstream line, "
    "the reader's verify path kept its own copy of the old name",
)
class ProfV2ReaderNamesTheClaimSeqLen(LayoutAdapter):
    def verify(self, recorded, payload, expected):  # type: ignore[no-untyped-def]
        result = super().verify(recorded, payload, expected)
        if isinstance(result, values.Fault) and result.field == "positions":
            return replace(result, field="seq_len")  # MUTATION: the old name on the reader
        return result


# --- PROF-8, PROF-9: one whole block ------------------------------------------------


class _NoWholeBlock(LayoutMeasurer):
    def check_whole_block(self, layout: BlockLayout | None, tokens: int) -> None:
        pass  # MUTATION: a partial tail block is a block


@mutant(
    "prof-partial-block-accepted",
    breaks=("PROF-8", "PROF-9", "VERIFY-11"),
    half="under",
    plausible="the block size is metadata recorded for the reader, and the payload is "
    "measured as under v1; the last, partial block of a sequence is then stamped and "
    "read as a whole one",
)
class ProfPartialBlockAccepted(LayoutAdapter):
    measurer = _NoWholeBlock()


class _BlockSizeFirst(LayoutMeasurer):
    def measure(
        self,
        model_name: str,
        layers: Sequence[StoredLayer],
        profile: FormatProfile,
        layout: BlockLayout | None,
    ) -> CacheSignature:
        self.check_layout(profile, layout)
        if layout is not None and layers:  # MUTATION: the cheap check before the layers
            first = layers[0]
            per_token = first.n_kv_heads * first.head_dim
            if per_token > 0 and first.k.size // per_token != layout.block_size:
                raise errors.BlockSizeMismatch(
                    block_size=layout.block_size, tokens=first.k.size // per_token
                )
        return super().measure(model_name, layers, profile, layout)


@mutant(
    "prof-block-size-checked-before-the-layers",
    breaks=("PROF-8", "SIG-9"),
    half="contract",
    plausible="rejecting a block of the wrong size up front, from the first layer's length, "
    "looks like a fast path; a torn later layer is then reported as a block of the wrong "
    "size",
)
class ProfBlockSizeCheckedBeforeTheLayers(LayoutAdapter):
    measurer = _BlockSizeFirst()


# --- PROF-11: split width and the claim's name --------------------------------------


class _KWidthOnly(LayoutMeasurer):
    def measure_layer(
        self, index: int, layer: StoredLayer, per_token: int, profile: FormatProfile
    ) -> int:
        layer = replace(layer, v_head_dim=None)  # MUTATION: V measured with the K width
        return super().measure_layer(index, layer, per_token, profile)


@mutant(
    "prof-split-width-measured-with-k-width",
    breaks=("PROF-11", "ERR-10"),
    half="contract",
    plausible="the format has one head_dim, so V is measured with it as in v1; a split "
    "K 192 / V 128 payload then reports a misleading v_length (or k_length) instead of "
    "split_kv_head_width",
)
class ProfSplitWidthMeasuredWithKWidth(LayoutAdapter):
    measurer = _KWidthOnly()


class _ClaimAsSeqLen(LayoutMeasurer):
    def measure_layer(
        self, index: int, layer: StoredLayer, per_token: int, profile: FormatProfile
    ) -> int:
        try:
            return super().measure_layer(index, layer, per_token, profile)
        except errors.RaggedPayload as exc:
            if exc.field != "positions":
                raise
            raise errors.RaggedPayload(  # MUTATION: the v1 name kept
                layer_index=exc.layer_index, field="seq_len", expected=exc.expected, found=exc.found
            ) from None


@mutant(
    "prof-claim-reported-as-seq-len-under-split-width",
    breaks=("PROF-11", "ERR-12"),
    half="contract",
    plausible="the split_width line renamed the claim to positions in a later commit; an "
    "implementation that took the width check and kept its v1 error names reports seq_len",
)
class ProfClaimReportedAsSeqLenUnderSplitWidth(LayoutAdapter):
    measurer = _ClaimAsSeqLen()


# --- VERIFY-10, VERIFY-11, PROF-6, PROF-10: verifying --------------------------------


class _LayoutFromExpectation(LayoutVerifier):
    def layout(
        self, recorded: CacheSignature, expected: CacheSignature, rules: FormatProfile
    ) -> BlockLayout | None:
        return expected.layout if rules.has_layout else None  # MUTATION: the reader's layout


@mutant(
    "prof-verify-layout-from-expectation",
    breaks=("PROF-6", "VERIFY-11", "VERIFY-10"),
    half="contract",
    plausible="the reader knows the layout it runs under, so the payload is measured under "
    "it; an honest block from another window is then a payload_mismatch (or a "
    "block_size_mismatch) instead of incompatible",
)
class ProfVerifyLayoutFromExpectation(LayoutAdapter):
    verifier = _LayoutFromExpectation()


class _ExpectationLayoutValidated(LayoutVerifier):
    def layout(
        self, recorded: CacheSignature, expected: CacheSignature, rules: FormatProfile
    ) -> BlockLayout | None:
        layout = super().layout(recorded, expected, rules)
        if layout is not None and expected.layout is not None:
            expected.layout.check()  # MUTATION: the reader's own layout is the one validated
            if layout.sliding_window is not None and layout.block_size > 0:
                window = layout.sliding_window
                if window == 0 or window % layout.block_size:
                    # and the stamp's, "validated when it was written", is read as full causal
                    layout = BlockLayout(layout.block_size, None)
        return layout


@mutant(
    "prof-verify-validates-the-expectation-layout",
    breaks=("VERIFY-10", "PROF-7"),
    half="contract",
    plausible="a reader checks the configuration it runs under and trusts a stamp's layout "
    "because the writer checked it before stamping; a stamp with a zero or misaligned "
    "window is then measured as full causal",
)
class ProfVerifyValidatesTheExpectationLayout(LayoutAdapter):
    verifier = _ExpectationLayoutValidated()


class _WindowWildcard(LayoutVerifier):
    def compare(
        self,
        claim: CacheSignature,
        actual: CacheSignature,
        fields: Sequence[str],
        error: Callable[[str, Any, Any], errors.SignatureError],
    ) -> None:
        if (
            claim.field_value("sliding_window") is None
            or actual.field_value("sliding_window") is None
        ):
            # MUTATION: an absent window matches any window
            fields = [name for name in fields if name != "sliding_window"]
        super().compare(claim, actual, fields, error)


@mutant(
    "prof-absent-window-is-a-wildcard",
    breaks=("PROF-10", "VERIFY-11"),
    half="under",
    plausible="an Option compared only when both sides are Some: 'no window' on either side "
    "reads as 'no constraint', so a full-causal reader takes a windowed block",
)
class ProfAbsentWindowIsAWildcard(LayoutAdapter):
    verifier = _WindowWildcard()


class _BlockSizeBeforeTokens(LayoutVerifier):
    def fields(self, rules: FormatProfile) -> Sequence[str]:
        fields = list(rules.fields)
        if "block_size" in fields:  # MUTATION: block_size moved before tokens
            fields.remove("block_size")
            fields.insert(fields.index("tokens"), "block_size")
        return fields


@mutant(
    "prof-block-size-compared-before-tokens",
    breaks=("PROF-10",),
    half="contract",
    plausible="the layout is 'part of the shape', so its fields are compared with the "
    "shape fields, ahead of the token count; a reader that wants other tokens too is "
    "told about the block size first",
)
class ProfBlockSizeComparedBeforeTokens(LayoutAdapter):
    verifier = _BlockSizeBeforeTokens()


class _ReadsUpToItsVersion(LayoutVerifier):
    def readable(self, version: int, profile: FormatProfile, readable: tuple[int, ...]) -> bool:
        return version <= profile.version  # MUTATION: a range, not the listed set


@mutant(
    "prof-v2-reader-reads-v1-blocks",
    breaks=("VERIFY-3", "PROF-5"),
    half="under",
    plausible="'a newer reader reads older blocks' -- the `<=` of backwards compatibility; "
    "a v1 block, which cannot say what layout it was cut under, is then measured",
)
class ProfV2ReaderReadsV1Blocks(LayoutAdapter):
    verifier = _ReadsUpToItsVersion()


class _ReadsOtherVersionsAsItsOwn(LayoutVerifier):
    """A block of a version the reader lets through is decoded as the reader's own
    format; a header without a layout takes the expectation's (what the reader wants)."""

    def rules(self, recorded: CacheSignature, profile: FormatProfile) -> FormatProfile:
        return profile

    def layout(
        self, recorded: CacheSignature, expected: CacheSignature, rules: FormatProfile
    ) -> BlockLayout | None:
        return recorded.layout or expected.layout


class _ReadsItsVersionAndLater(_ReadsOtherVersionsAsItsOwn):
    def readable(self, version: int, profile: FormatProfile, readable: tuple[int, ...]) -> bool:
        return version >= profile.version  # MUTATION: a range upwards, not the listed set


@mutant(
    "prof-v2-reader-reads-later-blocks",
    breaks=("VERIFY-3", "PROF-3"),
    half="under",
    plausible="'a later format only adds fields' -- the `>=` of forward compatibility; a "
    "block of version 99, whose layout this reader cannot know, is decoded as its own",
)
class ProfV2ReaderReadsLaterBlocks(LayoutAdapter):
    verifier = _ReadsItsVersionAndLater()


class _RefusesOnlyTheVersionItReplaced(_ReadsOtherVersionsAsItsOwn):
    def readable(self, version: int, profile: FormatProfile, readable: tuple[int, ...]) -> bool:
        return version != 1  # MUTATION: refuses the one older version it knows of


@mutant(
    "prof-v2-reader-refuses-only-v1",
    breaks=("VERIFY-3", "PROF-3"),
    half="under",
    plausible="the upgrade adds a check refusing version-1 blocks, the format it replaced, "
    "and reads every other block as its own: a block of version 0 or 99 is then measured",
)
class ProfV2ReaderRefusesOnlyV1(LayoutAdapter):
    verifier = _RefusesOnlyTheVersionItReplaced()


class _EmptyBlockFirst(LayoutVerifier):
    def verify(
        self,
        block: Any,
        expected: CacheSignature,
        profile: FormatProfile,
        readable: tuple[int, ...],
        measure: MeasureUnder,
    ) -> Any:
        if block.signature is not None and not block.layers:
            raise errors.EmptyPayload()  # MUTATION: the payload looked at before the version
        return super().verify(block, expected, profile, readable, measure)


@mutant(
    "prof-v2-reader-refuses-an-empty-block-before-its-version",
    breaks=("VERIFY-9", "VERIFY-3"),
    half="contract",
    plausible="a cheap guard against empty blocks at the top of the reader, before the "
    "header is decoded; a block of a version it cannot read is then reported as empty",
)
class ProfV2ReaderRefusesAnEmptyBlockBeforeItsVersion(LayoutAdapter):
    verifier = _EmptyBlockFirst()


#: What a v1 stamp decodes to as a v2 header: no block size and no window, as zeros.
_V1_HEADER_AS_V2 = BlockLayout(block_size=0, sliding_window=None)


class _EveryBlockUnderV2(LayoutVerifier):
    def measured(
        self,
        measure: MeasureUnder,
        recorded: CacheSignature,
        layers: Sequence[StoredLayer],
        rules: FormatProfile,
        layout: BlockLayout | None,
    ) -> CacheSignature:
        # MUTATION: the reader's own (v2) rules for every block; a v1 stamp has no layout
        v2 = signature.profile_for(2, rules.revision)
        return measure(recorded.model, layers, v2, layout or _V1_HEADER_AS_V2)


@mutant(
    "prof-rolling-reader-measures-all-under-v2",
    breaks=("PROF-12", "SIG-12"),
    half="under",
    plausible="the upgraded node measures with the one measurer it now has, the v2 one, "
    "and added 1 to the readable list only; every honest v1 block is then refused for the "
    "layout it never had",
)
class ProfRollingReaderMeasuresAllUnderV2(LayoutAdapter):
    verifier = _EveryBlockUnderV2()

    def __init__(
        self, writes: int = 2, reads: tuple[int, ...] | None = (1, 2), revision: str = "split_width"
    ) -> None:
        super().__init__(writes, reads, revision)


class _EveryBlockUnderV1(LayoutVerifier):
    def measured(
        self,
        measure: MeasureUnder,
        recorded: CacheSignature,
        layers: Sequence[StoredLayer],
        rules: FormatProfile,
        layout: BlockLayout | None,
    ) -> CacheSignature:
        # MUTATION: v1's rules for every block; the stamp's version and layout carried over
        v1 = measure(recorded.model, layers, signature.V1, None)
        return replace(v1, format_version=recorded.format_version, layout=layout)


@mutant(
    "prof-rolling-reader-measures-all-under-v1",
    breaks=("PROF-12", "SIG-12", "PROF-8"),
    half="under",
    plausible="a v1 node taught to read v2 stamps decodes their layout and keeps its v1 "
    "measurer; a v2 block of 3 positions stamped with a block size of 4 is then accepted",
)
class ProfRollingReaderMeasuresAllUnderV1(LayoutAdapter):
    verifier = _EveryBlockUnderV1()

    def __init__(
        self, writes: int = 1, reads: tuple[int, ...] | None = (1, 2), revision: str = "split_width"
    ) -> None:
        super().__init__(writes, reads, revision)


# --- PROF-8: the v1 rules a v2 writer keeps (found by a stranger's trial) ------------


class _NoVLength(LayoutMeasurer):
    def measure_layer(
        self, index: int, layer: StoredLayer, per_token: int, profile: FormatProfile
    ) -> int:
        layer = replace(layer, v=layer.k)  # MUTATION: the V buffer is never looked at
        return super().measure_layer(index, layer, per_token, profile)


@mutant(
    "prof-v2-writer-skips-the-v-length",
    breaks=("PROF-8", "SIG-7"),
    half="under",
    plausible="a v2 writer rewritten around the whole-block check compares the token "
    "count with the block size and measures it from K alone; a torn V buffer is stamped",
)
class ProfV2WriterSkipsTheVLength(LayoutAdapter):
    measurer = _NoVLength()


class _WrappingWidth(LayoutMeasurer):
    def measure(
        self,
        model_name: str,
        layers: Sequence[StoredLayer],
        profile: FormatProfile,
        layout: BlockLayout | None,
    ) -> CacheSignature:
        wrapped = [  # MUTATION: the width computed modulo 2^64, as a release build wraps
            replace(layer, n_kv_heads=layer.n_kv_heads % (1 << 63)) for layer in layers[:1]
        ]
        sig = super().measure(model_name, [*wrapped, *layers[1:]], profile, layout)
        return replace(sig, n_kv_heads=layers[0].n_kv_heads)


@mutant(
    "prof-v2-writer-wraps-the-width",
    breaks=("PROF-8", "SIG-15"),
    half="under",
    plausible="the v2 writer multiplies the untrusted head count and head width in u64 "
    "with wrapping arithmetic; 2^63+1 heads of dimension 2 measure as width 2",
)
class ProfV2WriterWrapsTheWidth(LayoutAdapter):
    measurer = _WrappingWidth()


@mutant(
    "prof-v2-model-label-trimmed",
    breaks=("PROF-8", "SIG-3", "SEC-2"),
    half="under",
    plausible="the v2 stamp path trims and lowercases the model label it is given, "
    "as configuration strings often are; two tenants' labels then collide",
)
class ProfV2ModelLabelTrimmed(LayoutAdapter):
    def stamp(
        self, model_name: str, payload: values.Payload, *, layout: values.Layout | None = None
    ) -> values.Signature | values.Fault:
        return super().stamp(model_name.strip().lower(), payload, layout=layout)  # MUTATION


_U32_MAX = (1 << 32) - 1


@mutant(
    "prof-layout-checked-before-representability",
    breaks=("VERIFY-10", "VERIFY-9"),
    half="under",
    plausible="a v2 reader with 32-bit counts parses the stamp's layout first, since it "
    "sits in the header before the counts; a stamp with a bad layout and a count it cannot "
    "hold is then refused as bad_layout instead of unrepresentable",
)
class ProfLayoutCheckedBeforeRepresentability(ReferenceAdapter):
    def __init__(self) -> None:
        super().__init__(writes=2)

    def describe(self) -> values.AdapterInfo:
        return replace(super().describe(), uint_bits=32)

    def verify(
        self, recorded: values.Signature | None, payload: values.Payload, expected: values.Signature
    ) -> values.Signature | values.Fault:
        if recorded is not None and recorded.format_version in self.reads:
            if recorded.layout is not None:
                try:  # MUTATION: the layout (2b) before the counts (2a)
                    BlockLayout(recorded.layout.block_size, recorded.layout.sliding_window).check()
                except errors.BadLayout:
                    return super().verify(recorded, payload, expected)
            for name in ("n_layers", "n_kv_heads", "head_dim", "tokens"):
                found = getattr(recorded, name)
                if found > _U32_MAX:
                    return values.Fault(
                        "unrepresentable", name, None, {"found": found}, f"{name} {found} > u32"
                    )
        return super().verify(recorded, payload, expected)


class _WindowAtLeast(LayoutVerifier):
    def compare(
        self,
        claim: CacheSignature,
        actual: CacheSignature,
        fields: Sequence[str],
        error: Callable[[str, Any, Any], errors.SignatureError],
    ) -> None:
        wanted, written = claim.field_value("sliding_window"), actual.field_value("sliding_window")
        comparable = error is incompatible and wanted is not None and written is not None
        if comparable and written >= wanted:  # MUTATION: "the block saw at least as much"
            fields = [name for name in fields if name != "sliding_window"]
        super().compare(claim, actual, fields, error)


@mutant(
    "prof-window-compatible-when-larger",
    breaks=("PROF-10", "VERIFY-11"),
    half="under",
    plausible="a block written under a larger window 'holds everything' a smaller-window "
    "reader needs, so windows are compared as at least; but its positions were computed "
    "under another mask than the reader's model uses",
)
class ProfWindowCompatibleWhenLarger(LayoutAdapter):
    verifier = _WindowAtLeast()


class _WindowBeforeBlockSize(LayoutVerifier):
    def fields(self, rules: FormatProfile) -> Sequence[str]:
        order = [name for name in rules.fields if name != "sliding_window"]
        if "sliding_window" in rules.fields:  # MUTATION: the window before the block size
            order.insert(order.index("block_size"), "sliding_window")
        return order


@mutant(
    "prof-window-compared-before-block-size",
    breaks=("PROF-10", "ERR-3"),
    half="contract",
    plausible="the layout is compared as one record in the order it is declared in the "
    "header (window, then block size); a block differing in both is then reported on the "
    "window",
)
class ProfWindowComparedBeforeBlockSize(LayoutAdapter):
    verifier = _WindowBeforeBlockSize()


class _WholeBlocks(LayoutMeasurer):
    def check_whole_block(self, layout: BlockLayout | None, tokens: int) -> None:
        if layout is not None and (tokens == 0 or tokens % layout.block_size):  # MUTATION
            raise errors.BlockSizeMismatch(block_size=layout.block_size, tokens=tokens)


@mutant(
    "prof-whole-number-of-blocks-accepted",
    breaks=("PROF-8",),
    half="under",
    plausible="'a block is whole' is checked as 'the tokens fill whole blocks' (a paged "
    "allocator's test); a payload of two blocks is then stamped as one, and a reader "
    "indexing the stamp as one block reads half of it",
)
class ProfWholeNumberOfBlocksAccepted(LayoutAdapter):
    measurer = _WholeBlocks()
