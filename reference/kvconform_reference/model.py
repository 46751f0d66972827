"""A model as a held plan sees it (spec/plan.md).

What the plan bakes from a model is its *structure* (family and structural
parameters), the presence of each optional hook, and -- standing in for the
weights -- its never-recycled instance id (PLAN-15, PLAN-8). The weights
themselves are not modelled: the specification says nothing about them
except that their identity is the instance id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kvconform_reference.identity import ModelInstanceId

#: A structural parameter: an unsigned integer, a float, or a string literal
#: (a mask policy, an activation name).
Param = int | float | str


@dataclass(frozen=True)
class ModelConfig:
    """Family and structural parameters: everything the plan's graph depends on."""

    family: str
    params: Mapping[str, Param] = field(default_factory=dict)
    hooks: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "hooks", MappingProxyType(dict(self.hooks)))
        for name, value in self.params.items():
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise TypeError(f"parameter {name!r} must be an int, a float or a string")
            if isinstance(value, int) and not 0 <= value < 1 << 64:
                raise ValueError(f"parameter {name!r} must fit in a u64")


class Model:
    """A constructed model: a config, live hook settings and an instance id."""

    def __init__(self, config: ModelConfig) -> None:
        self.config = config
        self._hooks = dict(config.hooks)
        self.instance_id = ModelInstanceId.mint()  # ID-1

    def reload(self) -> Model:
        """Construct the same model again, e.g. from disk: a new id (ID-6)."""
        return Model(self.config)

    @property
    def hooks(self) -> Mapping[str, bool]:
        return MappingProxyType(self._hooks)

    def set_hook(self, name: str, present: bool) -> None:
        """Attach or detach an optional hook in place. The id stays (ID-10).

        The hooks a model can carry are those its configuration declares, so
        switching one back restores exactly the key it had (PLAN-18).
        """
        if name not in self._hooks:
            raise KeyError(f"the {self.config.family} configuration declares no hook {name!r}")
        self._hooks[name] = present
