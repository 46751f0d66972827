"""ERR mutants: the right refusal, reported wrongly.

Most rewrite one kind of :class:`~kvconform.values.Fault` as the
adapter reports it (:class:`~._kit.FaultAdapter`), the layer where an
implementation turns its typed error into a kind, a field, values and a
message. The one about ``k_length`` changes what the measuring code raises.
"""

from __future__ import annotations

from dataclasses import replace

from kvconform_reference import errors
from kvconform_reference.signature import StoredLayer

from kvconform.values import Fault

from . import mutant
from ._kit import BlockAdapter, FaultAdapter, Measurer

# --- ERR-8: the closed set ----------------------------------------------------


@mutant(
    "err-kind-outside-the-closed-set",
    breaks=("ERR-8",),
    half="contract",
    plausible="a stamp that contradicts its payload 'is corruption', so it gets its own "
    "kind, corrupt_block; ERR-8 closes the set so callers can handle every refusal",
)
class ErrKindOutsideTheClosedSet(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.kind == "payload_mismatch":
            return replace(fault, kind="corrupt_block")  # MUTATION
        return fault


# --- ERR-2: the parts each kind carries ---------------------------------------


@mutant(
    "err-degenerate-layer-without-layer",
    breaks=("ERR-2",),
    half="contract",
    plausible="'it is always layer 0', so the layer is left out of degenerate_layer; "
    "ERR-2 makes it part of the error",
)
class ErrDegenerateLayerWithoutLayer(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.kind == "degenerate_layer":
            return replace(fault, layer=None)  # MUTATION
        return fault


@mutant(
    "err-out-of-range-index-as-value",
    breaks=("ERR-2", "ALLOC-9"),
    half="contract",
    plausible="the requested index is 'a value of the error' next to n_layers; ERR-2 "
    "carries it as the error's layer",
)
class ErrOutOfRangeIndexAsValue(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.kind == "layer_out_of_range":  # MUTATION
            return replace(fault, layer=None, values={"layer": fault.layer, **fault.values})
        return fault


@mutant(
    "err-capacity-without-field",
    breaks=("ERR-2", "ALLOC-16"),
    half="contract",
    plausible="capacity_exceeded is about the cache as a whole, so it names no field; "
    "ERR-2 gives it max_seq_len",
)
class ErrCapacityWithoutField(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.kind == "capacity_exceeded":
            return replace(fault, field=None)  # MUTATION
        return fault


@mutant(
    "err-field-repeated-among-values",
    breaks=("ERR-2",),
    half="contract",
    plausible="serializing the whole error record as its values puts the field in twice; "
    "ERR-2 allows no other normative parts",
)
class ErrFieldRepeatedAmongValues(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.kind == "incompatible":
            return replace(fault, values={"field": fault.field or "", **fault.values})
        return fault


class _KLengthExpectedRounded(Measurer):
    def measure_layer(self, index: int, layer: StoredLayer, per_token: int) -> int:
        k_len = layer.k.size
        if k_len % per_token != 0:  # MUTATION: 'expected' is the nearest whole length
            raise errors.RaggedPayload(
                layer_index=index,
                field="k_length",
                expected=k_len - k_len % per_token,
                found=k_len,
            )
        return super().measure_layer(index, layer, per_token)


@mutant(
    "err-k-length-expected-rounded",
    breaks=("ERR-2", "ERR-3", "SIG-7"),
    half="contract",
    plausible="'expected' as the length the buffer should have had (rounded down to whole "
    "tokens); the specification decides it is the per-token width the length must divide",
)
class ErrKLengthExpectedRounded(BlockAdapter):
    measurer = _KLengthExpectedRounded()


class _VLengthExpectedIsWidth(Measurer):
    def measure_layer(self, index: int, layer: StoredLayer, per_token: int) -> int:
        k_len, v_len = layer.k.size, layer.v.size
        if k_len % per_token == 0 and v_len != k_len:  # MUTATION: copied from k_length
            raise errors.RaggedPayload(
                layer_index=index, field="v_length", expected=per_token, found=v_len
            )
        return super().measure_layer(index, layer, per_token)


@mutant(
    "err-v-length-expected-is-the-width",
    breaks=("ERR-2", "SIG-7"),
    half="contract",
    plausible="the v_length branch copied from the k_length one above it keeps "
    "'expected=per_token'; ERR-2 makes it the k length the v length must equal",
)
class ErrVLengthExpectedIsTheWidth(BlockAdapter):
    measurer = _VLengthExpectedIsWidth()


class _SeqLenExpectedIsClaim(Measurer):
    def measure_layer(self, index: int, layer: StoredLayer, per_token: int) -> int:
        k_len, v_len = layer.k.size, layer.v.size
        if k_len % per_token == 0 and v_len == k_len and layer.seq_len != k_len // per_token:
            raise errors.RaggedPayload(  # MUTATION: the claim as 'expected'
                layer_index=index,
                field="seq_len",
                expected=layer.seq_len,
                found=k_len // per_token,
            )
        return super().measure_layer(index, layer, per_token)


@mutant(
    "err-seq-len-claim-reported-as-expected",
    breaks=("ERR-2", "SIG-7"),
    half="contract",
    plausible="'the layer expected to hold seq_len positions and we found fewer' reads "
    "naturally; ERR-2 makes the measured count the expected value and the claim the found",
)
class ErrSeqLenClaimReportedAsExpected(BlockAdapter):
    measurer = _SeqLenExpectedIsClaim()


@mutant(
    "err-unsupported-found-is-the-written-version",
    breaks=("ERR-2", "VERIFY-3"),
    half="contract",
    plausible="a message template 'format_version {version} ...' filled from the "
    "reader's own constant instead of the block's recorded version",
)
class ErrUnsupportedFoundIsTheWrittenVersion(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.kind == "unsupported_format":  # MUTATION
            return replace(
                fault,
                values={**fault.values, "found": 1},
                message=f"format_version 1 cannot read this block (readable: 1); "
                f"it was written as {fault.values['found']}",
            )
        return fault


# --- ERR-3, ERR-4: canonical names and typed values ---------------------------

_SEED_SPELLING = {
    "layer_shape": "layer shape",
    "k_length": "k length",
    "v_length": "v length",
    "seq_len": "seq len",
    "token_count": "token count",
}


@mutant(
    "err-seed-field-spellings",
    breaks=("ERR-3",),
    half="contract",
    plausible="the seed spells payload fields with spaces ('layer shape', 'token count'); "
    "a port that keeps them reports names no other implementation uses",
)
class ErrSeedFieldSpellings(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.field in _SEED_SPELLING:
            return replace(fault, field=_SEED_SPELLING[fault.field])  # MUTATION
        return fault


@mutant(
    "err-layer-shape-as-text",
    breaks=("ERR-4",),
    half="contract",
    plausible="the seed formats a layer shape as '2x8'; ERR-4 makes it the pair [2, 8]",
)
class ErrLayerShapeAsText(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.field != "layer_shape":
            return fault
        shown = {
            k: "x".join(map(str, v)) if isinstance(v, tuple) else v for k, v in fault.values.items()
        }  # MUTATION
        return replace(fault, values=shown)


@mutant(
    "err-readable-as-a-number",
    breaks=("ERR-4", "VERIFY-3"),
    half="contract",
    plausible="with one readable version, 'readable: 1' looks natural; ERR-4 makes it a "
    "sorted list",
)
class ErrReadableAsANumber(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        readable = fault.values.get("readable")
        if isinstance(readable, tuple) and len(readable) == 1:
            return replace(fault, values={**fault.values, "readable": readable[0]})
        return fault


# --- ERR-13: messages ----------------------------------------------------------


@mutant(
    "err-message-omits-the-values",
    breaks=("ERR-13",),
    half="contract",
    plausible="'block is incompatible: head_dim differs' names the field and stops; an "
    "operator cannot tell which setting changed to what",
)
class ErrMessageOmitsTheValues(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.kind == "incompatible":
            return replace(fault, message=f"block is incompatible: {fault.field} differs")
        return fault


@mutant(
    "err-message-omits-the-field",
    breaks=("ERR-13",),
    half="contract",
    plausible="a friendly paraphrase ('layer 1 holds 4 positions but claims 7') gives the "
    "values and never names the field",
)
class ErrMessageOmitsTheField(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.kind == "ragged_payload":
            found, expected = fault.values["found"], fault.values["expected"]
            return replace(
                fault,
                message=f"layer {fault.layer} does not add up: found {found!s}, "
                f"wanted {expected!s}".replace("(", "")
                .replace(")", "")
                .replace(",", ""),
            )
        return fault


@mutant(
    "err-message-is-a-fixed-string",
    breaks=("ERR-13",),
    half="contract",
    plausible="'cache miss' is what a lookup says when it fails; ERR-13 names exactly "
    "this message as telling an operator nothing",
)
class ErrMessageIsAFixedString(FaultAdapter):
    def report(self, fault: Fault) -> Fault:
        if fault.kind == "capacity_exceeded":
            return replace(fault, message="cache full")  # MUTATION
        return fault
