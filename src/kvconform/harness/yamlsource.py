"""Reading data files safely, with line numbers for every path.

YAML is read with :class:`yaml.SafeLoader` only: it builds plain data and
never constructs arbitrary objects. While constructing, the node tree is kept
so that an error about ``scenarios[3].steps[2].check.expect`` can name its line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import yaml

import kvconform

SCHEMA_DIR = kvconform.data_root() / "conformance" / "schema"

PathKey = tuple[str | int, ...]


@dataclass
class SourceError(Exception):
    """A data file that cannot be used: its path, line, the offending element, why."""

    file: str
    line: int | None
    where: str
    problem: str

    def __str__(self) -> str:
        at = f"{self.file}:{self.line}" if self.line else self.file
        inside = f" at {self.where}" if self.where else ""
        return f"{at}{inside}: {self.problem}"


@dataclass(frozen=True)
class Document:
    """A loaded file: its data and the line of every path in it."""

    file: str
    data: Any
    lines: dict[PathKey, int]

    def line_of(self, path: Iterable[str | int]) -> int | None:
        """The line of ``path``, or of its nearest ancestor that has one."""
        key = tuple(path)
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return self.lines.get(())

    def error(self, path: Iterable[str | int], problem: str) -> SourceError:
        path = tuple(path)
        return SourceError(self.file, self.line_of(path), render_path(path), problem)


def render_path(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_yaml(path: Path) -> Document:
    """Parse a YAML file with the safe loader, keeping the line of every node."""
    text = _read(path)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise SourceError(str(path), None, "", "the file is empty")
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise SourceError(str(path), line, "", f"not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise SourceError(str(path), None, "", f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    lines: dict[PathKey, int] = {}
    _walk(node, (), lines)
    return Document(str(path), data, lines)


def load_json(path: Path) -> Document:
    text = _read(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(str(path), exc.lineno, "", f"not valid JSON: {exc.msg}") from None
    return Document(str(path), data, {})


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(str(path), None, "", f"cannot be read: {exc}") from None


def _walk(node: yaml.Node, path: PathKey, lines: dict[PathKey, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                _walk(value_node, (*path, key_node.value), lines)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _walk(item, (*path, index), lines)


@cache
def schema(name: str) -> jsonschema.protocols.Validator:
    """The validator for ``schema/<name>.schema.json``."""
    document = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(document)
    cls.check_schema(document)
    return cls(document)


def validate(document: Document, schema_name: str) -> None:
    """Raise a :class:`SourceError` for the most relevant schema violation, if any."""
    errors = list(schema(schema_name).iter_errors(document.data))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    # best_match prefers shallow errors; for oneOf, descend to the deepest cause
    # so the message names the element that is actually wrong.
    while best.context:
        best = jsonschema.exceptions.best_match(best.context)
    raise document.error(best.absolute_path, best.message)
