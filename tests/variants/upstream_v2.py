"""Profile v2 written the way the upstream crates are shaped, not the way the reference is.

- ``ferrox-v2-layout-only``: writes 2, reads exactly {2}, revision ``layout_only``
  (PROF-11): a layer has one head width, so a split payload is a ragged ``v_length``
  and the layer's claim is named ``seq_len``.
- ``ferrox-v2-rolling-split``: writes 2, reads {1, 2}, revision ``split_width``: the
  later line, during an upgrade (PROF-12).
- ``ferrox-v2-upstream-wording``: the first line as upstream words its layout refusals:
  each message names its field ("KV block size must be positive") but not the value.
  Kind, field and values are right, so it passes by default; its messages fall short of
  ERR-13, which is advice (CONF-12), so it fails under ``--strict-messages``.

Independent of the reference's signature code: the layout is a type that can only be
built valid (a stamp whose layout is not one is refused while it is decoded, as the
upstream disk decoder does), measuring walks the layers once with the claim check
folded into a table of per-layer rules, and comparison reads fields from a list of
getters. The rest (hash, identity, plans) is the reference's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo, Fault, LayerDesc, Layout, Payload, Signature

from . import variant

_U64 = (1 << 64) - 1


class _Refused(Exception):
    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.kind)
        self.fault = fault


def _refuse(
    kind: str, *, field: str | None = None, layer: int | None = None, **values: object
) -> None:
    shown = ", ".join(f"{k}={'none' if v is None else v}" for k, v in values.items())
    message = f"{kind}: {field or ''} {shown}"
    raise _Refused(Fault(kind, field, layer, values, message))  # type: ignore[arg-type]


@dataclass(frozen=True)
class _ValidLayout:
    """A layout that exists only when valid (upstream ``BlockLayout::new``)."""

    block_size: int
    window: int | None

    @classmethod
    def new(cls, block_size: int, window: int | None) -> _ValidLayout:
        values = {"block_size": block_size, "sliding_window": window}
        if block_size == 0:
            _refuse("bad_layout", field="block_size", **values)
        if window is not None:
            if window == 0:
                _refuse("bad_layout", field="sliding_window", **values)
            if window % block_size:
                _refuse(
                    "bad_layout", field="sliding_window", **values, remainder=window % block_size
                )
        return cls(block_size, window)


_ORDER: tuple[tuple[str, Callable[[Signature], object]], ...] = (
    ("format_version", lambda s: s.format_version),
    ("model", lambda s: s.model),
    ("n_layers", lambda s: s.n_layers),
    ("n_kv_heads", lambda s: s.n_kv_heads),
    ("head_dim", lambda s: s.head_dim),
    ("dtype", lambda s: s.dtype),
    ("tokens", lambda s: s.tokens),
    ("block_size", lambda s: None if s.layout is None else s.layout.block_size),
    ("sliding_window", lambda s: None if s.layout is None else s.layout.sliding_window),
)


class _UpstreamWordedLayout(_ValidLayout):
    """The same layout, refused in upstream's words: the field, never the value."""

    @classmethod
    def new(cls, block_size: int, window: int | None) -> _ValidLayout:
        try:
            return super().new(block_size, window)
        except _Refused as refused:
            words = {
                "block_size": "KV block size must be positive",
                "sliding_window": "sliding window must be a positive multiple of the block size",
            }
            raise _Refused(
                Fault(
                    refused.fault.kind,
                    refused.fault.field,
                    refused.fault.layer,
                    refused.fault.values,
                    words[str(refused.fault.field)],
                )
            ) from None


