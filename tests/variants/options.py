"""One variant per option value other than the default (CONF-6).

Each is the reference with exactly one decision answered the other safe way,
and it declares that answer in its self-description. The suite must pass every
one of them: a failure means a case judges a decision as if it were the
seeds' semantics.

- ``truncate-refuses``: a truncate past the length is refused, nothing changes (ALLOC-15).
- ``append-grows``: an append past the capacity reallocates larger storage and
  mints a new allocation id (ALLOC-16).
- ``replace-order-len-first``: a replacement layer's shape is checked
  ``max_seq_len``, ``head_dim``, ``n_kv_heads`` (ALLOC-17).
- ``clear-lazy``: ``clear()`` drops the storage and mints when storage is next
  allocated, which happens before anything observes or uses the cache (ALLOC-18).
- ``hook-remints``: toggling a hook mints a new instance id (ID-10).
- ``cache-heads-implied``: the plan key leaves ``n_kv_heads`` and ``head_dim``
  to the allocation id (PLAN-15).
- ``cache-heads-implied-validity``: the same, with the class ``plan_validity``: a
  cache of other heads is ``allocation_changed`` (PLAN-19), and a rebind to it is
  refused (PLAN-27; until 3.0.0 this variant adopted it, which is now a mutant).
- ``fixed-schema-defaults``: a fixed struct per family (PLAN-17): a left-out parameter
  keys as its type's default, a left-out hook as detached.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from kvconform_reference import errors, kv_cache, model, plan
from kvconform_reference.identity import KvAllocId, ModelInstanceId

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo, Fault, ModelSpec, PlanIdentity, StepInputs

from . import variant


def _declaring(info: AdapterInfo, name: str, **options: str) -> AdapterInfo:
    return replace(info, name=name, options={**info.options, **options})


# --- ALLOC-15: truncate past the length is refused ---------------------------------


@variant("truncate-refuses", "truncate past the length refused (truncate_past_length: refuse)")
class TruncateRefuses(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return _declaring(super().describe(), "truncate-refuses", truncate_past_length="refuse")

    def cache_truncate(self, cache: kv_cache.KvCache, length: int) -> None:
        if length > len(cache):
            raise ValueError(f"cannot rewind to {length}: only {len(cache)} positions held")
        cache.truncate_to(length)


# --- ALLOC-16: append past the capacity grows, with a new allocation ----------------


class _GrowingCache(kv_cache.KvCache):
    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        end = len(self) + k.shape[1]
        if end > self.geometry.max_seq_len:
            # Reallocate: larger storage is new storage, so a new id (ALLOC-16).
            grown = replace(self.geometry, max_seq_len=max(end, 2 * self.geometry.max_seq_len))
            old = self._layers
            self.geometry = grown
            self._layers = [kv_cache.KvLayer.allocate(grown) for _ in old]
            for new, layer in zip(self._layers, old, strict=True):
                new.k[: len(self)] = layer.k[: len(self)]
                new.v[: len(self)] = layer.v[: len(self)]
            self._alloc_id = KvAllocId.mint()
        super().append(k, v)


@variant("append-grows", "append past the capacity grows and re-mints (append_past_capacity: grow)")
class AppendGrows(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return _declaring(super().describe(), "append-grows", append_past_capacity="grow")

    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _GrowingCache
        return cache

    def cache_new_placed(self, geometry, residency, layer_storage):  # type: ignore[no-untyped-def]
        cache = super().cache_new_placed(geometry, residency, layer_storage)
        cache.__class__ = _GrowingCache  # a placed cache grows as any other
        return cache


# --- ALLOC-17: another order of the replacement shape checks ------------------------


class _LenFirstLayer(kv_cache.KvLayer):
    def shape_fields(self) -> tuple[tuple[str, int], ...]:
        return tuple(reversed(super().shape_fields()))


@variant(
    "replace-order-len-first",
    "replacement shape checked max_seq_len, head_dim, n_kv_heads (replace_layer_order)",
)
class ReplaceOrderLenFirst(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return _declaring(
            super().describe(),
            "replace-order-len-first",
            replace_layer_order="max_seq_len,head_dim,n_kv_heads",
        )

    def cache_replace_layer(self, cache, layer, n_kv_heads, head_dim, max_seq_len):  # type: ignore[no-untyped-def]
        g = cache.geometry
        shape = kv_cache.CacheGeometry(
            n_layers=1,
            n_kv_heads=g.n_kv_heads if n_kv_heads is None else n_kv_heads,
            head_dim=g.head_dim if head_dim is None else head_dim,
            max_seq_len=g.max_seq_len if max_seq_len is None else max_seq_len,
            dtype=g.dtype,
        )
        new = kv_cache.KvLayer.allocate(shape)
        if 0 <= layer < g.n_layers:
            current = cache.layer(layer)
            for (name, expected), (_, found) in zip(
                _LenFirstLayer(current.k, current.v).shape_fields(),
                _LenFirstLayer(new.k, new.v).shape_fields(),
                strict=True,
            ):
                if expected != found:
                    from kvconform.adapters.reference import fault_of

                    return fault_of(
                        errors.LayerShapeMismatch(
                            layer_index=layer, field=name, expected=expected, found=found
                        )
                    )
        return super().cache_replace_layer(cache, layer, n_kv_heads, head_dim, max_seq_len)


# --- ALLOC-18: clear mints lazily ---------------------------------------------------


class _LazyCache(kv_cache.KvCache):
    """``clear()`` drops the storage; the next use allocates it and mints."""

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

    @property
    def alloc_id(self) -> KvAllocId:
        self._allocate()
        return self._alloc_id

    def layer(self, index: int) -> kv_cache.KvLayer:
        self._allocate()
        return super().layer(index)

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        self._allocate()
        super().append(k, v)

    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        self._allocate()
        super().set_layer(index, layer)


@variant("clear-lazy", "clear mints when storage is next allocated (clear_mints: lazy)")
class ClearLazy(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return _declaring(super().describe(), "clear-lazy", clear_mints="lazy")

    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _LazyCache
        return cache


# --- ID-10: a hook toggle re-mints the instance id -----------------------------------


class _RemintingModel(model.Model):
    def set_hook(self, name: str, present: bool) -> None:
        super().set_hook(name, present)
        self.instance_id = ModelInstanceId.mint()

    def reload(self) -> model.Model:
        return _RemintingModel(self.config)


@variant("hook-remints", "a hook toggle re-mints the instance id (hook_toggle: remints_instance)")
class HookRemints(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return _declaring(super().describe(), "hook-remints", hook_toggle="remints_instance")

    def model_new(self, spec):  # type: ignore[no-untyped-def]
        m = super().model_new(spec)
        m.__class__ = _RemintingModel
        return m


# --- PLAN-15: the cache's head geometry is left to the allocation id ----------------


def _implied_key(ident: plan.PlanIdentity) -> int:
    g = ident.geometry
    # The same key as the reference's with n_kv_heads and head_dim fixed at 1:
    # the composition stays injective over every other component.
    return replace(ident, geometry=replace(g, n_kv_heads=1, head_dim=1)).key()


class _ImpliedPlan(plan.DecodePlan):
    def __init__(self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int = 1) -> None:
        self.step_tokens = step_tokens
        self.key = _implied_key(plan.PlanIdentity.of(m, cache, step_tokens))

    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        return _implied_key(plan.PlanIdentity.of(m, cache, len(step.token_ids))) == self.key


@variant(
    "cache-heads-implied", "plan key without n_kv_heads/head_dim (plan_key_cache_heads: implied)"
)
class CacheHeadsImplied(ReferenceAdapter):
    #: Its plans are its own, with a boolean validity only (CONF-10).
    classes = ReferenceAdapter.classes - {"plan_validity"}

    def describe(self) -> AdapterInfo:
        return _declaring(super().describe(), "cache-heads-implied", plan_key_cache_heads="implied")

    def plan_key(self, identity: PlanIdentity) -> int:
        from kvconform.adapters.reference import plan_identity

        return _implied_key(plan_identity(identity))

    def session_new(self, m, cache, step_tokens):  # type: ignore[no-untyped-def]
        return _ImpliedPlan(m, cache, step_tokens)

    def session_valid(self, session, m, cache, step: StepInputs) -> bool:  # type: ignore[no-untyped-def]
        return super().session_valid(session, m, cache, step)


# --- PLAN-15 implied, with the class plan_validity (PLAN-19) --------------------------


def _implied_structure(ident: plan.PlanIdentity) -> int:
    """The structure a plan is judged ``stale`` on, with the heads left to the allocation."""
    g = ident.geometry
    return replace(ident, geometry=replace(g, n_kv_heads=1, head_dim=1)).key(with_alloc=False)


class _ImpliedValidityPlan(plan.DecodePlan):
    """A plan whose key and structure leave out the cache's heads: a cache that differs
    from the baked one only in its heads (and so in its allocation id) is
    ``allocation_changed``, not ``stale`` (PLAN-19: the heads are no component), and a
    rebind to it is refused, as later fuel's storage fingerprint refuses it (PLAN-27)."""

    def __init__(self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int = 1) -> None:
        super().__init__(m, cache, step_tokens)
        self.key = _implied_key(self._identity)
        self._structure = _implied_structure(self._identity)

    def is_valid_for(self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs) -> bool:
        return _implied_key(plan.PlanIdentity.of(m, cache, len(step.token_ids))) == self.key

    def validity_for(
        self, m: model.Model, cache: kv_cache.KvCache, step: plan.StepInputs
    ) -> plan.Validity:
        current = plan.PlanIdentity.of(m, cache, len(step.token_ids))
        if _implied_structure(current) != self._structure:
            return "stale"
        return "valid" if _implied_key(current) == self.key else "allocation_changed"

    def rebind(self, cache: kv_cache.KvCache) -> None:
        baked, incoming = self._identity.geometry, cache.geometry
        if (baked.n_kv_heads, baked.head_dim) != (incoming.n_kv_heads, incoming.head_dim):
            # Not a typed refusal of PLAN-21: the labels are equal, the layout is not.
            raise ValueError("the incoming storage is laid out for other heads (PLAN-27)")
        super().rebind(cache)
        self.key = _implied_key(self._identity)


