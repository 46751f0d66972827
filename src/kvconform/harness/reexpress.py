"""Re-expressing a case into the shape an implementation declares (CONF-7, CONF-12).

A case written in one shape is often about a rule that holds as well in another:
a plan probe written with free parameter names checks the key of whatever fields
an engine's fixed schema has (PLAN-17), and a v1 signature scenario checks rules
that profile v2 keeps unchanged under a layout (PROF-8). Where a case's point
survives in the declared shape, the case is rewritten into it and judged there,
and the report says so; only a case whose point needs what the shape cannot hold
is set aside, with that reason. The rules are those of
``conformance/INTERPRETING.md`` §6.4, written so that a runner in another
language rewrites every case the same way.

:func:`reexpress` is the entry: it returns the rewritten case, a reason it
cannot be rewritten, or ``None`` when no rewriting is meant for it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from kvconform.harness.checks import ErrorIs, OutcomeCheck, Refuses, SignatureIs
from kvconform.harness.hook_carrier import NoRoom, hooks_in_turn
from kvconform.harness.key_schema import model_spec, outside_schema, schema_models
from kvconform.harness.reexpress_v2 import block_of as block_of  # re-exported
from kvconform.harness.reexpress_v2 import for_readable_set, is_v1_scenario, lift_to_v2
from kvconform.harness.scenario import Case
from kvconform.protocol import operations as ops
from kvconform.values import AdapterInfo, ModelSpec, Param, Signature

#: The kinds of field a fixed key schema types (PLAN-17), parameters first.
KINDS = ("u64", "f64", "str", "hook")


def reexpress(case: Case, info: AdapterInfo) -> Case | str | None:
    """``case`` rewritten into the shape ``info`` declares, a reason it cannot be, or ``None``.

    Called for a case that does not apply as written. ``None``: no rewriting is
    meant for it (its reason stands as it is).
    """
    out = case
    under_set = for_readable_set(out, info)
    if isinstance(under_set, str):
        return under_set
    out = under_set or out
    if is_v1_scenario(out):
        lifted = lift_to_v2(out, info)
        if isinstance(lifted, str):
            return lifted
        out = lifted or out
    schema = info.key_schema
    if schema is not None and _outside(out, schema) and schema_models(out, schema) is None:
        moved = into_schema(out, schema)
        if isinstance(moved, str):
            return moved
        out = moved
    if info.dtypes is not None and any(
        isinstance(op, ops.Verify) and op.expected.dtype not in info.dtypes for op in out.program
    ):
        scaled = into_dtypes(out, info.dtypes)
        if isinstance(scaled, str):
            return scaled
        out = scaled
    return None if out is case else out


def _outside(case: Case, schema: Mapping[str, Mapping[str, str]]) -> bool:
    return any(
        (spec := model_spec(op)) is not None and outside_schema(spec, schema, "") is not None
        for op in case.program
    )


# -- a fixed per-family key schema (PLAN-17) ---------------------------------------


def _kind(value: Param) -> str:
    if isinstance(value, str):
        return "str"
    return "f64" if isinstance(value, float) else "u64"


def _same_value(value: object) -> object:
    """A value as compared for variation: a float by its bits (two NaNs alike)."""
    if isinstance(value, float):
        return ("f64", struct.pack("<d", value))
    return (type(value).__name__, value)


def _encodable(text: str) -> bool:
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)  # a lone surrogate has no UTF-8


@dataclass(frozen=True)
class SchemaMap:
    """Where each family, parameter and hook of a case goes in the declared schema."""

    families: Mapping[str, str]
    #: (original family, original name) -> the declared field, or ``None`` when the
    #: name is left out (it holds one value throughout the case).
    fields: Mapping[tuple[str, str], str | None]

    def spec(self, spec: ModelSpec) -> ModelSpec:
        family = self.families[spec.family]
        params = tuple(
            (field, value)
            for name, value in spec.params
            if (field := self.fields[(spec.family, name)]) is not None
        )
        hooks = tuple(
            (field, present)
            for name, present in spec.hooks
            if (field := self.fields[(spec.family, name)]) is not None
        )
        return ModelSpec(family, params, hooks)

    def describe(self) -> str:
        parts = []
        for original, family in self.families.items():
            moved = [
                f"{name}->{field}" if field is not None else f"{name} left out"
                for (fam, name), field in self.fields.items()
                if fam == original and field != name
            ]
            head = original if original == family else f"{original}->{family}"
            parts.append(head + (f" ({', '.join(moved)})" if moved else ""))
        return "models written in the declared key schema: " + "; ".join(parts)


def _uses(case: Case) -> tuple[list[ModelSpec], list[tuple[str, str, bool]], set[int]]:
    """The case's model specs, its hook toggles (family, hook, present), and its probes."""
    specs: list[ModelSpec] = []
    toggles: list[tuple[str, str, bool]] = []
    family_of: dict[str, ModelSpec] = {}
    for op in case.program:
        if isinstance(op, ops.ModelNew):
            specs.append(op.spec)
            family_of[op.handle] = op.spec
        elif isinstance(op, ops.PlanKey):
            specs.append(op.identity.model)
        elif isinstance(op, ops.ModelReload):
            family_of[op.handle] = family_of[op.model]
        elif isinstance(op, ops.ModelSetHook):
            toggles.append((family_of[op.model].family, op.hook, op.present))
    probes = {
        c.op_index
        for c in case.checks
        if isinstance(c, OutcomeCheck) and isinstance(c.expect, Refuses)
    }
    return specs, toggles, probes


