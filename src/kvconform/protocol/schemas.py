"""The protocol's JSON Schemas: ``conformance/schema/protocol/``, one file per operation.

``ops/<op>.schema.json`` holds an operation's request (``$defs/request``, also
the file's root) and the value of an ``ok`` answer (``$defs/result``);
``common.schema.json`` the values they share; ``request.schema.json`` and
``response.schema.json`` the envelopes of a line each way. References between
the files are relative, and each file's ``$id`` is its path under one base, so
a validator in any language resolves them from the files alone.
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


def folder() -> Path:
    return kvconform.data_root() / "conformance" / "schema" / "protocol"


@cache
def documents() -> dict[str, dict[str, Any]]:
    """Every protocol schema by its path below the folder (``ops/hash.schema.json``)."""
    root = folder()
    return {
        path.relative_to(root).as_posix(): json.loads(path.read_text(encoding="utf-8"))
        for path in sorted(root.rglob("*.schema.json"))
    }


@cache
def _registry() -> referencing.Registry[Any]:
    resources = [
        (BASE + name, referencing.Resource.from_contents(document))
        for name, document in documents().items()
    ]
    return referencing.Registry().with_resources(resources)


def validator(ref: str) -> jsonschema.protocols.Validator:
    """A validator for ``request``, ``response``, ``ops/<op>`` or ``ops/<op>#/$defs/result``."""
    path, _, pointer = ref.partition("#")
    target = f"{BASE}{path}.schema.json" + (f"#{pointer}" if pointer else "")
    return jsonschema.Draft202012Validator({"$ref": target}, registry=_registry())


def errors(ref: str, instance: Any) -> list[str]:
    """The messages of every violation of ``ref`` by ``instance`` (empty when valid)."""
    return [error.message for error in validator(ref).iter_errors(instance)]
