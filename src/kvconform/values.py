"""Values exchanged between the harness and an implementation (spec/conformance.md).

They are language-neutral on purpose: each has a JSON form on the wire
(:mod:`.ops`), and nothing here refers to the reference implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from kvconform import limits

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

#: A structural parameter value: u64, binary64 float or string.
Param: TypeAlias = int | float | str
#: A value carried by an error (ERR-4).
ErrorValue: TypeAlias = int | str | tuple[int, ...] | None

MixKind = Literal["bytes", "str", "u64", "f64", "present", "instance", "finish"]


@dataclass(frozen=True)
class MixOp:
    """One step of a hash program (HASH group).

    ``value`` is ``bytes`` for ``bytes`` (with ``repeat``), ``str`` for ``str``,
    an ``int`` for ``u64``/``instance`` and for ``f64`` (its bit pattern),
    a ``bool`` for ``present`` and ``None`` for ``finish``.
    """

    kind: MixKind
    value: bytes | str | int | bool | None = None
    repeat: int = 1


@dataclass(frozen=True)
class ModelSpec:
    """A model's family, structural parameters and hook settings."""

    family: str
    params: tuple[tuple[str, Param], ...] = ()
    hooks: tuple[tuple[str, bool], ...] = ()

    def param_map(self) -> dict[str, Param]:
        return dict(self.params)

    def hook_map(self) -> dict[str, bool]:
        return dict(self.hooks)


@dataclass(frozen=True)
class Geometry:
    """A KV cache's shape (ALLOC, PLAN-15)."""

    n_layers: int
    n_kv_heads: int
    head_dim: int
    max_seq_len: int
    dtype: str = "f32"


@dataclass(frozen=True)
class StepInputs:
    """Per-step inputs a held plan rebinds every call (PLAN-6)."""

    token_ids: tuple[int, ...] = (1,)
    write_offset: int = 0
    rope_theta: float = 10000.0
    rope_scaling: float | None = None
    mask: tuple[int, ...] = ()


@dataclass(frozen=True)
class PlanIdentity:
    """The components of a plan key with explicit ids: the ``plan_key`` probe."""

    model: ModelSpec
    instance: int
    alloc: int
    geometry: Geometry
    step_tokens: int


@dataclass(frozen=True)
class LayerDesc:
    """One stored layer described by its shape, its claim and its buffer lengths.

    ``k_len``/``v_len`` count elements. The implementation builds real buffers of
    these lengths; a payload never travels as its floats.
    """

    n_kv_heads: int
    head_dim: int
    seq_len: int
    k_len: int
    v_len: int
    #: The width of the layer's V heads; ``None`` when it equals ``head_dim`` (PROF-11).
    v_head_dim: int | None = None


Payload: TypeAlias = tuple[LayerDesc, ...]


@dataclass(frozen=True)
class Layout:
    """The layout a profile-v2 block was cut under (PROF-5): ``None`` window = full causal."""

    block_size: int
    sliding_window: int | None = None


@dataclass(frozen=True)
class Signature:
    """A block signature (SIG-1)."""

    format_version: int
    model: str
    n_layers: int
    n_kv_heads: int
    head_dim: int
    dtype: str
    tokens: int
    #: The block's layout (PROF-5): a version-2 stamp has one; a v1 scenario may still
    #: give a version-2 signature without one to a v1 reader, which refuses it by version.
    layout: Layout | None = None


#: A plan's validity under the class ``plan_validity`` (PLAN-19).
VALIDITY_OUTCOMES = ("valid", "allocation_changed", "stale")


