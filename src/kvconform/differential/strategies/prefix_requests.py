"""The requests a program of the class ``prefix_cache`` draws, and where they are made,
as values: what :mod:`.prefix` writes into operations and :mod:`.prefix_bounded` reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Media:
    start: int
    length: int
    content: str
    width: int
    height: int
    caller_id: str | None


@dataclass(frozen=True)
class Embeds:
    start: int
    length: int
    content: str


Span = Media | Embeds


@dataclass(frozen=True)
class Load:
    handle: str
    cache: str
    name: str
    weights: str


@dataclass
class Cache:
    handle: str
    stored_blocks: int = 0


@dataclass(frozen=True)
class Request:
    handle: str
    tokens: tuple[int, ...]
    salt: str | None = None
    user_key: str | None = None
    lora: Load | None = None
    spans: tuple[Span, ...] = ()


def fits(span: Span, others: tuple[Span, ...] | list[Span], length: int) -> bool:
    """Inside the request, overlapping no other item (placements do not overlap)."""
    if span.start < 0 or span.length < 1 or span.start + span.length > length:
        return False
    end = span.start + span.length
    return all(end <= o.start or o.start + o.length <= span.start for o in others)
