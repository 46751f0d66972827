"""The protocol's JSON Schemas: ``conformance/schema/protocol/``, one file per operation.

``ops/<op>.schema.json`` holds an operation's request (``$defs/request``, also
the file's root) and the value of an ``ok`` answer (``$defs/result``);
``common.schema.json`` the values they share; ``request.schema.json`` and
``response.schema.json`` the envelopes of a line each way. References between
the files are relative, and each file's ``$id`` is its path under one base, so
a validator in any language resolves them from the files alone.

Protocol 2 (every count as a decimal string, PROTO-33) has its own folder,
``conformance/schema/protocol2/``, derived from protocol 1's by :func:`v2_document`
and written by ``python -m kvconform.protocol.schemas`` (a test checks it is current):
each count becomes the string of ``$defs/count``, the ``hello`` exchange and ``seq``
stay as they are.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import referencing

import kvconform

#: The ``$id`` of every protocol schema is this base plus the file's path below the folder.
BASE = "https://kvconform.invalid/schema/protocol/"
#: The same for protocol 2's folder.
BASE_V2 = "https://kvconform.invalid/schema/protocol2/"


def folder(protocol: int = 1) -> Path:
    name = "protocol" if protocol == 1 else f"protocol{protocol}"
    return kvconform.data_root() / "conformance" / "schema" / name


@cache
def documents(protocol: int = 1) -> dict[str, dict[str, Any]]:
    """Every protocol schema by its path below the folder (``ops/hash.schema.json``)."""
    root = folder(protocol)
    return {
        path.relative_to(root).as_posix(): json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(root.rglob("*.schema.json"))
    }


@cache
def _registry(protocol: int = 1) -> referencing.Registry[Any]:
    base = BASE if protocol == 1 else BASE_V2
    resources = [
        (base + name, referencing.Resource.from_contents(document))
        for name, document in documents(protocol).items()
    ]
    return referencing.Registry().with_resources(resources)


def validator(ref: str, protocol: int = 1) -> jsonschema.protocols.Validator:
    """A validator for ``request``, ``response``, ``ops/<op>`` or ``ops/<op>#/$defs/result``."""
    path, _, pointer = ref.partition("#")
    base = BASE if protocol == 1 else BASE_V2
    target = f"{base}{path}.schema.json" + (f"#{pointer}" if pointer else "")
    return jsonschema.Draft202012Validator({"$ref": target}, registry=_registry(protocol))


def validator_of(document: dict[str, Any], protocol: int = 1) -> jsonschema.protocols.Validator:
    """A validator for a schema of the caller's own, whose references resolve to the files."""
    return jsonschema.Draft202012Validator(document, registry=_registry(protocol))


def errors(ref: str, instance: Any, protocol: int = 1) -> list[str]:
    """The messages of every violation of ``ref`` by ``instance`` (empty when valid)."""
    return [error.message for error in validator(ref, protocol).iter_errors(instance)]


#: A count in protocol 2: decimal digits, no sign, no leading zero, at most 20 digits
#: (a value above 2^64 - 1 is refused by the reader, as for a u64: PROTO-17).
COUNT_PATTERN = "^(0|[1-9][0-9]{0,19})$"
_INTEGER_TYPES = ("integer", ["integer", "null"])


def _to_v2(node: Any, name: str, path: tuple[str, ...]) -> Any:
    """``node`` of protocol 1's ``name`` at ``path``, with each count as a string."""
    if isinstance(node, list):
        return [_to_v2(item, name, (*path, str(i))) for i, item in enumerate(node)]
    if not isinstance(node, dict):
        return node
    if name == "ops/hello.schema.json" or path[:2] in (("$defs", "seq"), ("$defs", "info")):
        return node  # the envelope and the handshake are the same in every version
    out = {key: _to_v2(value, name, (*path, key)) for key, value in node.items()}
    if out.get("type") in _INTEGER_TYPES:
        nullable = out["type"] != "integer"
        for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            out.pop(bound, None)
        out["type"] = ["string", "null"] if nullable else "string"
        lowest = node.get("minimum", 0)
        out["pattern"] = "^[1-9][0-9]{0,19}$" if lowest == 1 else COUNT_PATTERN
    if path[-3:] == ("properties", "values", "additionalProperties") and "oneOf" in out:
        out["anyOf"] = out.pop("oneOf")  # a count and a label are both strings now
    return out


def v2_document(name: str, document: dict[str, Any]) -> dict[str, Any]:
    """Protocol 2's schema ``name`` (a path below the folder), from protocol 1's."""
    out: dict[str, Any] = _to_v2(document, name, ())
    out["$id"] = BASE_V2 + name
    if isinstance(out.get("title"), str):
        out["title"] = out["title"].replace("protocol 1", "protocol 2")
    if name == "common.schema.json":
        info = out["$defs"]["info"] = json.loads(json.dumps(out["$defs"]["info"]))
        info["properties"]["protocol"] = {
            "const": 2,
            "description": "Protocol 2 was offered and is spoken from here on (PROTO-32).",
        }
        out["description"] = (
            "Protocol 2 (spec/protocol.md): protocol 1 with every count, length, index, "
            "width, token count, version and error layer or value as a string of decimal "
            "digits (PROTO-33). Generated from conformance/schema/protocol/ by "
            "python -m kvconform.protocol.schemas: do not edit."
        )
    return out


def write_v2() -> list[Path]:
    """Write protocol 2's folder from protocol 1's; the paths written."""
    root = folder(2)
    written = []
    for name, document in documents(1).items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(v2_document(name, document), indent=2) + "\n", "utf-8")
        written.append(path)
    return written


if __name__ == "__main__":  # pragma: no cover
    for written in write_v2():
        print(f"wrote {written}")