@variant(
    "cache-heads-implied-validity",
    "plan_key_cache_heads: implied with the class plan_validity: a cache of other heads is "
    "allocation_changed and a rebind to it is refused (PLAN-15, PLAN-19, PLAN-27)",
)
class CacheHeadsImpliedValidity(CacheHeadsImplied):
    classes = ReferenceAdapter.classes

    def describe(self) -> AdapterInfo:
        return _declaring(
            ReferenceAdapter.describe(self),
            "cache-heads-implied-validity",
            plan_key_cache_heads="implied",
        )

    def session_new(self, m, cache, step_tokens):  # type: ignore[no-untyped-def]
        return _ImpliedValidityPlan(m, cache, step_tokens)


# --- PLAN-17 fixed, keying a left-out field as its default ----------------------------

#: A plain per-family struct: every field always present, a left-out one at its default.
_FIXED_FIELDS: dict[str, dict[str, str]] = {
    "llama": {
        "n_layers": "u64",
        "n_heads": "u64",
        "hidden": "u64",
        "vocab": "u64",
        "rms_norm_eps": "f64",
        "mask_policy": "str",
        "logit": "hook",
        "sampler": "hook",
    },
    "qwen3": {
        "n_layers": "u64",
        "n_heads": "u64",
        "rms_norm_eps": "f64",
        "mask_policy": "str",
        "sliding_window": "u64",
        "mask_structure": "str",
        "logit": "hook",
    },
}
_DEFAULTS = {"u64": 0, "f64": 0.0, "str": ""}


