"""Reading data files safely, with line numbers for every path.

YAML is read with PyYAML's safe loaders only: they build plain data and never
construct arbitrary objects. While constructing, the node tree is kept so that
an error about ``scenarios[3].steps[2].check.expect`` can name its line.

Two safe loaders, one answer. The pure-Python :class:`yaml.SafeLoader` is the
authority; :class:`yaml.CSafeLoader` (libyaml's parser with the *same* Python
constructor and resolver, so the same tags, scalars and node marks) is tried
first when PyYAML was built with it, because it parses the suite about five
times faster. Whenever the fast parse fails in any way -- a syntax error, a tag
the safe constructor refuses, libyaml refusing an escape PyYAML accepts (the
suite's surrogate probes), or anything else -- the file is parsed again with
:class:`yaml.SafeLoader`, so both the data and every error message are exactly
the pure loader's. Text holding a character PyYAML's reader refuses goes to the
pure loader directly, so the fast path never accepts what it would refuse. The pure
loader refuses nesting past :data:`MAX_DEPTH` as it composes, at the first node past
the depth, before anything else about the file's shape (:func:`_pure_loader`).

``yaml`` and ``jsonschema`` are imported on first use: a run whose suite comes
from the cache (:mod:`.cache`) needs neither.
"""

from __future__ import annotations

import json
import stat
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import kvconform
from kvconform import limits

if TYPE_CHECKING:
    import jsonschema.protocols
    import yaml

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
    import yaml

    text = _read(path)
    fast = _fast_loader()
    if (
        fast is not None
        and not yaml.reader.Reader.NON_PRINTABLE.search(text)
        and not _too_deep_for_libyaml(text, fast)
    ):
        try:
            return _parse(path, text, fast)
        except Exception:
            pass  # the pure loader below decides, and words any error
    return _parse(path, text, _pure_loader())


#: Text this short cannot nest deeply enough to exhaust the C stack in libyaml's
#: composer (each level takes at least one character; 20,000 levels compose safely).
_SHALLOW_BY_SIZE = 16_384


def _too_deep_for_libyaml(text: str, fast: type[yaml.SafeLoader]) -> bool:
    """Whether ``text`` nests deeper than :data:`MAX_DEPTH`, or cannot be told.

    libyaml's composer recurses in C, without Python's recursion limit: a small file
    of 50,000 nested brackets ends the process with a segmentation fault before
    :func:`_check_shape` could refuse it. Its parser is not recursive, so the events
    are read first and the depth counted; deep (or unparsable) text goes to the pure
    loader, which stops composing past the depth and words the error.
    """
    if len(text) <= _SHALLOW_BY_SIZE:
        return False
    import yaml

    opening = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
    closing = (yaml.SequenceEndEvent, yaml.MappingEndEvent)
    loader = fast(text)
    depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()  # type: ignore[no-untyped-call]
            if isinstance(event, opening):
                depth += 1
                if depth > MAX_DEPTH:
                    return True
            elif isinstance(event, closing):
                depth -= 1
    except Exception:
        return True
    finally:
        loader.dispose()
    return False


def _fast_loader() -> type[yaml.SafeLoader] | None:
    """libyaml's safe loader when PyYAML was built with it (``yaml.CSafeLoader``), else ``None``.

    A module-level function so that a test can turn the fast path off.
    """
    import yaml

    fast: type[yaml.SafeLoader] | None = getattr(yaml, "CSafeLoader", None)
    return fast


class _TooDeep(Exception):
    """A node past :data:`MAX_DEPTH`, met by the pure loader as it composes."""

    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


@cache
def _pure_loader() -> type[yaml.SafeLoader]:
    """:class:`yaml.SafeLoader`, refusing a node past :data:`MAX_DEPTH` as it composes it.

    PyYAML's pure scanner does work in proportion to the depth for every token of a
    flow collection, so it took about a second of CPU to reach its recursion limit in
    text nested thousands of levels deep (libyaml stops at 1,000 levels, and any failure
    of the fast parse comes here): the time a refusal of such a file took. Composing
    stops at the first node past the depth instead (a node :func:`_check_shape` refuses
    too; a file it refuses after a fast parse comes here), and the scanner reads on only
    as far as its look-ahead for a simple key (1,024 characters): 0.2 s for 5,000 or
    50,000 levels of brackets. An alias is the node it names, so it is not counted
    where it stands, as in :func:`_check_shape`.
    """
    import yaml

    class DepthGuardedLoader(yaml.SafeLoader):
        _depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self._depth > MAX_DEPTH and not self.check_event(yaml.AliasEvent):
                event = self.peek_event()  # type: ignore[no-untyped-call]
                raise _TooDeep(event.start_mark.line + 1)
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return DepthGuardedLoader


