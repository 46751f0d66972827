"""What an implementation may claim and answer: the conformance classes and the block
format versions, the options (decisions with more than one safe answer, CONF-6), and
the decisions of this specification that a verdict may rest on (CONF-8). Data tables."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: The conformance classes (CONF-1).
CLASSES = ("hash", "identity", "plan", "signature", "verify", "plan_validity", "prefix_cache")
#: Classes that a class depends on (CONF-1, CONF-10).
CLASS_REQUIRES: Mapping[str, tuple[str, ...]] = {
    "plan": ("identity",),
    "verify": ("signature",),
    "plan_validity": ("plan",),
}
#: The block format versions this specification defines (PROF-2, PROF-5).
FORMAT_VERSIONS = (1, 2)


@dataclass(frozen=True)
class OptionSpec:
    """A decision with more than one safe answer, which an implementation declares (CONF-6).

    ``values`` are the allowed answers, ``default`` the one assumed when an
    adapter declares nothing; ``requirement`` is the requirement that states
    the option (spec/README.md lists each with the argument why every value is safe).
    """

    name: str
    values: tuple[str, ...]
    default: str
    requirement: str


#: The order ALLOC-17 checks a replacement layer's shape in, unless declared otherwise.
SHAPE_FIELDS = ("n_kv_heads", "head_dim", "max_seq_len")


def _orders() -> tuple[str, ...]:
    from itertools import permutations

    return tuple(",".join(p) for p in permutations(SHAPE_FIELDS))


#: The values of the option ``prefix_block_size`` (PREFIX-6): any size the harness
#: creates a prefix cache with, or the one size an engine supports.
PREFIX_BLOCK_SIZES = ("any", "1", "2", "4", "8", "16", "32", "64", "128", "256")


#: Every option of this specification (CONF-6), by name.
OPTIONS: Mapping[str, OptionSpec] = {
    o.name: o
    for o in (
        OptionSpec("truncate_past_length", ("noop", "refuse"), "noop", "ALLOC-15"),
        OptionSpec("append_past_capacity", ("refuse", "grow"), "refuse", "ALLOC-16"),
        OptionSpec("replace_layer_order", _orders(), ",".join(SHAPE_FIELDS), "ALLOC-17"),
        OptionSpec("clear_mints", ("eager", "lazy"), "eager", "ALLOC-18"),
        OptionSpec(
            "hook_toggle", ("keeps_instance", "remints_instance"), "keeps_instance", "ID-10"
        ),
        OptionSpec("plan_key_cache_heads", ("keyed", "implied"), "keyed", "PLAN-15"),
        OptionSpec("plan_key_params", ("named", "fixed"), "named", "PLAN-17"),
        OptionSpec("profile_v2_revision", ("split_width", "layout_only"), "split_width", "PROF-11"),
        OptionSpec("plan_key_window", ("keyed", "structure"), "keyed", "PLAN-25"),
        OptionSpec("replace_layer_shape", ("refuse", "regrow"), "refuse", "ALLOC-19"),
        OptionSpec("clear_storage", ("reallocate", "release"), "reallocate", "ALLOC-20"),
        OptionSpec("append_empty", ("accept", "refuse"), "accept", "ALLOC-21"),
        # The class prefix_cache (CONF-16, spec/prefix.md).
        OptionSpec("prefix_partial", ("none", "tokens", "exact_tail"), "none", "PREFIX-5"),
        OptionSpec("prefix_block_size", PREFIX_BLOCK_SIZES, "any", "PREFIX-6"),
        OptionSpec("prefix_adapter_identity", ("instance", "content"), "instance", "PREFIX-8"),
        OptionSpec("prefix_media_identity", ("content", "caller"), "content", "PREFIX-11"),
        OptionSpec("prefix_salt_scope", ("root", "every_block"), "root", "PREFIX-13"),
        OptionSpec("prefix_empty_salt", ("distinct", "refuse"), "distinct", "PREFIX-14"),
        OptionSpec("prefix_key", ("digest", "verified"), "digest", "PREFIX-19"),
        OptionSpec("prefix_root", ("seeded", "per_process"), "seeded", "PREFIX-20"),
        OptionSpec("prefix_tier", ("none", "shared"), "none", "PREFIX-21"),
        OptionSpec("prefix_tier_layout", ("keyed", "converted"), "keyed", "PREFIX-25"),
    )
}

#: The decisions of this specification by name, each with the requirements that state
#: it (spec/README.md, Decisions); scenarios cite the names as their basis (CONF-8).
DECISIONS: Mapping[str, tuple[str, ...]] = {
    "truncate-past-length": ("ALLOC-15",),
    "append-past-capacity": ("ALLOC-16",),
    "append-empty": ("ALLOC-21",),
    "replace-layer-bounds": ("ALLOC-9",),
    "replace-layer-shape": ("ALLOC-17",),
    "replace-other-shape": ("ALLOC-19",),
    "replace-keeps-length": ("ALLOC-11",),
    "clear-mint-point": ("ALLOC-18",),
    "clear-storage": ("ALLOC-20",),
    "refusals-change-nothing": ("ALLOC-14",),
    "cache-error-kinds": ("ERR-8",),
    "typed-error-parts": ("ERR-3", "ERR-4", "VERIFY-3"),
    "raw-fold": ("HASH-14",),
    "u64-range": ("HASH-12",),
    "utf8-strings": ("HASH-13",),
    "id-numbering": ("ID-8",),
    "hook-toggle": ("ID-10", "PLAN-18"),
    "key-composition": ("PLAN-3",),
    "key-cache-heads": ("PLAN-15",),
    "key-params": ("PLAN-17",),
    "dtype-vocabulary": ("SIG-14",),
    "measure-under-recorded-version": ("SIG-12",),
    "width-overflow": ("SIG-15",),
    "unrepresentable-stamp": ("VERIFY-9", "ERR-9"),
    "profiles-declared": ("PROF-3",),
    "profile-v2": (
        "PROF-5",
        "PROF-6",
        "PROF-7",
        "PROF-8",
        "PROF-9",
        "PROF-10",
        "VERIFY-10",
        "VERIFY-11",
        "ERR-10",
        "ERR-12",
    ),
    "v2-revision": ("PROF-11",),
    "rolling-reader": ("PROF-12",),
    "key-window": ("PLAN-25",),
    "plan-validity-outcomes": ("PLAN-19", "PLAN-20"),
    "guarded-rebind": ("PLAN-21", "PLAN-22", "PLAN-24", "PLAN-26", "PLAN-27"),
    # The class prefix_cache rests on decisions, not on the seeds (spec/prefix.md).
    "prefix-observable-reuse": ("PREFIX-1", "PREFIX-2", "PREFIX-3", "PREFIX-4", "PREFIX-18"),
    "prefix-partial": ("PREFIX-5",),
    "prefix-block-size": ("PREFIX-6",),
    "prefix-adapter-identity": ("PREFIX-7", "PREFIX-8"),
    "prefix-media-identity": ("PREFIX-9", "PREFIX-10", "PREFIX-11"),
    "prefix-propagation": ("PREFIX-12",),
    "prefix-salt": ("PREFIX-13", "PREFIX-15"),
    "prefix-empty-salt": ("PREFIX-14",),
    "prefix-typed-extras": ("PREFIX-16", "PREFIX-17"),
    "prefix-key-strength": ("PREFIX-19",),
    "prefix-chain-root": ("PREFIX-20",),
    "prefix-shared-tier": ("PREFIX-21", "PREFIX-22"),
    "prefix-tier-layout": ("PREFIX-25",),
    "prefix-inputs": ("PREFIX-23",),
    "prefix-capacity": ("PREFIX-24",),
}

#: Requirements a generated counterexample may bear on that state an option's
#: answer; such a counterexample rests on that decision, not on the seeds (CONF-8).
OPTION_DECISIONS: Mapping[str, str] = {
    "ALLOC-15": "truncate-past-length",
    "ALLOC-16": "append-past-capacity",
    "ALLOC-17": "replace-layer-shape",
    "ALLOC-18": "clear-mint-point",
    "ID-10": "hook-toggle",
    "PLAN-18": "hook-toggle",
    "PLAN-15": "key-cache-heads",
    "PLAN-17": "key-params",
    "SIG-14": "dtype-vocabulary",
    "SIG-15": "width-overflow",
    "PROF-11": "v2-revision",
    "PLAN-25": "key-window",
    "ALLOC-19": "replace-other-shape",
    "ALLOC-20": "clear-storage",
    "ALLOC-21": "append-empty",
    "PREFIX-5": "prefix-partial",
    "PREFIX-6": "prefix-block-size",
    "PREFIX-8": "prefix-adapter-identity",
    "PREFIX-11": "prefix-media-identity",
    "PREFIX-13": "prefix-salt",
    "PREFIX-14": "prefix-empty-salt",
    "PREFIX-19": "prefix-key-strength",
    "PREFIX-20": "prefix-chain-root",
    "PREFIX-21": "prefix-shared-tier",
    "PREFIX-25": "prefix-tier-layout",
}
