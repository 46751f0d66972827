"""One declared hook carrying the hooks a case toggles (conformance/INTERPRETING.md
§6.4.1 rule 6), for an engine whose fixed key schema has fewer hooks to a family than
the case toggles (PLAN-17, CONF-14).

A plan's validity reads a model's hooks only as one state, compared between the
session's build and the check (PLAN-18), and an instance id does not read them at all
(ID-10). A case that toggles two hooks of one model to show that each change of state
counts keeps that point with one hook that changes whenever the state changes, so
long as every comparison the case makes sees equal states exactly where it sees equal
values of that hook; :mod:`kvconform.harness.reexpress` then writes the case into the
schema as any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops


class NoRoom(str):
    """Why rule 3 of §6.4.1 finds no schema family for a family of a case: rules 5 and 6
    may still rewrite it, where a reason of rule 2 is final."""


def hooks_in_turn(case: Case, schema: Mapping[str, Mapping[str, str]]) -> Case | str | None:
    """``case`` with the toggled hooks of each family that toggles more hooks than any
    family of ``schema`` has carried by one hook, the reason its point does not
    survive that, or ``None`` when the rule is not meant for it."""
    most = max((sum(1 for k in f.values() if k == "hook") for f in schema.values()), default=0)
    if most == 0:
        return None
    models: dict[str, list[ops.ModelNew]] = {}
    toggled: dict[str, list[str]] = {}  # family -> toggled hooks, in program order
    family_of: dict[str, str] = {}
    keyed: set[str] = set()  # families a plan_key or a reload also uses
    for op in case.program:
        if isinstance(op, ops.ModelNew):
            models.setdefault(op.spec.family, []).append(op)
            family_of[op.handle] = op.spec.family
        elif isinstance(op, ops.PlanKey):
            keyed.add(op.identity.model.family)
        elif isinstance(op, ops.ModelReload):
            keyed.add(family_of[op.model])
            family_of[op.handle] = family_of[op.model]
        elif isinstance(op, ops.ModelSetHook):
            names = toggled.setdefault(family_of[op.model], [])
            if op.hook not in names:
                names.append(op.hook)
    folded = {f: names for f, names in toggled.items() if len(names) > most}
    if not folded:
        return None
    for family, names in folded.items():
        if family in keyed or any(
            not set(names) <= {n for n, _ in new.spec.hooks} for new in models[family]
        ):
            return None  # the rule is not meant for it: rule 3's reason stands
    program = list(case.program)
    # per model handle: its hooks' values, and the carrier hook's value
    state: dict[str, dict[str, bool]] = {}
    value: dict[str, bool] = {}
    built: dict[str, tuple[str, dict[str, bool], bool]] = {}
    for index, op in enumerate(case.program):
        if isinstance(op, ops.ModelNew) and op.spec.family in folded:
            names = folded[op.spec.family]
            state[op.handle] = dict(op.spec.hooks)
            value[op.handle] = state[op.handle][names[0]]
            hooks = [(n, p) for n, p in op.spec.hooks if n not in names]
            hooks.append((sorted(names)[0], value[op.handle]))
            program[index] = replace(op, spec=replace(op.spec, hooks=tuple(sorted(hooks))))
        elif isinstance(op, ops.ModelNew):
            state.pop(op.handle, None)  # a handle given again names another model
        elif isinstance(op, ops.ModelSetHook) and op.model in state:
            if state[op.model][op.hook] != op.present:
                state[op.model][op.hook] = op.present
                value[op.model] = not value[op.model]
            carrier = sorted(folded[family_of[op.model]])[0]
            program[index] = replace(op, hook=carrier, present=value[op.model])
        elif isinstance(op, ops.SessionNew) and op.model in state:
            built[op.handle] = (op.model, dict(state[op.model]), value[op.model])
        elif isinstance(op, ops.SessionValid | ops.SessionValidity) and op.session in built:
            model, then, then_value = built[op.session]
            if model == op.model and (then == state[model]) != (then_value == value[model]):
                return (
                    f"its point is two {family_of[model]} hook states that one hook cannot "
                    "tell apart: a session built in one is checked in the other"
                )
    how = "; ".join(
        f"{family} hooks {', '.join(sorted(names))} carried by {sorted(names)[0]}"
        for family, names in folded.items()
    )
    return replace(
        case,
        program=tuple(program),
        reexpressed=(
            *case.reexpressed,
            f"one hook changes wherever the model's hook state changes ({how})",
        ),
    )
