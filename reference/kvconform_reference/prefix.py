"""Prefix-cache reuse (spec/prefix.md): a chain of SHA-256 digests over full blocks.

A block's identity is the SHA-256 digest (256 bits, PREFIX-19) of a record holding
its parent's identity, its token ids and every discriminant that covers it, each
field typed and length-delimited (PREFIX-16). The first block's parent is a root
derived from the request's namespace: its salt, its user key and its adapter
(PREFIX-7, PREFIX-13, PREFIX-15), so the chain carries them to every later block
(PREFIX-12). Only full blocks are stored and reused (PREFIX-5, option
``prefix_partial: none``); a cache made with ``partial_tail`` also keeps a request's
partial last block, whole, its record holding its own count of tokens (the option's
value ``exact_tail``).

A shared tier is a set of keys that outlives any one prefix cache. A tier key is
the same chain computed with portable identities only (the adapter's weights, not
its instance number), under a root that also holds the model, the KV element type,
the layout, the shard and the block size (PREFIX-21), and no per-process secret, so
another process computes the same key (PREFIX-22).

Nothing here is tuned for speed: it is the rule, written out.
"""

from __future__ import annotations

import hashlib
import itertools
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: Field tags: one byte in front of every field, so that no value of one field can be
#: read as another's (PREFIX-16).
_TAG_PARENT = b"P"
_TAG_TOKENS = b"T"
_TAG_SALT = b"S"
_TAG_USER_KEY = b"U"
_TAG_ADAPTER = b"A"
_TAG_MEDIA = b"M"
_TAG_EMBEDS = b"E"
_TAG_ENGINE = b"G"

#: Adapter instance numbers: never recycled within a process (PREFIX-8, as ID-3 for models).
_adapter_numbers = itertools.count(1)


def _u64(value: int) -> bytes:
    return value.to_bytes(8, "little")


def _text(value: str) -> bytes:
    """A string as its UTF-8 byte count and bytes: length-delimited (PREFIX-16)."""
    data = value.encode("utf-8")
    return _u64(len(data)) + data


def _optional_text(value: str | None) -> bytes:
    """Absent and empty differ: a presence byte first (PREFIX-14)."""
    return b"\x00" if value is None else b"\x01" + _text(value)


def _digest(*parts: bytes) -> bytes:
    return hashlib.sha256(b"".join(parts)).digest()


def parse_tokens(text: str) -> tuple[int, ...]:
    """Token ids written as decimal numbers separated by single spaces (spec/protocol.md)."""
    words = text.split(" ")
    if not text or any(not w.isascii() or not w.isdigit() for w in words):
        raise ValueError(f"tokens: expected decimal ids separated by single spaces, got {text!r}")
    return tuple(int(w) for w in words)


@dataclass(frozen=True)
class Adapter:
    """A loaded LoRA adapter: a never-recycled instance (PREFIX-8).

    ``weights`` stands for the adapter's weights; its digest is the identity every
    process agrees on, used at a shared tier (PREFIX-21).
    """

    name: str
    weights: str
    number: int = field(default_factory=lambda: next(_adapter_numbers))

    def local_identity(self) -> bytes:
        """In memory: the instance, never the name alone (PREFIX-8)."""
        return b"i" + _u64(self.number)

    def portable_identity(self) -> bytes:
        """At a shared tier: the weights' digest, equal in every process (PREFIX-22)."""
        return b"w" + _digest(_text(self.weights))


@dataclass(frozen=True)
class MediaItem:
    """An item over ``length`` positions from ``start``, identified by its content and
    its shape (PREFIX-9), placed by its start and length (PREFIX-10)."""

    start: int
    length: int
    content: str
    width: int
    height: int
    caller_id: str | None = None

    def record(self) -> bytes:
        # Option prefix_media_identity: content (PREFIX-11): the caller's id is not used.
        content = _digest(_text(self.content), _u64(self.width), _u64(self.height))
        return _TAG_MEDIA + content + _u64(self.start) + _u64(self.length)


@dataclass(frozen=True)
class Embeds:
    """Embeddings fed over ``length`` positions from ``start`` (PREFIX-17)."""

    start: int
    length: int
    content: str

    def record(self) -> bytes:
        return _TAG_EMBEDS + _digest(_text(self.content)) + _u64(self.start) + _u64(self.length)


@dataclass
class Request:
    """Token ids and their discriminants (spec/prefix.md, the table of discriminants)."""

    tokens: tuple[int, ...]
    salt: str | None = None
    user_key: str | None = None
    adapter: Adapter | None = None
    media: list[MediaItem] = field(default_factory=list)
    embeds: list[Embeds] = field(default_factory=list)

    def full_blocks(self, block_size: int) -> int:
        return len(self.tokens) // block_size

    def block_lengths(self, block_size: int, partial_tail: bool) -> list[int]:
        """The number of positions of each block a chain covers: the full blocks, and
        under ``partial_tail`` the partial last one too (PREFIX-5, ``exact_tail``)."""
        lengths = [block_size] * self.full_blocks(block_size)
        rest = len(self.tokens) % block_size
        return [*lengths, rest] if partial_tail and rest else lengths

    def namespace(self, adapter_identity: bytes | None) -> bytes:
        """The record the chain's root holds: salt, user key, adapter (PREFIX-13, -15, -7)."""
        adapter = b"\x00" if adapter_identity is None else b"\x01" + adapter_identity
        return (
            _TAG_SALT
            + _optional_text(self.salt)
            + _TAG_USER_KEY
            + _optional_text(self.user_key)
            + _TAG_ADAPTER
            + adapter
        )

    def block_record(self, index: int, block_size: int) -> bytes:
        """Block ``index``'s tokens and every item or span that covers one of its
        positions (PREFIX-3, PREFIX-10, PREFIX-17)."""
        first, end = index * block_size, (index + 1) * block_size
        tokens = self.tokens[first:end]
        out = [_TAG_TOKENS, _u64(len(tokens)), struct.pack(f"<{len(tokens)}Q", *tokens)]
        spans: list[MediaItem | Embeds] = [*self.media, *self.embeds]
        covering = [s.record() for s in spans if s.start < end and first < s.start + s.length]
        out.append(_u64(len(covering)))
        out.extend(sorted(covering))
        return b"".join(out)