def schema_map(case: Case, schema: Mapping[str, Mapping[str, str]]) -> SchemaMap | str:
    """How the case's models go into ``schema`` (INTERPRETING.md §6.4.1), or why they cannot."""
    specs, toggles, _ = _uses(case)
    # Every field name of each family the case uses, with its kind, and the values it
    # takes (absence being one) across the case's specs of that family.
    order: list[str] = []
    kinds: dict[str, dict[str, str]] = {}
    values: dict[str, dict[str, set[object]]] = {}
    for spec in specs:
        if spec.family not in kinds:
            order.append(spec.family)
            kinds[spec.family] = {}
            values[spec.family] = {}
        given = [(n, _kind(v), _same_value(v)) for n, v in spec.params]
        given += [(n, "hook", ("hook", p)) for n, p in spec.hooks]
        for name, kind, value in given:
            if kinds[spec.family].setdefault(name, kind) != kind:
                return (
                    f"its point is the {spec.family} field {name!r} given as both "
                    f"{kinds[spec.family][name]} and {kind}; a fixed schema types each field once"
                )
            values[spec.family].setdefault(name, set()).add(value)
    for family, hook, present in toggles:
        if kinds.get(family, {}).setdefault(hook, "hook") != "hook":
            return f"its point is {hook!r} as both a {family} parameter and a hook"
        values[family].setdefault(hook, set()).add(("hook", present))
        values[family][hook].add(("hook", not present))  # a toggle varies it
    for family in order:
        for spec in specs:
            if spec.family == family:
                named = {n for n, _ in spec.params} | {n for n, _ in spec.hooks}
                for name in kinds[family]:
                    if name not in named:
                        values[family][name].add(("absent",))
    for family in order:
        for name in (family, *kinds[family]):
            if not _encodable(name):
                return (
                    f"its point is the name {name!r}, which has no UTF-8 form; a fixed "
                    "schema's families and fields are names the engine declared"
                )
    if len(order) > len(schema):
        return f"uses {len(order)} model families; the declared key schema has {len(schema)}"

    def varying(family: str, name: str) -> bool:
        return len(values[family][name]) > 1

    def room(family: str, target: str) -> bool:
        declared = schema[target]
        for kind in KINDS:
            need = sum(1 for n, k in kinds[family].items() if k == kind and varying(family, n))
            have = sum(1 for k in declared.values() if k == kind)
            if need > have:
                return False
        return True

    families: dict[str, str] = {}
    taken: set[str] = set()
    for family in order:  # a family the schema has, with room, stays itself
        if family in schema and room(family, family):
            families[family] = family
            taken.add(family)
    for family in order:
        if family in families:
            continue
        target = next((t for t in sorted(schema) if t not in taken and room(family, t)), None)
        if target is None:
            need = ", ".join(
                f"{sum(1 for n, k in kinds[family].items() if k == kind and varying(family, n))}"
                f" {kind}"
                for kind in KINDS
            )
            return NoRoom(
                f"its {family} models vary {need} fields; no free family of the declared "
                "key schema has that many of each type"
            )
        families[family] = target
        taken.add(target)
    placed: dict[tuple[str, str], str | None] = {}
    for family in order:
        declared = schema[families[family]]
        free = {kind: sorted(n for n, k in declared.items() if k == kind) for kind in KINDS}
        names = sorted(kinds[family])
        for want_varying in (True, False):
            group = [n for n in names if varying(family, n) == want_varying]
            for name in group:  # a name the family declares, of the same kind, stays
                kind = kinds[family][name]
                if name in free[kind]:
                    free[kind].remove(name)
                    placed[(family, name)] = name
            for name in group:
                if (family, name) in placed:
                    continue
                kind = kinds[family][name]
                placed[(family, name)] = free[kind].pop(0) if free[kind] else None
    return SchemaMap(families, dict(sorted(placed.items())))


