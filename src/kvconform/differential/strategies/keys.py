"""The key-side program: every class's rules together, the stories that cross them, and
:func:`key_program` (with its strategy, :func:`key_programs`).
"""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import strategies as st

from kvconform.differential.compare import Program
from kvconform.differential.strategies.scope import Scope
from kvconform.differential.strategies.source import Source, flag, pick, strategy
from kvconform.differential.strategies.table import TableRules
from kvconform.protocol import operations as ops


class KeyBuilder(TableRules):
    """One program under construction: every rule, in a fixed order."""

    def rules(self) -> list[Callable[[], None]]:
        """Every rule, in a fixed order whatever is live (so a step means the same thing
        after shrinking deleted an earlier one); a rule whose preconditions fail adds nothing.
        Rules listed twice are drawn twice as often."""
        rules: list[Callable[[], None]] = [
            self.new_model,
            self.new_cache,
            self.append,
            self.append,
            self.truncate,
            self.truncate,
            self.alloc_id,
            self.alloc_id,
            self.instance_id,
            self.instance_id,
            self.cache_len,
            self.clear,
            self.replace_layer,
            self.replace_layer,
            self.reload_model,
            self.set_hook,
            self.set_hook,
            self.drop_model,
            self.drop_cache,
            self.story_restore,
        ]
        if self.plan:
            rules += [
                self.new_session,
                self.check,
                self.check,
                self.check,
                self.drop_session,
                self.plan_key,
                self.plan_key,
                self.story_rewind,
                self.story_rebuild,
                self.story_hooks,
            ]
        return rules + self.table_rules()

    # stories: short sequences real engines run, with random parts

    def story_rewind(self) -> None:
        """A plan, its cache grown and rewound (speculative decoding), the plan checked."""
        if not (self.models and self.caches):
            return
        model, cache = self.pick(self.models), self.pick(self.caches)
        session = self.session_on(model, cache)
        for _ in range(self.src.integer(1, 3)):
            pick(self.src, (self.append_to, self.truncate_to))(cache)
            if flag(self.src):
                self.check_with(session, model, cache)
        self.check_with(session, model, cache)

    def story_rebuild(self) -> None:
        """A plan, its model and/or cache dropped and built again alike, the plan checked
        against the new ones (the slot-pooling and reload stories, PLAN-14)."""
        if not (self.models and self.caches):
            return
        model, cache = self.pick(self.models), self.pick(self.caches)
        session = self.session_on(model, cache)
        which = pick(self.src, ("model", "cache", "both", "reload"))
        if which == "reload" and self.models[model].toggled:
            which = "model"
        if which == "reload":
            model = self.reload_from(model)
        if which in ("model", "both"):
            spec = self.models[model].spec
            self.drop(model)
            model = self.add_model(spec)
        if which in ("cache", "both"):
            cache_geometry = self.caches[cache].geometry
            self.drop(cache)
            cache = self.add_cache(cache_geometry)
        self.check_with(session, model, cache)

    def story_hooks(self) -> None:
        """A plan, its model's hook toggled and restored, the plan checked each time (PLAN-18)."""
        with_hooks = {n: m for n, m in self.models.items() if m.spec.hooks}
        if not (with_hooks and self.caches and self.scope.hook_toggles):
            return
        model = self.pick(with_hooks)
        cache = self.pick(self.caches)
        session = self.session_on(model, cache)
        hook, _ = pick(self.src, self.models[model].spec.hooks)
        for _ in range(2):  # away from its state and back
            present = self.models[model].toggle(hook)
            self.ops.append(ops.ModelSetHook(model=model, hook=hook, present=present))
            self.maybe_read(model)
            self.check_with(session, model, cache)

    def story_restore(self) -> None:
        """A layer restored from an offload tier: a plan on a cache, the cache grown, one
        layer replaced in place, its length read and the plan checked (ALLOC-4, ALLOC-11,
        PLAN-10)."""
        if not self.caches:
            return
        cache = self.pick(self.caches)
        model = self.pick(self.models) if self.models else None
        session = self.session_on(model, cache) if model and self.plan else None
        self.append_to(cache)
        self.replace_in(cache, fits=True)
        self.ops.append(ops.CacheLen(cache=cache))
        if session is not None and model is not None:
            self.check_with(session, model, cache)


def key_program(
    src: Source,
    plan: bool = True,
    max_ops: int = 60,
    scope: Scope | None = None,
    classes: frozenset[str] | None = None,
) -> Program:
    """A program over models, caches and (with ``plan``) held plans and key probes, and
    the table's other operations of ``classes`` (by default ``identity`` and, with
    ``plan``, ``plan``: the class ``plan_validity`` only when given).

    Each step is one group, so the shrinker can delete a step whole.
    """
    if classes is None:
        classes = frozenset({"identity", "plan"} if plan else {"identity"})
    builder = KeyBuilder(src, plan, scope or Scope(), classes)
    rules = builder.rules()
    while len(builder.ops) < max_ops and src.group(lambda: builder.step(rules)):
        pass
    builder.epilogue()
    return tuple(builder.ops)


def key_programs(
    plan: bool = True,
    max_ops: int = 60,
    scope: Scope | None = None,
    classes: frozenset[str] | None = None,
) -> st.SearchStrategy[Program]:
    """:func:`key_program` as a Hypothesis strategy."""
    return strategy(lambda src: key_program(src, plan, max_ops, scope, classes))
