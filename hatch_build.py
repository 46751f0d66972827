"""Build hook: keep editable installs pointing at the working tree.

The wheel force-includes the top-level folders under ``kvconform/``. In an
editable install that would copy them into site-packages, where edits to the
working tree would not be seen; instead ``src/kvconform/__init__.py`` extends
the package path to the checkout. So an editable build force-includes only a
marker file.
"""

from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class EditableLayoutHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            build_data["force_include_editable"] = {
                "src/kvconform/py.typed": "kvconform/py.typed",
            }