@dataclass(frozen=True)
class Fault:
    """A semantic refusal, as an implementation reports it (ERR-8 .. ERR-13).

    ``kind``, ``field``, ``layer`` and ``values`` are normative; ``message`` is
    free wording that must still name the field and the values (ERR-13).
    """

    kind: str
    field: str | None = None
    layer: int | None = None
    values: Mapping[str, ErrorValue] = _field(default_factory=dict)
    message: str = ""


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
        OptionSpec("prefix_partial", ("none", "tokens"), "none", "PREFIX-5"),
        OptionSpec("prefix_block_size", PREFIX_BLOCK_SIZES, "any", "PREFIX-6"),
        OptionSpec("prefix_adapter_identity", ("instance", "content"), "instance", "PREFIX-8"),
        OptionSpec("prefix_media_identity", ("content", "caller"), "content", "PREFIX-11"),
        OptionSpec("prefix_salt_scope", ("root", "every_block"), "root", "PREFIX-13"),
        OptionSpec("prefix_empty_salt", ("distinct", "refuse"), "distinct", "PREFIX-14"),
        OptionSpec("prefix_key", ("digest", "verified"), "digest", "PREFIX-19"),
        OptionSpec("prefix_root", ("seeded", "per_process"), "seeded", "PREFIX-20"),
        OptionSpec("prefix_tier", ("none", "shared"), "none", "PREFIX-21"),
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
}


def _shown(text: str, limit: int = 60) -> str:
    """An implementation's own word, inert and short enough for one line of an error."""
    shown = ascii(text)
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(text)} characters)"


def _clipped(shown: str, limit: int = 60) -> str:
    return shown if len(shown) <= limit else f"{shown[:limit]}... ({len(shown)} characters)"


def _safe_ascii(value: object) -> str:
    """``ascii(value)``, clipped, with its type's name where it is not a built-in one; the
    type's name alone if its own ``repr`` fails (or it has more digits than ``str`` shows)."""
    kind = type(value).__name__
    try:
        shown = _clipped(ascii(value))
    except Exception:  # a hostile __repr__, or an int of more digits than str() allows
        return f"a value of type {kind} that cannot be shown"
    return shown if type(value).__module__ == "builtins" else f"{shown} (of type {kind})"


#: A field type in a fixed per-family key schema (PLAN-17): a typed parameter, or a hook.
PARAM_TYPES = ("u64", "f64", "str", "hook")


