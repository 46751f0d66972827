"""Capabilities declared on their own (CONF-7): each the reference with one thing less.

- ``u32-counts``: a stamp's counts are held in ``u32`` (declares ``uint_bits: 32``); a
  stamp count above 2^32-1 is refused as ``unrepresentable`` on that field (VERIFY-9).

- ``dtype-enum-f32-f16``: signatures hold their element type in an enum with two
  values, ``f32`` and ``f16`` (declares ``dtypes: {f32, f16}``, SIG-14). A stamp
  naming any other dtype (``bf16``, or a spelling such as ``F32``) cannot be
  decoded into a signature and is refused as ``unrepresentable`` on ``dtype``,
  after the format-version check and before the payload is measured (VERIFY-9).
  The cache's element types are the reference's.
- ``no-raw-fold``: the hasher's raw byte fold is private, as in seed 000
  (declares ``raw_fold: false``, HASH-14); a ``bytes`` mix is an adapter error.
- ``dtype-enum-v2`` and ``u32-counts-v2``: the first two as profile-v2 readers, where
  the representability check (2a) comes before the recorded layout's (2b, VERIFY-10).
- ``u32-layout-v2``: ``u32-counts-v2`` whose writer holds its layout in u32 fields too,
  refusing to measure or stamp under a layout above 2^32-1 (found by the false-alarm
  audit of 2.5.0: such a case is not applicable to it, CONF-7).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from enum import Enum

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo, Fault, Layout, MixOp, Payload, Signature

from . import variant


class KvDtype(Enum):
    """The element types a stored block's signature can hold here."""

    F32 = "f32"
    F16 = "f16"

    @classmethod
    def decode(cls, name: str) -> KvDtype | None:
        return next((d for d in cls if d.value == name), None)


class KvDtypeFull(Enum):
    """An element-type enum of the whole vocabulary of SIG-14."""

    F32 = "f32"
    F16 = "f16"
    BF16 = "bf16"

    @classmethod
    def decode(cls, name: str) -> KvDtypeFull | None:
        return next((d for d in cls if d.value == name), None)


@variant(
    "dtype-enum-f32-f16",
    "signature dtype is an enum of f32 and f16 only (capabilities.dtypes: {f32, f16}); "
    "other stamped dtypes are unrepresentable",
)
class DtypeEnumF32F16(ReferenceAdapter):
    #: The element-type enum a stamp's dtype is decoded into.
    dtype_enum: type[KvDtype] | type[KvDtypeFull] = KvDtype
    variant_name = "dtype-enum-f32-f16"

    def describe(self) -> AdapterInfo:
        return replace(
            super().describe(),
            name=self.variant_name,
            dtypes=frozenset(d.value for d in self.dtype_enum),
        )

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        names = self.dtype_enum
        if names.decode(expected.dtype) is None:
            raise ValueError(f"a reader cannot require dtype {expected.dtype!r}: no such KvDtype")
        readable = recorded is not None and recorded.format_version in self.reads
        if readable and names.decode(recorded.dtype) is None:  # type: ignore[union-attr]
            found = recorded.dtype  # type: ignore[union-attr]
            return Fault(
                kind="unrepresentable",
                field="dtype",
                values={"found": found},
                message=(
                    f"the stamp records dtype {found}, which KvDtype cannot represent "
                    f"(it holds {', '.join(d.value for d in names)})"
                ),
            )
        return super().verify(recorded, payload, expected)


@variant(
    "dtype-enum-full-vocabulary",
    "signature dtype is an enum of the whole vocabulary, f32, f16 and bf16 (capabilities."
    "dtypes lists all three): any other stamped name is unrepresentable, and the reader "
    "cannot even require one (a false alarm of the generated checks, which took this "
    "declaration for none)",
)
class DtypeEnumFullVocabulary(DtypeEnumF32F16):
    dtype_enum = KvDtypeFull
    variant_name = "dtype-enum-full-vocabulary"


