"""JUnit XML, for CI systems that display test results."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def render(report: Mapping[str, Any]) -> str:
    by_area: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for result in report["results"]:
        by_area[result["area"]].append(result)
    summary = report["summary"]
    root = ET.Element(
        "testsuites",
        name=f"kvconform {report['suite']['version']} against {report['adapter']['name']}",
        tests=str(summary["total"]),
        failures=str(summary["failed"]),
        skipped=str(summary["not_applicable"]),
        time=f"{report['seconds']:.3f}",
    )
    for area, results in sorted(by_area.items()):
        suite = ET.SubElement(
            root,
            "testsuite",
            name=area,
            tests=str(len(results)),
            failures=str(sum(r["verdict"] == "failed" for r in results)),
            skipped=str(sum(r["verdict"] == "not_applicable" for r in results)),
            time=f"{sum(r.get('seconds', 0.0) for r in results):.6f}",
        )
        for r in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"kvconform.{area}",
                name=r["id"],
                time=f"{r.get('seconds', 0.0):.6f}",
                file=r.get("file", ""),
            )
            props = ET.SubElement(case, "properties")
            for req in r["requires"]:
                ET.SubElement(props, "property", name="requirement", value=req)
            basis = r.get("basis", "seed")
            shown = "seed" if basis == "seed" else ",".join(basis)
            ET.SubElement(props, "property", name="basis", value=shown)
            if r["verdict"] == "failed":
                failure = r["failure"]
                on = "seed" if basis == "seed" else "decision " + ",".join(basis)
                node = ET.SubElement(
                    case,
                    "failure",
                    message=f"[{on}] {failure['step']}: expected {failure['expected']}",
                    type="seed" if basis == "seed" else "decision",
                )
                node.text = failure["text"]
            elif r["verdict"] == "not_applicable":
                ET.SubElement(case, "skipped", message=r.get("reason", "not applicable"))
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(report: Mapping[str, Any], path: Path) -> None:
    path.write_text(render(report), encoding="utf-8")