def _rewriter(mapping: SchemaMap) -> Callable[[ops.Op], ops.Op]:
    family_of: dict[str, str] = {}

    def rewrite(op: ops.Op) -> ops.Op:
        if isinstance(op, ops.ModelNew):
            family_of[op.handle] = op.spec.family
            return replace(op, spec=mapping.spec(op.spec))
        if isinstance(op, ops.ModelReload):
            family_of[op.handle] = family_of[op.model]
            return op
        if isinstance(op, ops.PlanKey):
            return replace(op, identity=replace(op.identity, model=mapping.spec(op.identity.model)))
        if isinstance(op, ops.ModelSetHook):
            field = mapping.fields[(family_of[op.model], op.hook)]
            assert field is not None  # a toggled hook varies, so it always has a field
            return replace(op, hook=field)
        return op

    return rewrite


def into_schema(case: Case, schema: Mapping[str, Mapping[str, str]]) -> Case | str:
    """``case`` with its models written in ``schema``, or why its point does not survive."""
    mapping = schema_map(case, schema)
    carried = hooks_in_turn(case, schema) if isinstance(mapping, NoRoom) else None
    if isinstance(carried, Case) and not isinstance(again := schema_map(carried, schema), str):
        case, mapping = carried, again  # rule 6, then rules 1 to 4 again
    elif isinstance(mapping, str):
        named = names_as_strings(case, schema)  # rule 5
        return named if named is not None else carried if isinstance(carried, str) else mapping
    rewrite = _rewriter(mapping)
    program = tuple(rewrite(op) for op in case.program)
    return replace(case, program=program, reexpressed=(*case.reexpressed, mapping.describe()))


def _spelling(spec: ModelSpec) -> str:
    """A model spec as one string, the same for equal specs (order aside) and different
    for different ones: its family, then its sorted parameters and hooks, each name and
    value tagged and length-prefixed (a float as its bits)."""

    def part(text: str) -> str:
        return f"{len(text)}:{text}"

    def value(v: Param) -> str:
        if isinstance(v, float):
            return "f64 " + struct.pack("<d", v).hex()
        return f"{_kind(v)} {v}"

    fields = [part(n) + part(value(v)) for n, v in sorted(spec.params)]
    fields += [part(n) + part(f"hook {'true' if p else 'false'}") for n, p in sorted(spec.hooks)]
    return part(spec.family) + "".join(fields)


