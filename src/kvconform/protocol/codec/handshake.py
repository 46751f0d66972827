"""The wire form of the handshake: the ``hello`` request and the adapter's
self-description that answers it (PROTO-10, PROTO-32, PROTO-35)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import kvconform
from kvconform import limits
from kvconform.protocol.codec.scalars import WireError
from kvconform.rendering import clip, one_line
from kvconform.values import CAPABILITIES, CLASSES, AdapterInfo

#: Protocol 1, whose wire form this codec reads and writes; protocol 2 is this form
#: with every count as a decimal string (:mod:`kvconform.protocol.v2`, which lists the
#: versions spoken).
PROTOCOL_VERSION = 1


def hello_request(
    suite: str = kvconform.SUITE_VERSION, protocol: int = PROTOCOL_VERSION
) -> dict[str, Any]:
    return {"op": "hello", "protocol": protocol, "suite": suite}


def info_to_wire(info: AdapterInfo, protocol: int = PROTOCOL_VERSION) -> dict[str, Any]:
    """The ``ok`` value of a ``hello`` response, speaking ``protocol``."""
    return {
        "name": info.name,
        "version": info.version,
        "language": info.language,
        "protocol": protocol,
        "classes": sorted(info.classes),
        "format": {"writes": info.format_writes, "reads": sorted(info.format_reads)},
        # Declarations are optional on the wire (PROTO-35): what is left out is the default.
        **({"options": dict(info.options)} if info.options else {}),
        **({"capabilities": caps} if (caps := info.declared_capabilities()) else {}),
    }


#: The members of a ``hello`` answer (spec/protocol.md, PROTO-10, PROTO-35).
_INFO_MEMBERS = frozenset(
    ("name", "version", "language", "protocol", "classes", "format", "options", "capabilities")
)


#: The most characters of an adapter's name, version or language kept for reports.
INFO_TEXT_LIMIT = limits.INFO_TEXT_CHARS


def info_text(text: str) -> str:
    """An adapter's name, version or language as the harness keeps it: clipped to
    :data:`INFO_TEXT_LIMIT` characters, on one line, control characters escaped."""
    return one_line(clip(text, INFO_TEXT_LIMIT))


def _too_many(raw: Mapping[str, Any]) -> str | None:
    """Which list or mapping of a ``hello`` answer has more than
    :data:`~kvconform.limits.MAX_DECLARED_ENTRIES` entries, worded, or ``None``."""
    most = limits.MAX_DECLARED_ENTRIES
    fmt = raw.get("format")
    caps = raw.get("capabilities")
    schema = caps.get("key_schema") if isinstance(caps, Mapping) else None
    listed: list[tuple[str, object]] = [
        ("classes", raw.get("classes")),
        ("format.reads", fmt.get("reads") if isinstance(fmt, Mapping) else None),
        ("options", raw.get("options")),
        ("capabilities.dtypes", caps.get("dtypes") if isinstance(caps, Mapping) else None),
        ("capabilities.key_schema", schema),
        (
            "capabilities.prefix_inputs",
            caps.get("prefix_inputs") if isinstance(caps, Mapping) else None,
        ),
    ]
    if isinstance(schema, Mapping) and len(schema) <= most:
        listed += [
            (f"capabilities.key_schema.{clip(ascii(family), 60)}", params)
            for family, params in schema.items()
        ]
    for where, value in listed:
        if isinstance(value, list | Mapping) and len(value) > most:
            return (
                f"{where}: {len(value)} entries, more than the {most} the harness accepts "
                "(spec/security.md)"
            )
    return None


def info_from_wire(raw: object, offered: int = PROTOCOL_VERSION) -> AdapterInfo:
    """An adapter's self-description from its ``hello`` answer to a ``hello`` that offered
    protocol ``offered``; :class:`~.WireError` if bad. The answer may name ``offered`` or
    an older version the harness speaks (PROTO-32): the caller reads which."""
    if not isinstance(raw, Mapping):
        raise WireError(f"hello result: expected an object, got {clip(repr(raw))}")
    unknown_members = sorted(set(raw) - _INFO_MEMBERS)
    if unknown_members:
        raise WireError(
            f"hello result: unknown member {clip(', '.join(map(repr, unknown_members)))} "
            f"(the members are {', '.join(sorted(_INFO_MEMBERS))}; PROTO-35)"
        )
    too_many = _too_many(raw)
    if too_many:  # before anything looks at the entries (limits.py)
        raise WireError(f"hello result.{too_many}")
    for name in ("name", "version", "language"):
        if not isinstance(raw.get(name), str) or not raw[name]:
            raise WireError(f"hello result.{name}: expected a non-empty string")
    protocol = raw.get("protocol")
    if type(protocol) is not int or not PROTOCOL_VERSION <= protocol <= offered:  # not 1.0
        spoken = ", ".join(map(str, range(PROTOCOL_VERSION, offered + 1)))
        raise WireError(
            f"hello result.protocol: the harness offered protocol {offered} and speaks "
            f"{spoken}, the adapter answered {clip(ascii(protocol), 60)}"
        )
    classes = raw.get("classes")
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise WireError("hello result.classes: expected a list of class names")
    twice = sorted(c for c, n in Counter(classes).items() if n > 1)
    if twice:
        named = clip(", ".join(map(repr, twice)))  # adapter text: escaped and clipped
        raise WireError(f"hello result.classes: {named} listed more than once")
    unknown = sorted(set(classes) - set(CLASSES))
    if unknown:
        raise WireError(
            f"hello result.classes: unknown class {clip(', '.join(map(ascii, unknown)))} "
            f"(the classes are {', '.join(CLASSES)})"
        )
    fmt = raw.get("format")
    if not isinstance(fmt, Mapping):
        raise WireError("hello result.format: expected {writes, reads}")
    unknown_format = sorted(set(fmt) - {"writes", "reads"})
    if unknown_format:
        raise WireError(
            f"hello result.format: unknown member {clip(', '.join(map(repr, unknown_format)))} "
            "(the members are writes, reads; PROTO-35)"
        )
    writes = fmt.get("writes")
    reads = fmt.get("reads")
    if writes is not None and (not isinstance(writes, int) or isinstance(writes, bool)):
        raise WireError("hello result.format.writes: expected an integer or null")
    if not isinstance(reads, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in reads
    ):
        raise WireError("hello result.format.reads: expected a list of integers")
    if len(set(reads)) != len(reads):
        raise WireError("hello result.format.reads: a version listed more than once")
    options = raw.get("options", {})
    if not isinstance(options, Mapping) or not all(isinstance(v, str) for v in options.values()):
        raise WireError("hello result.options: expected an object of option names to strings")
    caps = raw.get("capabilities", {})
    if not isinstance(caps, Mapping):
        raise WireError("hello result.capabilities: expected an object")
    unknown_caps = sorted(set(caps) - set(CAPABILITIES))
    if unknown_caps:
        raise WireError(
            f"hello result.capabilities: unknown capability "
            f"{clip(', '.join(map(ascii, unknown_caps)))} "
            f"(the capabilities are {', '.join(CAPABILITIES)})"
        )
    uint_bits = caps.get("uint_bits", 64)
    if type(uint_bits) is not int or uint_bits not in (32, 53, 64):
        raise WireError("hello result.capabilities.uint_bits: expected 32, 53 or 64")
    raw_fold = caps.get("raw_fold", True)
    if not isinstance(raw_fold, bool):
        raise WireError("hello result.capabilities.raw_fold: expected true or false")
    dtypes = caps.get("dtypes")
    if dtypes is not None and (
        not isinstance(dtypes, list) or not all(isinstance(d, str) for d in dtypes)
    ):
        raise WireError("hello result.capabilities.dtypes: expected a list of dtype names")
    inputs = caps.get("prefix_inputs")
    if inputs is not None and (
        not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs)
    ):
        raise WireError("hello result.capabilities.prefix_inputs: expected a list of input names")
    if inputs is not None and len(set(inputs)) != len(inputs):
        raise WireError("hello result.capabilities.prefix_inputs: an input listed more than once")
    capacity = caps.get("prefix_capacity", False)
    if not isinstance(capacity, bool):
        raise WireError("hello result.capabilities.prefix_capacity: expected true or false")
    schema = caps.get("key_schema")
    if schema is not None and (
        not isinstance(schema, Mapping)
        or not all(
            isinstance(p, Mapping) and all(isinstance(t, str) for t in p.values())
            for p in schema.values()
        )
    ):
        raise WireError(
            "hello result.capabilities.key_schema: expected {family: {parameter: type}}"
        )
    info = AdapterInfo(  # an adapter's own words are kept short enough to show
        name=info_text(raw["name"]),
        version=info_text(raw["version"]),
        language=info_text(raw["language"]),
        classes=frozenset(classes),
        format_writes=writes,
        format_reads=frozenset(reads),
        options=dict(options),
        raw_fold=raw_fold,
        dtypes=None if dtypes is None else frozenset(dtypes),
        key_schema=None if schema is None else {f: dict(p) for f, p in schema.items()},
        uint_bits=uint_bits,
        prefix_inputs=None if inputs is None else frozenset(inputs),
        prefix_capacity=capacity,
    )
    problems = info.problems()
    if problems:
        raise WireError(f"hello result.{problems[0]}")
    return info
