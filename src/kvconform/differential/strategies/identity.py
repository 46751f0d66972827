"""The key-side rules of the class ``identity``: models made, reloaded, hooked and
dropped, and their instance ids read.
"""

from __future__ import annotations

from kvconform.differential.strategies.source import pick
from kvconform.differential.strategies.state import KeyState, _Model
from kvconform.protocol import operations as ops
from kvconform.values import (
    ModelSpec,
)


class IdentityRules(KeyState):
    """Models: made, reloaded, hooks toggled, ids read, dropped."""

    def new_model(self) -> None:
        self.add_model(self.model_spec())

    def reload_model(self) -> None:
        untouched = {n: m for n, m in self.models.items() if not m.toggled}
        if not untouched:
            return
        self.reload_from(self.pick(untouched))

    def set_hook(self) -> None:
        if not self.scope.hook_toggles or not any(m.spec.hooks for m in self.models.values()):
            return
        name = self.pick({n: m for n, m in self.models.items() if m.spec.hooks})
        hook = pick(self.src, [h for h, _ in self.models[name].spec.hooks])
        present = self.models[name].toggle(hook)
        self.ops.append(ops.ModelSetHook(model=name, hook=hook, present=present))
        self.maybe_read(name)

    def instance_id(self) -> None:
        if not self.models:
            return
        self.ops.append(ops.ModelInstanceId(model=self.pick(self.models)))

    def drop_model(self) -> None:
        if self.models:
            self.drop(self.pick(self.models))

    def add_model(self, spec: ModelSpec) -> str:
        name = self.fresh("m")
        self.models[name] = _Model(spec)
        self.ops.append(ops.ModelNew(handle=name, spec=spec))
        self.read(name)
        return name

    def reload_from(self, source: str) -> str:
        name = self.fresh("m")
        self.models[name] = _Model(self.models[source].spec)
        self.ops.append(ops.ModelReload(model=source, handle=name))
        self.read(name)
        return name