def names_as_strings(case: Case, schema: Mapping[str, Mapping[str, str]]) -> Case | None:
    """A case whose models differ only in names, re-expressed with each model's names as the
    value of one declared string field (INTERPRETING.md §6.4.1), or ``None``.

    The point of such a case is that names key exactly as spelled (HASH-5, PLAN-16): a
    family, parameter or hook name differing only in case, Unicode form or whitespace.
    A fixed schema's names are the engine's own, but the same spelling carried as a
    string value is keyed by the same rule, so the case keeps its point.
    """
    specs, toggles, _ = _uses(case)
    if toggles or not specs:
        return None

    def unnamed(spec: ModelSpec) -> tuple[object, ...]:
        return (
            sorted((_kind(v), repr(_same_value(v))) for _, v in spec.params),
            sorted(p for _, p in spec.hooks),
        )

    first = unnamed(specs[0])
    if any(unnamed(spec) != first for spec in specs[1:]):
        return None
    if not all(_encodable(_spelling(spec)) for spec in specs):
        return None
    target = next((f for f in sorted(schema) if any(k == "str" for k in schema[f].values())), None)
    if target is None:
        return None
    field = sorted(n for n, k in schema[target].items() if k == "str")[0]

    def rewrite(spec: ModelSpec) -> ModelSpec:
        return ModelSpec(target, ((field, _spelling(spec)),), ())

    program = tuple(
        replace(op, spec=rewrite(op.spec))
        if isinstance(op, ops.ModelNew)
        else replace(op, identity=replace(op.identity, model=rewrite(op.identity.model)))
        if isinstance(op, ops.PlanKey)
        else op
        for op in case.program
    )
    how = (
        f"its models differ only in names: each is written as {target} with its family, "
        f"parameters and hooks spelled out in the string field {field}"
    )
    return replace(case, program=program, reexpressed=(*case.reexpressed, how))


# -- a dtype enum (SIG-14) ------------------------------------------------------------


def into_dtypes(case: Case, dtypes: frozenset[str]) -> Case | str:
    """Each ``verify`` whose expectation names a dtype outside ``dtypes``, with the dtypes
    it names outside them renamed to declared ones it does not name (§6.4.3), or why not.

    A verification compares its stamp, its payload (f32 under both profiles) and its
    expectation field by field, and no relation reads its answer, so a renaming within
    one operation that keeps equal names equal and different names different keeps
    every comparison's outcome; f32 is always declared and never renamed.
    """
    program = list(case.program)
    checks = list(case.checks)
    expects = {
        c.op_index: position
        for position, c in enumerate(case.checks)
        if isinstance(c, OutcomeCheck)
    }
    renamed_any: list[str] = []
    for index, op in enumerate(case.program):
        if not isinstance(op, ops.Verify) or op.expected.dtype in dtypes:
            continue
        named = [s.dtype for s in (op.recorded, op.expected) if s is not None]
        outside = sorted({d for d in named if d not in dtypes})
        free = sorted(d for d in dtypes if d not in named and d != "f32")
        if len(free) < len(outside):
            return (
                f"its point needs the dtypes {', '.join(sorted(set(named) | {'f32'}))} in one "
                f"verification; the declared dtypes are {', '.join(sorted(dtypes))}"
            )
        rename = dict(zip(outside, free, strict=False))

        def moved(sig: Signature, rename: Mapping[str, str] = rename) -> Signature:
            return replace(sig, dtype=rename.get(sig.dtype, sig.dtype))

        program[index] = replace(
            op,
            recorded=None if op.recorded is None else moved(op.recorded),
            expected=moved(op.expected),
        )
        position = expects[index]
        check = checks[position]
        assert isinstance(check, OutcomeCheck)
        expect = check.expect
        if isinstance(expect, SignatureIs):
            checks[position] = replace(check, expect=SignatureIs(moved(expect.signature)))
        elif isinstance(expect, ErrorIs) and expect.field == "dtype":
            values = {
                k: rename.get(v, v) if isinstance(v, str) else v for k, v in expect.values.items()
            }
            checks[position] = replace(check, expect=replace(expect, values=values))
        renamed_any += [f"{a}->{b}" for a, b in rename.items()]
    how = "dtypes outside the declared enum renamed within each verification: " + ", ".join(
        dict.fromkeys(renamed_any)
    )
    return replace(
        case, program=tuple(program), checks=tuple(checks), reexpressed=(*case.reexpressed, how)
    )
