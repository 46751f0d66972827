"""The kill test: the whole suite (scenarios and vectors) against every mutant.

A mutant (``tests/mutants/``) is the reference with one deliberate misreading of
the specification. It is *killed* when at least one case of the suite fails
for it; a mutant no case fails *survives*, which means a scenario is missing or
has no teeth (CONF-3: a conforming implementation passes every case, so every
non-conforming one must fail at least one).

- ``test_mutant_is_killed[<name>]``: one test per mutant. A mutant registered
  with a ``gap`` cannot be killed through the adapter interface as it stands;
  it is a strict xfail, so the day the harness kills it the test says so.
- ``test_kill_matrix``: only when ``KVCONFORM_KILL_MATRIX`` names a file (it runs
  the whole suite against every mutant): writes the full matrix there and prints
  mutant -> the case ids that killed it (run with ``-s`` to see it).

A mutant's own test stops at its first failing case: it runs first the cases
that cite a requirement the mutant breaks, and the rest of the suite only if
none of those fails. The full list of killing cases, for every mutant, is
``test_kill_matrix`` with ``KVCONFORM_KILL_MATRIX`` set (docs/mutation-testing.md);
it is not needed to decide whether a mutant is killed.
The reference hasher's long folds (four 1 MiB known-answer vectors) are computed
once per test process (``_fold_long_bytes_once`` in tests/conftest.py), so a mutant
whose fold is the reference's ``mix_bytes`` does not fold the same megabytes again;
a mutant with a fold of its own folds for itself.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest

from kvconform.adapters import reference as reference_adapters
from kvconform.adapters.reference import ReferenceAdapter
from kvconform.harness import suite
from kvconform.harness.case import Case
from kvconform.harness.runner import CaseResult, run_case, run_cases
from kvconform.protocol.adapter import Adapter
from kvconform.protocol.driver import InProcessDriver
from tests import figures
from tests.mutants import MODULES, Mutant, all_mutants
from tests.mutants._kit import KIT_ADAPTERS
from tests.verdicts import not_passing

pytestmark = pytest.mark.covers("CONF-3")

MUTANTS: list[Mutant] = all_mutants()
GROUPS = ("HASH", "ID", "ALLOC", "PLAN", "SIG", "PROF", "VERIFY", "ERR", "SEC", "CONF")


# --- running ------------------------------------------------------------------

_RESULTS: dict[str, list[CaseResult]] = {}


def run_suite(name: str, adapter: Adapter) -> list[CaseResult]:
    """Every case of the suite against ``adapter``, once per session per ``name``."""
    if name not in _RESULTS:
        # strict: a mutant whose only fault is a message (ERR-13) is caught, as advice by
        # default and as a failure under --strict-messages (CONF-12)
        _RESULTS[name] = run_cases(
            suite.all_cases(), InProcessDriver(adapter), strict_messages=True
        )
    return _RESULTS[name]


def killers(mutant: Mutant) -> list[str]:
    """The ids of the cases that fail for ``mutant``: empty when it survives."""
    results = run_suite(f"mutant:{mutant.name}", mutant.factory())
    return [r.case.id for r in results if r.verdict == "failed"]


def aimed_cases(mutant: Mutant) -> list[Case]:
    """The cases that cite a requirement ``mutant`` breaks, in the suite's order."""
    broken = set(mutant.breaks)
    return [c for c in suite.all_cases() if broken & set(c.requires)]


def run_aimed(mutant: Mutant) -> list[CaseResult]:
    """The results of :func:`aimed_cases` for ``mutant``, through one driver."""
    return run_cases(aimed_cases(mutant), InProcessDriver(mutant.factory()), strict_messages=True)


#: Mutants whose misreading is to break where an answer is due (an exception on a valid
#: input, a method that returns nothing): a failure that is a break kills them. Every
#: other mutant must be killed by a wrong answer, so that one which breaks by accident
#: (6.2.0 briefly killed prefix-store-and-lookup-key-differently by a ValueError of its
#: own) is not counted as caught.
BREAKING_IS_THE_MISREADING = frozenset(
    {
        "prof-zero-block-size-checked-after-the-window",  # a modulo by the block size 0
        "verify-yields-nothing",  # verify returns None
        "hash-u64-refuses-above-int64-max",  # raises on a valid u64
        "hash-str-refuses-astral",  # raises on valid text
        "hash-str-refuses-noncharacters",  # raises on valid text
        "truncate-refuse-at-the-current-length",  # raises on a valid rewind
        "append-of-nothing-refused",  # raises on a valid empty append
    }
)


