"""Expectation files: known failures, for gating CI on regressions only.

    # kvconform expectations
    kvconform: expectations/1
    known_failures:
      - id: verify.format.older-version-refused
        reason: we still read v0 blocks (tracking issue)
        link: https://example.invalid/issues/12

With an expectations file a run fails on any failure it does not list, and
also on any listed case that now passes, so the list cannot go stale.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from kvconform.harness.runner import CaseResult
from kvconform.harness.yamlsource import SourceError, load_yaml, validate


@dataclass(frozen=True)
class KnownFailure:
    id: str
    reason: str
    link: str = ""


@dataclass(frozen=True)
class Expectations:
    file: str
    known: tuple[KnownFailure, ...]

    def ids(self) -> set[str]:
        return {k.id for k in self.known}


def load(path: Path, known_ids: Iterable[str]) -> Expectations:
    """Load and validate an expectations file; every listed id must exist."""
    document = load_yaml(path)
    validate(document, "expectations")
    known_set = set(known_ids)
    entries = []
    seen: set[str] = set()
    for index, raw in enumerate(document.data.get("known_failures") or []):
        if raw["id"] not in known_set:
            raise document.error(("known_failures", index, "id"), f"no case has id {raw['id']!r}")
        if raw["id"] in seen:
            raise document.error(("known_failures", index, "id"), f"{raw['id']!r} listed twice")
        seen.add(raw["id"])
        entries.append(KnownFailure(raw["id"], raw["reason"], raw.get("link", "")))
    return Expectations(str(path), tuple(entries))


@dataclass(frozen=True)
class Gate:
    """What an expectations file makes of a run's results."""

    unexpected_failures: tuple[str, ...]
    stale: tuple[str, ...]  # listed as failing, but passed
    expected_failures: tuple[str, ...]
    #: listed, but not run (not selected or not applicable): neither good nor bad
    unchecked: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not (self.unexpected_failures or self.stale)


def gate(results: Sequence[CaseResult], expectations: Expectations | None) -> Gate:
    listed = expectations.ids() if expectations else set()
    by_id = {r.case.id: r for r in results}
    failed = {i for i, r in by_id.items() if r.verdict == "failed"}
    passed = {i for i, r in by_id.items() if r.verdict == "passed"}
    return Gate(
        unexpected_failures=tuple(sorted(failed - listed)),
        stale=tuple(sorted(listed & passed)),
        expected_failures=tuple(sorted(failed & listed)),
        unchecked=tuple(sorted(listed - failed - passed)),
    )


def write(path: Path, results: Sequence[CaseResult]) -> int:
    """Write the current failures as a starting expectations file; return their count."""
    text, count = render(results)
    path.write_text(text, encoding="utf-8")
    return count


def render(results: Sequence[CaseResult]) -> tuple[str, int]:
    """The text of a starting expectations file listing the current failures, and
    their count (``kvconform run --write-expectations`` writes it whole or not at all)."""
    failures = [r for r in results if r.verdict == "failed"]
    data = {
        "kvconform": "expectations/1",
        "known_failures": [
            {"id": r.case.id, "reason": "TODO: why this fails, or a link to the issue"}
            for r in sorted(failures, key=lambda r: r.case.id)
        ],
    }
    header = (
        "# kvconform expectations: known failures, each with a reason or a link.\n"
        "# A run fails on any failure not listed here, and on any listed case that passes.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False), len(failures)


__all__ = [
    "Expectations",
    "Gate",
    "KnownFailure",
    "SourceError",
    "gate",
    "load",
    "render",
    "write",
]
