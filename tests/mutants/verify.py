"""VERIFY mutants (and SEC-4): verification with one misreading each.

Each overrides ``verify_block`` of :class:`~._kit.BlockAdapter` with a copy of
``reference.verify.verify`` (``_kit.reference_verify``) in which one line is
changed; the changed line is marked ``MUTATION``.
"""

from __future__ import annotations

from dataclasses import replace

from kvconform_reference import errors
from kvconform_reference.signature import SIGNATURE_FIELDS, V1, CacheSignature
from kvconform_reference.verify import KvBlock, UnverifiedBlock

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo, Fault, Payload, Signature

from . import mutant
from ._kit import BlockAdapter, compare, incompatible, payload_mismatch

# --- VERIFY-2: unmarked -------------------------------------------------------


@mutant(
    "verify-unmarked-treated-as-compatible",
    breaks=("VERIFY-2",),
    half="under",
    plausible="'no stamp means nothing contradicts us': the reader's expectation stands "
    "in for the missing stamp, so an unmarked block passes whenever it measures right",
)
class VerifyUnmarkedTreatedAsCompatible(BlockAdapter):
    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is None:
            recorded = expected  # MUTATION: absence taken as agreement
        if recorded.format_version not in V1.readable:
            raise errors.UnsupportedFormat(found=recorded.format_version, readable=V1.readable)
        actual = replace(
            self.measure_layers(recorded.model, block.layers),
            format_version=recorded.format_version,
        )
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-measures-before-the-stamp-is-looked-at",
    breaks=("VERIFY-9", "VERIFY-2"),
    half="contract",
    plausible="measuring first and then comparing with whatever stamp there is reads "
    "naturally; an unmarked broken block then reports its payload fault, not unmarked",
)
class VerifyMeasuresBeforeTheStampIsLookedAt(BlockAdapter):
    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        model = expected.model if block.signature is None else block.signature.model
        measured = self.measure_layers(model, block.layers)  # MUTATION: step 3 first
        recorded = block.signature
        if recorded is None:
            raise errors.Unmarked()
        if recorded.format_version not in V1.readable:
            raise errors.UnsupportedFormat(found=recorded.format_version, readable=V1.readable)
        actual = replace(measured, format_version=recorded.format_version)
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


# --- VERIFY-3: the readable set -----------------------------------------------


class _ReadableCheck(BlockAdapter):
    """``reference_verify`` with the readable test as a method."""

    def readable(self, recorded: CacheSignature, expected: CacheSignature) -> bool:
        return recorded.format_version in V1.readable

    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is None:
            raise errors.Unmarked()
        if not self.readable(recorded, expected):
            raise errors.UnsupportedFormat(found=recorded.format_version, readable=V1.readable)
        actual = replace(
            self.measure_layers(recorded.model, block.layers),
            format_version=recorded.format_version,
        )
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-readable-written-as-le",
    breaks=("VERIFY-3",),
    half="under",
    plausible="'we can read anything up to the version we write' -- the `<=` the seed "
    "explicitly refuses; a version-0 block is then read under the v1 layout",
)
class VerifyReadableWrittenAsLe(_ReadableCheck):
    def readable(self, recorded: CacheSignature, expected: CacheSignature) -> bool:
        return recorded.format_version <= V1.version  # MUTATION: a rule, not a list


@mutant(
    "verify-readable-from-expectation",
    breaks=("VERIFY-3", "VERIFY-6"),
    half="under",
    plausible="'the version we expect is the version we can read': the expectation's "
    "format_version stands in for the readable set, and widens it",
)
class VerifyReadableFromExpectation(_ReadableCheck):
    def readable(self, recorded: CacheSignature, expected: CacheSignature) -> bool:
        return recorded.format_version == expected.format_version  # MUTATION


@mutant(
    "verify-coherence-before-format",
    breaks=("VERIFY-9", "VERIFY-3"),
    half="contract",
    plausible="validating the payload before interpreting the stamp looks defensive; a "
    "reader then measures a layout it cannot read and reports the wrong fault",
)
class VerifyCoherenceBeforeFormat(BlockAdapter):
    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is None:
            raise errors.Unmarked()
        measured = self.measure_layers(recorded.model, block.layers)  # MUTATION: step 3, 2
        if recorded.format_version not in V1.readable:
            raise errors.UnsupportedFormat(found=recorded.format_version, readable=V1.readable)
        actual = replace(measured, format_version=recorded.format_version)
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