def first_killers(mutant: Mutant) -> list[str]:
    """A case that fails for ``mutant``, or none exactly when :func:`killers` finds none.

    A failure counts only if it is a wrong answer, unless breaking is the mutant's
    misreading (:data:`BREAKING_IS_THE_MISREADING`): a case at which the mutant breaks
    is passed over, and if no case gives a wrong answer, none kills it.

    The cases citing a requirement the mutant breaks run first (scenarios before the
    known-answer vectors, whose folds are the slow ones), then the rest of the suite,
    one at a time through one driver, up to the first failure: the id ledger spans them
    as it spans a whole run (INTERPRETING.md §5, rules 6 and 7). Every failure found is
    a real one, the order of the cases being the implementation's to bear. If this
    order finds none, the suite in its own order decides (as :func:`killers` runs it).
    """
    aimed = sorted(aimed_cases(mutant), key=lambda case: case.kind == "vector")
    first = {case.id for case in aimed}
    rest = [c for c in suite.all_cases() if c.id not in first]
    driver = InProcessDriver(mutant.factory())
    breaking = mutant.name in BREAKING_IS_THE_MISREADING
    for case in (*aimed, *rest):
        result = run_case(case, driver, strict_messages=True)
        if _kills(result, breaking):
            return [case.id]
    results = run_suite(f"mutant:{mutant.name}", mutant.factory())
    return [r.case.id for r in results if _kills(r, breaking)]


def _kills(result: CaseResult, breaking: bool) -> bool:
    """A failed case with a wrong answer in it, or with a break where breaking is the
    mutant's misreading."""
    return result.verdict == "failed" and (breaking or not all(f.broken for f in result.failures))


def _reference_failures() -> list[str]:
    return not_passing(run_suite("reference", ReferenceAdapter()))


# --- the baseline -------------------------------------------------------------


def test_reference_passes_every_case() -> None:
    """A kill means something only if the reference itself passes everything."""
    failures = _reference_failures()
    assert not failures, "\n\n".join(failures)


#: The reference in each of its format declarations (PROF-2, PROF-5, PROF-11, PROF-12).
PROFILES = {
    "v1": ReferenceAdapter,
    "v2": reference_adapters.v2,
    "v2-layout-only": reference_adapters.v2_layout_only,
    "rolling-v1": reference_adapters.rolling_v1,
    "rolling-v2": reference_adapters.rolling_v2,
}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_the_reference_passes_under_every_profile(name: str) -> None:
    failures = not_passing(run_suite(f"reference:{name}", PROFILES[name]()))
    assert not failures, "\n\n".join(failures)


def test_the_documented_not_applicable_figures_are_what_a_run_reports() -> None:
    """INTERPRETING.md §11 and docs/profiles-and-upgrades.md give, per declaration of the
    reference, the cases a run reports not applicable: re-expressed cases are judged."""
    known = figures.figures()
    for name, factory in PROFILES.items():
        figure = "ReferenceAdapter" if name == "v1" else name.replace("-", "_")
        results = run_suite(f"reference:{name}", factory())
        reported = sum(r.verdict == "not_applicable" for r in results)
        assert reported == known[f"not_applicable.{figure}"], name


def test_every_profile_case_is_passed_by_some_profile_of_the_reference() -> None:
    """The v1 baseline sets the v2 cases aside; each must still be run and passed somewhere."""
    passed = {
        r.case.id
        for name, factory in PROFILES.items()
        for r in run_suite(f"reference:{name}", factory())
        if r.verdict == "passed"
    }
    never = [
        r.case.id
        for r in run_suite("reference", ReferenceAdapter())
        if r.case.id not in passed and "(PROF-3)" in r.reason
    ]
    assert not never, f"cases no profile of the reference passes: {never}"


@pytest.mark.parametrize("kit", KIT_ADAPTERS, ids=lambda k: k.__name__)
def test_kit_defaults_are_the_reference(kit: type[ReferenceAdapter]) -> None:
    """Every mutant is built from a kit adapter; with no hook changed, it must pass.

    A kit adapter with plans of its own does not claim ``plan_validity`` (CONF-10).
    """
    results = run_suite(f"kit:{kit.__name__}", kit())
    failures = [
        line
        for line in not_passing(results)
        if not line.endswith("(kvconform-reference does not declare the class plan_validity)")
    ]
    assert not failures, "\n\n".join(failures)


