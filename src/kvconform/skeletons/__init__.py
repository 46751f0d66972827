"""Adapter skeletons: ``kvconform new-adapter --lang python|rust|javascript DIR``.

A skeleton is a runnable stdio adapter (spec/protocol.md) that completes the
``hello`` handshake, declares the classes it was told to claim, and answers every
operation of those classes with an explicit ``failure`` ("not implemented: <op>")
for its author to replace, every operation of the other classes with
``unsupported``, and the control operations as the protocol says. Run against the
suite, it fails every applicable case with a reason naming the operation to
implement next, instead of failing to start.

The operations come from the operation table (:data:`kvconform.protocol.operations.TABLE`)
by the class each ``needs``, so a skeleton generated after an operation is added
answers it too. The templates are Python strings, one module per language.
"""

from __future__ import annotations

import contextlib
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from kvconform.protocol.operations import TABLE
from kvconform.skeletons._common import SPOKEN, Plan, classes_note, describe, written_by
from kvconform.values import CLASS_REQUIRES, CLASSES

#: The languages a skeleton can be written in.
LANGUAGES = ("python", "rust", "javascript")
#: The classes claimed when none are given.
DEFAULT_CLASSES = ("hash",)


class SkeletonError(ValueError):
    """A request the generator refuses (a bad language or class, a non-empty folder)."""


@dataclass(frozen=True)
class Skeleton:
    """A skeleton written to disk."""

    plan: Plan
    directory: Path
    #: The files written, relative to :attr:`directory`.
    files: tuple[str, ...]
    #: How to build it, from inside :attr:`directory` (empty when nothing to build).
    build: str
    #: The adapter command, from inside :attr:`directory`.
    command: str


def parse_classes(text: str | None) -> list[str]:
    """``--classes``: a comma-separated list; ``None`` is the default (``hash``)."""
    if text is None:
        return list(DEFAULT_CLASSES)
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise SkeletonError(f"--classes: no class given (choose from {', '.join(CLASSES)})")
    return names


def resolve_classes(requested: Iterable[str]) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """The classes to claim: those requested and every class they require (CONF-1).

    Returns the classes in the order of :data:`CLASSES`, and the classes added with
    the requested or added classes that required them.
    """
    wanted = list(dict.fromkeys(requested))
    unknown = [name for name in wanted if name not in CLASSES]
    if unknown:
        raise SkeletonError(
            f"--classes: unknown class {unknown[0]!r} (choose from {', '.join(CLASSES)})"
        )
    claimed = set(wanted)
    added: dict[str, list[str]] = {}
    todo = list(wanted)
    while todo:
        cls = todo.pop(0)
        for need in CLASS_REQUIRES.get(cls, ()):
            if need not in wanted:
                added.setdefault(need, []).append(cls)
            if need not in claimed:
                claimed.add(need)
                todo.append(need)
    order = tuple(c for c in CLASSES if c in claimed)
    return order, {c: tuple(added[c]) for c in CLASSES if c in added}


def plan(language: str, classes: Iterable[str], name: str = "my-adapter") -> Plan:
    """What a skeleton in ``language`` claiming ``classes`` (and their requirements) answers."""
    if language not in LANGUAGES:
        raise SkeletonError(f"--lang {language!r}: not one of {', '.join(LANGUAGES)}")
    order, added = resolve_classes(classes)
    return Plan(
        language=language,
        name=name,
        classes=order,
        added=added,
        claimed=tuple(spec for spec in TABLE if spec.needs in order),
        unclaimed=tuple(spec for spec in TABLE if spec.needs not in order),
    )


def adapter_name(directory: Path) -> str:
    """A name for the adapter from its folder: lower case, letters, digits and dashes."""
    try:
        base = directory.resolve().name.lower()
    except (OSError, RuntimeError):  # a link loop (RuntimeError before Python 3.13):
        base = directory.absolute().name.lower()  # writing the files will say so
    name = re.sub(r"[^a-z0-9]+", "-", base).strip("-")
    name = re.sub(r"^[^a-z]+", "", name)
    if not name:
        return "my-adapter"
    return f"{name}-adapter" if name in _RESERVED else name


#: Rust's keywords and the names of its built-in crates, which Cargo refuses as names.
_RUST_WORDS = (
    "alloc as async await break const continue core crate dyn else enum extern false fn for "
    "if impl in let loop match mod move mut proc-macro pub ref return self std struct super "
    "test trait true type unsafe use where while abstract become box do final macro override "
    "priv try typeof unsized virtual yield"
)
_RESERVED = frozenset(_RUST_WORDS.split())


def check_directory(directory: Path) -> None:
    """Refuse a folder that exists and is not empty, or a path that is not a folder."""
    if directory.exists() or directory.is_symlink():
        if not directory.is_dir():
            raise SkeletonError(f"{directory}: exists and is not a directory")
        if any(directory.iterdir()):
            raise SkeletonError(
                f"{directory}: the directory exists and is not empty (give a new or empty one)"
            )