def chain(
    request: Request, block_size: int, root: bytes, partial_tail: bool = False
) -> Iterator[bytes]:
    """The identity of each full block (and under ``partial_tail`` of the partial last
    one), first to last: each digest holds its parent's (PREFIX-4, PREFIX-12). Computed
    as it is read, so a reader that stops at a block computes nothing after it."""
    parent = root
    for index in range(len(request.block_lengths(block_size, partial_tail))):
        parent = _digest(_TAG_PARENT, parent, request.block_record(index, block_size))
        yield parent


@dataclass(frozen=True)
class EngineConfig:
    """What a process computes: the model, the KV element type, layout and shard (PREFIX-21)."""

    model: str
    kv_dtype: str
    layout: str
    shard: str


@dataclass
class SharedTier:
    """Storage outside any process: the keys of the blocks written to it.

    With a ``directory``, each key is also an empty file named by its hexadecimal
    digits there, and a key is held when its file is, so a tier opened on the same
    directory by a later process finds every block written before (PREFIX-22).
    """

    keys: set[bytes] = field(default_factory=set)
    directory: Path | None = None

    def add(self, keys: Iterable[bytes]) -> None:
        for key in keys:
            self.keys.add(key)
            if self.directory is not None:
                (self.directory / key.hex()).touch()

    def holds(self, key: bytes) -> bool:
        if key in self.keys:
            return True
        return self.directory is not None and (self.directory / key.hex()).is_file()


@dataclass
class PrefixCache:
    """One engine process's store of computed blocks, optionally over a shared tier.

    In memory the root is seeded (option ``prefix_root: seeded``, PREFIX-20): it is
    derived from the namespace alone, so a per-process secret never enters a key.

    With a ``capacity`` it holds at most that many blocks, the ones stored most recently
    (PREFIX-24): ``blocks`` keeps its keys in the order they were last stored, a key
    stored again moves to the end, and the first is dropped while there are too many.
    A dropped key is gone from the one table a lookup reads, so no entry outlives it.

    With ``partial_tail`` a request's partial last block is a block too, kept and
    reused whole (option ``prefix_partial: exact_tail``, PREFIX-5).
    """

    block_size: int
    config: EngineConfig
    tier: SharedTier | None = None
    capacity: int | None = None
    partial_tail: bool = False
    #: The keys held, least recently stored first (a dict used as an ordered set).
    blocks: dict[bytes, None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError("a block holds at least one position (PREFIX-6)")
        if self.capacity is not None and self.capacity < 1:
            raise ValueError("a prefix cache holds at least one block (PREFIX-24)")

    def _local_keys(self, request: Request) -> Iterable[bytes]:
        adapter = request.adapter.local_identity() if request.adapter else None
        root = _digest(request.namespace(adapter))
        return chain(request, self.block_size, root, self.partial_tail)

    def _tier_keys(self, request: Request) -> Iterable[bytes]:
        """The tier's keys: the in-memory record with portable identities, under a root
        that adds what the process computes (PREFIX-21)."""
        adapter = request.adapter.portable_identity() if request.adapter else None
        engine = (
            _TAG_ENGINE
            + _text(self.config.model)
            + _text(self.config.kv_dtype)
            + _text(self.config.layout)
            + _text(self.config.shard)
            + _u64(self.block_size)
        )
        root = _digest(engine, request.namespace(adapter))
        return chain(request, self.block_size, root, self.partial_tail)

    def store(self, request: Request) -> None:
        """Hold every full block of a computed request (and under ``partial_tail`` its
        partial last block); write them to the tier too.

        Store and lookup compute keys with the same functions (PREFIX-18).
        """
        self._hold(self._local_keys(request))
        if self.tier is not None:
            self.tier.add(self._tier_keys(request))

    def _hold(self, keys: Iterable[bytes]) -> None:
        """Hold a store's blocks in memory, within the capacity (PREFIX-24)."""
        for key in keys:
            self.blocks.pop(key, None)  # stored again: now the most recent
            self.blocks[key] = None
            if self.capacity is not None and len(self.blocks) > self.capacity:
                del self.blocks[next(iter(self.blocks))]  # the least recently stored

    def lookup(self, request: Request) -> int:
        """The leading positions of ``request`` this cache would reuse (PREFIX-1, PREFIX-2):
        whole blocks (a partial last one too, whole, under ``partial_tail``), found in memory
        or at the tier, up to the first miss. Stores nothing."""
        local = self._local_keys(request)
        shared = self._tier_keys(request) if self.tier is not None else itertools.repeat(b"")
        lengths = request.block_lengths(self.block_size, self.partial_tail)
        reused = 0
        # one key of each at a time, to a miss
        for mine, theirs, length in zip(local, shared, lengths, strict=False):
            if mine in self.blocks or (self.tier is not None and self.tier.holds(theirs)):
                reused += length
            else:
                break
        return reused
