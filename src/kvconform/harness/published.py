"""Published ids: every case id and requirement id a release has shipped (CONF-5).

    python -m kvconform.harness.published   # add the current ids to the list

Users list case ids in expectation files and cite requirement ids, so an id
that was published must keep existing: a test fails when one disappears
(renamed, or deleted instead of withdrawn). Releases add their new ids.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import kvconform
from kvconform.harness import suite


def published_path() -> Path:
    return kvconform.data_root() / "conformance" / "published-ids.txt"


def read() -> set[str]:
    path = published_path()
    if not path.exists():
        return set()
    return {
        line.strip()
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }


def current() -> set[str]:
    return {case.id for case in suite.all_cases()} | set(suite.requirements())


def missing() -> list[str]:
    """Published ids that no longer exist."""
    return sorted(read() - current())


def main(argv: Sequence[str] | None = None) -> int:
    ids = sorted(read() | current())
    header = (
        "# Every case id and requirement id kvconform has published (CONF-5).\n"
        "# Ids here must keep existing; add new ones with\n"
        "# python -m kvconform.harness.published\n"
        f"# Last updated for suite {kvconform.SUITE_VERSION}.\n"
    )
    published_path().write_text(header + "\n".join(ids) + "\n", encoding="utf-8")
    print(f"{published_path()}: {len(ids)} ids", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
