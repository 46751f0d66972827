"""What the skeletons of every language share: the plan of one skeleton, and the words
the templates use for operations, fields and declarations (:mod:`kvconform.skeletons`
and each language's module import them from here)."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources

import kvconform
from kvconform.protocol.operations import FieldKind, OpSpec, ResultKind


@dataclass(frozen=True)
class Plan:
    """What one skeleton claims and answers."""

    language: str
    #: The adapter's name (its ``hello`` ``name``; the Cargo package for Rust).
    name: str
    #: The classes claimed, in the order of :data:`kvconform.values.CLASSES`.
    classes: tuple[str, ...]
    #: Classes added because a claimed class requires them: class -> the classes
    #: that required it.
    added: Mapping[str, tuple[str, ...]]
    #: The operations of the claimed classes, in the table's order.
    claimed: tuple[OpSpec, ...]
    #: The operations of the other classes: answered ``unsupported``.
    unclaimed: tuple[OpSpec, ...]

    @property
    def signature(self) -> bool:
        """Whether the skeleton claims the class ``signature`` (and so declares a format)."""
        return "signature" in self.classes

    @property
    def format_writes(self) -> int | None:
        return 1 if self.signature else None

    @property
    def format_reads(self) -> tuple[int, ...]:
        return (1,) if self.signature else ()


# --- what the templates say about each operation ---------------------------------

_FIELD_TEXT: dict[FieldKind, str] = {
    "new_handle": "the name to bind the new object to",
    "handle": "a live handle",
    "released": "a live handle, released by this operation",
    "str": "string",
    "bool": "boolean",
    "count": "integer",
    "count_or_null": "integer or null",
    "program": "array of mix ops",
    "model_spec": "model spec",
    "geometry": "geometry",
    "plan_identity": "plan identity",
    "step": "step inputs",
    "payload": "payload",
    "signature": "signature",
    "signature_or_null": "signature or null",
    "layout_or_null": "layout",
    "str_or_null": "string or null",
    "str_list": "array of strings",
}

_RESULT_TEXT: dict[ResultKind, str] = {
    "null": "null",
    "u64": "a u64 as a decimal string",
    "u64_list": "an array of u64 decimal strings, one per finish",
    "count": "an integer",
    "bool": "a boolean",
    "signature": "a signature",
    "validity": '"valid", "allocation_changed" or "stale"',
}


def describe(spec: OpSpec, *, name: bool = True) -> str:
    """One line on an operation: its name, class, request fields and ``ok`` value."""
    fields = []
    for f in spec.fields:
        text = f"{f.name}: {_FIELD_TEXT[f.kind]}"
        if f.added:  # the only fields a request may leave out (PROTO-31)
            text += " (only when not the default)"
        fields.append(text)
    text = (
        f"(class {spec.needs}): {'; '.join(fields) or 'no fields'}. "
        f"ok: {_RESULT_TEXT[spec.result]}."
    )
    return f"{spec.name} {text}" if name else text


def not_implemented(op: str) -> str:
    """The failure text a skeleton answers an operation it claims but does not implement."""
    return f"not implemented: {op}"


#: The protocol version each language's skeleton speaks (spec/protocol.md): JavaScript's
#: is 2, in which every count is a decimal string, so its built-in ``JSON.parse`` is exact.
SPOKEN = {"python": 1, "rust": 1, "javascript": 2}


def written_by(language: str) -> str:
    """Which command, package, suite and protocol wrote a skeleton: its header's words."""
    return (
        f"`kvconform new-adapter` (kvconform {kvconform.__version__}, suite "
        f"{kvconform.SUITE_VERSION}, protocol {SPOKEN[language]})"
    )


def header_lines(chosen: Plan, replace: Iterable[str], width: int = 78) -> list[str]:
    """The header comment of a generated file, as lines without a comment marker."""
    lines = [
        f"{chosen.name}: a kvconform stdio adapter skeleton ({chosen.language}), written by",
        *textwrap.wrap(f"{written_by(chosen.language)}.", width),
        *textwrap.wrap(f"It claims the classes {', '.join(chosen.classes)}.", width),
        "",
        "What to replace:",
    ]
    for item in replace:
        lines += textwrap.wrap(item, width, initial_indent="- ", subsequent_indent="  ")
    lines += [
        "",
        "The protocol is spec/protocol.md in kvconform (installed with the package as",
        "kvconform/data/spec/protocol.md); the message schemas are in",
        "conformance/schema/protocol/. README.md has the command that runs the suite",
        "against this adapter.",
    ]
    return lines


def comment(text: str, marker: str, width: int = 88) -> str:
    """``text`` wrapped as comment lines starting with ``marker``."""
    return "\n".join(f"{marker} {line}" for line in textwrap.wrap(text, width - len(marker) - 1))


def template(name: str) -> str:
    """The text of a skeleton template kept as data in ``skeletons/templates/``."""
    return (resources.files("kvconform.skeletons") / "templates" / name).read_text(encoding="utf-8")


def fill(template: str, **values: str) -> str:
    """``template`` with each ``@@KEY@@`` replaced by ``values[KEY]``; none may be left."""
    text = template
    for key, value in values.items():
        marker = f"@@{key}@@"
        if marker not in template:
            raise KeyError(f"the template has no {marker}")
        text = text.replace(marker, value)
    left = re.search(r"@@[A-Z_]+@@", text)
    if left:
        raise KeyError(f"the template's {left.group(0)} was not filled")
    return text


def format_note(chosen: Plan) -> str:
    """What the skeleton declares as its block format profile, and why."""
    if chosen.signature:
        return (
            "The block format profile (PROF-3): writes 1, reads [1] (profile v1), "
            "because the class signature is claimed."
        )
    return (
        "The block format profile (PROF-3): writes null, reads [] (nothing), because "
        "the class signature is not claimed."
    )


def classes_note(chosen: Plan) -> str:
    """``"hash, identity, plan (identity added: plan requires it)"``."""
    text = ", ".join(chosen.classes)
    if chosen.added:
        why = "; ".join(
            f"{cls} added: {' and '.join(by)} require{'s' if len(by) == 1 else ''} it"
            for cls, by in chosen.added.items()
        )
        text += f" ({why})"
    return text
