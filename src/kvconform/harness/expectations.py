"""Expectation files: known failures, for gating CI on regressions only.

    # kvconform expectations
    kvconform: expectations/1
    known_failures:
      - id: verify.format.older-version-refused
        reason: we still read v0 blocks (tracking issue)
        link: https://example.invalid/issues/12
        cause: answer          # optional: answer, message or adapter

With an expectations file a run fails on any failure it does not list (or lists with
another cause), and also on any listed case that now passes, so the list cannot go
stale unnoticed. A message-only finding (ERR-13) is advice, never an unexpected failure,
unless the run is ``--strict-messages`` (CONF-12); an entry ``cause: message`` lists one,
and gates (stale once the message is fixed) only under that flag.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kvconform.harness.runner import CaseResult, cause_of
from kvconform.harness.yamlsource import SourceError, load_yaml, validate
from kvconform.rendering import clip


@dataclass(frozen=True)
class KnownFailure:
    id: str
    reason: str
    link: str = ""
    #: How the case is known to fail (runner.CAUSES); empty: by any judged cause, a
    #: wrong answer or a message's wording, never by the adapter breaking.
    cause: str = ""

    def matches(self, cause: str) -> bool:
        """Whether a failure of this ``cause`` is the one this entry knows."""
        return cause == self.cause if self.cause else cause != "adapter"


@dataclass(frozen=True)
class Expectations:
    file: str
    known: tuple[KnownFailure, ...]

    def ids(self) -> set[str]:
        return {k.id for k in self.known}


def load(path: Path, known_ids: Iterable[str]) -> Expectations:
    """Load and validate an expectations file; every listed id must name a case of the
    suite or a generated property (``known_ids``), run in this run or not."""
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
        entries.append(
            KnownFailure(raw["id"], raw["reason"], raw.get("link", ""), raw.get("cause", ""))
        )
    return Expectations(str(path), tuple(entries))


@dataclass(frozen=True)
class Gate:
    """What an expectations file makes of a run's results."""

    #: failed and not listed, or listed for another cause (those are in ``changed`` too)
    unexpected_failures: tuple[str, ...]
    stale: tuple[str, ...]  # listed as failing, but passed
    expected_failures: tuple[str, ...]
    #: listed, but not run (not selected or not applicable): neither good nor bad
    unchecked: tuple[str, ...]
    #: listed cases that failed by another cause than the one listed: (id, listed, now)
    changed: tuple[tuple[str, str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return not (self.unexpected_failures or self.stale)


def gate(
    results: Sequence[CaseResult],
    expectations: Expectations | None,
    *,
    strict_messages: bool = False,
) -> Gate:
    """What ``expectations`` make of ``results`` (docs/validate-your-implementation.md,
    "5. Gate CI"): a listed failure is expected only when it fails as the entry says.

    A message-only finding (ERR-13) is advice unless the run is ``strict_messages``
    (``--strict-messages``, CONF-12), and so is an entry that lists one (``cause:
    message``): without the flag such an entry is expected while the finding is there
    and unchecked once it is gone, never stale; with the flag it gates like any entry.
    """
    entries = {k.id: k for k in expectations.known} if expectations else {}
    by_id = {r.case.id: r for r in results}
    failed = {i: cause_of(r.failures) for i, r in by_id.items() if r.verdict == "failed"}
    passed = {i for i, r in by_id.items() if r.verdict == "passed"}
    expected = {i for i, cause in failed.items() if i in entries and entries[i].matches(cause)}
    advice_only: set[str] = set()  # listed for a message's wording, in a run that advises
    if not strict_messages:
        advice_only = {i for i in passed & entries.keys() if entries[i].cause == "message"}
        expected |= {i for i in advice_only if by_id[i].advice}
    changed = tuple(
        (i, entries[i].cause or "answer or message", failed[i])
        for i in sorted(failed.keys() & entries.keys() - expected)
    )
    return Gate(
        unexpected_failures=tuple(sorted(failed.keys() - expected)),
        stale=tuple(sorted(entries.keys() & passed - advice_only)),
        expected_failures=tuple(sorted(expected)),
        unchecked=tuple(sorted(entries.keys() - failed.keys() - (passed - advice_only) - expected)),
        changed=changed,
    )


def as_report(gate: Gate, expectations: Expectations) -> dict[str, Any]:
    """The ``gate`` object of the JSON report (conformance/schema/report.schema.json)."""
    return {
        "file": expectations.file,
        "unexpected_failures": list(gate.unexpected_failures),
        "stale": list(gate.stale),
        "expected_failures": list(gate.expected_failures),
        "unchecked": list(gate.unchecked),
        "changed": [{"id": i, "listed": listed, "now": now} for i, listed, now in gate.changed],
        "reasons": {k.id: clip(k.reason, 500) for k in expectations.known},
    }


def render(results: Sequence[CaseResult]) -> tuple[str, int]:
    """The text of a starting expectations file listing the current failures, and
    their count (``kvconform run --write-expectations`` writes it whole or not at all).
    Advice is not a failure and is not listed; under ``--strict-messages`` a
    message-only finding is a failure, listed with ``cause: message`` (CONF-12)."""
    failures = [r for r in results if r.verdict == "failed"]
    data = {
        "kvconform": "expectations/1",
        "known_failures": [
            {
                "id": r.case.id,
                "reason": "TODO: why this fails, or a link to the issue",
                "cause": cause_of(r.failures),
            }
            for r in sorted(failures, key=lambda r: r.case.id)
        ],
    }
    header = (
        "# kvconform expectations: known failures, each with a reason or a link.\n"
        "# A run fails on any failure not listed here (or listed with another cause:\n"
        "# answer, message or adapter), and on any listed case that passes.\n"
    )
    return header + yaml.safe_dump(data, sort_keys=False), len(failures)


__all__ = [
    "Expectations",
    "Gate",
    "KnownFailure",
    "SourceError",
    "as_report",
    "gate",
    "load",
    "render",
]