def _filled(spec: ModelSpec) -> ModelSpec:
    """``spec`` with every field of its family: a left-out parameter at its type's default,
    a left-out hook detached, as a struct with a field for each would hold it."""
    fields = _FIXED_FIELDS[spec.family]
    params = dict(spec.params)
    hooks = dict(spec.hooks)
    for name, kind in fields.items():
        if kind == "hook":
            hooks.setdefault(name, False)
        else:
            params.setdefault(name, _DEFAULTS[kind])
    return replace(spec, params=tuple(sorted(params.items())), hooks=tuple(sorted(hooks.items())))


@variant(
    "fixed-schema-defaults",
    "plan_key_params: fixed, a plain struct per family: a left-out parameter keys as its "
    "type's default and a left-out hook as detached (PLAN-17, decision key-params)",
)
class FixedSchemaDefaults(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        info = _declaring(super().describe(), "fixed-schema-defaults", plan_key_params="fixed")
        return replace(info, key_schema=_FIXED_FIELDS)

    def model_new(self, spec: ModelSpec) -> model.Model:
        return super().model_new(_filled(spec))

    def plan_key(self, identity: PlanIdentity) -> int:
        return super().plan_key(replace(identity, model=_filled(identity.model)))


# --- ALLOC-19: a replacement of another shape regrows the layer, with a new id --------


class _RegrowingCache(kv_cache.KvCache):
    """Later fuel's ``set_layer``: any shape is taken, and the swap mints (ALLOC-19).

    The geometry the cache reports stays its construction geometry (what a plan keys
    on); a regrown layer's storage label records its own shape, so a plan that baked
    the old storage cannot be rebound onto it (PLAN-21 ``storage_differs``).
    """

    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        if not 0 <= index < self.geometry.n_layers:
            raise errors.LayerOutOfRange(layer_index=index, n_layers=self.geometry.n_layers)
        current = self._layers[index]
        if (
            layer.k.dtype != current.k.dtype
            or layer.v.dtype != current.v.dtype
            or layer.v.shape != layer.k.shape
        ):
            raise ValueError("replacement K and V must both have the cache's element type")
        self._layers[index] = layer
        self._alloc_id = KvAllocId.mint()

    @property  # type: ignore[override]
    def layer_storage(self) -> tuple[str, ...]:
        g = self.geometry
        native = (g.max_seq_len, g.n_kv_heads, g.head_dim)
        return tuple(
            label if layer.k.shape == native else f"{label}@{'x'.join(map(str, layer.k.shape))}"
            for label, layer in zip(self._labels, self._layers, strict=True)
        )

    @layer_storage.setter
    def layer_storage(self, labels: tuple[str, ...]) -> None:
        self._labels = labels

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        end = len(self) + k.shape[1]
        for layer in self._layers:
            if layer.k.shape[1:] != k.shape[2:] or (
                end <= self.geometry.max_seq_len and layer.k.shape[0] < end
            ):
                # One layer cannot take what the others would: refuse before writing.
                raise ValueError("the layers of this cache disagree: append refused")
        super().append(k, v)


@variant(
    "replace-regrows",
    "a replacement of another shape is taken and mints (replace_layer_shape: regrow)",
)
class ReplaceRegrows(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return _declaring(super().describe(), "replace-regrows", replace_layer_shape="regrow")

    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        labels = cache.layer_storage
        cache.__class__ = _RegrowingCache
        cache.layer_storage = labels
        return cache

    def cache_new_placed(self, geometry, residency, layer_storage):  # type: ignore[no-untyped-def]
        cache = super().cache_new_placed(geometry, residency, layer_storage)
        labels = cache.layer_storage
        cache.__class__ = _RegrowingCache
        cache.layer_storage = labels
        return cache


# --- ALLOC-20: clear releases the storage; replacing every layer gives it back ---------


class _ReleasingCache(kv_cache.KvCache):
    """Later fuel's ``clear()``: every slot emptied and the id minted at once; the
    caller allocates again by replacing each layer, and an append needs every layer."""

    def clear(self) -> None:
        self._layers = [None] * self.geometry.n_layers  # type: ignore[list-item]
        self._length = 0
        self._alloc_id = KvAllocId.mint()

    def released(self) -> list[int]:
        return [i for i, layer in enumerate(self._layers) if layer is None]

    def append(self, k: np.ndarray, v: np.ndarray) -> None:
        empty = self.released()
        if empty:
            raise RuntimeError(f"layer {empty[0]} has no storage since clear(); replace it first")
        super().append(k, v)

    def set_layer(self, index: int, layer: kv_cache.KvLayer) -> None:
        if 0 <= index < self.geometry.n_layers and self._layers[index] is None:
            # Checked against the cache's geometry, as a layer in place would be.
            self._layers[index] = kv_cache.KvLayer.allocate(self.geometry)
            try:
                super().set_layer(index, layer)
            except BaseException:
                self._layers[index] = None  # type: ignore[call-overload]
                raise
            return
        super().set_layer(index, layer)


def _released_slot(session: plan.DecodePlan, cache: _ReleasingCache) -> Fault | None:
    """PLAN-21 in its order, with a released layer as a slot the cache does not have."""
    if cache.residency is None or session._residency is None:
        return None  # the reference refuses these itself
    if cache.residency != session._residency:
        return None
    incoming = cache.layer_storage
    empty = set(cache.released())
    for layer, baked_slots in enumerate(session._slots):
        for which, baked in zip(("k", "v"), baked_slots, strict=True):
            if layer >= len(incoming) or layer in empty:
                from kvconform.adapters.reference import fault_of

                return fault_of(errors.MissingSlot(layer_index=layer, which=which))
            if incoming[layer] != baked:
                return None
    return None


@variant(
    "clear-releases",
    "clear releases the storage until each layer is replaced (clear_storage: release)",
)
class ClearReleases(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return _declaring(super().describe(), "clear-releases", clear_storage="release")

    def cache_new(self, geometry):  # type: ignore[no-untyped-def]
        cache = super().cache_new(geometry)
        cache.__class__ = _ReleasingCache
        return cache

    def cache_new_placed(self, geometry, residency, layer_storage):  # type: ignore[no-untyped-def]
        cache = super().cache_new_placed(geometry, residency, layer_storage)
        cache.__class__ = _ReleasingCache
        return cache

    def session_rebind(self, session, cache):  # type: ignore[no-untyped-def]
        refusal = _released_slot(session, cache)
        return refusal if refusal is not None else super().session_rebind(session, cache)


# --- ALLOC-21: an append of nothing is refused, and changes nothing -------------------


@variant("empty-append-refused", "an append of zero tokens is refused (append_empty: refuse)")
class EmptyAppendRefused(ReferenceAdapter):
    def describe(self) -> AdapterInfo:
        return _declaring(super().describe(), "empty-append-refused", append_empty="refuse")

    def cache_append(self, cache: kv_cache.KvCache, tokens: int):  # type: ignore[no-untyped-def]
        if tokens == 0:
            raise ValueError("an append needs at least one token")
        return super().cache_append(cache, tokens)