def generate(language: str, classes: Iterable[str], directory: Path) -> Skeleton:
    """Write a skeleton into ``directory`` (created if missing; refused if not empty).

    Raises :class:`SkeletonError` for a bad language or class or an unusable folder,
    and :class:`OSError` when a file cannot be written.
    """
    chosen = plan(language, classes, adapter_name(directory))
    check_directory(directory)
    files, build, command = _render(chosen)
    files = {"README.md": readme(chosen, build, command), **files}
    made = [folder for folder in (directory, *directory.parents) if not folder.exists()]
    written: list[Path] = []
    try:
        for relative, text in files.items():
            path = directory / relative
            made += [f for f in (path.parent, *path.parent.parents) if not f.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            written.append(path)
            path.write_text(text, encoding="utf-8", newline="\n")
            if relative in _EXECUTABLE:
                path.chmod(path.stat().st_mode | 0o111)
    except OSError:  # a full disk, say: what was begun is taken away, so a retry can run
        for path in written:
            with contextlib.suppress(OSError):
                path.unlink()
        for folder in sorted(set(made), key=lambda f: len(f.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return Skeleton(chosen, directory, tuple(files), build, command)


#: Files made executable (those with a ``#!`` line).
_EXECUTABLE = frozenset({"adapter.py", "adapter.js"})


#: How each language's skeleton is shown and what its README adds.
_DISPLAY = {"python": "Python", "rust": "Rust", "javascript": "JavaScript (Node)"}
_NOTES = {
    "python": "It needs Python 3.8 or later and nothing but the standard library; where\n"
    "`python3` is not the name of Python 3, run it as `python adapter.py`.",
    "rust": "It uses the standard library only (no dependency, so `--offline` builds it).\n"
    "For faster runs build with `cargo build --offline --release` and run\n"
    "`target/release/@@NAME@@` instead.",
    "javascript": "It needs Node and no npm package. It speaks protocol 2, in which every count\n"
    "travels as a decimal string, so the built-in `JSON.parse` reads every request exactly\n"
    "(read a count with `count()`, a stamp's with `bigCount()`), and it declares\n"
    "`uint_bits: 53`: its counts are Numbers, so no case sends a wider one.",
}


def readme(chosen: Plan, build: str, command: str) -> str:
    """The skeleton's README.md: what it declares, how to build and run it, what to write."""
    claimed = "\n".join(f"- `{spec.name}` {describe(spec, name=False)}" for spec in chosen.claimed)
    unclaimed = ", ".join(f"`{spec.name}`" for spec in chosen.unclaimed)
    fmt = (
        "`format`: writes 1, reads [1] (block format profile v1), because it claims `signature`"
        if chosen.signature
        else "`format`: writes null, reads [] (nothing), because it claims no `signature` class"
    )
    batch = (
        "answers a not-implemented failure until you implement it (run `hash` on each program)"
        if "hash" in chosen.classes
        else "answers `unsupported` (the class `hash` is not claimed)"
    )
    others = (
        f"The operations of the classes not claimed ({unclaimed}) are answered\n"
        "`unsupported`, as the protocol requires (PROTO-23). "
        if unclaimed
        else ""
    )
    build_step = f"Build it:\n\n```sh\n{build}\n```\n\n" if build else ""
    return _reflow(f"""# {chosen.name}

<!-- Written by {written_by(chosen.language)}.
What to replace: each "not implemented" answer in the adapter's source, with a call on
your implementation. The protocol is spec/protocol.md in kvconform. -->

A kvconform adapter skeleton in {_DISPLAY[chosen.language]}: a program that speaks the stdio
protocol of `spec/protocol.md` in kvconform (installed with the package as
`kvconform/data/spec/protocol.md`; the message schemas are in
`conformance/schema/protocol/`). {_NOTES[chosen.language].replace("@@NAME@@", chosen.name)}

It completes the `hello` handshake (protocol {SPOKEN[chosen.language]}) and declares:

- classes: {classes_note(chosen)};
- {fmt}.

Every operation of a claimed class is answered with the failure
`"not implemented: <op>"`: replace each with a call on your implementation.
{others}`reset` answers `ok: null` (release every handle there), `shutdown` answers
`ok: null` and exits, and `hash_batch` {batch}.

{build_step}Run the suite against it, from this folder:

```sh
kvconform run --adapter-cmd "{command}"
```

As generated, the handshake completes and every applicable case fails with
"not implemented: <op>" (exit status 1), so the report says what to implement next;
a case of a class not claimed is reported not applicable. The few cases that only
probe for a refusal (a u64 out of range, a string with no UTF-8 form: any refusal
will do, CONF-9) pass already.

The operations to implement:

{claimed}
""")


def _reflow(markdown: str, width: int = 88) -> str:
    """Prose paragraphs and list items wrapped to ``width``; headings, code and comments kept."""

    def fill(text: str, first: str = "", rest: str = "") -> str:
        wrapper = textwrap.TextWrapper(
            width,
            initial_indent=first,
            subsequent_indent=rest,
            break_on_hyphens=False,
            break_long_words=False,
        )
        return wrapper.fill(" ".join(text.split()))

    blocks = []
    for block in markdown.strip("\n").split("\n\n"):
        if block.startswith(("#", "```", "<!--")):
            blocks.append(block)
        elif block.startswith("- "):
            items = ("\n" + block).split("\n- ")[1:]
            blocks.append("\n".join(fill(item, "- ", "  ") for item in items))
        else:
            blocks.append(fill(block))
    return "\n\n".join(blocks) + "\n"


def _render(chosen: Plan) -> tuple[dict[str, str], str, str]:
    """The language's files, build command and adapter command."""
    from kvconform.skeletons import _javascript, _python, _rust

    renderers: dict[str, Callable[[Plan], tuple[dict[str, str], str, str]]] = {
        "python": _python.render,
        "rust": _rust.render,
        "javascript": _javascript.render,
    }
    return renderers[chosen.language](chosen)