# --- VERIFY-4, VERIFY-5: honest, then compatible ------------------------------


@mutant(
    "verify-stamp-trusted-unmeasured",
    breaks=("VERIFY-4", "SIG-2", "SEC-3"),
    half="under",
    plausible="the writer measured when it stamped, so reading the stamp is measuring; "
    "'the stamp says 32 heads' and 'there are 32 heads' become one claim",
)
class VerifyStampTrustedUnmeasured(BlockAdapter):
    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is None:
            raise errors.Unmarked()
        if recorded.format_version not in V1.readable:
            raise errors.UnsupportedFormat(found=recorded.format_version, readable=V1.readable)
        actual = recorded  # MUTATION: the payload is never measured
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-honesty-skipped-when-stamp-is-expected",
    breaks=("VERIFY-4",),
    half="under",
    plausible="a fast path: 'the stamp is exactly what we want, accept it once the payload "
    "is coherent'; VERIFY-4 holds even when the stamp equals the expectation",
)
class VerifyHonestySkippedWhenStampIsExpected(BlockAdapter):
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
        if recorded == expected:  # MUTATION: the fast path
            return KvBlock(signature=recorded, layers=block.layers)
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-compatibility-before-honesty",
    breaks=("VERIFY-9", "VERIFY-4", "VERIFY-5"),
    half="contract",
    plausible="'is it what we want?' is the question the caller asked, so it is answered "
    "first; a lying stamp is then reported as an ordinary miss",
)
class VerifyCompatibilityBeforeHonesty(BlockAdapter):
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
        compare(expected, actual, incompatible)  # MUTATION: step 5 before step 4
        compare(recorded, actual, payload_mismatch)
        return KvBlock(signature=actual, layers=block.layers)


class _CompareIn(BlockAdapter):
    fields: tuple[str, ...] = SIGNATURE_FIELDS

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
        compare(recorded, actual, payload_mismatch, self.fields)
        compare(expected, actual, incompatible, self.fields)
        return KvBlock(signature=actual, layers=block.layers)


class _ExpectationMatch(BlockAdapter):
    """``reference_verify`` with step 5's per-field test as a method."""

    def matches(self, name: str, wanted: object, measured: object) -> bool:
        return wanted == measured

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
        for name in SIGNATURE_FIELDS:
            wanted, measured = expected.field_value(name), actual.field_value(name)
            if not self.matches(name, wanted, measured):
                raise incompatible(name, wanted, measured)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-expected-zero-tokens-is-a-wildcard",
    breaks=("VERIFY-5",),
    half="under",
    plausible="0 is a config struct's usual 'unset': a reader that leaves the token count "
    "at 0 when it 'does not care' accepts a block of any length, and reads positions it "
    "never asked for",
)
class VerifyExpectedZeroTokensIsAWildcard(_ExpectationMatch):
    def matches(self, name: str, wanted: object, measured: object) -> bool:
        return wanted == measured or (name == "tokens" and wanted == 0)  # MUTATION


@mutant(
    "verify-expected-falsy-is-a-wildcard",
    breaks=("VERIFY-5", "SIG-3"),
    half="under",
    plausible="'if expected.model and expected.model != found' skips the fields the reader "
    "left empty or zero; a reader with an empty model label then accepts every model's block",
)
class VerifyExpectedFalsyIsAWildcard(_ExpectationMatch):
    def matches(self, name: str, wanted: object, measured: object) -> bool:
        return not wanted or wanted == measured  # MUTATION: 0 and "" match anything


@mutant(
    "verify-compat-accepts-more-layers",
    breaks=("VERIFY-5", "SEC-4"),
    half="under",
    plausible="'the block covers every layer I need' reads as compatible; a block of a "
    "deeper model is then read as this one's, its extra layers silently dropped",
)
class VerifyCompatAcceptsMoreLayers(_ExpectationMatch):
    def matches(self, name: str, wanted: object, measured: object) -> bool:
        if name == "n_layers" and isinstance(wanted, int) and isinstance(measured, int):
            return measured >= wanted  # MUTATION: at least, not exactly
        return wanted == measured


