"""The teeth matrix (``conformance/teeth.yaml``): option and capability values against
operations, read and judged.

A row is one value of an option (CONF-6) or of a capability (CONF-7, CONF-13, the
profiles of PROF-3); a column is an operation of the protocol's table. A cell cites the
cases that judge what the value changes at that operation, or says why the value
changes nothing there (``unaffected``), or why no scenario can judge it (``gap``).

:func:`depends_on` is the test a cited case must pass: it checks the operation, it
applies under the row's value, and under some other value of the same row it is either
not applicable or read otherwise (its program or its checks differ once adapted,
as a replacement's first differing field does under ``replace_layer_order``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kvconform.harness.checks import OutcomeCheck, RelationCheck
from kvconform.harness.declarations import adapt
from kvconform.harness.runner import in_declared_shape
from kvconform.harness.scenario import Case
from kvconform.values import OPTIONS, AdapterInfo

ROOT = Path(__file__).resolve().parent.parent
MATRIX = ROOT / "conformance" / "teeth.yaml"

#: Every class, so that a case is never set aside for a class it needs.
ALL_CLASSES = frozenset(
    {"hash", "identity", "plan", "signature", "verify", "plan_validity", "prefix_cache"}
)

#: The four profile declarations of spec/conformance.md (Profiles), by the matrix's names.
FORMATS: Mapping[str, tuple[int, frozenset[int]]] = {
    "w1r1": (1, frozenset({1})),
    "w1r12": (1, frozenset({1, 2})),
    "w2r12": (2, frozenset({1, 2})),
    "w2r2": (2, frozenset({2})),
}

#: The capability fields of :class:`AdapterInfo`, as the matrix names them.
CAPABILITY_FIELDS: Mapping[str, str] = {
    "raw_fold": "raw_fold",
    "dtypes": "dtypes",
    "uint_bits": "uint_bits",
    "key_schema": "key_schema",
    "prefix_inputs": "prefix_inputs",
    "prefix_capacity": "prefix_capacity",
    "format_writes": "format",
    "format_reads": "format",
}
#: The fields of :class:`AdapterInfo` that are not capabilities.
NOT_CAPABILITIES = frozenset({"name", "version", "language", "classes", "options"})


@dataclass(frozen=True)
class Row:
    kind: str  # "option" or "capability"
    name: str
    value: str
    cells: Mapping[str, Any]


@cache
def document() -> Mapping[str, Any]:
    from kvconform.harness.yamlsource import load_yaml, validate

    loaded = load_yaml(MATRIX)
    validate(loaded, "teeth")
    data: Mapping[str, Any] = loaded.data
    return data


def rows() -> list[Row]:
    out = []
    for raw in document()["rows"]:
        kind = "option" if "option" in raw else "capability"
        out.append(Row(kind, raw[kind], raw["value"], raw["cells"]))
    return out


def counts() -> dict[str, int]:
    """The matrix's figures: its size and how its cells are filled."""
    all_rows = rows()
    cells = [cell for row in all_rows for cell in row.cells.values()]
    columns = {op for row in all_rows for op in row.cells}
    judged = [c for c in cells if isinstance(c, list)]
    return {
        "teeth.rows": len(all_rows),
        "teeth.columns": len(columns),
        "teeth.cells": len(cells),
        "teeth.judged": len(judged),
        "teeth.unaffected": sum(1 for c in cells if isinstance(c, dict) and "unaffected" in c),
        "teeth.gaps": sum(1 for c in cells if isinstance(c, dict) and "gap" in c),
        "teeth.cited": len({case for c in judged for case in c}),
    }


def values_of(name: str) -> tuple[str, ...]:
    if name in OPTIONS:
        return OPTIONS[name].values
    return tuple(document()["capabilities"][name]["values"])


def declaring(case: Case, name: str, value: str, fmt: str) -> AdapterInfo:
    """An implementation of every class that makes the case's own assumptions, with the
    row's value and the profile declaration ``fmt``."""
    from tests.variants.upstream_shapes import FUEL_FAMILIES

    options = dict(case.options)
    extra: dict[str, Any] = {}
    if name in OPTIONS:
        options[name] = value
        if name == "plan_key_params" and value == "fixed":
            extra["key_schema"] = FUEL_FAMILIES
    elif name == "raw_fold":
        extra["raw_fold"] = {"true": True, "false": False}[value]
    elif name == "dtypes":
        extra["dtypes"] = None if value == "any" else frozenset(value.split(","))
    elif name == "uint_bits":
        extra["uint_bits"] = int(value)
    elif name == "prefix_inputs":
        given = {"all": None, "none": ""}.get(value, value)
        extra["prefix_inputs"] = (
            None if given is None else frozenset(filter(None, given.split(",")))
        )
    elif name == "prefix_capacity":
        extra["prefix_capacity"] = {"true": True, "false": False}[value]
    elif name == "format":
        fmt = value
    else:
        raise ValueError(f"no capability {name!r} in the matrix")
    writes, reads = FORMATS[fmt]
    return AdapterInfo(
        "teeth-matrix",
        "0",
        "python",
        ALL_CLASSES,
        format_writes=writes,
        format_reads=reads,
        options=options,
        **extra,
    )


def _judged_as(case: Case, info: AdapterInfo) -> Case | None:
    shaped, reason = in_declared_shape(case, info)
    return None if reason else adapt(shaped, info)


def checked_operations(case: Case) -> set[str]:
    """The operations at whose steps the case judges an answer."""
    steps: set[int] = set()
    for check in case.checks:
        if isinstance(check, OutcomeCheck):
            steps.add(check.op_index)
        elif isinstance(check, RelationCheck):
            steps.update(ref.op_index for ref in check.refs)
    return {type(case.program[i]).name for i in steps}


def depends_on(case: Case, name: str, value: str) -> str | None:
    """Why ``case`` does not judge the row's value, or ``None`` when it does."""
    formats = [value] if name == "format" else list(FORMATS)
    for fmt in formats:
        mine = _judged_as(case, declaring(case, name, value, fmt))
        if mine is not None:
            break
    else:
        return f"{case.id} is not applicable under {name}: {value}"
    for other in values_of(name):
        if other == value:
            continue
        theirs = _judged_as(case, declaring(case, name, other, fmt))
        if theirs is None or (theirs.program, theirs.checks) != (mine.program, mine.checks):
            return None
    return (
        f"{case.id} is judged alike under every value of {name}: it does not depend on "
        f"{name}: {value}"
    )
