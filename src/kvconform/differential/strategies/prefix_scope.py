"""What an implementation's declared prefix options let a program of the class
``prefix_cache`` hold (:class:`PrefixScope`), and the vocabularies the programs draw from.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvconform.harness.declarations import prefix_inputs_given
from kvconform.protocol import operations as ops
from kvconform.values import PREFIX_INPUTS, AdapterInfo

#: Token ids are drawn from 0 to this (0 first: the padding token of a careless store).
TOKEN_MAX = 3
#: The longest request drawn (outside strength programs).
MAX_TOKENS = 16
#: Block sizes drawn when the implementation takes any (PREFIX-6), simplest first.
BLOCK_SIZES = (4, 2, 1, 8)
#: Salts, user keys and adapter names share one vocabulary (PREFIX-16's aliases).
WORDS = ("a", "b", "ab")
SALTS: tuple[str | None, ...] = (None, *WORDS)
USER_KEYS: tuple[str | None, ...] = (None, *WORDS)
#: Weights of adapters under ``prefix_adapter_identity: content`` (equal labels, equal weights).
SHARED_WEIGHTS = ("w1", "w2", "w3")
CONTENTS = ("cat", "dog")
SHAPES = ((64, 64), (30, 100), (100, 30))
CALLER_IDS: tuple[str | None, ...] = (None, "img-1", "img-2")
EMBEDDINGS = ("e1", "e2")
#: The configuration of the first prefix cache, and one other value of each field.
BASE_CONFIG = ("llama-3-8b", "bf16", "nhd", "tp0-of-2")
OTHER_CONFIG = ("llama-3-8b-v2", "fp8", "hnd", "tp1-of-2")
#: PREFIX-6: the blocks a prefix cache must hold without evicting.
HELD_BLOCKS = 64
#: Distinct one-block requests in a strength program (prefix/strength.yaml's 512).
STRENGTH_ITEMS = 512
#: The most requests a bounded program stores.
BOUNDED_STORES = 8
MAX_CACHES = 4


@dataclass(frozen=True)
class PrefixScope:
    """What an implementation's declared prefix options let a program hold (CONF-6,
    CONF-16). The default is the reference's declaration."""

    block_sizes: tuple[int, ...] = BLOCK_SIZES
    #: ``prefix_partial: tokens`` (the reference answers with blocks of one position).
    partial: bool = False
    #: ``prefix_partial: exact_tail``: a partial last block is a block (of a bound too).
    tail: bool = False
    #: Whether tiers are drawn: ``prefix_tier: shared`` and whole blocks only.
    tier: bool = True
    #: Whether the empty salt is drawn: ``prefix_empty_salt: distinct``.
    empty_salt: bool = True
    #: ``prefix_adapter_identity: content``: loads of equal weights in one prefix cache.
    adapter_content: bool = False
    #: ``prefix_media_identity: caller``: caller ids that name the content.
    media_caller: bool = False
    #: Whether a program may be a strength program (512 one-block requests).
    strength: bool = True
    #: Whether a program may bound its prefix cache (capability ``prefix_capacity``,
    #: PREFIX-24): a *bounded* program.
    capacity: bool = True
    #: The discriminants a request may carry (capability ``prefix_inputs``, PREFIX-23).
    inputs: frozenset[str] = frozenset(PREFIX_INPUTS)

    @classmethod
    def of(cls, info: AdapterInfo) -> PrefixScope:
        fixed = info.option("prefix_block_size")
        partial = info.option("prefix_partial") == "tokens"
        return cls(
            block_sizes=BLOCK_SIZES if fixed == "any" else (int(fixed),),
            partial=partial,
            tail=info.option("prefix_partial") == "exact_tail",
            tier=info.option("prefix_tier") == "shared" and not partial,
            empty_salt=info.option("prefix_empty_salt") == "distinct",
            adapter_content=info.option("prefix_adapter_identity") == "content",
            media_caller=info.option("prefix_media_identity") == "caller",
            capacity=info.prefix_capacity,
            inputs=frozenset(PREFIX_INPUTS if info.prefix_inputs is None else info.prefix_inputs),
        )


def within_inputs(program: tuple[ops.Op, ...], inputs: frozenset[str]) -> tuple[ops.Op, ...]:
    """``program`` without the discriminants an implementation's requests cannot carry
    (PREFIX-23): its adapter loads and uses, media items or embeddings left out, a salt
    or a user key made absent. The reference and the implementation run the same
    program, so what the requests lose changes no comparison."""
    if inputs >= set(PREFIX_INPUTS):
        return program
    kept: list[ops.Op] = []
    for op in program:
        if isinstance(op, ops.RequestNew):
            op = replace(
                op,
                salt=op.salt if "salt" in inputs else None,
                user_key=op.user_key if "user_key" in inputs else None,
            )
        elif any(name not in inputs for name in prefix_inputs_given(op)):
            continue
        kept.append(op)
    return tuple(kept)