@dataclass(frozen=True)
class AdapterInfo:
    """What an implementation says about itself (CONF-2, CONF-6, CONF-7)."""

    name: str
    version: str
    language: str
    classes: frozenset[str]
    format_writes: int | None = 1
    format_reads: frozenset[int] = frozenset({1})
    #: Declared option values (CONF-6); an option not listed takes its default.
    options: Mapping[str, str] = _field(default_factory=dict)
    #: Capability: the raw byte fold is reachable (HASH-14).
    raw_fold: bool = True
    #: Capability: the dtype names the implementation's types can hold (SIG-14);
    #: ``None`` when any name is held as a string.
    dtypes: frozenset[str] | None = None
    #: Capability, with ``plan_key_params: fixed``: per family, the parameters
    #: the key holds and their types (PLAN-17).
    key_schema: Mapping[str, Mapping[str, str]] | None = None
    #: Capability: the width of the unsigned integers a block's counts are held in
    #: (SIG-14): 64, or 32 for a reader whose counts are ``u32``.
    uint_bits: int = 64

    def _type_problems(self) -> list[str]:
        """Each field whose value is not of its type, named as a hello answer names it
        (the wire codec checks the same of a stdio adapter's answer)."""

        # exact types, as a hello answer carries them: a subclass's own hashing,
        # comparison or printing never runs in the harness
        def text(value: object) -> bool:
            return type(value) is str and bool(value)

        def strings(value: object) -> bool:
            return type(value) in (set, frozenset, list, tuple) and all(
                type(v) is str
                for v in value  # type: ignore[attr-defined]
            )

        def integer(value: object) -> bool:
            return type(value) is int and value.bit_length() <= 64

        def text_map(value: object) -> bool:
            return type(value) in (dict, MappingProxyType) and all(
                type(k) is str and type(v) is str
                for k, v in value.items()  # type: ignore[attr-defined]
            )

        fields: list[tuple[str, object, bool, str]] = [
            ("name", self.name, text(self.name), "a string"),
            ("version", self.version, text(self.version), "a string"),
            ("language", self.language, text(self.language), "a string"),
            ("classes", self.classes, strings(self.classes), "a set of class names"),
            ("format.writes", self.format_writes,
             self.format_writes is None or integer(self.format_writes), "an integer or None"),
            ("format.reads", self.format_reads,
             type(self.format_reads) in (set, frozenset, list, tuple)
             and all(integer(v) for v in self.format_reads), "a set of integers"),
            ("options", self.options, text_map(self.options), "a mapping of names to values"),
            ("capabilities.raw_fold", self.raw_fold, type(self.raw_fold) is bool, "a bool"),
            ("capabilities.dtypes", self.dtypes, self.dtypes is None or strings(self.dtypes),
             "None or a set of dtype names"),
            ("capabilities.key_schema", self.key_schema,
             self.key_schema is None or (type(self.key_schema) in (dict, MappingProxyType) and all(
                 type(f) is str and text_map(p) for f, p in self.key_schema.items())),
             "None or a mapping of families to parameter types"),
            ("capabilities.uint_bits", self.uint_bits, integer(self.uint_bits), "an integer"),
        ]  # fmt: skip
        return [
            f"{where}: expected {what}, got {_safe_ascii(value)}"
            for where, value, ok, what in fields
            if not ok
        ]

    def _size_problems(self) -> list[str]:
        """Each declared list or mapping longer than the harness accepts, and each
        declared name longer than it shows (:mod:`kvconform.limits`): what an adapter
        says of itself is carried into every report."""
        most, longest = limits.MAX_DECLARED_ENTRIES, limits.DECLARED_NAME_CHARS
        schema = self.key_schema or {}
        listed: list[tuple[str, Any]] = [
            ("classes", self.classes),
            ("format.reads", self.format_reads),
            ("options", self.options),
            ("capabilities.dtypes", self.dtypes or ()),
            ("capabilities.key_schema", schema),
        ]
        if len(schema) <= most:
            listed += [
                (f"capabilities.key_schema.{_shown(family)}", params)
                for family, params in schema.items()
            ]
        found = [
            f"{where}: {len(value)} entries, more than the {most} the harness accepts"
            for where, value in listed
            if len(value) > most
        ]
        if found:
            return found
        # (an option's name and value are checked against the known ones, and clipped)
        names: list[tuple[str, str]] = [
            *(("capabilities.dtypes", name) for name in self.dtypes or ()),
            *(("capabilities.key_schema", family) for family in schema),
        ]
        for params in schema.values():
            names += [("capabilities.key_schema", text) for p in params.items() for text in p]
        return [
            f"{where}: a name of {len(name)} characters, more than the {longest} the harness "
            f"accepts: {_shown(name)}"
            for where, name in names
            if len(name) > longest
        ][:1]

    def declared_capabilities(self) -> dict[str, object]:
        """The capabilities that differ from their defaults, in their wire form (CONF-7)."""
        caps: dict[str, object] = {} if self.raw_fold else {"raw_fold": False}
        if self.dtypes is not None:
            caps["dtypes"] = sorted(self.dtypes)
        if self.key_schema is not None:
            caps["key_schema"] = {f: dict(p) for f, p in self.key_schema.items()}
        if self.uint_bits != 64:
            caps["uint_bits"] = self.uint_bits
        return caps

    def option(self, name: str) -> str:
        """The value the implementation answers the option with (CONF-6)."""
        return self.options.get(name, OPTIONS[name].default)

    def problems(self) -> list[str]:
        """What is wrong with this self-description (an adapter-start error if any)."""
        typed = self._type_problems()
        if typed:  # an in-process describe() is Python: its types are not yet checked
            return typed
        oversized = self._size_problems()
        if oversized:  # before anything goes through the entries
            return oversized
        found = []
        for where, listed in (("classes", self.classes), ("format.reads", self.format_reads)):
            if len(set(listed)) != len(listed):  # a list, as a hello answer's would be refused
                found.append(f"{where}: a value is listed more than once in {_safe_ascii(listed)}")
        unknown = sorted(set(self.classes) - set(CLASSES))
        if unknown:
            found.append(
                f"classes: unknown class {_shown(', '.join(unknown))} "
                f"(the classes are {', '.join(CLASSES)})"
            )
        if not self.classes:
            found.append("classes: none declared; claim at least one class (CONF-1)")
        for cls in sorted(self.classes):
            missing = [need for need in CLASS_REQUIRES.get(cls, ()) if need not in self.classes]
            if missing:
                found.append(
                    f"classes: {cls} requires {', '.join(missing)}, which is not declared (CONF-1)"
                )
        for name, value in self.options.items():
            spec = OPTIONS.get(name)
            if spec is None:
                found.append(
                    f"options.{_shown(name)}: no such option (spec/README.md, Decisions, "
                    f"lists the {len(OPTIONS)} options)"
                )
            elif value not in spec.values:
                found.append(
                    f"options.{name}: {_shown(value)} is not one of {', '.join(spec.values)}"
                )
        if self.format_writes is not None and self.format_writes not in FORMAT_VERSIONS:
            found.append(
                f"format.writes: {self.format_writes!r} is not a defined version (1 or 2, PROF-1)"
            )
        if "signature" in self.classes and self.format_writes is None:
            found.append(
                "format.writes: null, but the class signature is claimed; declare the "
                "block format version written (PROF-3, CONF-2)"
            )
        undefined = sorted(v for v in self.format_reads if v not in FORMAT_VERSIONS)
        if undefined:
            found.append(f"format.reads: {undefined[0]!r} is not a defined version (1 or 2)")
        if self.format_writes is not None and self.format_writes not in self.format_reads:
            found.append(
                f"format.reads: must contain the version written, {self.format_writes} (PROF-12)"
            )
        if self.uint_bits not in (32, 53, 64):
            found.append(f"capabilities.uint_bits: {self.uint_bits!r} is not 32, 53 or 64")
        if self.dtypes is not None and "f32" not in self.dtypes:
            found.append("capabilities.dtypes: must hold f32, the element type of profile v1")
        fixed = self.option("plan_key_params") == "fixed"
        if fixed and not self.key_schema:
            found.append("options.plan_key_params is fixed but capabilities.key_schema is empty")
        if not fixed and self.key_schema is not None:
            found.append(
                "capabilities.key_schema is given but options.plan_key_params is not fixed"
            )
        if self.option("prefix_root") == "per_process" and self.option("prefix_tier") == "shared":
            found.append(
                "options.prefix_root is per_process but options.prefix_tier is shared: a "
                "shared tier needs keys equal in every process (PREFIX-20)"
            )
        for family, params in (self.key_schema or {}).items():
            for pname, ptype in params.items():
                if ptype not in PARAM_TYPES:
                    found.append(
                        f"capabilities.key_schema.{_shown(family)}.{_shown(pname)}: "
                        f"{_shown(ptype)} is not one of "
                        f"{', '.join(PARAM_TYPES)}"
                    )
        return found


# Outcomes of one operation -------------------------------------------------


@dataclass(frozen=True)
class Ok:
    """The operation succeeded, with its value (``None`` for operations without one)."""

    value: object = None


@dataclass(frozen=True)
class Refused:
    """The operation was refused with a semantic error."""

    fault: Fault


@dataclass(frozen=True)
class Broken:
    """The adapter failed: an exception, a crash, a timeout, a malformed reply.

    Never a conformance answer: a step that gets one fails, whatever it expected.
    """

    reason: str
    detail: str = ""


Outcome: TypeAlias = Ok | Refused | Broken
