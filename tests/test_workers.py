"""How the project's own tests are spread over workers (pytest-xdist, ``pyproject.toml``).

Tests that share a costly module fixture (the wheel built and installed, the suite
loaded in full, a run of the whole suite over stdio) carry one ``xdist_group``, so that
``--dist loadgroup`` sends them to one worker and the fixture is made once. If grouping
stops working, nothing fails: each worker makes the fixture again and the loop only
grows slower (pytest 9.2 with pytest-xdist 3.8: pytest-dev/pytest-xdist#1386; the test
extra keeps pytest below 9.2 for this). This test says so instead.

And how a worker ends: the collection ``tests/conftest.py`` makes before pytest's last
check for exceptions raised in finalizers must leave that check nothing to miss.
"""

from __future__ import annotations

import gc

import pytest

from tests import conftest
from tests.heap import made_here


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


#: A session fixture and the group of the tests that ask for it: each is made once on the
#: one worker its group goes to.
SHARED = {"fresh_suite": "suite-fresh-load"}


def test_every_test_of_a_shared_fixture_is_in_its_group(request: pytest.FixtureRequest) -> None:
    """A test that asks for a costly session fixture (itself or through another fixture)
    without its group makes that fixture again on whichever worker it lands: a full load
    of the suite, 1.4 to 2 s, without any test failing. Catches the mark left out."""
    strays = [
        item.nodeid
        for item in request.session.items
        for fixture, group in SHARED.items()
        if fixture in getattr(item, "fixturenames", ())
        and not any(mark.args[:1] == (group,) for mark in item.iter_markers("xdist_group"))
    ]
    assert not strays, f"not in their fixture's xdist_group: {strays}"


def test_the_last_collection_runs_every_finalizer_before_the_heap_is_set_aside(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fails a worker that sets its heap aside (``gc.freeze``) with garbage still in it,
    or after one collection only: pytest's check would then never see a finalizer that
    garbage holds, nor one of the garbage that finalizer leaves.

    The collections look only at what the test makes (:func:`tests.heap.made_here`: on
    the whole heap they took 0.9 s); what the hook stops (this worker's reference
    service) is left running.
    """
    monkeypatch.setattr(conftest, "_STOPS", [])
    ran: list[str] = []

    class Cycle:
        def __init__(self, name: str, then: str = "") -> None:
            self.name, self.then, self.me = name, then, self

        def __del__(self) -> None:
            ran.append(self.name)
            if self.then:  # garbage left by a finalizer: found only by a later collection
                Cycle(self.then)

    with made_here():
        Cycle("first", then="second")
        survivor = [ran]  # made in the block: the hook sets it aside
        frozen = gc.get_freeze_count()
        conftest.pytest_unconfigure(pytest.Config.__new__(pytest.Config))
        assert ran == ["first", "second"]
        assert gc.get_freeze_count() > frozen, survivor
