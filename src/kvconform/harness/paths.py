"""Where the installed suite's folders are: ``spec/``, ``vectors/``, ``conformance/``.

Everything is found relative to :func:`kvconform.data_root`, so the same code serves a
source checkout and an installed wheel. The lowest module of the harness: the suite
(:mod:`.suite`), its cache (:mod:`.cache`) and its manifest (:mod:`.manifest`) all find
the files here, so that they form a line (suite, then cache, then manifest) and not a
circle.
"""

from __future__ import annotations

from pathlib import Path

import kvconform


def spec_dir() -> Path:
    return kvconform.data_root() / "spec"


def vectors_dir() -> Path:
    return kvconform.data_root() / "vectors"


def conformance_dir() -> Path:
    return kvconform.data_root() / "conformance"


def scenarios_dir() -> Path:
    return conformance_dir() / "scenarios"
