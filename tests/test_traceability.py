"""The specification and the cases stay in step (issue: traceability)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kvconform
from kvconform.harness import coverage, published, suite


def test_every_requirement_is_cited_by_a_case() -> None:
    missing = coverage.uncited(suite.all_cases())
    assert not missing, f"requirements no case, project test or mark accounts for: {missing}"


def test_every_must_is_judged_by_a_case_or_marked() -> None:
    """A MUST, SHALL or REQUIRED with no citing case is marked in spec/marks.yaml, with why."""
    missing = coverage.unjudged(suite.all_cases())
    assert not missing, (
        f"requirements holding MUST/SHALL/REQUIRED that no scenario or vector cites and "
        f"spec/marks.yaml does not mark: {', '.join(missing)}"
    )


def test_every_mark_is_sound() -> None:
    problems = coverage.mark_problems(suite.all_cases())
    assert not problems, "\n".join(problems)


def _mark(req: str, part: str | None = None, judged: str | None = None) -> coverage.Mark:
    return coverage.Mark(req, "review", "a reason long enough to read", part, judged, 1)


def test_the_mark_checks_have_teeth() -> None:
    """Each rule of the marks fails when broken (the real file passes them all above)."""
    cases = suite.all_cases()
    real = coverage.marks()
    # A MUST that no case cites and that loses its mark is reported.
    assert "ID-5" in coverage.unjudged(cases, [m for m in real if m.id != "ID-5"])
    # A mark for an id that spec/ does not define, or that is withdrawn.
    assert any("ID-99" in p for p in coverage.mark_problems(cases, [_mark("ID-99")]))
    assert any("withdrawn" in p for p in coverage.mark_problems(cases, [_mark("ID-7")]))
    # A mark of a requirement that cases cite must say which part and what they judge.
    for part, judged in ((None, None), ("the clause", None), (None, "the rest")):
        problems = coverage.mark_problems(cases, [_mark("HASH-4", part, judged)])
        assert any("must say which part" in p for p in problems), (part, judged)
    assert not coverage.mark_problems(cases, [_mark("HASH-4", "the clause", "the rest")])
    # A mark that claims cases judge a part no case cites.
    assert any(
        "no case cites" in p for p in coverage.mark_problems(cases, [_mark("ID-5", None, "x" * 10)])
    )
    # A requirement with only MAY or SHOULD owes no mark: ID-8.
    req = suite.requirements()["ID-8"]
    assert not coverage.binding(req)
    assert coverage.binding(suite.requirements()["ID-5"])


def test_marks_file_is_validated_by_its_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kvconform.harness.yamlsource import SourceError

    bad = tmp_path / "marks.yaml"
    bad.write_text(
        "marks:\n  - id: ID-5\n    kind: untestable\n    reason: because it is so, says who\n"
    )
    monkeypatch.setattr(coverage, "marks_path", lambda: bad)
    with pytest.raises(SourceError, match="untestable"):
        coverage.marks()


@pytest.mark.covers("CONF-5")
def test_no_case_cites_a_withdrawn_requirement() -> None:
    cited = coverage.withdrawn_citations(suite.all_cases())
    assert not cited, f"cases cite withdrawn requirements: {cited}"


def test_every_cited_requirement_exists() -> None:
    known = suite.requirements()
    unknown = {
        (case.id, req) for case in suite.all_cases() for req in case.requires if req not in known
    }
    assert not unknown, f"cases cite requirements that spec/ does not define: {sorted(unknown)}"


def test_case_ids_are_unique() -> None:
    ids = [case.id for case in suite.all_cases()]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"duplicate case ids: {duplicates}"


def test_every_requirement_has_a_keyword_and_a_rationale() -> None:
    for req in suite.requirements().values():
        if req.withdrawn:
            # A withdrawn line says what it was and what replaces it (CONF-5).
            assert re.search(r"\b[A-Z]+-\d+\b", req.text), req.id
            continue
        path = suite.spec_dir() / req.file
        text = path.read_text(encoding="utf-8")
        # The whole list item: the definition line and its indented continuation.
        start = text.index(f"- **{req.id}** ")
        end = re.compile(r"\n(?!  )").search(text, start + 1)
        item = text[start : end.start() if end else len(text)]
        assert re.search(r"\b(MUST|SHOULD|MAY|REQUIRED|SHALL)\b", item), req.id
        assert "*Rationale:*" in item, f"{req.id} has no rationale"


def test_requirement_references_in_spec_resolve() -> None:
    known = set(suite.requirements())
    for path in sorted(suite.spec_dir().glob("*.md")):
        if path.name == "coverage.md":
            continue
        for match in re.finditer(
            r"\b((?:HASH|ID|ALLOC|PLAN|SIG|PROF|VERIFY|ERR|SEC|CONF|PROTO)-\d+)\b",
            path.read_text(encoding="utf-8"),
        ):
            assert match.group(1) in known, f"{path.name} mentions undefined {match.group(1)}"


def test_reference_docstrings_cite_existing_requirements() -> None:
    known = set(suite.requirements())
    root = suite.spec_dir().parent / "reference"
    for path in sorted(root.glob("*.py")):
        for match in re.finditer(
            r"\b((?:HASH|ID|ALLOC|PLAN|SIG|PROF|VERIFY|ERR|SEC|CONF)-\d+)\b",
            path.read_text(encoding="utf-8"),
        ):
            assert match.group(1) in known, f"{path.name} cites undefined {match.group(1)}"


@pytest.mark.covers("CONF-5")
def test_published_ids_still_exist() -> None:
    """Ids are forever: a published case or requirement id may not disappear."""
    assert published.read(), "conformance/published-ids.txt is missing or empty"
    gone = published.missing()
    assert not gone, f"published ids that no longer exist (withdraw, do not delete): {gone}"


def test_coverage_table_is_current() -> None:
    expected = coverage.render(suite.all_cases())
    current = coverage.coverage_path().read_text(encoding="utf-8")
    assert current == expected, "spec/coverage.md is stale: python -m kvconform.harness.coverage"


def test_the_readme_counts_scenarios_by_basis_as_they_are() -> None:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    text = re.sub(r"<!--#[^>]*-->", "", text)  # the figures' marks (tests/figures.py)
    found = re.search(r"\| (\d+) \((\d+) on the seeds' semantics, (\d+) on a decision\)", text)
    assert found, "the README's scenario row"
    scenarios = [c for c in suite.all_cases() if c.kind == "scenario"]
    on_seed = sum(1 for c in scenarios if not c.basis)
    assert tuple(map(int, found.groups())) == (len(scenarios), on_seed, len(scenarios) - on_seed)


def test_the_readme_publishes_this_suite_versions_digest() -> None:
    import kvconform
    from kvconform.harness import manifest

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    row = re.search(
        rf"^\| {re.escape(kvconform.SUITE_VERSION)} \| `([0-9a-f]{{64}})` \|$", text, re.M
    )
    assert row, f"README: no published digest for suite {kvconform.SUITE_VERSION}"
    assert row.group(1) == manifest.check().digest, (
        "the suite's files changed: publish the new digest (kvconform --version) in the README"
    )


#: Digests of released suites as the README published them: a row, once published, never
#: changes (three branches of 3.0.0 rewrote the 2.6.0 row to their own tree's digest). A
#: release's row is added here when the release lands; until then its digest follows the
#: tree (:func:`test_the_readme_publishes_this_suite_versions_digest` holds it to the manifest).
PUBLISHED_DIGESTS = {
    "2.1.0": "035da8e0d421812a684296da931c11d00ced2f683bd6074e892b8da825b24c43",
    "2.2.0": "8eb794dd6474427b313b2060bbd3f0a189cceb8d3f5fe47f4de30ac7650da9a0",
    "2.3.0": "3af08723d95f520d6b6c262d3960ebcdc0ff21ef31fa357dda89cb6860b6e7d7",
    "2.4.0": "8a47e91be8cb87fb9e9fcf013fd33b24c396afa369793348775c9a02725868b9",
    "2.5.0": "d8de50f7986b5dd67e9b8fd877a4e918ea50824adb46d44b7246acd4fdf1e131",
    "2.6.0": "2f67eddb648eaf7883b7aafd8d67079b992474c2d9ed1ed922fd7961f06c6ec7",
    "3.0.0": "1f5a63e459e584700a5cb885c6460e872dba5e6fd70be32ab66a523caa5a83f0",
    "4.0.0": "0f0ba22dd55904c63dff938ce328cc9ec42e8770cdff28ff4175d466b79ecf7c",
    "5.0.0": "daf1afe5bc4133ad472058daef6ab540888a4193fc050c2ae92e446e68cc6939",
    "6.0.0": "fb4dadb01332d8b758ba61be4d7dcf8a1c878007f15deb2acb41cdde6cbc4152",
    "6.1.0": "87d105b0e7ee5767484e5f726a15c60a10d13b67c560b3151d83de749bb4ea8c",
    "6.2.0": "a8680d818d325c322995a5bc6f35f0bdf50a6f4cee3d26536c4000856f658444",
    "6.3.0": "e1638300fc9ea7901c383cb95fbedf7707284a55815e795ca28e2019ae666f40",
    "6.4.0": "da08436f28b1f6b023f7518c50361f4c837a88e65264774487c45c7258cea06e",
    "6.5.0": "c46fa621d8f5888cb9efdea0a6c34817779b997e557ff743bbbec202ef27d832",
    "7.0.0": "8a5d8435a58b25b950cc0b6aa1c543d1997e229d5c8810fb28d2dccafe43d3be",
    "7.0.1": "4baf4f7a843550e6b04c3cabfdab6cd3a39c52c883ef16b24dc3eae6b8d7e3e5",
    "7.1.0": "4017ac86713bba373c00ed80333335e5d69259d16953ff951121e36470f6c2eb",
    "7.2.0": "6e1fe2428b4cece58148231879137f1316fa6e655fb5ba565a9615405fde7ffd",
    "7.3.0": "e30b7378f814fcb9716864f1efd3bdab800f57ea5856adde81ac3124d1045403",
}


def test_published_digest_rows_never_change() -> None:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    for version, digest in PUBLISHED_DIGESTS.items():
        assert f"| {version} | `{digest}` |" in text, f"README: the {version} digest row changed"


#: Where a document states the version it belongs to (each must be this release's).
_VERSION_STATEMENTS = (
    re.compile(r"part of kvconform specification (\d+\.\d+\.\d+)"),
    re.compile(r"This release: specification (\d+\.\d+\.\d+), suite (\d+\.\d+\.\d+)\."),
    re.compile(r"\(this one: specification (\d+\.\d+\.\d+),\s+suite (\d+\.\d+\.\d+)\)"),
    re.compile(r"\| suite \(scenarios and vectors\) \| \*\*(\d+\.\d+\.\d+)\*\* \|"),
    re.compile(r"\| specification \| (\d+\.\d+\.\d+) \|"),
    re.compile(r"Specification (\d+\.\d+\.\d+), suite (\d+\.\d+\.\d+) \(`kvconform --version`"),
    re.compile(
        r"Specification version \*\*(\d+\.\d+\.\d+)\*\*\. "
        r"Conformance suite version \*\*(\d+\.\d+\.\d+)\*\*\."
    ),
    # the harness's hello in an example exchange: it sends this suite's version
    re.compile(r'"op": ?"hello", ?"protocol": ?\d+, ?"suite": ?"(\d+\.\d+\.\d+)"'),
)


def test_every_document_states_this_release() -> None:
    """A document's own statement of the version it belongs to follows the release: the
    status line of each spec document, the release line of spec/README.md, conformance.md's
    summary, INTERPRETING.md's table, README.md's status and spec/README.md's heading
    (6.1.0 shipped them saying 6.0.0 and 3.0.0; 6.2.0's README said 6.1.0; the heading
    said 4.0.0 until 6.3.0), and the hello of an example exchange (protocol.md's said
    6.0.0 until 6.5.0)."""
    root = Path(__file__).resolve().parent.parent
    stale, found = [], 0
    documents = [
        *sorted((root / "spec").glob("*.md")),
        *sorted((root / "docs").glob("*.md")),
        root / "conformance" / "INTERPRETING.md",
    ]
    for path in [*documents, root / "README.md"]:
        text = path.read_text(encoding="utf-8")
        for pattern in _VERSION_STATEMENTS:
            for match in pattern.finditer(text):
                found += 1
                if set(match.groups()) != {kvconform.SUITE_VERSION}:
                    line = text.count("\n", 0, match.start()) + 1
                    stale.append(f"{path.relative_to(root)}:{line}: {match.group(0)}")
    assert found >= 15, found
    assert not stale, f"not {kvconform.SUITE_VERSION}:\n" + "\n".join(stale)
