"""What counts as passing the whole suite for an implementation that declares nothing.

Every case must pass, except the cases written for another answer to an option
(CONF-6) or for another format declaration (PROF-3): those are not applicable
to an implementation that answers by the default, and say so in their reason.
"""

from __future__ import annotations

from collections.abc import Sequence

from kvconform.harness.runner import CaseResult


def for_another_option(result: CaseResult) -> bool:
    return result.verdict == "not_applicable" and (
        "(CONF-6)" in result.reason or "(PROF-3)" in result.reason
    )


def not_passing(results: Sequence[CaseResult]) -> list[str]:
    """A report per case that neither passed nor was written for another option value."""
    return [
        r.report() if r.verdict == "failed" else f"{r.case.id}: {r.verdict} ({r.reason})"
        for r in results
        if r.verdict != "passed" and not for_another_option(r)
    ]