@mutant(
    "verify-fields-in-alphabetical-order",
    breaks=("VERIFY-4", "VERIFY-5", "SIG-1"),
    half="contract",
    plausible="iterating a signature's fields sorted (or as a dict/JSON object happens to "
    "order them) reports a different first difference than SIG-1's order",
)
class VerifyFieldsInAlphabeticalOrder(_CompareIn):
    fields = tuple(sorted(SIGNATURE_FIELDS))  # MUTATION


@mutant(
    "verify-model-compared-ignoring-case",
    breaks=("SIG-3", "VERIFY-5"),
    half="under",
    plausible="'Llama-3-8B' and 'llama-3-8b' look like the same model to a person; SIG-3 "
    "makes the label opaque, and the deployment may distinguish them (SEC-2)",
)
class VerifyModelComparedIgnoringCase(BlockAdapter):
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
        folded = (
            replace(expected, model=actual.model)
            if (
                expected.model.casefold() == actual.model.casefold()  # MUTATION: case folded
            )
            else expected
        )
        compare(folded, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-dtype-compared-ignoring-case",
    breaks=("SIG-14", "VERIFY-4"),
    half="under",
    plausible="'F32' and 'f32' name the same type to a person; SIG-14 compares dtype as "
    "a string so that any other spelling simply differs",
)
class VerifyDtypeComparedIgnoringCase(BlockAdapter):
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
        recorded = replace(recorded, dtype=recorded.dtype.lower())  # MUTATION: case folded
        expected = replace(expected, dtype=expected.dtype.lower())
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-model-checked-for-honesty",
    breaks=("VERIFY-5", "SIG-3"),
    half="contract",
    plausible="measuring 'for the model we want' puts the reader's model into the "
    "measurement, so a stamp naming another model fails step 4 as payload_mismatch "
    "instead of step 5 as incompatible",
)
class VerifyModelCheckedForHonesty(BlockAdapter):
    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is None:
            raise errors.Unmarked()
        if recorded.format_version not in V1.readable:
            raise errors.UnsupportedFormat(found=recorded.format_version, readable=V1.readable)
        actual = replace(
            self.measure_layers(expected.model, block.layers),  # MUTATION: reader's model
            format_version=recorded.format_version,
        )
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-recorded-and-actual-swapped",
    breaks=("VERIFY-4", "ERR-2"),
    half="contract",
    plausible="PayloadMismatch(field, actual, recorded): positional arguments in the "
    "order the comparison happened to name them",
)
class VerifyRecordedAndActualSwapped(BlockAdapter):
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
        compare(actual, recorded, payload_mismatch)  # MUTATION: arguments swapped
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-expected-and-found-swapped",
    breaks=("VERIFY-5", "ERR-2"),
    half="contract",
    plausible="'expected' read as 'what the block was expected to be' (the measurement) "
    "rather than the reader's expectation",
)
class VerifyExpectedAndFoundSwapped(BlockAdapter):
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
        compare(actual, expected, incompatible)  # MUTATION: arguments swapped
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-yields-nothing",
    breaks=("VERIFY-7",),
    half="contract",
    plausible="a check that 'raises on failure and returns None' is the common Python "
    "shape of a validator; VERIFY-7 makes success yield the measured signature",
)
class VerifyYieldsNothing(BlockAdapter):
    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        result = super().verify(recorded, payload, expected)
        return result if isinstance(result, Fault) else None  # type: ignore[return-value]


# --- VERIFY-6, SIG-2: the expectation never fills the measurement -------------


