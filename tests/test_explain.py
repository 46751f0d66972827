"""``kvconform explain``: from an id to the requirement's text and the case as written."""

from __future__ import annotations

import pytest

from kvconform.harness import explain, suite
from kvconform.harness.runner import run_cases
from kvconform.protocol.driver import InProcessDriver
from tests.mutants import all_mutants


def test_a_case_explains_its_steps_requirements_basis_and_command() -> None:
    text = explain.explain("verify.v2.window-change-across-restart")
    assert "As written:" in text and "sliding_window: 128" in text  # the YAML itself
    assert '"op": "verify"' in text  # each operation as sent on the wire
    assert "expects error incompatible (field=sliding_window, expected=256, found=128)" in text
    assert "PROF-10 (spec/signature.md:" in text and "Rationale:" in text
    assert "decision profile-v2" in text
    assert "kvconform run --id verify.v2.window-change-across-restart" in text


def test_a_requirement_explains_its_text_and_every_case_that_cites_it() -> None:
    text = explain.explain("PROF-7")
    assert "MUST be refused with `bad_layout`" in text and "Rationale:" in text
    citing = [c.id for c in suite.all_cases() if "PROF-7" in c.requires]
    assert citing and all(case_id in text for case_id in citing)
    vectors = explain.explain("HASH-4")
    assert "vector(s)" in vectors and "more" in vectors  # a long vector list is cut


def test_an_unknown_id_is_one_line_with_suggestions() -> None:
    with pytest.raises(explain.UnknownId, match=r"did you mean .*verify\.v2\.round-trip"):
        explain.explain("v2.round")


def test_every_case_and_requirement_explains() -> None:
    for case in suite.all_cases():
        assert case.id in explain.explain(case.id)
    for req in suite.requirements():
        assert req in explain.explain(req)


def test_a_failure_carries_the_one_line_text_of_its_requirements() -> None:
    mutant = next(m for m in all_mutants() if m.name == "prof-partial-block-accepted")
    results = run_cases(suite.all_cases(), InProcessDriver(mutant.factory()))
    report = next(r for r in results if r.verdict == "failed").report()
    assert "    PROF-8: Measuring under profile v2 MUST first check the layout" in report


def test_the_explain_command(capsys: pytest.CaptureFixture[str]) -> None:
    from kvconform import cli

    assert cli.main(["explain", "plan.rebind.all-or-nothing"]) == cli.EXIT_OK
    assert "kvconform run --id plan.rebind.all-or-nothing" in capsys.readouterr().out
    assert cli.main(["explain", "PLAN-99"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'PLAN-99' is neither a case id nor a requirement id" in err


@pytest.mark.parametrize(
    "property_id", ["generated.key-state-machine", "generated.hash", "generated.verify"]
)
def test_a_generated_check_explains_itself(property_id: str) -> None:
    """A failing generated check names its id; explaining that id must work (a stranger
    followed the report's advice and got 'neither a case id nor a requirement id')."""
    text = explain.explain(property_id)
    assert text.startswith(f"generated {property_id}: ")
    assert "CONF-12" in text and f"--generated 200 --id {property_id}" in text
