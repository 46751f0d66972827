"""PREFIX mutants: prefix caches that each misread spec/prefix.md in one way.

Each mutant is :class:`PrefixAdapter` (the reference adapter making prefix caches,
requests, adapters and media of the classes it names) with one class whose one
method is overridden. One mutant at least per incident of issue 27 and per rule;
the changed line is marked ``MUTATION``.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace

from kvconform_reference import prefix
from kvconform_reference.prefix import (
    Adapter,
    EngineConfig,
    MediaItem,
    PrefixCache,
    Request,
    SharedTier,
    chain,
)

from kvconform.adapters.reference import ReferenceAdapter
from kvconform.values import AdapterInfo

from . import mutant
from ._kit import declaring


class PrefixAdapter(ReferenceAdapter):
    """The reference, with the prefix-cache classes as attributes a mutant replaces."""

    cache_cls: type[PrefixCache] = PrefixCache
    request_cls: type[Request] = Request
    adapter_cls: type[Adapter] = Adapter
    media_cls: type[MediaItem] = MediaItem
    #: Whether its caches keep a request's partial last block (``prefix_partial: exact_tail``).
    partial_tail: bool = False

    def prefix_new(
        self,
        block_size: int,
        model_name: str,
        kv_dtype: str,
        layout: str,
        shard: str,
        *,
        capacity: int | None = None,
    ) -> PrefixCache:
        config = EngineConfig(model_name, kv_dtype, layout, shard)
        return self.cache_cls(block_size, config, capacity=capacity, partial_tail=self.partial_tail)

    def lora_load(self, cache: PrefixCache, adapter_name: str, weights: str) -> Adapter:
        return self.adapter_cls(adapter_name, weights)

    def request_new(self, tokens: str, salt: str | None, user_key: str | None) -> Request:
        return self.request_cls(prefix.parse_tokens(tokens), salt, user_key)

    def request_media(
        self,
        request: Request,
        start: int,
        length: int,
        content: str,
        width: int,
        height: int,
        caller_id: str | None,
    ) -> None:
        request.media.append(self.media_cls(start, length, content, width, height, caller_id))


def _sha(*parts: bytes) -> bytes:
    return hashlib.sha256(b"".join(parts)).digest()


def _text(value: str) -> bytes:
    data = value.encode()
    return len(data).to_bytes(8, "little") + data


# --- incidents ---------------------------------------------------------------------


class _NarrowKeys(PrefixCache):
    def _local_keys(self, request: Request) -> list[bytes]:
        return [key[:2] for key in super()._local_keys(request)]  # MUTATION: 16-bit block keys


@mutant(
    "prefix-block-key-16-bit",
    breaks=("PREFIX-19",),
    half="under",
    plausible="a block table keyed by a small integer hash to keep the index compact, "
    "trusted on a hit without comparing tokens; the shape of vLLM CVE-2025-25183, where a "
    "predictable root and a weak hash let crafted prompts collide",
)
class PrefixBlockKey16Bit(PrefixAdapter):
    cache_cls = _NarrowKeys


class _ShapelessMedia(MediaItem):
    def record(self) -> bytes:
        content = _sha(_text(self.content))  # MUTATION: the pixels' digest, no width or height
        return b"M" + content + self.start.to_bytes(8, "little") + self.length.to_bytes(8, "little")


@mutant(
    "prefix-image-hash-without-shape",
    breaks=("PREFIX-9",),
    half="under",
    plausible="the image is hashed from its decoded pixel bytes, which look like its whole "
    "content; vLLM CVE-2025-46722 (30x100 and 100x30 of the same bytes collided)",
)
class PrefixImageHashWithoutShape(PrefixAdapter):
    media_cls = _ShapelessMedia


class _Narrow16Media(MediaItem):
    def record(self) -> bytes:
        full = super().record()
        return full[:3] + full[33:]  # MUTATION: the item's digest cut to its first 16 bits


@mutant(
    "prefix-media-identity-16-bit",
    breaks=("PREFIX-19", "PREFIX-9"),
    half="under",
    plausible="a media identity packed into a 16-bit field of a larger key, which looks "
    "wide enough because the key is; LMCache #4086",
)
class PrefixMediaIdentity16Bit(PrefixAdapter):
    media_cls = _Narrow16Media


class _TokensChainOnly(PrefixCache):
    def _local_keys(self, request: Request) -> list[bytes]:
        plain = Request(request.tokens)  # MUTATION: the chain carries tokens only;
        parents = chain(plain, self.block_size, b"root")
        adapter = request.adapter.local_identity() if request.adapter else None
        namespace = request.namespace(adapter)  # the namespace is keyed in every block,
        keys = []
        for index, parent in enumerate(parents):
            extras = request.block_record(index, self.block_size)  # media only where they lie
            keys.append(_sha(parent, namespace, extras))
        return keys


@mutant(
    "prefix-extras-do-not-reach-later-blocks",
    breaks=("PREFIX-12",),
    half="under",
    plausible="the chain hashes tokens, and each block's extras are added beside it for "
    "the items that overlap that block; vLLM #12603 (a multimodal change in an earlier "
    "block did not reach later blocks)",
)
class PrefixExtrasDoNotReachLaterBlocks(PrefixAdapter):
    cache_cls = _TokensChainOnly


class _NamedAdapter(Adapter):
    def local_identity(self) -> bytes:
        return b"n" + _text(self.name)  # MUTATION: the adapter by its name


@mutant(
    "prefix-adapter-by-name",
    breaks=("PREFIX-8",),
    half="under",
    plausible="the adapter's name is what requests carry and what the server shows; "
    "vLLM #42125 and #30931, llama.cpp #26207 (a reloaded adapter served stale blocks)",
)
class PrefixAdapterByName(PrefixAdapter):
    adapter_cls = _NamedAdapter


class _UntaggedRequest(Request):
    def namespace(self, adapter_identity: bytes | None) -> bytes:
        # MUTATION: the present values in one untagged sequence
        values = [v.encode() for v in (self.salt, self.user_key) if v is not None]
        if adapter_identity is not None:
            values.append(adapter_identity)
        return b"".join(len(v).to_bytes(8, "little") + v for v in values)


@mutant(
    "prefix-extras-untagged",
    breaks=("PREFIX-16",),
    half="under",
    plausible="the extras are one tuple of whatever the request has, each length-"
    "prefixed but none tagged with what it is; vLLM #44701 (a LoRA name equal to a salt "
    "collided)",
)
class PrefixExtrasUntagged(PrefixAdapter):
    request_cls = _UntaggedRequest


class _JoinedRequest(Request):
    def namespace(self, adapter_identity: bytes | None) -> bytes:
        # MUTATION: salt, user key and adapter joined without separators
        adapter = self.adapter.name if self.adapter is not None else ""
        return ((self.salt or "") + (self.user_key or "") + adapter).encode()


@mutant(
    "prefix-extra-key-joined-without-separators",
    breaks=("PREFIX-16", "PREFIX-14"),
    half="under",
    plausible="one namespace string built by concatenation, as SGLang built extra_key; "
    "SGLang #24638 (a crafted extra key aliased another adapter's namespace)",
)
class PrefixExtraKeyJoinedWithoutSeparators(PrefixAdapter):
    request_cls = _JoinedRequest


class _TierWithoutSalt(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        unsalted = Request(
            request.tokens, None, request.user_key, request.adapter, request.media, request.embeds
        )  # MUTATION: the storage key leaves the salt out
        return super()._tier_keys(unsalted)


@mutant(
    "prefix-tier-ignores-salt",
    breaks=("PREFIX-21",),
    half="under",
    plausible="the storage backend was written before cache_salt existed and hashes the "
    "pages it is handed; SGLang #26747",
)
class PrefixTierIgnoresSalt(PrefixAdapter):
    cache_cls = _TierWithoutSalt


class _TierWithoutDtype(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        saved = self.config
        self.config = EngineConfig(saved.model, "", saved.layout, saved.shard)  # MUTATION
        try:
            return super()._tier_keys(request)
        finally:
            self.config = saved


@mutant(
    "prefix-tier-ignores-kv-dtype",
    breaks=("PREFIX-21",),
    half="under",
    plausible="the model name seems to fix everything about a block; SGLang #33268, "
    "LMCache #1856 (two clusters with different KV dtypes hit each other's chunks)",
)
class PrefixTierIgnoresKvDtype(PrefixAdapter):
    cache_cls = _TierWithoutDtype


class _TierTokensOnly(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        return super()._tier_keys(Request(request.tokens))  # MUTATION: no extras offloaded


@mutant(
    "prefix-offload-key-drops-extras",
    breaks=("PREFIX-21",),
    half="under",
    plausible="the offload connector receives token blocks and rebuilds their hashes "
    "from tokens; vLLM #44250 (offload keys dropped LoRA, salt and multimodal identity)",
)
class PrefixOffloadKeyDropsExtras(PrefixAdapter):
    cache_cls = _TierTokensOnly


class _TierWithoutAdapter(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        keyed = Request(
            request.tokens, request.salt, request.user_key, None, request.media, request.embeds
        )  # MUTATION: the offload key leaves the adapter out
        return super()._tier_keys(keyed)


@mutant(
    "prefix-offload-key-drops-the-adapter",
    breaks=("PREFIX-21", "PREFIX-7"),
    half="under",
    plausible="the offload connector rebuilds keys from tokens, salt and media and never "
    "learns which adapter computed the block; vLLM #44250 (LoRA missing from offload keys)",
)
class PrefixOffloadKeyDropsTheAdapter(PrefixAdapter):
    cache_cls = _TierWithoutAdapter


class _TierWithoutMedia(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        keyed = Request(
            request.tokens, request.salt, request.user_key, request.adapter, [], request.embeds
        )  # MUTATION: the offload key leaves the media items out
        return super()._tier_keys(keyed)


@mutant(
    "prefix-offload-key-drops-media",
    breaks=("PREFIX-21", "PREFIX-9"),
    half="under",
    plausible="the offload key is the chain of token hashes, and the multimodal identity "
    "lived only in the in-memory extras; vLLM #44250 (multimodal identity missing)",
)
class PrefixOffloadKeyDropsMedia(PrefixAdapter):
    cache_cls = _TierWithoutMedia


class _TierWithoutExtraKeys(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        keyed = Request(
            request.tokens, request.salt, None, request.adapter, request.media, []
        )  # MUTATION: "extra keys ignored for now": no user key, no embeddings
        return super()._tier_keys(keyed)


@mutant(
    "prefix-tier-ignores-extra-keys",
    breaks=("PREFIX-21", "PREFIX-15", "PREFIX-17"),
    half="under",
    plausible="the chunk hashes chain like vLLM's with the extra keys ignored for now "
    "(LMCache), safe only while no request sets a user key or prompt embeddings",
)
class PrefixTierIgnoresExtraKeys(PrefixAdapter):
    cache_cls = _TierWithoutExtraKeys


class _SaltIgnored(Request):
    def namespace(self, adapter_identity: bytes | None) -> bytes:
        return Request(self.tokens, None, self.user_key).namespace(adapter_identity)  # MUTATION


@mutant(
    "prefix-salt-ignored",
    breaks=("PREFIX-13",),
    half="under",
    plausible="the salt is accepted by the API and validated, and the hashing code, "
    "written earlier, never reads it; the side channel of vLLM CVE-2025-46570 stays open",
)
class PrefixSaltIgnored(PrefixAdapter):
    request_cls = _SaltIgnored


class _UserKeyIgnored(Request):
    def namespace(self, adapter_identity: bytes | None) -> bytes:
        return Request(self.tokens, self.salt, None).namespace(adapter_identity)  # MUTATION


@mutant(
    "prefix-text-only-user-key-ignored",
    breaks=("PREFIX-15",),
    half="under",
    plausible="a text-only engine declares the inputs it has (prefix_inputs: salt, "
    "user_key), and its front end takes a user key that its block hash, written for "
    "salts, never reads; a declaration sets aside only the inputs it leaves out",
)
class PrefixTextOnlyUserKeyIgnored(PrefixAdapter):
    request_cls = _UserKeyIgnored

    def describe(self) -> AdapterInfo:
        return replace(super().describe(), prefix_inputs=frozenset({"salt", "user_key"}))


# --- rules -------------------------------------------------------------------------


class _LookupStores(PrefixCache):
    def lookup(self, request: Request) -> int:
        self.store(request)  # MUTATION: a lookup that inserts what it looked up
        return super().lookup(request)


@mutant(
    "prefix-lookup-stores",
    breaks=("PREFIX-1",),
    half="under",
    plausible="a get-or-create on the block table, so that the scheduler's allocation "
    "and the lookup are one call",
)
class PrefixLookupStores(PrefixAdapter):
    cache_cls = _LookupStores


class _WholeRequest(PrefixCache):
    def lookup(self, request: Request) -> int:
        found = super().lookup(request)
        full = request.full_blocks(self.block_size) * self.block_size
        return found if found == full else 0  # MUTATION: all or nothing, a prompt cache


@mutant(
    "prefix-whole-request-or-nothing",
    breaks=("PREFIX-2",),
    half="over",
    plausible="a prompt cache keyed by the whole request, which is all a chat replay "
    "needs; every continuation of a conversation misses",
)
class PrefixWholeRequestOrNothing(PrefixAdapter):
    cache_cls = _WholeRequest


class _FirstTokensOnly(Request):
    def block_record(self, index: int, block_size: int) -> bytes:
        # MUTATION: the first two tokens of each block stand for it
        kept = Request(tuple(t if i % block_size < 2 else 0 for i, t in enumerate(self.tokens)))
        kept.media, kept.embeds = self.media, self.embeds
        return Request.block_record(kept, index, block_size)


@mutant(
    "prefix-block-keyed-by-its-first-tokens",
    breaks=("PREFIX-3",),
    half="under",
    plausible="a cheap fingerprint of each block (its first tokens) in front of a "
    "comparison that was later removed as redundant",
)
class PrefixBlockKeyedByItsFirstTokens(PrefixAdapter):
    request_cls = _FirstTokensOnly


class _Parentless(PrefixCache):
    def _local_keys(self, request: Request) -> list[bytes]:
        adapter = request.adapter.local_identity() if request.adapter else None
        return [
            _sha(index.to_bytes(8, "little"), request.namespace(adapter),
                 request.block_record(index, self.block_size))  # MUTATION: no parent
            for index in range(request.full_blocks(self.block_size))
        ]  # fmt: skip


@mutant(
    "prefix-block-key-without-parent",
    breaks=("PREFIX-4",),
    half="under",
    plausible="each block addressed by its own content and index, so that equal blocks "
    "of different requests deduplicate",
)
class PrefixBlockKeyWithoutParent(PrefixAdapter):
    cache_cls = _Parentless


class _Positionless(PrefixCache):
    def _local_keys(self, request: Request) -> list[bytes]:
        adapter = request.adapter.local_identity() if request.adapter else None
        keys = []
        for index in range(request.full_blocks(self.block_size)):
            record = request.block_record(index, self.block_size)
            keys.append(_sha(request.namespace(adapter), record))  # MUTATION: no position
        return keys


@mutant(
    "prefix-block-key-without-position",
    breaks=("PREFIX-4",),
    half="under",
    plausible="content-addressed storage: a block is its tokens, wherever it appears",
)
class PrefixBlockKeyWithoutPosition(PrefixAdapter):
    cache_cls = _Positionless


class _PaddedTail(PrefixCache):
    def store(self, request: Request) -> None:
        size = self.block_size
        tail = -len(request.tokens) % size
        padded = Request(request.tokens + (0,) * tail, request.salt, request.user_key)
        padded.adapter, padded.media, padded.embeds = request.adapter, request.media, request.embeds
        super().store(padded)  # MUTATION: the partial block stored padded with token 0


@mutant(
    "prefix-partial-block-padded",
    breaks=("PREFIX-5",),
    half="under",
    plausible="blocks are fixed-size arrays, so the last one is padded to be stored, and "
    "the padding hashes like tokens",
)
class PrefixPartialBlockPadded(PrefixAdapter):
    cache_cls = _PaddedTail


class _FixedBlockSize(PrefixCache):
    def __post_init__(self) -> None:
        self.block_size = 4  # MUTATION: the engine's own block size, whatever it is given
        super().__post_init__()


@mutant(
    "prefix-ignores-the-block-size",
    breaks=("PREFIX-6",),
    half="contract",
    plausible="a block size fixed at build time while the configuration option is read "
    "for the memory pool only",
)
class PrefixIgnoresTheBlockSize(PrefixAdapter):
    cache_cls = _FixedBlockSize


@mutant(
    "prefix-content-adapter-identity-keyed-by-instance",
    breaks=("PREFIX-8",),
    half="over",
    plausible="an engine that declares content identity for its adapters while its "
    "cache still keys the load, so identical weights never share",
)
class PrefixContentAdapterIdentityKeyedByInstance(PrefixAdapter):
    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), prefix_adapter_identity="content")  # MUTATION


class _Placeless(MediaItem):
    def record(self) -> bytes:
        shape = self.width.to_bytes(8, "little") + self.height.to_bytes(8, "little")
        return b"M" + _sha(_text(self.content), shape)  # MUTATION: no start, no length


@mutant(
    "prefix-media-without-placement",
    breaks=("PREFIX-10",),
    half="under",
    plausible="the item's digest is added to every block it touches, which seems to say "
    "where it is",
)
class PrefixMediaWithoutPlacement(PrefixAdapter):
    media_cls = _Placeless


class _TrustedCaller(MediaItem):
    def record(self) -> bytes:
        if self.caller_id is None:
            return super().record()
        label = MediaItem(self.start, self.length, self.caller_id, self.width, self.height)
        return label.record()  # MUTATION: the caller's id taken for the content


@mutant(
    "prefix-caller-media-id-trusted-under-content",
    breaks=("PREFIX-11",),
    half="under",
    plausible="a caller-supplied uuid saves hashing every image, and the engine keeps "
    "declaring content identity",
)
class PrefixCallerMediaIdTrustedUnderContent(PrefixAdapter):
    media_cls = _TrustedCaller


class _SaltPerRequest(Request):
    def namespace(self, adapter_identity: bytes | None) -> bytes:
        nonce = os.urandom(8) if self.salt is not None else b""  # MUTATION: salt "hardened"
        return super().namespace(adapter_identity) + nonce


@mutant(
    "prefix-salt-with-a-nonce",
    breaks=("PREFIX-13",),
    half="over",
    plausible="a salt hardened with fresh randomness, which isolates tenants perfectly "
    "and leaves each of them no cache at all",
)
class PrefixSaltWithANonce(PrefixAdapter):
    request_cls = _SaltPerRequest


class _EmptySaltIsNone(Request):
    def namespace(self, adapter_identity: bytes | None) -> bytes:
        salt = self.salt or None  # MUTATION: "if salt:"
        return Request(self.tokens, salt, self.user_key).namespace(adapter_identity)


@mutant(
    "prefix-empty-salt-is-no-salt",
    breaks=("PREFIX-14",),
    half="under",
    plausible="a truthiness test (if salt:) on an optional string, which reads an empty "
    "salt as no salt",
)
class PrefixEmptySaltIsNoSalt(PrefixAdapter):
    request_cls = _EmptySaltIsNone


class _UserKeyIgnored(Request):
    def namespace(self, adapter_identity: bytes | None) -> bytes:
        return Request(self.tokens, self.salt).namespace(adapter_identity)  # MUTATION


@mutant(
    "prefix-user-key-ignored",
    breaks=("PREFIX-15",),
    half="under",
    plausible="the user key is plumbed through the request object and dropped where "
    "the block hashes are computed",
)
class PrefixUserKeyIgnored(PrefixAdapter):
    request_cls = _UserKeyIgnored


class _EmbedsIgnored(Request):
    def block_record(self, index: int, block_size: int) -> bytes:
        plain = Request(self.tokens)
        plain.media = self.media  # MUTATION: prompt embeddings left out
        return Request.block_record(plain, index, block_size)


@mutant(
    "prefix-embeddings-ignored",
    breaks=("PREFIX-17",),
    half="under",
    plausible="embeddings arrive with placeholder token ids, and the hash reads token ids",
)
class PrefixEmbeddingsIgnored(PrefixAdapter):
    request_cls = _EmbedsIgnored


class _StoreLookupDisagree(PrefixCache):
    def store(self, request: Request) -> None:
        adapter = request.adapter.portable_identity() if request.adapter else None
        # MUTATION: the store path keys the adapter by its weights, the lookup by instance
        self._hold(chain(request, self.block_size, _sha(request.namespace(adapter))))
        if self.tier is not None:
            self.tier.keys.update(self._tier_keys(request))


@mutant(
    "prefix-store-and-lookup-key-differently",
    breaks=("PREFIX-18",),
    half="over",
    plausible="the store and the lookup were written by different people, each computing "
    "the adapter's part of the key its own way",
)
class PrefixStoreAndLookupKeyDifferently(PrefixAdapter):
    cache_cls = _StoreLookupDisagree


class _PerProcessRoot(PrefixCache):
    def __post_init__(self) -> None:
        super().__post_init__()
        self.secret = os.urandom(16)

    def _tier_keys(self, request: Request) -> list[bytes]:
        return [_sha(self.secret, k) for k in super()._tier_keys(request)]  # MUTATION


@mutant(
    "prefix-tier-keys-per-process",
    breaks=("PREFIX-22", "PREFIX-20"),
    half="over",
    plausible="the chain's root is drawn at random per process (vLLM's answer to "
    "CVE-2025-25183) and the offload tier reuses the in-memory hashes",
)
class PrefixTierKeysPerProcess(PrefixAdapter):
    cache_cls = _PerProcessRoot


class _RootOfTheProcess(PrefixCache):
    #: Set by the adapter that made the cache: one value per process (per adapter object).
    process_root = b""

    def _tier_keys(self, request: Request) -> list[bytes]:
        return [_sha(self.process_root, k) for k in super()._tier_keys(request)]  # MUTATION


@mutant(
    "prefix-tier-root-drawn-per-process",
    breaks=("PREFIX-22", "PREFIX-20"),
    half="over",
    plausible="the chain's root is drawn once when the engine starts (vLLM's answer to "
    "CVE-2025-25183 without PYTHONHASHSEED) and every cache of the process shares it, so "
    "two caches of one process find each other's blocks at the tier; the offload tier "
    "reuses the chain, which a restarted process can never read again",
)
class PrefixTierRootDrawnPerProcess(PrefixAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.process_root = os.urandom(16)  # a new process, a new root

    def prefix_new(
        self,
        block_size: int,
        model_name: str,
        kv_dtype: str,
        layout: str,
        shard: str,
        *,
        capacity: int | None = None,
    ) -> PrefixCache:
        config = EngineConfig(model_name, kv_dtype, layout, shard)
        cache = _RootOfTheProcess(block_size, config, capacity=capacity)
        cache.process_root = self.process_root
        return cache


class _RegisteredAdapter(Adapter):
    #: The adapter's number in its process's registry of loaded adapters.
    registered = 0

    def portable_identity(self) -> bytes:
        return b"r" + self.registered.to_bytes(8, "little")  # MUTATION: not the weights


@mutant(
    "prefix-tier-keys-adapter-by-process-number",
    breaks=("PREFIX-22", "PREFIX-21"),
    half="over",
    plausible="the tier keys an adapter by the integer id its process's registry gave it "
    "(one per distinct name and weights, in load order, as a LoRA int id): every cache "
    "of one process agrees, and a process that loads its adapters in another order "
    "after a restart gives the same weights another number",
)
class PrefixTierKeysAdapterByProcessNumber(PrefixAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.registry: dict[tuple[str, str], int] = {}  # a new process, a new registry

    def lora_load(self, cache: PrefixCache, adapter_name: str, weights: str) -> Adapter:
        number = self.registry.setdefault((adapter_name, weights), len(self.registry) + 1)
        adapter = _RegisteredAdapter(adapter_name, weights)
        object.__setattr__(adapter, "registered", number)
        return adapter


@mutant(
    "prefix-tier-kept-in-the-process",
    breaks=("PREFIX-22", "PROTO-36"),
    half="over",
    plausible="the tier is a dictionary in the engine's memory that every cache of the "
    "process writes through (a CPU offload buffer taken for a shared store): caches of "
    "one process find each other's blocks, and a restart loses all of them",
)
class PrefixTierKeptInTheProcess(PrefixAdapter):
    def tier_new(self, *, storage: str | None = None) -> SharedTier:
        return SharedTier()  # MUTATION: the directory it was given is never used


class _TierWithoutPlacement(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        unplaced = replace(request, media=[_Placeless(**vars(m)) for m in request.media])
        return list(super()._tier_keys(unplaced))  # MUTATION: the tier keys no placement


@mutant(
    "prefix-tier-drops-media-placement",
    breaks=("PREFIX-21", "PREFIX-10"),
    half="under",
    plausible="the offload key carries each image's content hash and size, as the "
    "in-memory key does, but not where in the prompt it sits, which the in-memory key "
    "gets from the block it hashes; vLLM #44250's family of offload keys",
)
class PrefixTierDropsMediaPlacement(PrefixAdapter):
    cache_cls = _TierWithoutPlacement


class _TierWithoutModel(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        saved = self.config
        self.config = EngineConfig("", saved.kv_dtype, saved.layout, saved.shard)  # MUTATION
        try:
            return super()._tier_keys(request)
        finally:
            self.config = saved


@mutant(
    "prefix-tier-ignores-model",
    breaks=("PREFIX-21",),
    half="under",
    plausible="block hashes hold tokens and extras, and the tier is assumed to serve one "
    "model; a rolling update of the weights (vLLM PR 55776) reads the old model's blocks",
)
class PrefixTierIgnoresModel(PrefixAdapter):
    cache_cls = _TierWithoutModel


class PrefixExactTailAdapter(PrefixAdapter):
    """The reference declaring ``prefix_partial: exact_tail``, its caches keeping a
    request's partial last block whole."""

    partial_tail = True

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), prefix_partial="exact_tail")


