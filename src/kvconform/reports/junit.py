"""JUnit XML, for CI systems that display test results."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvconform.files import write_atomic
from kvconform.reports.record import STAKE_LABELS
from kvconform.reports.untrusted import xml as _x


def render(report: Mapping[str, Any]) -> str:
    """One testsuite per area. Under an expectations file the test tab agrees with the
    gate: an expected failure is skipped (its failure in the message), a stale entry
    (listed as failing, but passed) is a failure."""
    by_area: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for result in report["results"]:
        by_area[result["area"]].append(result)
    gate = report.get("gate") or {}
    expected = set(gate.get("expected_failures", ()))
    stale = set(gate.get("stale", ()))

    def failing(r: Mapping[str, Any]) -> bool:
        return (r["verdict"] == "failed" and r["id"] not in expected) or r["id"] in stale

    def skipped(r: Mapping[str, Any]) -> bool:
        return r["verdict"] in ("not_applicable", "not_run") or r["id"] in expected

    results = report["results"]
    root = ET.Element(
        "testsuites",
        name=_x(f"kvconform {report['suite']['version']} against {report['adapter']['name']}"),
        tests=str(report["summary"]["total"]),
        failures=str(sum(map(failing, results))),
        skipped=str(sum(map(skipped, results))),
        time=f"{report['seconds']:.3f}",
    )
    from kvconform.reports.record import caveats

    notes = caveats(report)
    if notes:  # on the root's name, and as a property of every suite (where JUnit has them)
        root.set("name", _x(f"{root.get('name')} [{'; '.join(notes)}]"))
    for area, results in sorted(by_area.items()):
        suite = ET.SubElement(
            root,
            "testsuite",
            name=_x(area),
            tests=str(len(results)),
            failures=str(sum(map(failing, results))),
            skipped=str(sum(map(skipped, results))),
            time=f"{sum(r.get('seconds', 0.0) for r in results):.6f}",
        )
        if notes:
            suite_props = ET.SubElement(suite, "properties")
            for note in notes:
                ET.SubElement(suite_props, "property", name="kvconform-caveat", value=_x(note))
        for r in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=_x(f"kvconform.{area}"),
                name=_x(r["id"]),
                time=f"{r.get('seconds', 0.0):.6f}",
                file=_x(r.get("file", "")),
            )
            props = ET.SubElement(case, "properties")
            for req in r["requires"]:
                ET.SubElement(props, "property", name="requirement", value=_x(req))
            basis = r.get("basis", "seed")
            shown = "seed" if basis == "seed" else ",".join(basis)
            ET.SubElement(props, "property", name="basis", value=_x(shown))
            if r["id"] in expected:
                failure = r["failure"]
                ET.SubElement(
                    case,
                    "skipped",
                    message=_x(
                        f"known failure (listed in {gate.get('file', '')}: "
                        f"{gate.get('reasons', {}).get(r['id'], '')}): "
                        f"{failure['step']}: expected {failure['expected']}"
                    ),
                )
            elif r["id"] in stale:
                ET.SubElement(
                    case,
                    "failure",
                    message=_x(
                        f"listed as failing in {gate.get('file', '')}, but passes: "
                        "remove it from the expectations file"
                    ),
                    type="stale-expectation",
                )
            elif r["verdict"] == "failed":
                failure = r["failure"]
                on = "seed" if basis == "seed" else "decision " + ",".join(basis)
                label = STAKE_LABELS.get(str(r.get("stake")))
                if label:  # the gravest first (CONF-18)
                    on = f"{label}; {on}"
                node = ET.SubElement(
                    case,
                    "failure",
                    message=_x(f"[{on}] {failure['step']}: expected {failure['expected']}"),
                    type="seed" if basis == "seed" else "decision",
                )
                node.text = _x(failure["text"])
            elif r["verdict"] == "not_run":
                ET.SubElement(case, "skipped", message=_x(r.get("reason", "not run")))
            if r.get("advice"):  # a passing case's advice, never a failure (CONF-12)
                out = ET.SubElement(case, "system-out")
                out.text = _x(
                    "advice (ERR-13, not part of the verdict; --strict-messages makes it a "
                    "failure):\n" + "\n".join(f"{a['step']}: {a['actual']}" for a in r["advice"])
                )
            elif r["verdict"] == "not_applicable":
                ET.SubElement(case, "skipped", message=_x(r.get("reason", "not applicable")))
    if report.get("incomplete"):  # a CI tab must not read an incomplete run as green
        suite = ET.SubElement(root, "testsuite", name="kvconform", tests="1", errors="1")
        case = ET.SubElement(suite, "testcase", classname="kvconform.run", name="complete run")
        ET.SubElement(
            case, "error", message=_x(f"incomplete run: {report['incomplete']}"), type="incomplete"
        )
        root.set("errors", "1")
        root.set("tests", str(int(root.get("tests", "0")) + 1))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(report: Mapping[str, Any], path: Path) -> None:
    write_atomic(path, render(report))