def test_the_corpus_is_well_formed() -> None:
    known = suite.requirements()
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names)), "mutant names must be unique"
    assert len(MUTANTS) >= 30
    for m in MUTANTS:
        unknown = [req for req in m.breaks if req not in known]
        assert not unknown, f"{m.name} cites unknown requirements {unknown}"
        assert m.breaks, f"{m.name} names no requirement it breaks"
        assert m.half in ("under", "over", "contract"), m.name
        assert len(m.plausible) > 40, f"{m.name}: say why someone would plausibly write it"
    groups = {req.rsplit("-", 1)[0] for m in MUTANTS for req in m.breaks}
    assert set(GROUPS) <= groups, f"groups no mutant breaks: {sorted(set(GROUPS) - groups)}"
    halves = Counter(m.half for m in MUTANTS)
    assert halves["under"] and halves["over"], halves
    modules = {m.factory.__module__.rsplit(".", 1)[-1] for m in MUTANTS}
    assert modules == set(MODULES), f"modules without a mutant: {set(MODULES) - modules}"


# --- one test per mutant ------------------------------------------------------


def _param(m: Mutant) -> object:
    if m.gap:
        return pytest.param(
            m, id=m.name, marks=pytest.mark.xfail(strict=True, reason=f"known gap: {m.gap}")
        )
    return pytest.param(m, id=m.name)


@pytest.mark.parametrize("mutant", [_param(m) for m in MUTANTS])
def test_mutant_is_killed(mutant: Mutant) -> None:
    assert _reference_failures() == [], "the reference fails; kills would mean nothing"
    killed_by = first_killers(mutant)
    assert killed_by, (
        f"SURVIVED: no case fails for the mutant {mutant.name} ({mutant.spec}).\n"
        f"  breaks:    {', '.join(mutant.breaks)} ({mutant.half})\n"
        f"  plausible: {mutant.plausible}\n"
        "  A scenario is missing: write one that this misreading fails and the "
        "reference passes (conformance/scenarios/<area>/from-mutants.yaml)."
    )


# --- the matrix ---------------------------------------------------------------


def _cites(mutant: Mutant, case_ids: Sequence[str]) -> bool:
    """Whether a killing case cites a requirement the mutant breaks."""
    by_id = {case.id: case for case in suite.all_cases()}
    return any(set(by_id[cid].requires) & set(mutant.breaks) for cid in case_ids)


def kill_matrix(full: bool) -> str:
    """The kill matrix as text; ``full`` lists every killing case, else the first few."""
    rows = []
    width = max(len(m.name) for m in MUTANTS)
    killed = survived = gaps = 0
    by_group: Counter[tuple[str, str]] = Counter()
    for m in MUTANTS:
        ids = killers(m)
        for group in sorted({req.rsplit("-", 1)[0] for req in m.breaks}):
            by_group[(group, m.half)] += 1
        if ids:
            killed += 1
            shown = ids if full or len(ids) <= 4 else [*ids[:4], f"... +{len(ids) - 4}"]
            cites = "" if _cites(m, ids) else "  [no killing case cites " + ",".join(m.breaks) + "]"
            verdict = f"killed by {len(ids)}: {', '.join(shown)}{cites}"
        elif m.gap:
            gaps += 1
            verdict = f"SURVIVED (known gap: {m.gap})"
        else:
            survived += 1
            verdict = "SURVIVED"
        rows.append(f"{m.name:<{width}}  {m.half:<8}  {','.join(m.breaks):<28}  {verdict}")
    total = len(MUTANTS)
    header = [
        f"kill matrix: {killed}/{total} mutants killed"
        + (f", {gaps} known gap(s)" if gaps else "")
        + (f", {survived} SURVIVED" if survived else "")
        + f"; suite of {len(suite.all_cases())} cases",
        "mutants per requirement group and half (a mutant counts in each group it breaks):",
    ]
    for group in GROUPS:
        counts = {half: by_group[(group, half)] for half in ("under", "over", "contract")}
        header.append(
            f"  {group:<7} under {counts['under']:>3}  over {counts['over']:>3}  "
            f"contract {counts['contract']:>3}"
        )
    header.append(f"{'mutant':<{width}}  {'half':<8}  {'breaks':<28}  verdict")
    return "\n".join([*header, *rows]) + "\n"


@pytest.mark.skipif(
    not os.environ.get("KVCONFORM_KILL_MATRIX"),
    reason="the full kill matrix runs the whole suite against every mutant: set "
    "KVCONFORM_KILL_MATRIX=FILE to write it (each mutant's kill is checked above)",
)
def test_kill_matrix() -> None:
    """Print the kill matrix and write the full one to $KVCONFORM_KILL_MATRIX."""
    print()
    print(kill_matrix(full=False))
    target = os.environ.get("KVCONFORM_KILL_MATRIX")
    if target:
        Path(target).write_text(kill_matrix(full=True), encoding="utf-8")
