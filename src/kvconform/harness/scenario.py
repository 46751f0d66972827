"""Scenario files: loading, validation and compilation into cases.

A scenario file (format ``scenarios/2``, schema ``schema/scenarios.schema.json``)
holds scenarios; each compiles into a :class:`Case`: a program of operations
(:mod:`kvconform.protocol.operations`) and the checks that judge their outcomes
(:mod:`.checks`). A step's verb is the name of the operation it performs (the
protocol's ``op``), or one of the verbs that define values (``payload``,
``signature``), assert relations (``same``, ``differ``, ``nonzero``,
``increasing``), repeat steps (``repeat``) or restart the implementation
(``restart``): see :func:`verbs`.
Everything a reader can get wrong in a file -- a schema violation, a handle used
before it is made, a value name used twice -- is a :class:`SourceError` that
names the file, the line and the element.
"""

from __future__ import annotations

from pathlib import Path

from kvconform.harness.case import Case as Case  # re-exported: where users import it from
from kvconform.harness.steps.blocks import _BlockVerbs
from kvconform.harness.steps.compiler import verbs_of
from kvconform.harness.steps.hashing import _HashVerbs
from kvconform.harness.steps.hashing import mix_op as mix_op  # re-exported (suite, vectors)
from kvconform.harness.steps.plan import _PlanVerbs
from kvconform.harness.steps.restart import _RestartVerbs
from kvconform.harness.yamlsource import Document, PathKey, load_yaml, validate


class _Compiler(_PlanVerbs, _HashVerbs, _BlockVerbs, _RestartVerbs):
    """Compiles one scenario of a document into a :class:`Case`, verb by verb
    (:mod:`kvconform.harness.steps`)."""


#: Format ``scenarios/1`` named these operations otherwise; a file in that format
#: is read as ``scenarios/2`` with its verbs renamed (nothing else changed meaning).
LEGACY_VERBS = {
    "new_model": "model_new",
    "reload_model": "model_reload",
    "set_hook": "model_set_hook",
    "instance_id": "model_instance_id",
    "new_cache": "cache_new",
    "append": "cache_append",
    "truncate": "cache_truncate",
    "clear": "cache_clear",
    "replace_layer": "cache_replace_layer",
    "alloc_id": "cache_alloc_id",
    "new_session": "session_new",
    "check": "session_valid",
}


def verbs() -> tuple[str, ...]:
    """Every verb a step may use: the operations of the table and the verbs of the format."""
    return verbs_of(_Compiler)


def migrate(document: Document) -> Document:
    """A ``scenarios/1`` document as ``scenarios/2``: verbs renamed, lines kept."""
    data = document.data
    if not isinstance(data, dict) or data.get("kvconform") != "scenarios/1":
        return document

    def rename(steps: object) -> object:
        if not isinstance(steps, list):
            return steps
        out = []
        for step in steps:
            if isinstance(step, dict) and len(step) == 1:
                ((verb, args),) = step.items()
                if verb == "repeat" and isinstance(args, dict):
                    args = {**args, "steps": rename(args.get("steps"))}
                step = {LEGACY_VERBS.get(verb, verb): args}
            out.append(step)
        return out

    scenarios = data.get("scenarios")
    if isinstance(scenarios, list):
        scenarios = [
            {**raw, "steps": rename(raw.get("steps"))} if isinstance(raw, dict) else raw
            for raw in scenarios
        ]
    migrated = {**data, "kvconform": "scenarios/2", "scenarios": scenarios}

    def key(path: PathKey) -> PathKey:
        return tuple(
            LEGACY_VERBS.get(part, part)
            if isinstance(part, str) and i >= 2 and path[i - 2] == "steps"
            else part
            for i, part in enumerate(path)
        )

    lines = {key(path): line for path, line in document.lines.items()}
    return Document(document.file, migrated, lines)


def load_scenario_file(path: Path) -> list[Case]:
    """Load, validate and compile every scenario in one file."""
    document = migrate(load_yaml(path))
    validate(document, "scenarios")
    area = document.data["area"]
    cases = []
    for index, raw in enumerate(document.data["scenarios"]):
        cases.append(_Compiler(document, ("scenarios", index), area).compile(raw))
    return cases
