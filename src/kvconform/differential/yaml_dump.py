"""How a counterexample's scenario file is written in YAML: one step on one line (flow
style), nothing shared by anchors, and every string that a reader could misread or that
could hide text written out escaped."""

from __future__ import annotations

from typing import Any

import yaml


class _Flow(dict):  # type: ignore[type-arg]
    """A mapping written in flow style: one step on one line."""


class _FlowList(list):  # type: ignore[type-arg]
    """A list written in flow style."""


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True

    def write_double_quoted(self, text: str, split: bool = True) -> None:
        """A scalar with a character that is not printable (a bidirectional control, a
        noncharacter, a format character) is written with every character outside ASCII
        escaped: the file means the same, and reads in review as it means (no text
        reversed or hidden by the adapter's words)."""
        if text.isprintable() and "\ufeff" not in text:
            super().write_double_quoted(text, split)
            return
        allow, self.allow_unicode = self.allow_unicode, False
        try:
            super().write_double_quoted(text, split)
        finally:
            self.allow_unicode = allow


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    """Plain or quoted as PyYAML likes, unless a character could be lost: line and
    paragraph separators, NEL, a BOM, controls and other non-printables are written
    escaped in double quotes (a quoted scalar folds a raw line break on reading)."""
    style = None if text.isprintable() and "\ufeff" not in text else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(
    _Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data.items(), True)
)
_Dumper.add_representer(
    _FlowList, lambda d, data: d.represent_sequence("tag:yaml.org,2002:seq", data, True)
)
