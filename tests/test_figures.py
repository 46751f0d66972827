"""The documents' figures follow the data (tests/figures.py has the figures and the marks).

A count that drifts fails here with the file, the line, the figure and the value it
should be; ``python -m tests.figures`` rewrites every marked figure from the data.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests import figures
from tests.figures import ROOT


def test_every_marked_figure_is_the_datas() -> None:
    drifted = figures.problems(figures.figures())
    assert not drifted, (
        "figures in the documents differ from the data (python -m tests.figures rewrites "
        "them; then python -m kvconform.harness.manifest):\n" + "\n".join(drifted)
    )


def test_no_count_of_the_data_is_written_by_hand() -> None:
    found = figures.unmarked()
    assert not found, "\n".join(found)


def test_the_figures_the_documents_lean_on_are_marked() -> None:
    """The places issue 28 found stale, and the tables most read, carry marks."""
    names = {(m.path.relative_to(ROOT).as_posix(), m.name) for m in figures.marks()}
    for where, name in [
        ("README.md", "vectors"),
        ("README.md", "scenarios"),
        ("README.md", "requirements"),
        ("README.md", "mutants.killable"),
        ("README.md", "variants"),
        ("vectors/README.md", "vectors"),
        ("vectors/README.md", "vectors.encoding"),
        ("conformance/INTERPRETING.md", "not_applicable.ReferenceAdapter"),
        ("conformance/INTERPRETING.md", "not_applicable.rolling_v2"),
        ("docs/profiles-and-upgrades.md", "applicable.v2"),
        ("docs/mutation-testing.md", "mutants.group.PLAN"),
        ("spec/seeds.md", "vectors"),
    ]:
        assert (where, name) in names, f"{where} no longer marks the figure {name}"


def test_a_drifted_figure_is_named_with_its_value_and_rewritten(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "| total | 443<!--#vectors--> |\n"
        "1,200<!--#scenarios--> scenarios, 7<!--#measured--> cases then, 3<!--#nothing-->\n",
        encoding="utf-8",
    )
    known = {"vectors": 444, "scenarios": 1200}
    found = [line.split(": ", 1)[1] for line in figures.problems(known, [doc], root=tmp_path)]
    assert found == [
        "vectors is written 443, the data give 444",
        "no figure named 'nothing' (tests/figures.py)",
    ]
    assert figures.rewrite(known, [doc]) == [doc]
    assert doc.read_text(encoding="utf-8").startswith("| total | 444<!--#vectors--> |\n")
    assert figures.problems(known, [doc], root=tmp_path) == [
        "doc.md:2: no figure named 'nothing' (tests/figures.py)"
    ]


def test_a_count_written_by_hand_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "the 124 published FNV-1a 64 vectors; 320 scenarios and 12 correct variants;\n"
        "320<!--#scenarios--> scenarios; 637<!--#measured--> cases; HASH-13 vectors\n",
        encoding="utf-8",
    )
    found = figures.unmarked([doc], root=tmp_path)
    assert [re.findall(r"'([^']*)'", line)[0] for line in found] == [
        "320 scenarios",
        "12 correct variants",
    ]


def test_the_capabilities_cite_the_requirements_conf_7_gives_them() -> None:
    """The protocol schema's description of each capability names the requirement that
    CONF-7 ties it to (``uint_bits`` cited SIG-14 where CONF-7 says VERIFY-9)."""
    from kvconform.harness import suite

    conf7 = suite.requirements()["CONF-7"].text
    schema = json.loads(
        (ROOT / "conformance/schema/protocol/common.schema.json").read_text(encoding="utf-8")
    )

    def capabilities(node: object) -> dict[str, dict[str, object]] | None:
        if isinstance(node, dict):
            props = node.get("properties", {})
            if {"raw_fold", "uint_bits"} <= set(props):
                return props  # type: ignore[no-any-return]
            for value in node.values():
                found = capabilities(value)
                if found is not None:
                    return found
        return None

    props = capabilities(schema)
    assert props is not None
    for name, spec in props.items():
        cited = re.search(rf"`{name}` \(([^()]*)\)", conf7)
        assert cited, f"CONF-7 names no capability {name}"
        ids = re.findall(r"[A-Z]+-\d+", cited.group(1))
        described = str(spec.get("description", ""))
        assert ids and any(described.startswith(i) for i in ids), (
            f"capability {name}: the schema says {described[:40]!r}, CONF-7 cites {ids}"
        )
