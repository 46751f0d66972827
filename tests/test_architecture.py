"""The package's shape: its layers, written down once (:data:`LAYERS`), and no import circle.

Every ``import`` and ``from ... import`` in ``src/kvconform`` is read from the source
(with :mod:`ast`, so an import inside a function counts as much as one at the top: it
runs the same code, only later). Two rules:

- no circle: no module reaches itself by following imports;
- nothing reaches up: a module imports only modules of its own layer or of a lower one.

README.md's Layout section states the same order; a test checks that it does.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "kvconform"

#: The layers of ``kvconform``, lowest first: a layer's name and the modules in it (a
#: package stands for every module under it, unless a longer name is listed elsewhere).
#: A module may import from its own layer and from any layer before it.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("kvconform", "kvconform.values", "kvconform.rendering", "kvconform.files")),
    ("protocol", ("kvconform.protocol",)),
    ("adapters", ("kvconform.adapters",)),
    ("harness", ("kvconform.harness",)),
    ("differential", ("kvconform.differential",)),
    ("reports", ("kvconform.reports",)),
    ("skeletons", ("kvconform.skeletons",)),
    (
        "commands",
        ("kvconform.cli", "kvconform.__main__", "kvconform.plugin", "kvconform.serve"),
    ),
)


def module_name(path: Path) -> str:
    parts = ("kvconform", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(name: str, path: Path) -> dict[str, int]:
    """The package's modules that ``name`` imports, each with the line of its first import.

    ``from a.b import c`` imports ``a.b``, and ``a.b.c`` too when that is a module;
    a relative import is resolved against the module's package.
    """
    known = modules()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict[str, int] = {}
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for target in targets:
            if target in known and target != name:
                found.setdefault(target, node.lineno)
    return found


@cache
def graph() -> dict[str, dict[str, int]]:
    return {name: imported(name, path) for name, path in modules().items()}


def layer_of(name: str) -> int:
    """The index in :data:`LAYERS` of the longest listed name that ``name`` is or is under."""
    best: tuple[int, int] | None = None
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            inside = name == member or name.startswith(member + ".")
            if inside and (best is None or len(member) > best[0]):
                best = (len(member), index)
    if best is None:
        raise LookupError(name)
    return best[1]


def circles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan's algorithm),
    as the path that closes it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, {})):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return [_closing_path(edges, set(group)) for group in groups]


def _closing_path(edges: dict[str, dict[str, int]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(edges[v]):
                if w == start:
                    return [*paths[v], start]
                if w in group and w not in paths:
                    paths[w] = [*paths[v], w]
                    following.append(w)
        frontier = following
    raise AssertionError("a strongly connected group without a circle")


def layer_line() -> str:
    """The order as README.md's Layout section states it."""
    return " < ".join(f"`{name}`" for name, _ in LAYERS)


# The rules --------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for name in modules():
        try:
            layer_of(name)
        except LookupError:
            unplaced.append(name)
    assert not unplaced, f"modules in no layer of tests/test_architecture.py LAYERS: {unplaced}"


def test_no_import_circle() -> None:
    found = circles(graph())
    assert not found, "import circles in src/kvconform:\n" + "\n".join(
        " -> ".join(circle) for circle in found
    )


def test_no_module_imports_a_higher_layer() -> None:
    upward = []
    for name, targets in sorted(graph().items()):
        for target, line in sorted(targets.items()):
            if layer_of(target) > layer_of(name):
                upward.append(
                    f"{modules()[name].relative_to(ROOT)}:{line}: {name} "
                    f"({LAYERS[layer_of(name)][0]}) imports {target} "
                    f"({LAYERS[layer_of(target)][0]})"
                )
    assert not upward, "imports that reach up a layer:\n" + "\n".join(upward)


#: The longest a module may be, in lines.
MODULE_LINES = 500
#: Modules over that length, each with the length it may not exceed: data tables (the
#: operation table) and any module still to be split. A split lowers or removes its
#: entry; no entry may rise.
LONG_MODULES = {
    "kvconform.protocol.operations": 667,  # the operation table (data; prefix_cache in 3.0.0)
}


def test_no_module_is_longer_than_it_may_be() -> None:
    too_long = []
    for name, path in modules().items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        limit = LONG_MODULES.get(name, MODULE_LINES)
        if lines > limit:
            too_long.append(f"{path.relative_to(ROOT)}: {lines} lines (at most {limit})")
    assert not too_long, "modules too long (split by what they do):\n" + "\n".join(too_long)


def test_the_readme_states_the_layers_in_this_order() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert layer_line() in readme, (
        f"README.md's Layout section should give the layers as: {layer_line()}"
    )


# The checks themselves find what they are for ---------------------------------------


def test_a_circle_is_found_and_shown_as_a_path() -> None:
    edges = {
        "a": {"b": 1},
        "b": {"c": 1},
        "c": {"a": 1, "d": 1},
        "d": {},
        "e": {"f": 1},
        "f": {"e": 1},
    }
    assert circles(edges) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert circles({"a": {"b": 1}, "b": {}}) == []


def test_imports_are_read_inside_functions_and_relative_ones_resolved(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text(
        "def f():\n    from kvconform.harness import runner\n"
        "from ..protocol import codec\nimport kvconform.values\n",
        encoding="utf-8",
    )
    found = imported("kvconform.reports.m", source)
    assert found == {
        "kvconform.harness": 2,
        "kvconform.harness.runner": 2,
        "kvconform.protocol": 3,
        "kvconform.protocol.codec": 3,
        "kvconform.values": 4,
    }


@pytest.mark.parametrize(
    ("name", "layer"),
    [
        ("kvconform", "core"),
        ("kvconform.values", "core"),
        ("kvconform.protocol.server", "protocol"),
        ("kvconform.harness.explain", "harness"),
        ("kvconform.differential.engine", "differential"),
        ("kvconform.cli", "commands"),
    ],
)
def test_a_module_is_placed_by_its_longest_listed_name(name: str, layer: str) -> None:
    assert LAYERS[layer_of(name)][0] == layer
