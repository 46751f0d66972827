"""What an implementation says about itself (:class:`AdapterInfo`), and what is wrong
with it, worded so that an implementation's own words stay inert."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as _field
from types import MappingProxyType
from typing import Any

from kvconform import limits
from kvconform.values.options import CLASS_REQUIRES, CLASSES, FORMAT_VERSIONS, OPTIONS


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

#: The discriminants a prefix cache's request can carry besides its token ids, in the
#: order of spec/prefix.md's table (capability ``prefix_inputs``, PREFIX-23);
#: ``prompt_embeds``: embeddings that can only replace a whole prompt (``embeds`` implies it).
PREFIX_INPUTS = ("adapter", "media", "embeds", "prompt_embeds", "salt", "user_key")

#: The capabilities a ``hello`` answer may carry (CONF-7, PROTO-35), as protocol.md lists them.
CAPABILITIES = ("raw_fold", "dtypes", "key_schema", "uint_bits", "prefix_inputs", "prefix_capacity")


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
    #: Capability: the discriminants a prefix cache's requests can carry (PREFIX-23);
    #: ``None`` when all of :data:`PREFIX_INPUTS`.
    prefix_inputs: frozenset[str] | None = None
    #: Capability: a prefix cache can be made to hold at most a given number of blocks
    #: (PREFIX-24); ``False`` when the implementation cannot bound it exactly.
    prefix_capacity: bool = False

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
            ("capabilities.prefix_inputs", self.prefix_inputs,
             self.prefix_inputs is None or strings(self.prefix_inputs),
             "None or a set of input names"),
            ("capabilities.prefix_capacity", self.prefix_capacity,
             type(self.prefix_capacity) is bool, "a bool"),
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
            ("capabilities.prefix_inputs", self.prefix_inputs or ()),
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
        if self.prefix_inputs is not None:
            caps["prefix_inputs"] = [n for n in PREFIX_INPUTS if n in self.prefix_inputs]
        if self.prefix_capacity:
            caps["prefix_capacity"] = True
        return caps

    def takes(self, prefix_input: str) -> bool:
        """Whether a request can carry ``prefix_input`` (PREFIX-23); embeddings anywhere
        (``embeds``) include embeddings as a whole prompt (``prompt_embeds``)."""
        if self.prefix_inputs is None or prefix_input in self.prefix_inputs:
            return True
        return prefix_input == "prompt_embeds" and "embeds" in self.prefix_inputs

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
        for where, listed in (
            ("classes", self.classes),
            ("format.reads", self.format_reads),
            ("capabilities.prefix_inputs", self.prefix_inputs or ()),
        ):
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
        for name in sorted(set(self.prefix_inputs or ()) - set(PREFIX_INPUTS)):
            found.append(
                f"capabilities.prefix_inputs: {_shown(name)} is not one of "
                f"{', '.join(PREFIX_INPUTS)} (PREFIX-23)"
            )
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
