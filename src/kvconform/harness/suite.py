"""The suite as installed: scenario files, vector files, and the requirement index.

Everything is found relative to :func:`kvconform.data_root`, so the same code
serves a source checkout and an installed wheel.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from kvconform.harness.checks import OutcomeCheck, ValueIs, Where

# Where the files are; named here too, where every caller has always found them.
from kvconform.harness.paths import conformance_dir as conformance_dir
from kvconform.harness.paths import scenarios_dir as scenarios_dir
from kvconform.harness.paths import spec_dir as spec_dir
from kvconform.harness.paths import vectors_dir as vectors_dir
from kvconform.harness.scenario import Case, load_scenario_file, mix_op
from kvconform.harness.yamlsource import SourceError, load_json, read_text, validate
from kvconform.protocol import operations as ops

#: A requirement definition line in spec/*.md.
REQUIREMENT_LINE = re.compile(r"^- \*\*([A-Z]+-\d+)\*\* ", re.MULTILINE)
#: The same lines after the first, found by their line break: a pattern that starts with a
#: literal is searched for that literal, one that starts with ``^`` is tried at every
#: character (six times faster over spec/, where every run reads it).
_LATER_REQUIREMENT_LINE = re.compile(r"\n- \*\*([A-Z]+-\d+)\*\* ")


@dataclass(frozen=True)
class Requirement:
    id: str
    file: str
    line: int
    text: str

    @property
    def group(self) -> str:
        return self.id.rsplit("-", 1)[0]

    @property
    def withdrawn(self) -> bool:
        """Withdrawn requirements keep their id and line, marked, and are never cited (CONF-5)."""
        return self.text.startswith("*Withdrawn")


@cache
def requirements() -> Mapping[str, Requirement]:
    """Every requirement defined in ``spec/*.md``, by id."""
    found: dict[str, Requirement] = {}
    for path in sorted(spec_dir().glob("*.md")):
        text = read_text(path)  # a regular file of at most limits.MAX_FILE_BYTES
        first = REQUIREMENT_LINE.match(text)
        matches = [first] if first else []
        matches += _LATER_REQUIREMENT_LINE.finditer(text)
        line, counted = 1, 0
        for match in matches:
            start = match.start(1) - 4  # where the line's "- **" starts
            line += text.count("\n", counted, start)
            counted = start
            end = text.find("\n", match.end())
            req = Requirement(match.group(1), path.name, line, text[match.end() : end].strip())
            if req.id in found:
                raise SourceError(str(path), line, req.id, "requirement defined twice")
            found[req.id] = req
    return found


def scenario_files() -> list[Path]:
    """The scenario files: regular files only (a folder named ``x.yaml`` or a FIFO is no file)."""
    return sorted(p for p in scenarios_dir().rglob("*.yaml") if _regular(p))


def vector_files() -> list[Path]:
    return sorted(p for p in vectors_dir().glob("*.json") if _regular(p))


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def load_vector_file(path: Path) -> list[Case]:
    """Each known-answer vector as a one-operation case."""
    document = load_json(path)
    validate(document, "vectors")
    cases = []
    for index, raw in enumerate(document.data["vectors"]):
        cases.append(_vector_case(raw, str(path), index))
    return cases


def _vector_case(raw: Mapping[str, Any], file: str, index: int) -> Case:
    program = tuple(mix_op(op) for op in raw["ops"])
    where = Where(file, None, f"vector {raw['id']}")
    expect = ValueIs(tuple(int(v, 16) for v in raw["expect"]))
    return Case(
        id=raw["id"],
        title=raw.get("note", raw["catches"]),
        cls="hash",
        requires=tuple(raw["requires"]),
        why=raw["catches"],
        file=file,
        line=None,
        program=(ops.Hash(program=program),),
        checks=(OutcomeCheck(where, 0, expect),),
        area="vectors/" + Path(file).stem,
        kind="vector",
    )


def load_file(path: Path) -> list[Case]:
    if path.suffix == ".json":
        return load_vector_file(path)
    return load_scenario_file(path)


def check_references(cases: Iterable[Case]) -> None:
    """Every cited requirement exists, and every case id is used once."""
    known = requirements()
    seen: dict[str, Case] = {}
    for case in cases:
        if case.id in seen:
            other = seen[case.id]
            raise SourceError(case.file, case.line, case.id, f"id already used at {other.file}")
        seen[case.id] = case
        for req in case.requires:
            if req not in known:
                raise SourceError(case.file, case.line, case.id, f"cites unknown requirement {req}")


@cache
def all_cases(suite_digest: str | None = None) -> tuple[Case, ...]:
    """Every scenario and vector of the installed suite, validated and cross-checked.

    From the cache of the last full load (:mod:`kvconform.harness.cache`) when
    neither the suite's files nor the code have changed since; otherwise, and
    with ``KVCONFORM_NO_CACHE=1``, by :func:`load_all_cases`. ``suite_digest``:
    the digest of the suite's files as the caller has just computed it (the
    manifest check before a run), so that they are not hashed twice.

    Each load is kept for the life of the process: by its digest, and the first made
    without one. A first call without a digest after a call with one (a run, then its
    HTML report explaining a failure) hashes the files and gets the load under that
    digest if they still hash to it, instead of loading them all again.
    """
    from kvconform.harness import cache as suite_cache
    from kvconform.harness import manifest

    if suite_digest is None and all_cases.cache_info().currsize:
        try:
            now = manifest.digest_of(manifest.file_hashes())
        except OSError:
            now = ""  # a file went while it was hashed: the load words the error
        if now:
            return all_cases(now)
    return suite_cache.cached_cases(load_all_cases, suite_digest)


def load_all_cases() -> tuple[Case, ...]:
    """Every scenario and vector, each file parsed, validated and compiled now (no cache)."""
    cases: list[Case] = []
    for path in [*scenario_files(), *vector_files()]:
        cases.extend(load_file(path))
    check_references(cases)
    return tuple(cases)
