"""Print the mutants a finished ``run.sh`` did not kill, as Markdown table rows.

    python tests/mutation/survivors_table.py [WORK]   # WORK: default /tmp/kvconform-mutation

One row per mutant: ``reference/<file>:<line>``, the function, the mutation
(removed -> added source), and an empty reason column. The reasons in
docs/mutation-testing.md are written by hand: a survivor is either killed by a
new scenario or argued equivalent there.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def _mutmut(work: Path) -> str:
    venv = Path(os.environ.get("MUTMUT_VENV", "/tmp/kvconform-mutmut-venv"))
    return str(venv / "bin" / "mutmut") if (venv / "bin" / "mutmut").exists() else "mutmut"


def _cell(text: str, limit: int = 90) -> str:
    text = text.replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def rows(work: Path) -> list[str]:
    out = []
    mutmut = _mutmut(work)
    for line in (work / "survivors.txt").read_text(encoding="utf-8").splitlines():
        name, _, status = line.strip().rpartition(": ")
        if not name:
            continue
        shown = subprocess.run(
            [mutmut, "show", name], cwd=work, capture_output=True, text=True, check=False
        ).stdout.splitlines()
        removed = [s[1:].strip() for s in shown if s.startswith("-") and not s.startswith("---")]
        added = [s[1:].strip() for s in shown if s.startswith("+") and not s.startswith("+++")]
        module = name.split(".x")[0].rsplit(".", 1)[-1] + ".py"
        function = re.sub(r"__mutmut_\d+$", "", name.rsplit(".", 1)[-1]).split("ǁ")[-1]
        function = function[2:] if function.startswith("x_") else function
        source = (REPO / "reference" / module).read_text(encoding="utf-8").splitlines()
        start = next(
            (i for i, s in enumerate(source) if re.match(rf"\s*def {re.escape(function)}\(", s)),
            0,
        )
        lineno = start + 1
        if removed:
            lineno = next(
                (i + 1 for i in range(start, len(source)) if source[i].strip() == removed[0]),
                lineno,
            )
        change = f"`{_cell(' / '.join(removed))}` → `{_cell(' / '.join(added))}`"
        out.append(f"| `{module}:{lineno}` | `{function}` | {change} | {status} |  |")
    return out


def main(argv: list[str]) -> int:
    work = Path(argv[1]) if len(argv) > 1 else Path("/tmp/kvconform-mutation")
    print("| where | function | mutation | status | reason |")
    print("|---|---|---|---|---|")
    for row in rows(work):
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
