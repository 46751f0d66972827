"""How the project's own tests are spread over workers (pytest-xdist, ``pyproject.toml``).

Tests that share a costly module fixture (the wheel built and installed, the suite
loaded in full, a run of the whole suite over stdio) carry one ``xdist_group``, so that
``--dist loadgroup`` sends them to one worker and the fixture is made once. If grouping
stops working, nothing fails: each worker makes the fixture again and the loop only
grows slower (pytest 9.2 with pytest-xdist 3.8: pytest-dev/pytest-xdist#1386; the test
extra keeps pytest below 9.2 for this). This test says so instead.
"""

from __future__ import annotations

import pytest


def _distribution(config: pytest.Config) -> str:
    """The controller's ``--dist`` (a worker's own option reads ``no``): the project's
    ``addopts``, unless the command line gave another."""
    dist = "load"
    words = [*config.getini("addopts"), *config.workerinput.get("mainargv", [])]  # type: ignore[attr-defined]
    for at, word in enumerate(words):
        if word == "--dist" and at + 1 < len(words):
            dist = words[at + 1]
        elif word.startswith("--dist="):
            dist = word.partition("=")[2]
    return dist


@pytest.mark.xdist_group("workers-keep-groups")
def test_a_group_is_kept_on_one_worker(request: pytest.FixtureRequest) -> None:
    if not hasattr(request.config, "workerinput"):
        pytest.skip("not distributed (-n 0): there are no workers to keep a group on")
    dist = _distribution(request.config)
    if dist != "loadgroup":
        pytest.skip(f"--dist {dist}: groups are not asked for")
    assert request.node.nodeid.endswith("@workers-keep-groups"), (
        f"pytest-xdist did not group this test ({request.node.nodeid}): its xdist_group "
        f"mark is ignored under pytest {pytest.__version__} (pytest-dev/pytest-xdist#1386); "
        "install the test extra's pytest (pip install -e '.[test]')"
    )
