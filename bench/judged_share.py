"""The share of the suite each standing declaration is judged on, before and after
re-expression (conformance/INTERPRETING.md §6.4).

Run from the repository root: ``python bench/judged_share.py``. For every correct
variant in ``tests/variants/`` and every profile of the reference adapter it prints, per
class, the cases judged as written, the cases judged once re-expressed, and the total;
then, for a declaration of the class ``plan``, one plan share: the plan and
plan_validity cases it declares, taken together, judged once re-expressed, over all of
them and over those whose options its declared answers match (a case written for
another answer of an option is not applicable to anyone who answers otherwise, CONF-6,
and no one declaration can take every answer at once). Nothing is run against an
implementation (applicability needs only the declaration).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kvconform.adapters import reference
from kvconform.harness import suite
from kvconform.harness.declarations import option_not_declared
from kvconform.harness.runner import in_declared_shape, not_applicable
from kvconform.harness.scenario import Case
from kvconform.values import AdapterInfo
from tests.variants import all_variants

CLASSES = (
    "hash",
    "identity",
    "plan",
    "plan_validity",
    "signature",
    "verify",
    "prefix_cache",
)
PLAN_CLASSES = ("plan", "plan_validity")


def shares(cases: Sequence[Case], info: AdapterInfo) -> dict[str, tuple[int, int, int]]:
    """Per class: (judged as written, judged after re-expression, total)."""
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for case in cases:
        total[case.cls] += 1
        if not_applicable(case, info) is None:
            before[case.cls] += 1
        if in_declared_shape(case, info)[1] is None:
            after[case.cls] += 1
    return {cls: (before[cls], after[cls], total[cls]) for cls in CLASSES if total[cls]}


def plan_share(cases: Sequence[Case], info: AdapterInfo) -> tuple[int, int, int]:
    """Over the plan classes ``info`` declares: (judged once re-expressed, cases whose
    options the declaration matches, all cases)."""
    judged = matching = total = 0
    for case in cases:
        if case.cls not in PLAN_CLASSES or case.cls not in info.classes:
            continue
        total += 1
        matching += option_not_declared(case, info) is None
        judged += in_declared_shape(case, info)[1] is None
    return judged, matching, total


def _percent(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.1f}%)" if whole else "0/0"


def declarations() -> list[tuple[str, AdapterInfo]]:
    """The standing declarations: the reference under each profile, then every variant."""
    infos = [("reference", reference.ReferenceAdapter().describe())]
    for profile in (
        reference.v2,
        reference.v2_layout_only,
        reference.rolling_v1,
        reference.rolling_v2,
    ):
        infos.append((f"reference:{profile.__name__}", profile().describe()))
    infos += [(v.name, v.factory().describe()) for v in all_variants()]
    return infos


def main() -> None:
    cases = suite.all_cases()
    print("judged as written -> judged once re-expressed / total, per declared class")
    for label, info in declarations():
        row = shares(cases, info)
        parts = [f"{cls} {b}->{a}/{t}" for cls, (b, a, t) in row.items() if cls in info.classes]
        print(f"{label:<34} " + ", ".join(parts))
        if "plan" in info.classes:
            judged, matching, total = plan_share(cases, info)
            print(
                f"{'':<34} plan share {_percent(judged, total)} of all, "
                f"{_percent(judged, matching)} of those its options apply to"
            )


if __name__ == "__main__":
    main()