class _UpstreamV2(ReferenceAdapter):
    revision = "split_width"
    layout_type: type[_ValidLayout] = _ValidLayout
    readable_versions: frozenset[int] = frozenset({2})
    label = ""

    def describe(self) -> AdapterInfo:
        options = {} if self.revision == "split_width" else {"profile_v2_revision": self.revision}
        return AdapterInfo(
            name=self.label,
            version="0",
            language="python",
            classes=frozenset({"hash", "identity", "plan", "signature", "verify"}),
            format_writes=2,
            format_reads=self.readable_versions,
            options=options,
        )

    # -- measuring

    def _tokens_of(self, index: int, layer: LayerDesc, width: int, version: int) -> int:
        split = version == 2 and self.revision == "split_width"
        if split and layer.v_head_dim is not None and layer.v_head_dim != layer.head_dim:
            _refuse(
                "split_kv_head_width",
                layer=index,
                head_dim=layer.head_dim,
                v_head_dim=layer.v_head_dim,
            )
        rows, rest = divmod(layer.k_len, width)
        if rest:
            _refuse(
                "ragged_payload", field="k_length", layer=index, expected=width, found=layer.k_len
            )
        if layer.v_len != layer.k_len:
            _refuse(
                "ragged_payload",
                field="v_length",
                layer=index,
                expected=layer.k_len,
                found=layer.v_len,
            )
        if layer.seq_len != rows:
            claim = "positions" if split else "seq_len"
            _refuse("ragged_payload", field=claim, layer=index, expected=rows, found=layer.seq_len)
        return rows

    def _measure(
        self, model: str, payload: Sequence[LayerDesc], version: int, layout: _ValidLayout | None
    ) -> Signature:
        if not payload:
            _refuse("empty_payload")
        head = payload[0]
        width = head.n_kv_heads * head.head_dim
        if head.n_kv_heads == 0 or head.head_dim == 0 or width > _U64:
            _refuse("degenerate_layer", layer=0, n_kv_heads=head.n_kv_heads, head_dim=head.head_dim)
        tokens = self._tokens_of(0, head, width, version)
        for index in range(1, len(payload)):
            layer = payload[index]
            if (layer.n_kv_heads, layer.head_dim) != (head.n_kv_heads, head.head_dim):
                _refuse(
                    "ragged_payload",
                    field="layer_shape",
                    layer=index,
                    expected=(head.n_kv_heads, head.head_dim),
                    found=(layer.n_kv_heads, layer.head_dim),
                )
            rows = self._tokens_of(index, layer, width, version)
            if rows != tokens:
                _refuse(
                    "ragged_payload", field="token_count", layer=index, expected=tokens, found=rows
                )
        if layout is not None and tokens != layout.block_size:
            _refuse("block_size_mismatch", block_size=layout.block_size, tokens=tokens)
        return Signature(
            version,
            model,
            len(payload),
            head.n_kv_heads,
            head.head_dim,
            "f32",
            tokens,
            None if layout is None else Layout(layout.block_size, layout.window),
        )

    def measure(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        return self.stamp(model_name, payload, layout=layout)

    def stamp(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        if layout is None:
            raise ValueError("a version-2 writer stamps under a layout")
        try:
            valid = self.layout_type.new(layout.block_size, layout.sliding_window)
            return self._measure(model_name, payload, 2, valid)
        except _Refused as refused:
            return refused.fault

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        try:
            if recorded is None:
                _refuse("unmarked")
            assert recorded is not None
            if recorded.format_version not in self.readable_versions:
                _refuse(
                    "unsupported_format",
                    field="format_version",
                    found=recorded.format_version,
                    readable=tuple(sorted(self.readable_versions)),
                )
            layout = None
            if recorded.format_version == 2:  # decoding the stamp builds its layout
                if recorded.layout is None:
                    raise ValueError("a version-2 stamp without its layout")
                layout = self.layout_type.new(
                    recorded.layout.block_size, recorded.layout.sliding_window
                )
            actual = self._measure(recorded.model, payload, recorded.format_version, layout)
            for claim, kind, names in (
                (recorded, "payload_mismatch", ("recorded", "actual")),
                (expected, "incompatible", ("expected", "found")),
            ):
                for field, get in _ORDER:
                    if field in ("block_size", "sliding_window") and actual.layout is None:
                        break
                    mine, theirs = get(claim), get(actual)
                    if mine != theirs or type(mine) is not type(theirs):
                        _refuse(kind, field=field, **{names[0]: mine, names[1]: theirs})
            return actual
        except _Refused as refused:
            return refused.fault


@variant(
    "ferrox-v2-layout-only",
    "profile v2 of the first upstream line (revision layout_only), written in the upstream "
    "shape: a layout type valid by construction, refused while a stamp is decoded",
)
class FerroxV2LayoutOnly(_UpstreamV2):
    revision = "layout_only"
    label = "variant-ferrox-v2-layout-only"


@variant(
    "ferrox-v2-rolling-split",
    "profile v2 of the later upstream line (split_width) reading {1, 2} during an upgrade, "
    "in the upstream shape",
)
class FerroxV2RollingSplit(_UpstreamV2):
    readable_versions = frozenset({1, 2})
    label = "variant-ferrox-v2-rolling"


@variant(
    "ferrox-v2-upstream-wording",
    "profile v2 of the first upstream line with upstream's layout messages, which name the "
    "field but not the value: ERR-13 advice, a pass by default (CONF-12)",
)
class FerroxV2UpstreamWording(_UpstreamV2):
    revision = "layout_only"
    label = "variant-ferrox-v2-upstream-wording"
    layout_type = _UpstreamWordedLayout


@variant(
    "ferrox-v2-expectation-by-construction",
    "profile v2 of the first upstream line as an unchanged build of it answers: the reader's "
    "expectation is decoded first, into the same layout type as a stamp's, and an expectation "
    "that type cannot hold is an adapter failure, not a refusal",
)
class FerroxV2ExpectationByConstruction(_UpstreamV2):
    """A reader whose expectation is its own configuration, built before any stamp is read.

    Upstream ferrox's expected signature holds a ``BlockLayout``, valid by construction,
    so a stdio adapter over the unchanged crate decodes the expectation first and cannot
    represent one with a layout PROF-7 refuses. That is safe: such an expectation is no
    configuration a reader runs with. The suite never sends one (spec/protocol.md, after
    the values table); this variant is the standing check that it does not.
    """

    revision = "layout_only"
    label = "variant-ferrox-v2-expectation-by-construction"

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        if expected.format_version == 2:
            if expected.layout is None:
                raise ValueError("expected: a version-2 expectation without its layout")
            try:
                self.layout_type.new(expected.layout.block_size, expected.layout.sliding_window)
            except _Refused as refused:
                raise ValueError(
                    f"expected.layout: this reader cannot hold it ({refused.fault.message})"
                ) from None
        return super().verify(recorded, payload, expected)
