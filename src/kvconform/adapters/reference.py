"""The reference implementation behind the adapter interface."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import cast

import numpy as np
from kvconform_reference import errors, hasher, kv_cache, model, plan, prefix, signature, verify

from kvconform import __version__
from kvconform.values import (
    AdapterInfo,
    Fault,
    Geometry,
    LayerDesc,
    Layout,
    MixOp,
    ModelSpec,
    Payload,
    PlanIdentity,
    Signature,
    StepInputs,
)


def fault_of(error: errors.KvError) -> Fault:
    """The conformance form of a reference error (ERR-2)."""
    return Fault(
        kind=error.kind,
        field=error.field_name,
        layer=error.layer,
        values=error.values(),
        message=error.message(),
    )


def run_program(program: Sequence[MixOp]) -> list[int]:
    """Run a mix program on a fresh :class:`~kvconform_reference.hasher.KeyHasher`."""
    h = hasher.KeyHasher()
    finishes = []
    for op in program:
        if op.kind == "bytes":
            assert isinstance(op.value, bytes)
            h.mix_bytes(op.value * op.repeat)
        elif op.kind == "str":
            assert isinstance(op.value, str)
            h.mix_str(op.value)
        elif op.kind == "u64":
            assert isinstance(op.value, int)
            h.mix_u64(op.value)
        elif op.kind == "f64":
            assert isinstance(op.value, int)
            h.mix_f64_bits(op.value)
        elif op.kind == "present":
            h.mix_present(bool(op.value))
        elif op.kind == "instance":
            assert isinstance(op.value, int)
            h.mix_instance(op.value)
        elif op.kind == "finish":
            finishes.append(h.finish())
        else:
            raise ValueError(f"unknown mix op {op.kind!r}")
    return finishes


def model_config(spec: ModelSpec) -> model.ModelConfig:
    return model.ModelConfig(spec.family, spec.param_map(), spec.hook_map())


def cache_geometry(g: Geometry) -> kv_cache.CacheGeometry:
    return kv_cache.CacheGeometry(g.n_layers, g.n_kv_heads, g.head_dim, g.max_seq_len, g.dtype)


def plan_identity(identity: PlanIdentity) -> plan.PlanIdentity:
    """The reference's form of a ``plan_key`` probe's components."""
    return plan.PlanIdentity(
        family=identity.model.family,
        params=identity.model.param_map(),
        hooks=identity.model.hook_map(),
        instance=identity.instance,
        alloc=identity.alloc,
        geometry=cache_geometry(identity.geometry),
        step_tokens=identity.step_tokens,
    )


def stored_layers(payload: Payload) -> list[signature.StoredLayer]:
    """Real f32 buffers of the described lengths (the payload's evidence)."""
    return [_stored_layer(index, layer) for index, layer in enumerate(payload)]


def _stored_layer(index: int, layer: LayerDesc) -> signature.StoredLayer:
    k = np.arange(layer.k_len, dtype=np.float32) + index
    v = np.arange(layer.v_len, dtype=np.float32) - index
    return signature.StoredLayer(
        layer.n_kv_heads, layer.head_dim, layer.seq_len, k, v, v_head_dim=layer.v_head_dim
    )


def block_layout(layout: Layout | None) -> signature.BlockLayout | None:
    return (
        None if layout is None else signature.BlockLayout(layout.block_size, layout.sliding_window)
    )


def to_signature(sig: signature.CacheSignature) -> Signature:
    layout = sig.layout
    return Signature(
        sig.format_version,
        sig.model,
        sig.n_layers,
        sig.n_kv_heads,
        sig.head_dim,
        sig.dtype,
        sig.tokens,
        None if layout is None else Layout(layout.block_size, layout.sliding_window),
    )


def from_signature(sig: Signature) -> signature.CacheSignature:
    return signature.CacheSignature(
        sig.format_version,
        sig.model,
        sig.n_layers,
        sig.n_kv_heads,
        sig.head_dim,
        sig.dtype,
        sig.tokens,
        block_layout(sig.layout),
    )


class _Unbuildable:
    """Append data of more elements than any array can have: the shape the cache's checks
    read (ALLOC-16 refuses it), and no element to write."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape

    def __getitem__(self, index: object) -> np.ndarray:
        raise MemoryError(f"no array holds append data of shape {self.shape}")


class ReferenceAdapter:
    """Every class; profile v1 unless told otherwise.

    ``writes`` and ``reads`` choose the profile (PROF-2, PROF-5) or a rolling
    upgrade (PROF-12); ``revision`` the reading of profile v2 (PROF-11).
    """

    #: The rules this implementation writes under (class defaults: profile v1), kept as
    #: class attributes so that a subclass need not call ``__init__``.
    profile: signature.FormatProfile = signature.V1
    reads: tuple[int, ...] = signature.V1.readable
    #: The classes claimed; a subclass whose plans lack the three-valued validity
    #: and the rebind leaves ``plan_validity`` out (CONF-10).
    classes: frozenset[str] = frozenset(
        {"hash", "identity", "plan", "signature", "verify", "plan_validity", "prefix_cache"}
    )

    def __init__(
        self,
        writes: int = 1,
        reads: tuple[int, ...] | None = None,
        revision: str = "split_width",
    ) -> None:
        self.profile = signature.profile_for(writes, revision)
        self.reads = self.profile.readable if reads is None else tuple(sorted(reads))

    def describe(self) -> AdapterInfo:
        options = {}
        if self.profile.revision != "split_width":
            options["profile_v2_revision"] = self.profile.revision
        if "prefix_cache" in self.classes:
            # A chain with a seeded root can address a tier every process reads (PREFIX-20).
            options["prefix_tier"] = "shared"
        return AdapterInfo(
            name="kvconform-reference",
            version=__version__,
            language="python",
            classes=self.classes,
            format_writes=self.profile.version,
            format_reads=frozenset(self.reads),
            options=options,
            # its prefix cache holds at most the blocks prefix_new's capacity gives (PREFIX-24)
            prefix_capacity="prefix_cache" in self.classes,
        )

    # hash
    def hash(self, program: Sequence[MixOp]) -> list[int]:
        return run_program(program)

    # identity
    def model_new(self, spec: ModelSpec) -> model.Model:
        return model.Model(model_config(spec))

    def model_reload(self, m: model.Model) -> model.Model:
        return m.reload()

    def model_set_hook(self, m: model.Model, hook: str, present: bool) -> None:
        m.set_hook(hook, present)

    def model_instance_id(self, m: model.Model) -> int:
        return m.instance_id.value

    def cache_new(self, geometry: Geometry) -> kv_cache.KvCache:
        return kv_cache.KvCache(cache_geometry(geometry))

    def cache_new_placed(
        self, geometry: Geometry, residency: str | None, layer_storage: Sequence[str]
    ) -> kv_cache.KvCache:
        return kv_cache.KvCache(
            cache_geometry(geometry), residency=residency, layer_storage=tuple(layer_storage)
        )

    def cache_append(self, cache: kv_cache.KvCache, tokens: int) -> Fault | None:
        """``tokens`` positions of one value, as a view that takes no memory: the count
        is untrusted, and the cache refuses one past its capacity before it reads any."""
        g = cache.geometry
        shape = (g.n_layers, tokens, g.n_kv_heads, g.head_dim)
        fill = np.asarray(len(cache) + 1, dtype=kv_cache.STORAGE_DTYPES[g.dtype])
        data: np.ndarray
        try:
            data = np.broadcast_to(fill, shape)
        except ValueError:  # more elements than any array has
            data = cast(np.ndarray, _Unbuildable(shape))
        try:
            cache.append(data, data)
        except errors.CacheError as exc:
            return fault_of(exc)
        return None

    def cache_truncate(self, cache: kv_cache.KvCache, length: int) -> None:
        cache.truncate_to(length)

    def cache_clear(self, cache: kv_cache.KvCache) -> None:
        cache.clear()

    def cache_replace_layer(
        self,
        cache: kv_cache.KvCache,
        layer: int,
        n_kv_heads: int | None,
        head_dim: int | None,
        max_seq_len: int | None,
    ) -> Fault | None:
        g = cache.geometry
        shape = kv_cache.CacheGeometry(
            n_layers=1,
            n_kv_heads=g.n_kv_heads if n_kv_heads is None else n_kv_heads,
            head_dim=g.head_dim if head_dim is None else head_dim,
            max_seq_len=g.max_seq_len if max_seq_len is None else max_seq_len,
            dtype=g.dtype,
        )
        try:
            cache.set_layer(layer, kv_cache.KvLayer.allocate(shape))
        except errors.CacheError as exc:
            return fault_of(exc)
        return None

    def cache_alloc_id(self, cache: kv_cache.KvCache) -> int:
        return cache.alloc_id.value

    def cache_len(self, cache: kv_cache.KvCache) -> int:
        return len(cache)

    # plan
    def plan_key(self, identity: PlanIdentity) -> int:
        return plan_identity(identity).key()

    def session_new(
        self, m: model.Model, cache: kv_cache.KvCache, step_tokens: int
    ) -> plan.DecodePlan:
        return plan.DecodePlan(m, cache, step_tokens)

    def session_valid(
        self,
        session: plan.DecodePlan,
        m: model.Model,
        cache: kv_cache.KvCache,
        step: StepInputs,
    ) -> bool:
        return session.is_valid_for(m, cache, _step(step))

    # plan_validity
    def session_validity(
        self,
        session: plan.DecodePlan,
        m: model.Model,
        cache: kv_cache.KvCache,
        step: StepInputs,
    ) -> str:
        return session.validity_for(m, cache, _step(step))

    def session_rebind(self, session: plan.DecodePlan, cache: kv_cache.KvCache) -> Fault | None:
        try:
            session.rebind(cache)
        except errors.RebindRefusal as exc:
            return fault_of(exc)
        return None

    def drop(self, handle: object) -> None:
        """The reference keeps no reference to any handle; nothing to release."""

    # signature and verify
    def measure(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        try:
            measured = signature.measure(
                model_name, stored_layers(payload), self.profile, block_layout(layout)
            )
        except errors.SignatureError as exc:
            return fault_of(exc)
        return to_signature(measured)

    def stamp(
        self, model_name: str, payload: Payload, *, layout: Layout | None = None
    ) -> Signature | Fault:
        try:
            block = verify.stamp(
                model_name, stored_layers(payload), self.profile, block_layout(layout)
            )
        except errors.SignatureError as exc:
            return fault_of(exc)
        return to_signature(block.signature)

    def verify(
        self, recorded: Signature | None, payload: Payload, expected: Signature
    ) -> Signature | Fault:
        block = verify.UnverifiedBlock(
            None if recorded is None else from_signature(recorded),
            tuple(stored_layers(payload)),
        )
        try:
            verified = verify.verify(
                block, from_signature(expected), self.profile, readable=self.reads
            )
        except errors.SignatureError as exc:
            return fault_of(exc)
        return to_signature(verified.signature)

    # prefix_cache
    def prefix_new(
        self,
        block_size: int,
        model_name: str,
        kv_dtype: str,
        layout: str,
        shard: str,
        *,
        capacity: int | None = None,
    ) -> prefix.PrefixCache:
        config = prefix.EngineConfig(model_name, kv_dtype, layout, shard)
        return prefix.PrefixCache(block_size, config, capacity=capacity)

    def tier_new(self, *, storage: str | None = None) -> prefix.SharedTier:
        return prefix.SharedTier(directory=None if storage is None else Path(storage))

    def prefix_attach(self, cache: prefix.PrefixCache, tier: prefix.SharedTier) -> None:
        cache.tier = tier

    def lora_load(
        self, cache: prefix.PrefixCache, adapter_name: str, weights: str
    ) -> prefix.Adapter:
        return prefix.Adapter(adapter_name, weights)

    def request_new(self, tokens: str, salt: str | None, user_key: str | None) -> prefix.Request:
        return prefix.Request(prefix.parse_tokens(tokens), salt, user_key)

    def request_lora(self, request: prefix.Request, lora: prefix.Adapter) -> None:
        request.adapter = lora

    def request_media(
        self,
        request: prefix.Request,
        start: int,
        length: int,
        content: str,
        width: int,
        height: int,
        caller_id: str | None,
    ) -> None:
        request.media.append(prefix.MediaItem(start, length, content, width, height, caller_id))

    def request_embeds(
        self, request: prefix.Request, start: int, length: int, content: str
    ) -> None:
        request.embeds.append(prefix.Embeds(start, length, content))

    def prefix_store(self, cache: prefix.PrefixCache, request: prefix.Request) -> None:
        cache.store(request)

    def prefix_lookup(self, cache: prefix.PrefixCache, request: prefix.Request) -> int:
        return cache.lookup(request)


def _step(step: StepInputs) -> plan.StepInputs:
    return plan.StepInputs(
        token_ids=step.token_ids,
        write_offset=step.write_offset,
        rope=plan.RopeSpec(step.rope_theta, step.rope_scaling),
        mask=step.mask,
    )


def v2() -> ReferenceAdapter:
    """The reference as a profile-v2 implementation (ferrox upstream: writes 2, reads {2})."""
    return ReferenceAdapter(writes=2)


def v2_layout_only() -> ReferenceAdapter:
    """Profile v2 under the revision ``layout_only`` (PROF-11)."""
    return ReferenceAdapter(writes=2, revision="layout_only")


def rolling_v1() -> ReferenceAdapter:
    """An upgrade's first step: writes 1, reads {1, 2} (PROF-12)."""
    return ReferenceAdapter(writes=1, reads=(1, 2))


def rolling_v2() -> ReferenceAdapter:
    """An upgrade's second step: writes 2, reads {1, 2} (PROF-12)."""
    return ReferenceAdapter(writes=2, reads=(1, 2))
