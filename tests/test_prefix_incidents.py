"""Each incident of issue 27 has a scenario that names it and fails an engine with that bug.

For every incident, some mutant of ``tests/mutants/prefix.py`` reproduces it (its
``plausible`` names the incident) and is failed by a prefix scenario whose ``incident``
or ``why`` names it too, so a reader of a failure sees the incident it repeats.
"""

from __future__ import annotations

import re
from functools import cache

import pytest

from kvconform.harness import suite
from kvconform.harness.runner import run_cases
from kvconform.harness.scenario import Case
from kvconform.protocol.driver import InProcessDriver

from .mutants import Mutant, all_mutants

#: The incidents issue 27 lists, as the scenarios and mutants cite them.
INCIDENTS = (
    "CVE-2025-25183",  # predictable chain root with a weak hash
    "CVE-2025-46722",  # an image identity without width and height
    "#12603",  # a multimodal difference in an earlier block not reaching later blocks
    "#42125",  # the same LoRA name reloaded with other weights
    "#30931",
    "#26207",  # llama.cpp: the slot's prompt reused whatever adapter computed it
    "#44701",  # a LoRA name equal to a salt colliding
    "#24638",  # a crafted extra key aliasing another adapter's namespace
    "#26747",  # a storage tier ignoring the salt
    "#33268",  # ... or the KV dtype
    "#1856",
    "#44250",  # offload keys dropping LoRA, salt or multimodal identity
    "#4086",  # 16-bit multimodal identity
    "CVE-2025-46570",  # the cross-tenant timing side channel behind cache_salt
)


@cache
def _cases() -> tuple[Case, ...]:
    return tuple(c for c in suite.all_cases() if c.cls == "prefix_cache")


@cache
def _killed_by(name: str) -> frozenset[str]:
    (m,) = [m for m in all_mutants() if m.name == name]
    results = run_cases(_cases(), InProcessDriver(m.factory()))
    return frozenset(r.case.id for r in results if r.verdict == "failed")


def _reproducing(incident: str) -> list[Mutant]:
    return [m for m in all_mutants() if m.name.startswith("prefix-") and incident in m.plausible]


@pytest.mark.parametrize("incident", INCIDENTS)
def test_an_incident_is_named_by_a_scenario_that_fails_its_mutant(incident: str) -> None:
    naming = {c.id for c in _cases() if incident in c.incident or incident in c.why}
    mutants = _reproducing(incident)
    assert naming, f"no prefix scenario names {incident}"
    assert mutants, f"no prefix mutant reproduces {incident}"
    assert any(_killed_by(m.name) & naming for m in mutants), (incident, naming)


def test_an_incident_in_a_scenario_file_keeps_its_issue_number() -> None:
    """A plain YAML scalar ends at `` #``: ``incident: SGLang #26747`` reads as ``SGLang``."""
    plain = re.compile(r"^\s*incident: [^\"'>|].* #", re.MULTILINE)
    root = suite.conformance_dir() / "scenarios"
    cut = [str(p) for p in sorted(root.rglob("*.yaml")) if plain.search(p.read_text("utf-8"))]
    assert cut == []