@variant("no-raw-fold", "the raw byte fold is private (capabilities.raw_fold: false)")
class NoRawFold(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="no-raw-fold", raw_fold=False)

    def hash(self, program: Sequence[MixOp]) -> list[int]:
        for op in program:
            if op.kind == "bytes":
                raise TypeError("the raw byte fold is private; only the typed mixes are public")
        return super().hash(program)


#: The largest count a ``u32`` holds.
_U32_MAX = (1 << 32) - 1


@variant(
    "u32-counts",
    "a reader whose block counts are u32 (capabilities.uint_bits: 32); a stamp count above "
    "2^32-1 is unrepresentable",
)
class U32Counts(ReferenceAdapter):
    """The reference, holding a stamp's counts in ``u32`` as a 32-bit engine's ``usize`` would."""

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="u32-counts", uint_bits=32)

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        readable = recorded is not None and recorded.format_version in self.reads
        if readable:
            assert recorded is not None
            for name in ("n_layers", "n_kv_heads", "head_dim", "tokens"):
                found = getattr(recorded, name)
                if found > _U32_MAX:
                    return Fault(
                        kind="unrepresentable",
                        field=name,
                        values={"found": found},
                        message=f"the stamp's {name} {found} does not fit in a u32",
                    )
        return super().verify(recorded, payload, expected)


@variant(
    "dtype-enum-v2",
    "dtype-enum-f32-f16 as a profile-v2 implementation: a stamp naming another dtype is "
    "unrepresentable before its layout is checked (VERIFY-10)",
)
class DtypeEnumV2(DtypeEnumF32F16):
    def __init__(self) -> None:
        super().__init__(writes=2)

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="dtype-enum-v2")


@variant(
    "u32-counts-v2",
    "u32-counts as a profile-v2 implementation: a count above 2^32-1 is unrepresentable "
    "before the stamp's layout is checked (VERIFY-10)",
)
class U32CountsV2(U32Counts):
    def __init__(self) -> None:
        super().__init__(writes=2)

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="u32-counts-v2")


@variant(
    "u32-layout-v2",
    "u32-counts-v2 whose writer also holds a layout in u32 header fields (as upstream "
    "ferrox's v2 disk header does): a layout above 2^32-1 to measure or stamp is refused",
)
class U32LayoutV2(U32CountsV2):
    def describe(self) -> AdapterInfo:
        return replace(super().describe(), name="u32-layout-v2")

    def measure(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        _layout_fits(layout)
        return super().measure(model_name, payload, layout=layout)

    def stamp(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        _layout_fits(layout)
        return super().stamp(model_name, payload, layout=layout)


def _layout_fits(layout: Layout | None) -> None:
    """A writer's layout as a u32 header holds it: one that does not fit is no layout."""
    if layout is None:
        return
    for name in ("block_size", "sliding_window"):
        value = getattr(layout, name)
        if value is not None and value > _U32_MAX:
            raise OverflowError(f"the layout's {name} {value} does not fit a u32 field")


@variant(
    "dtype-enum-and-u32-counts",
    "a reader of both narrow types (capabilities.dtypes: {f32, f16} and uint_bits: 32): of "
    "the stamp's fields it cannot hold, the first in the order of VERIFY-4 is named",
)
class DtypeEnumAndU32Counts(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return replace(
            super().describe(),
            name="dtype-enum-and-u32-counts",
            dtypes=frozenset(d.value for d in KvDtype),
            uint_bits=32,
        )

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        if recorded is not None and recorded.format_version in self.reads:
            for name in ("n_layers", "n_kv_heads", "head_dim", "dtype", "tokens"):  # VERIFY-4
                found = getattr(recorded, name)
                held = KvDtype.decode(found) is not None if name == "dtype" else found <= _U32_MAX
                if not held:
                    return Fault(
                        kind="unrepresentable",
                        field=name,
                        values={"found": found},
                        message=f"the stamp's {name} {found} cannot be held here",
                    )
        return super().verify(recorded, payload, expected)