class _TailDropped(PrefixCache):
    def __post_init__(self) -> None:
        super().__post_init__()
        self.partial_tail = False  # MUTATION: the partial last block is never kept


@mutant(
    "prefix-exact-tail-dropped",
    breaks=("PREFIX-5",),
    half="over",
    plausible="save_unfull_chunk is declared, but the engine is configured with it off: "
    "every request recomputes its partial last chunk",
)
class PrefixExactTailDropped(PrefixExactTailAdapter):
    cache_cls = _TailDropped


class _TailReusedInPart(PrefixCache):
    def lookup(self, request: Request) -> int:
        best = super().lookup(request)
        for n in range(len(request.tokens) - 1, 0, -1):
            # MUTATION: a stored partial block reused where the request's block starts with it
            best = max(best, super().lookup(replace(request, tokens=request.tokens[:n])))
        return best


@mutant(
    "prefix-exact-tail-reused-in-part",
    breaks=("PREFIX-5", "PREFIX-1"),
    half="under",
    plausible="a stored partial block is taken for a prefix of any block that starts with "
    "its tokens, as partial matching would, though the engine declares whole tails only",
)
class PrefixExactTailReusedInPart(PrefixExactTailAdapter):
    cache_cls = _TailReusedInPart


class _TailKeptOutOfTheTier(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        self.partial_tail = False  # MUTATION: the partial last block stays in memory only
        try:
            return list(super()._tier_keys(request))
        finally:
            self.partial_tail = True


@mutant(
    "prefix-exact-tail-kept-out-of-the-tier",
    breaks=("PREFIX-5", "PREFIX-22"),
    half="over",
    plausible="the offload path writes full chunks only, while the in-memory cache keeps "
    "the partial one: another process recomputes every tail",
)
class PrefixExactTailKeptOutOfTheTier(PrefixExactTailAdapter):
    cache_cls = _TailKeptOutOfTheTier


class _PaddedTailRecord(Request):
    def block_record(self, index: int, block_size: int) -> bytes:
        first = index * block_size
        missing = block_size - len(self.tokens[first : first + block_size])
        if missing <= 0:
            return super().block_record(index, block_size)
        padded = replace(self, tokens=self.tokens + (0,) * missing)
        return padded.block_record(index, block_size)  # MUTATION: the tail keyed padded


@mutant(
    "prefix-exact-tail-keyed-padded",
    breaks=("PREFIX-5", "PREFIX-1"),
    half="under",
    plausible="the partial last block is keyed as the paged block that holds it, its "
    "empty slots read as token 0: the same request, a longer or a shorter one all key "
    "it right, and a request whose tokens really are 0 there reuses positions never "
    "computed",
)
class PrefixExactTailKeyedPadded(PrefixExactTailAdapter):
    request_cls = _PaddedTailRecord


class _TailWithoutParent(PrefixCache):
    def _local_keys(self, request: Request) -> list[bytes]:
        keys = list(super()._local_keys(request))
        if len(request.tokens) % self.block_size:  # the partial last block is the last key
            adapter = request.adapter.local_identity() if request.adapter else None
            record = request.block_record(len(keys) - 1, self.block_size)
            keys[-1] = _sha(request.namespace(adapter), record)  # MUTATION: no parent
        return keys


@mutant(
    "prefix-exact-tail-without-parent",
    breaks=("PREFIX-5", "PREFIX-4"),
    half="under",
    plausible="the partial last chunk is kept in a table of its own, keyed by its tokens, "
    "their number and the request's extras, as if a tail were a prompt: the same tail "
    "after another prefix is served",
)
class PrefixExactTailWithoutParent(PrefixExactTailAdapter):
    cache_cls = _TailWithoutParent


class _TailNotPersisted(PrefixCache):
    def store(self, request: Request) -> None:
        self._hold(self._local_keys(request))
        if self.tier is not None:
            keys = list(self._tier_keys(request))
            whole = len(request.tokens) // self.block_size
            self.tier.add(keys[:whole])
            self.tier.keys.update(keys[whole:])  # MUTATION: the tail in the tier's index only


@mutant(
    "prefix-exact-tail-not-persisted",
    breaks=("PREFIX-5", "PREFIX-22"),
    half="over",
    plausible="the tier's storage takes full chunks only, and a partial last chunk is "
    "kept in the index of the process that wrote it: its other caches find the tail, a "
    "process started later recomputes it",
)
class PrefixExactTailNotPersisted(PrefixExactTailAdapter):
    cache_cls = _TailNotPersisted


class _TierWithoutLayout(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        saved = self.config
        self.config = EngineConfig(saved.model, saved.kv_dtype, "", saved.shard)  # MUTATION
        try:
            return super()._tier_keys(request)
        finally:
            self.config = saved


@mutant(
    "prefix-tier-ignores-layout",
    breaks=("PREFIX-21",),
    half="under",
    plausible="the tier is keyed as the in-memory cache is, and the layout is taken for "
    "a detail of the kernels; a process with HND caches reads NHD blocks, heads as "
    "positions",
)
class PrefixTierIgnoresLayout(PrefixAdapter):
    cache_cls = _TierWithoutLayout


@mutant(
    "prefix-converted-tier-keys-layout",
    breaks=("PREFIX-25",),
    half="over",
    plausible="the tier is declared to hold blocks in a format of its own, but the key "
    "still names the layout of the process that wrote them, so no process of another "
    "layout ever finds them",
)
class PrefixConvertedTierKeysLayout(PrefixAdapter):
    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), prefix_tier_layout="converted")  # MUTATION


