"""The key-side rules of the caches (classes ``identity`` and ``alloc``'s requirements):
caches made, appended to, truncated, cleared, a layer replaced, ids and lengths read.
"""

from __future__ import annotations

from kvconform.differential.strategies.source import flag, pick
from kvconform.differential.strategies.state import KeyState, _Cache
from kvconform.differential.strategies.values import _ABOVE_32_BITS
from kvconform.protocol import operations as ops
from kvconform.values import (
    SHAPE_FIELDS,
    Geometry,
)


class AllocRules(KeyState):
    """Caches: made, grown, rewound, cleared, a layer replaced, ids and lengths read."""

    def new_cache(self) -> None:
        self.add_cache(self.geometry())

    def append(self) -> None:
        if self.caches:
            self.append_to(self.pick(self.caches))

    def truncate(self) -> None:
        if self.caches:
            self.truncate_to(self.pick(self.caches))

    def clear(self) -> None:
        if not self.caches or not self.scope.clears:
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
        if not self.scope.shape_mismatches:  # under regrow: the index may still be wrong
            changeable = set()

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

    def add_cache(self, cache_geometry: Geometry) -> str:
        name = self.fresh("c")
        self.caches[name] = _Cache(cache_geometry)
        self.ops.append(ops.CacheNew(handle=name, geometry=cache_geometry))
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