@mutant(
    "verify-shape-from-expectation",
    breaks=("VERIFY-6", "SIG-2"),
    half="under",
    plausible="the reader knows its own geometry and reshapes the flat buffers as "
    "(tokens, its heads, its head_dim); a block of another width is then 'measured' to fit",
)
class VerifyShapeFromExpectation(BlockAdapter):
    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is None:
            raise errors.Unmarked()
        if recorded.format_version not in V1.readable:
            raise errors.UnsupportedFormat(found=recorded.format_version, readable=V1.readable)
        measured = self.measure_layers(recorded.model, block.layers)
        width = expected.n_kv_heads * expected.head_dim
        actual = replace(  # MUTATION: the expectation's geometry fills the measurement
            measured,
            format_version=recorded.format_version,
            n_kv_heads=expected.n_kv_heads,
            head_dim=expected.head_dim,
            tokens=block.layers[0].k.size // width if width else measured.tokens,
        )
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-dtype-from-expectation",
    breaks=("VERIFY-6", "SIG-2", "SIG-14"),
    half="under",
    plausible="'a flat buffer cannot tell its element type, the reader knows it': the "
    "expectation's dtype is filled in, and an f32 block is certified as f16",
)
class VerifyDtypeFromExpectation(BlockAdapter):
    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is None:
            raise errors.Unmarked()
        if recorded.format_version not in V1.readable:
            raise errors.UnsupportedFormat(found=recorded.format_version, readable=V1.readable)
        actual = replace(
            self.measure_layers(recorded.model, block.layers),
            format_version=recorded.format_version,
            dtype=expected.dtype,  # MUTATION: filled in from the expectation
        )
        compare(recorded, actual, payload_mismatch)
        compare(expected, actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


# --- SEC-4: geometry, not just size -------------------------------------------


def _width_only(claim: CacheSignature, actual: CacheSignature) -> CacheSignature:
    """``claim`` with heads and head_dim taken from ``actual`` when the widths agree."""
    if claim.n_kv_heads * claim.head_dim == actual.n_kv_heads * actual.head_dim:
        return replace(claim, n_kv_heads=actual.n_kv_heads, head_dim=actual.head_dim)
    return claim


@mutant(
    "verify-compares-width-not-shape",
    breaks=("SEC-4", "VERIFY-4", "VERIFY-5"),
    half="under",
    plausible="what a reader indexes is n_kv_heads * head_dim floats per token, so "
    "comparing that product looks sufficient; 2x8 and 4x4 blocks then pass for each other "
    "(the shape confusion of vLLM CVE-2025-46722)",
)
class VerifyComparesWidthNotShape(BlockAdapter):
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
        compare(_width_only(recorded, actual), actual, payload_mismatch)  # MUTATION
        compare(_width_only(expected, actual), actual, incompatible)
        return KvBlock(signature=actual, layers=block.layers)


@mutant(
    "verify-scrubs-a-refused-payload",
    breaks=("VERIFY-8",),
    half="contract",
    plausible="zeroing a refused block 'so that nobody can use it by mistake' looks like "
    "defence in depth; it destroys the evidence an operator needs",
    gap="the harness describes a fresh payload for every operation and never reads one "
    "back, so what verification does to the buffers it was given is invisible",
)
class VerifyScrubsARefusedPayload(BlockAdapter):
    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        try:
            return super().verify_block(block, expected)
        except errors.SignatureError:
            for layer in block.layers:  # MUTATION: the evidence is wiped
                layer.k[:] = 0
                layer.v[:] = 0
            raise


@mutant(
    "verify-empty-model-taken-from-the-reader",
    breaks=("VERIFY-6", "VERIFY-5", "SIG-3"),
    half="under",
    plausible="an empty label decodes as 'not recorded' (an Option read from a C string) "
    "and is filled in from the reader's expectation, so a block stamped with no model is a "
    "hit for every model",
)
class VerifyEmptyModelTakenFromTheReader(BlockAdapter):
    def verify_block(self, block: UnverifiedBlock, expected: CacheSignature) -> KvBlock:
        recorded = block.signature
        if recorded is not None and recorded.model == "":  # MUTATION
            block = UnverifiedBlock(replace(recorded, model=expected.model), block.layers)
        return super().verify_block(block, expected)


# --- VERIFY-9: of two fields a narrow reader cannot hold, the first is named ---------------

_U32_MAX = (1 << 32) - 1


@mutant(
    "unrepresentable-counts-before-dtype",
    breaks=("VERIFY-9", "VERIFY-4"),
    half="contract",
    plausible="a reader of u32 counts and a dtype enum that decodes the counts into their "
    "u32 fields first and the dtype last, naming tokens where the dtype comes first in "
    "field order (found by a C trial)",
)
class UnrepresentableCountsBeforeDtype(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), dtypes=frozenset({"f32", "f16"}), uint_bits=32)

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        if recorded is not None and recorded.format_version in self.reads:
            # MUTATION: every count first, the dtype last
            for name in ("n_layers", "n_kv_heads", "head_dim", "tokens", "dtype"):
                found = getattr(recorded, name)
                held = found in ("f32", "f16") if name == "dtype" else found <= _U32_MAX
                if not held:
                    return Fault(
                        "unrepresentable",
                        name,
                        None,
                        {"found": found},
                        f"the stamp's {name} {found} cannot be held here",
                    )
        return super().verify(recorded, payload, expected)