class _TierWithoutLayoutOrDtype(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        saved = self.config
        self.config = EngineConfig(saved.model, "", "", saved.shard)  # MUTATION
        try:
            return super()._tier_keys(request)
        finally:
            self.config = saved


@mutant(
    "prefix-converted-tier-ignores-kv-dtype",
    breaks=("PREFIX-21", "PREFIX-25"),
    half="under",
    plausible="a tier that converts layouts is taken to convert everything, the element "
    "type too, and serves f16 blocks to a bf16 process as they are",
)
class PrefixConvertedTierIgnoresKvDtype(PrefixAdapter):
    cache_cls = _TierWithoutLayoutOrDtype

    def describe(self) -> AdapterInfo:
        return declaring(super().describe(), prefix_tier_layout="converted")  # MUTATION


class _TierWithoutShard(PrefixCache):
    def _tier_keys(self, request: Request) -> list[bytes]:
        saved = self.config
        self.config = EngineConfig(saved.model, saved.kv_dtype, saved.layout, "")  # MUTATION
        try:
            return super()._tier_keys(request)
        finally:
            self.config = saved


@mutant(
    "prefix-tier-ignores-shard",
    breaks=("PREFIX-21",),
    half="under",
    plausible="every rank hashes the same tokens, so the rank seems not to matter",
)
class PrefixTierIgnoresShard(PrefixAdapter):
    cache_cls = _TierWithoutShard


class _BaseAndAdapterShare(Request):
    def namespace(self, adapter_identity: bytes | None) -> bytes:
        return Request(self.tokens, self.salt, self.user_key).namespace(None)  # MUTATION


@mutant(
    "prefix-adapter-not-keyed",
    breaks=("PREFIX-7",),
    half="under",
    plausible="adapters were added to the engine after the prefix cache; LMCache #2961, "
    "llama.cpp #26207",
)
class PrefixAdapterNotKeyed(PrefixAdapter):
    request_cls = _BaseAndAdapterShare
