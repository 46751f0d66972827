"""What validating the scenario files costs, against the schema as written and with its
local references inlined (``kvconform.harness.yamlsource.inline_local_refs``).

Run from the repository root: ``python bench/schema_bench.py [--runs N]``. Both
validators check the same documents, the shipped scenario files parsed once, in
alternation within one process; it prints each run's CPU time and the ratio of the
medians. Only the ratio means anything from machine to machine (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Sequence
from typing import Any

import jsonschema

from kvconform.harness import yamlsource


def _seconds(validator: Any, documents: Sequence[object]) -> float:
    started = time.process_time()
    for document in documents:
        for _ in validator.iter_errors(document):
            raise SystemExit("a shipped scenario file does not validate: nothing to measure")
    return time.process_time() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=4, help="alternations (default 4)")
    args = parser.parse_args(argv)
    written = json.loads((yamlsource.SCHEMA_DIR / "scenarios.schema.json").read_text("utf-8"))
    validators = {
        "as written": jsonschema.Draft202012Validator(written),
        "inlined": jsonschema.Draft202012Validator(yamlsource.inline_local_refs(written)),
    }
    folder = yamlsource.SCHEMA_DIR.parent / "scenarios"
    documents = [yamlsource.load_yaml(path).data for path in sorted(folder.glob("**/*.yaml"))]
    times: dict[str, list[float]] = {name: [] for name in validators}
    for _ in range(args.runs):
        for name, validator in validators.items():
            times[name].append(_seconds(validator, documents))
    for name, runs in times.items():
        print(f"{name:>10}: " + ", ".join(f"{t:.3f}" for t in runs) + " s of CPU")
    ratio = statistics.median(times["inlined"]) / statistics.median(times["as written"])
    print(f"{len(documents)} files; inlined / as written (medians): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