def _parse(path: Path, text: str, loader_cls: type[yaml.SafeLoader]) -> Document:
    import yaml

    try:
        loader = loader_cls(text)  # the pure reader checks every character here
    except yaml.reader.ReaderError as exc:
        at = text.count("\n", 0, exc.position) + 1
        problem = f"unacceptable character #x{exc.character:04x}: {exc.reason}"
        raise SourceError(str(path), at, "", f"not valid YAML: {problem}") from None
    try:
        node = loader.get_single_node()
        if node is None:
            raise SourceError(str(path), None, "", "the file is empty")
        _check_shape(path, node)
        data = loader.construct_document(node)
    except _TooDeep as exc:
        raise SourceError(str(path), exc.line, "", _NESTED_TOO_DEEP) from None
    except RecursionError:
        raise SourceError(str(path), None, "", "not valid YAML: nested too deeply") from None
    except ValueError as exc:  # a scalar its type cannot hold: a date, a 5,000-digit number
        raise SourceError(str(path), None, "", f"a value cannot be converted: {exc}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise SourceError(str(path), line, "", f"not valid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise SourceError(str(path), None, "", f"not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    return Document(str(path), data, _lines_of(node))


#: The most nodes a file may hold once its aliases are expanded: the largest file of
#: the suite holds a few thousand; an alias bomb holds billions in a few hundred bytes.
MAX_NODES = limits.MAX_YAML_NODES
#: The deepest a file may nest mappings and sequences.
MAX_DEPTH = limits.MAX_YAML_DEPTH
_NESTED_TOO_DEEP = f"nested deeper than {MAX_DEPTH} levels"


def _check_shape(path: Path, root: yaml.Node) -> None:
    """Refuse what a safe loader still accepts but a data file has no use for.

    - aliases that expand past :data:`MAX_NODES` nodes (a "billion laughs" file),
      or refer to themselves;
    - nesting deeper than :data:`MAX_DEPTH` (the pure loader refuses it earlier, as it
      composes: :func:`_pure_loader`);
    - a key given twice in one mapping (a loader would silently keep the last).

    Sizes are counted once per node, so the check is linear in the file's size.
    """
    import yaml

    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    aliased = [False]  # whether a node was met twice (through an alias) so far

    def fail(node: yaml.Node, problem: str) -> SourceError:
        return SourceError(str(path), node.start_mark.line + 1, "", problem)

    def size(node: yaml.Node, depth: int) -> int:
        known = sizes.get(id(node))
        if known is not None:
            aliased[0] = True
            return known
        if id(node) in open_nodes:
            raise fail(node, "an alias refers to the node that contains it")
        if depth > MAX_DEPTH:
            raise fail(node, _NESTED_TOO_DEEP)
        total = 1
        open_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if key.value in seen:
                        raise fail(key, f"the key {key.value!r} is given twice in one mapping")
                    seen.add(key.value)
                total += size(key, depth + 1) + size(value, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                total += size(item, depth + 1)
        open_nodes.discard(id(node))
        if total > MAX_NODES:
            expanded = " once its aliases are expanded" if aliased[0] else ""
            raise fail(node, f"holds more than {MAX_NODES} nodes{expanded}")
        sizes[id(node)] = total
        return total

    size(root, 0)


def load_json(path: Path) -> Document:
    text = _read(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SourceError(str(path), exc.lineno, "", f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise SourceError(str(path), None, "", "not valid JSON: nested too deeply") from None
    except ValueError:  # an integer of more digits than int() converts
        raise SourceError(str(path), None, "", f"not usable JSON: {_TOO_LONG}") from None
    return Document(str(path), data, {})


_TOO_LONG = f"a number has more than {sys.get_int_max_str_digits()} digits"

#: The largest data file read (a report of the whole suite with traces is a few MiB).
MAX_FILE_BYTES = limits.MAX_FILE_BYTES


def _read(path: Path) -> str:
    """The text of the regular file ``path`` (never a device, a FIFO or a directory,
    which could block or never end), at most :data:`MAX_FILE_BYTES` long."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise SourceError(str(path), None, "", "cannot be read: not a regular file")
        with path.open("rb") as file:
            data = file.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise SourceError(
                str(path), None, "", f"cannot be read: larger than {MAX_FILE_BYTES} bytes"
            )
        text = data.decode("utf-8")
    except OSError as exc:  # the path is named once, by the error, not again by the OS's words
        raise SourceError(str(path), None, "", f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise SourceError(str(path), None, "", f"cannot be read: {exc}") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it


#: The text of a data file, read as :func:`_read` reads it (a regular file, bounded).
read_text = _read


def _lines_of(root: yaml.Node) -> dict[PathKey, int]:
    """The (1-based) line of every path in the node tree."""
    import yaml

    mapping, sequence, scalar = yaml.MappingNode, yaml.SequenceNode, yaml.ScalarNode
    lines: dict[PathKey, int] = {}

    def walk(node: yaml.Node, path: PathKey) -> None:
        lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, mapping):
            for key_node, value_node in node.value:
                if isinstance(key_node, scalar):
                    walk(value_node, (*path, key_node.value))
        elif isinstance(node, sequence):
            for index, item in enumerate(node.value):
                walk(item, (*path, index))

    walk(root, ())
    return lines


@cache
def schema(name: str) -> jsonschema.protocols.Validator:
    """The validator for ``schema/<name>.schema.json``, its local references inlined
    (:func:`inline_local_refs`)."""
    import jsonschema

    document = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(document)
    cls.check_schema(document)
    return cls(inline_local_refs(document))


_LOCAL = "#/$defs/"


def inline_local_refs(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with each ``{"$ref": "#/$defs/<name>"}`` replaced by that definition,
    except for definitions that reach themselves (a step holds steps): outside
    ``$defs`` such a reference is replaced by the definition once, with the references
    inside it kept (a scenario's steps are read without one, the steps a step holds
    through the reference), and inside ``$defs`` it stays a reference.

    The same schema, read faster: jsonschema resolves a reference at every use and
    builds a new validator for it, which was a fifth of the time a fresh load of the
    suite spends validating. Verdicts and the error :func:`validate` chooses are the
    same (``tests/test_scenario_files.py`` compares them on altered shipped files). A
    reference with sibling keywords, or to anything but a definition, is kept.
    """
    definitions: dict[str, Any] = document.get("$defs", {})

    def refers(node: object) -> set[str]:
        found: set[str] = set()
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_LOCAL):
                found.add(ref[len(_LOCAL) :])
            for value in node.values():
                found |= refers(value)
        elif isinstance(node, list):
            for value in node:
                found |= refers(value)
        return found

    edges = {name: refers(body) for name, body in definitions.items()}

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(edges.get(start, ()))
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(edges.get(name, ()))
        return seen

    recursive = {name for name in definitions if name in reaches(name)}

    def inline(node: object, unroll: bool = False) -> object:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith(_LOCAL) and len(node) == 1:
                target = ref[len(_LOCAL) :]
                if target in definitions and target not in recursive:
                    return inline(definitions[target], unroll)
                if target in definitions and unroll:  # once: its own references stay
                    return inline(definitions[target])
            return {key: inline(value, unroll) for key, value in node.items()}
        if isinstance(node, list):
            return [inline(value, unroll) for value in node]
        return node

    inlined = {
        key: value if key == "$defs" else inline(value, unroll=True)
        for key, value in document.items()
    }
    if definitions:
        inlined["$defs"] = {name: inline(body) for name, body in definitions.items()}
    return inlined


def validate(document: Document, schema_name: str) -> None:
    """Raise a :class:`SourceError` for the most relevant schema violation, if any."""
    import jsonschema

    errors = list(schema(schema_name).iter_errors(document.data))
    if not errors:
        return
    best = jsonschema.exceptions.best_match(errors)
    # best_match prefers shallow errors; for oneOf, descend to the deepest cause
    # so the message names the element that is actually wrong.
    while best.context:
        best = jsonschema.exceptions.best_match(best.context)
    raise document.error(best.absolute_path, best.message)
