"""The programs of the class ``prefix_cache``: stores and lookups of related requests.

Random independent requests would almost never share a prefix, so they would judge
misses only. The requests here are drawn *from one another*: most are an earlier
request copied, cut, extended, cut and extended, or changed in one token, with its
media and embeddings kept where they still fit (or one of them added, dropped or
changed in one attribute) and its salt, user key or adapter kept or changed. Token ids
come from a vocabulary of four, salts, user keys and adapter names from one small
shared vocabulary (so that a salt ``ab`` meets a salt ``a`` with the user key ``b``,
and an adapter named like a salt, PREFIX-16), and the block size is drawn too, so
prefixes collide often and at every boundary. Each lookup is then judged both ways by
the reference's answer: fewer positions than the reference is under-reuse (PREFIX-2's
miss), more is over-reuse.

The expected answers are the reference's (:mod:`kvconform.differential.prefix`), run
under the implementation's declaration where a declared option changes the answer;
the programs stay where every other declared option does not:

- ``prefix_block_size``: the one size declared, else 4, 2, 1 or 8 (PREFIX-6);
- ``prefix_partial: tokens``: no shared tier is drawn (whether a tier must give back
  part of a block another process stored is not settled by PREFIX-22);
- ``prefix_adapter_identity: instance``: two loads in one prefix cache never have equal
  weights (sharing between them is allowed, not required, PREFIX-8); under ``content``
  they often do, and must then share;
- ``prefix_media_identity: caller``: a media item's caller id names its content (the
  condition under which PREFIX-11 calls it as safe as a digest); under ``content`` the
  caller id is drawn freely, equal for different images as often as not;
- ``prefix_empty_salt: refuse``: no empty salt (its refusal is a probe, CONF-9, which
  the scenarios make);
- ``prefix_tier: none``: no tier; under ``shared``, prefix caches of the same or of
  another model, KV element type, layout or shard read and write one tier
  (PREFIX-21, PREFIX-22);
- at most 64 blocks stored per prefix cache (PREFIX-6's minimum without eviction),
  except in a *strength* program: up to 512 distinct one-block requests, each looked
  up before it is stored, then the last one looked up again, as in the scenarios of
  ``prefix/strength.yaml`` (PREFIX-19: a narrow identity collides among them; every
  answer but the last is 0, which no eviction changes);
- ``prefix_capacity`` (a capability, PREFIX-24): three programs in twelve are *bounded*
  programs (:func:`.prefix_bounded.bounded`), a prefix cache made with a capacity at which
  what it must hold is whole stores, or, where its stores share no block, a capacity that
  cuts a store, whose counts are judged against every order within that store the rule
  leaves to the engine; a shortened counterexample stays such a program
  (:func:`.prefix_bounded.within_promises`). Not under
  ``prefix_partial: tokens``, whose reference holds blocks of one position, so a bound
  in positions, and whose engines hold blocks: no engine or variant declares both;
- ``prefix_inputs`` (a capability, PREFIX-23): no adapter, media item, embeddings, salt
  or user key the implementation's requests cannot carry (:func:`within_inputs`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from hypothesis import strategies as st

import kvconform.differential.strategies.prefix_scope as v
from kvconform.differential.compare import Program
from kvconform.differential.strategies.prefix_bounded import bounded
from kvconform.differential.strategies.prefix_requests import (
    Cache,
    Embeds,
    Load,
    Media,
    Request,
    Span,
    fits,
)
from kvconform.differential.strategies.prefix_scope import PrefixScope, within_inputs
from kvconform.differential.strategies.source import Source, Writer, flag, items, pick, strategy
from kvconform.protocol import operations as ops
from kvconform.values import AdapterInfo


@dataclass
class PrefixBuilder:
    """Writes one program of the class from a source of choices."""

    src: Source
    scope: PrefixScope = field(default_factory=PrefixScope)
    ops: list[ops.Op] = field(default_factory=list)
    caches: list[Cache] = field(default_factory=list)
    loads: list[Load] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    stored: list[Request] = field(default_factory=list)
    last_store: Cache | None = None
    tier: str | None = None
    block: int = 4
    counts: dict[str, int] = field(default_factory=dict)

    def fresh(self, letter: str) -> str:
        self.counts[letter] = self.counts.get(letter, 0) + 1
        return f"{letter}{self.counts[letter]}"

    # the program ------------------------------------------------------------------

    def program(self) -> Program:
        src = self.src
        self.block = pick(src, self.scope.block_sizes)
        roll = src.integer(0, 11)
        if self.scope.capacity and not self.scope.partial and roll >= 9:
            bounded(self, cut=roll == 9)  # two in twelve, and one more that cuts a store
            return within_inputs(tuple(self.ops), self.scope.inputs)
        if self.scope.tier and src.integer(0, 3) != 0:
            self.tier = self.fresh("t")
            self.ops.append(ops.TierNew(self.tier))
        self.new_cache(first=True)
        if self.tier is not None:  # a second process over the tier
            self.new_cache(first=False)
        if src.integer(0, 11) == 11 and self.scope.strength:
            self.strength()
        else:
            items(src, self.step, max_size=32, mean_extra=16)
        return within_inputs(tuple(self.ops), self.scope.inputs)

    def step(self) -> None:
        """One step: a request computed (looked up, then stored), stored, or only looked
        up; an earlier request looked up again, in any process; an adapter loaded;
        another process."""
        kind = self.src.integer(0, 8)
        if kind <= 4:
            cache = self.where()
            request = self.request(cache)
            if kind != 3:
                self.lookup(request, cache)
            if kind != 4:
                self.store(request, self.cache_for(request))
            if len(self.caches) > 1 and flag(self.src):  # and in another process
                self.lookup(request, self.cache_for(request))
        elif kind == 8:
            self.turns(self.where())
        elif kind == 5 and self.requests:
            request = pick(self.src, self.requests)
            self.lookup(request, self.cache_for(request))
        elif kind == 6:
            self.load(pick(self.src, self.caches))
        elif kind == 7 and len(self.caches) < v.MAX_CACHES:
            self.new_cache(first=False)

    def where(self) -> Cache:
        """The prefix cache of the next request: most often the last one a request was
        stored in (where what it is drawn from is found), else any."""
        if self.last_store is not None and self.src.integer(0, 3) != 0:
            return self.last_store
        return pick(self.src, self.caches)

    def cache_for(self, request: Request) -> Cache:
        """A prefix cache the request may go to: its adapter's, or any."""
        if request.lora is not None:
            return next(c for c in self.caches if c.handle == request.lora.cache)
        return pick(self.src, self.caches)

    def new_cache(self, first: bool) -> Cache:
        """A prefix cache (another engine process): the first one's configuration, or one
        field of it changed (PREFIX-21), attached to the tier if there is one."""
        config = list(v.BASE_CONFIG)
        if not first:
            which = self.src.integer(0, 4)
            if which:
                config[which - 1] = v.OTHER_CONFIG[which - 1]
        handle = self.fresh("p")
        model, dtype, layout, shard = config
        self.ops.append(ops.PrefixNew(handle, self.block, model, dtype, layout, shard))
        cache = Cache(handle)
        self.caches.append(cache)
        if self.tier is not None and not flag(self.src):
            self.ops.append(ops.PrefixAttach(handle, self.tier))
        return cache

    def load(self, cache: Cache, like: Load | None = None) -> Load:
        """An adapter loaded into a process, under a name of the shared vocabulary, or
        ``like``'s name again (a reload: vLLM #42125).

        Under ``instance`` its weights are new to that process, or those of a load in
        another process (which must then share through a tier, PREFIX-22); under
        ``content`` ``like``'s as often as not, else one of three."""
        name = like.name if like is not None else pick(self.src, v.WORDS)
        if self.scope.adapter_content:
            same = like is not None and flag(self.src)
            weights = like.weights if same and like else pick(self.src, v.SHARED_WEIGHTS)
        else:
            here = {load.weights for load in self.loads if load.cache == cache.handle}
            elsewhere = sorted({load.weights for load in self.loads} - here)
            new = f"{name}-v{len(self.loads) + 1}"
            weights = pick(self.src, [new, *elsewhere])
        load = Load(self.fresh("l"), cache.handle, name, weights)
        self.loads.append(load)
        self.ops.append(ops.LoraLoad(load.handle, cache.handle, name, weights))
        return load

    # requests ------------------------------------------------------------------------

    def request(self, cache: Cache) -> Request:
        """A new request for ``cache``: drawn from an earlier one (three times in four),
        or fresh."""
        src = self.src
        if self.requests and src.integer(0, 3) != 0:
            # from a stored request, most often: what a lookup can meet
            pool = self.stored if self.stored and src.integer(0, 3) != 0 else self.requests
            made = self.derive(pick(src, pool[::-1]), cache)  # the newest first
        else:
            made = self.fresh_request(cache)
        self.emit(made)
        return made

    def turns(self, cache: Cache) -> None:
        """A conversation in two turns: the first blocks of a new request stored, then the
        whole request looked up (and stored): it reuses those blocks and, whatever it
        shares with other stored requests further on, nothing after them that followed
        another first turn (PREFIX-3, PREFIX-12)."""
        if self.stored and flag(self.src):  # the newest stored request, another item in it
            whole = self.derive(self.stored[-1], cache, focus=1)
            self.emit(whole)
        else:
            whole = self.request(cache)
        full = len(whole.tokens) // self.block
        if full >= 2:
            cut = self.block * self.src.integer(1, full - 1)
            first = replace(
                whole,
                handle=self.fresh("r"),
                tokens=whole.tokens[:cut],
                spans=tuple(s for s in whole.spans if s.start + s.length <= cut),
            )
            self.emit(first)
            self.store(first, cache)
        self.lookup(whole, cache)
        self.store(whole, cache)

    def fresh_request(self, cache: Cache) -> Request:
        src = self.src
        tokens = tuple(
            items(src, lambda: src.integer(0, v.TOKEN_MAX), v.MAX_TOKENS, min_size=1, mean_extra=8)
        )
        salts = v.SALTS + (("",) if self.scope.empty_salt else ())
        salt = pick(src, salts) if src.integer(0, 2) == 2 else None
        user_key = pick(src, v.USER_KEYS) if src.integer(0, 2) == 2 else None
        lora = self.lora_in(cache) if src.integer(0, 2) == 2 else None
        spans: list[Span] = []
        for _ in range(src.integer(0, 3)):
            span = self.span(len(tokens))
            if fits(span, spans, len(tokens)):
                spans.append(span)
        return Request(self.fresh("r"), tokens, salt, user_key, lora, tuple(spans))

    def lora_in(self, cache: Cache) -> Load:
        """One of the process's adapters, or one loaded now (the first choice when none is)."""
        mine = [load for load in self.loads if load.cache == cache.handle]
        choice = self.src.integer(0, len(mine))
        return mine[choice - 1] if choice else self.load(cache)

    def derive(self, base: Request, cache: Cache, focus: int | None = None) -> Request:
        """``base`` with its tokens copied, cut, extended, cut and extended, changed in one
        token or continued as another request continues; its items kept where they fit,
        or one added, dropped or changed in one attribute; one of its salt, user key and
        adapter kept or changed. Most often only one of the three changes (so that a
        single difference is what the lookup meets), else any of them."""
        src = self.src
        tokens = list(base.tokens)
        spans = list(base.spans)
        if focus is None:  # 0: tokens only, 1: items only, 2: discriminants only, 3: any
            focus = src.integer(0, 3)
        edit = src.integer(0, 5) if focus in (0, 3) else 0
        if edit == 5:  # continued as another request continues, from a block boundary
            other = pick(src, self.requests)
            cut = self.block * src.integer(0, len(tokens) // self.block)
            tokens = tokens[:cut] + list(other.tokens[cut:])
            spans = [s for s in spans if s.start + s.length <= cut]
            spans += [s for s in other.spans if s.start >= cut]
            if not tokens:
                tokens = [src.integer(0, v.TOKEN_MAX)]
        if edit in (1, 3):
            tokens = tokens[: src.integer(0 if edit == 3 else 1, len(tokens))]
        if edit in (2, 3):  # random tokens, or a run of the token 0 (the usual padding)
            zeros = flag(src)
            count = src.integer(1, 8)
            tokens += [0 if zeros else src.integer(0, v.TOKEN_MAX) for _ in range(count)]
        if edit == 4:
            at = src.integer(0, len(tokens) - 1)
            tokens[at] = (tokens[at] + src.integer(1, v.TOKEN_MAX)) % (v.TOKEN_MAX + 1)
        tokens = tokens[: v.MAX_TOKENS]
        length = len(tokens)
        spans = [s for s in spans if s.start + s.length <= length]
        change = pick(src, (0, 3, 3, 1, 2)) if focus in (1, 3) else 0
        if change == 1:
            span = self.span(length)
            if fits(span, spans, length):
                spans.append(span)
        elif change == 2 and spans:
            spans.pop(src.integer(0, len(spans) - 1))
        elif change == 3 and spans:
            at = src.integer(0, len(spans) - 1)
            changed = self.vary_span(spans[at], length)
            if fits(changed, spans[:at] + spans[at + 1 :], length):
                spans[at] = changed
        salt, user_key = base.salt, base.user_key
        lora = base.lora
        if lora is not None and lora.cache != cache.handle:  # the same weights here, if loaded
            lora = next(
                (x for x in self.loads if x.cache == cache.handle and x.weights == lora.weights),
                None,
            )
        which = src.integer(0, 5) if focus in (2, 3) else 0
        if which == 1:
            salt = pick(src, v.SALTS + (("",) if self.scope.empty_salt else ()))
        elif which == 2:
            user_key = pick(src, v.USER_KEYS)
        elif which == 3:
            lora = self.lora_in(cache) if flag(src) else None
        elif which == 4:  # the adapter reloaded under its name, or one loaded
            lora = self.load(cache, like=lora)
        elif which == 5:  # the same text in other discriminants (PREFIX-16)
            salt, user_key, lora = self.respell(salt, user_key, lora)
        return Request(self.fresh("r"), tuple(tokens), salt, user_key, lora, tuple(spans))

    def respell(
        self, salt: str | None, user_key: str | None, lora: Load | None
    ) -> tuple[str | None, str | None, Load | None]:
        """The salt and user key swapped, their joined text split elsewhere, or the
        adapter's name moved into the salt or the user key (and the adapter dropped):
        what an engine joining or untagging its extras takes for the same namespace
        (SGLang #24638, vLLM #44701)."""
        src = self.src
        how = src.integer(0, 3)
        if how == 0:  # (an empty salt is no user key: an empty user key is not drawn)
            return user_key, (salt or None), lora
        if how == 1:
            text = (salt or "") + (user_key or "")
            at = src.integer(0, len(text))
            return (text[:at] or None), (text[at:] or None), lora
        if lora is None:
            return salt, user_key, lora
        if how == 2:
            return lora.name, user_key, None
        return salt, lora.name, None

    def span(self, length: int) -> Span:
        """A media item (with its shape and caller id) or embeddings, over one to four
        positions inside the request."""
        src = self.src
        start = src.integer(0, length - 1)
        size = src.integer(1, min(4, length - start))
        if src.integer(0, 2) == 2:
            return Embeds(start, size, pick(src, v.EMBEDDINGS))
        content = pick(src, v.CONTENTS)
        width, height = pick(src, v.SHAPES)
        return Media(start, size, content, width, height, self.caller_id(content))

    def caller_id(self, content: str) -> str | None:
        if self.scope.media_caller:
            return f"id-{content}"  # the caller names the content (PREFIX-11)
        return pick(self.src, v.CALLER_IDS)

    def vary_span(self, span: Span, length: int) -> Span:
        """``span`` with one attribute changed: content, shape, start, length or caller id."""
        src = self.src
        what = src.integer(0, 4)
        if what == 2:
            return replace(span, start=span.start + pick(src, (1, -1)))
        if what == 3:
            return replace(span, length=span.length + pick(src, (1, -1)))
        if isinstance(span, Embeds):
            return replace(span, content=pick(src, v.EMBEDDINGS))
        if what == 0:
            content = pick(src, v.CONTENTS)
            caller = f"id-{content}" if self.scope.media_caller else span.caller_id
            return replace(span, content=content, caller_id=caller)
        if what == 1 or self.scope.media_caller:
            width, height = pick(src, v.SHAPES)
            return replace(span, width=width, height=height)
        return replace(span, caller_id=pick(src, v.CALLER_IDS))

    def emit(self, request: Request) -> None:
        handle = request.handle
        text = " ".join(str(t) for t in request.tokens)
        self.ops.append(ops.RequestNew(handle, text, request.salt, request.user_key))
        if request.lora is not None:
            self.ops.append(ops.RequestLora(handle, request.lora.handle))
        for span in request.spans:
            if isinstance(span, Media):
                self.ops.append(
                    ops.RequestMedia(
                        handle,
                        span.start,
                        span.length,
                        span.content,
                        span.width,
                        span.height,
                        span.caller_id,
                    )
                )
            else:
                self.ops.append(ops.RequestEmbeds(handle, span.start, span.length, span.content))
        self.requests.append(request)

    # stores and lookups ---------------------------------------------------------------

    def lookup(self, request: Request, cache: Cache) -> None:
        self.ops.append(ops.PrefixLookup(cache.handle, request.handle))

    def store(self, request: Request, cache: Cache) -> None:
        """Store, unless the prefix cache would then hold more blocks than PREFIX-6 keeps."""
        blocks = -(-len(request.tokens) // self.block)
        if cache.stored_blocks + blocks > v.HELD_BLOCKS:
            return
        cache.stored_blocks += blocks
        self.ops.append(ops.PrefixStore(cache.handle, request.handle))
        if request not in self.stored:
            self.stored.append(request)
        self.last_store = cache

    def strength(self) -> None:
        """Distinct one-block requests (by their tokens, or by an image behind the same
        placeholder tokens), each looked up before it is stored, then the last one looked
        up again: every answer is 0 but the last (PREFIX-19; prefix/strength.yaml)."""
        src = self.src
        cache = self.caches[0]
        images = flag(src)
        seen: set[int] = set()
        last: list[Request] = []

        def item() -> bool:
            """One item, its choices (whether there is one, its label) in one group, so
            that the shrinker deletes items whole and the others keep their labels."""
            if src.integer(0, 1 << 20) == 0:
                return False
            label = src.integer(0, (1 << 24) - 1)
            if label in seen:  # distinct items only: a repeat would be a true hit
                return True
            seen.add(label)
            if images:
                content = f"img-{label}"
                caller = f"id-{content}" if self.scope.media_caller else None
                request = Request(
                    self.fresh("r"),
                    (7,) * self.block,
                    spans=(Media(0, self.block, content, 336, 336, caller),),
                )
            else:
                first = 100 + label * self.block
                request = Request(self.fresh("r"), tuple(range(first, first + self.block)))
            self.emit(request)
            self.ops.append(ops.PrefixLookup(cache.handle, request.handle))
            self.ops.append(ops.PrefixStore(cache.handle, request.handle))
            last[:] = [request]
            return True

        count = 0
        while count < v.STRENGTH_ITEMS and src.group(item):
            count += 1
        if last:
            self.ops.append(ops.PrefixLookup(cache.handle, last[0].handle))


def prefix_program(src: Source, scope: PrefixScope | None = None) -> Program:
    """One program of the class ``prefix_cache`` (see the module's description)."""
    return PrefixBuilder(src, scope or PrefixScope()).program()


def prefix_programs(scope: PrefixScope | None = None) -> st.SearchStrategy[Program]:
    """:func:`prefix_program` as a Hypothesis strategy."""
    return strategy(functools.partial(prefix_program, scope=scope))


def prefix_writer(info: AdapterInfo) -> Writer[Program]:
    """The writer for an implementation: its declared prefix options as the scope."""
    write: Callable[[Source], Program] = functools.partial(
        prefix_program, scope=PrefixScope.of(info)
    )
    return write
