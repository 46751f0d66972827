"""Ids are never given twice within one adapter process, across programs (ID-3, ALLOC-1).

Every object is released at the end of its program, so no case can compare its ids with
another's; the runner keeps, per driver, the ids each case read, and fails a case that
reads one an earlier case of the same process read. A restarted adapter is a new
process: its ids start anew and are not compared with the old one's. No timing here.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from kvconform.harness import suite
from kvconform.harness.runner import run_cases
from kvconform.protocol.client import StdioDriver

#: The reference served over stdio, its id counters rebuilt at every ``reset`` (the
#: counters of an engine object the adapter makes anew for each program): wrong.
COUNTERS_PER_PROGRAM = textwrap.dedent(
    """
    from kvconform_reference import identity
    from kvconform.protocol import server
    reset = server.Server.reset
    def fresh_counters(self):
        reset(self)
        identity._MODEL_INSTANCES = identity._Counter()
        identity._KV_ALLOCATIONS = identity._Counter()
    server.Server.reset = fresh_counters
    from kvconform.serve import main
    raise SystemExit(main([]))
    """
)

#: The reference over stdio, which exits after the answer to every third ``reset``: the
#: next program finds it gone and fails, the harness restarts it, and the new process's
#: ids start at 1 again (right).
EXITS_NOW_AND_THEN = textwrap.dedent(
    """
    import os
    from kvconform.protocol import server
    reset = server.Server.reset
    count = [0]
    def reset_then_maybe_exit(self):
        reset(self)
        count[0] += 1
        if count[0] % 3 == 0:
            import sys
            sys.stdout.flush()
    server.Server.reset = reset_then_maybe_exit
    handle = server.Server.handle_line
    def handle_line(self, line):
        out = handle(self, line)
        if count[0] and count[0] % 3 == 0 and b'"op":"reset"' in line.replace(b" ", b""):
            os.write(1, out)
            os._exit(0)
        return out
    server.Server.handle_line = handle_line
    from kvconform.serve import main
    raise SystemExit(main([]))
    """
)


def _cases() -> list:  # type: ignore[type-arg]
    return [c for c in suite.all_cases() if c.id.startswith("alloc.capacity.")]


def test_an_id_read_in_two_programs_of_one_process_fails_the_later_case() -> None:
    with StdioDriver([sys.executable, "-c", COUNTERS_PER_PROGRAM], timeout=30.0) as driver:
        results = run_cases(_cases(), driver)
    failed = [r for r in results if r.verdict == "failed"]
    assert failed, [r.verdict for r in results]
    first = results[0]
    assert first.verdict == "passed", first.report()  # nothing was given before it
    text = failed[0].report()
    assert "an id given twice" in text and "ALLOC-1" in text, text


def test_a_restarted_adapter_gives_its_ids_anew() -> None:
    with StdioDriver([sys.executable, "-c", EXITS_NOW_AND_THEN], timeout=30.0) as driver:
        results = run_cases(_cases(), driver)
        restarts = driver.restarts
    assert restarts > 1, "the adapter was never restarted: the test proves nothing"
    # The program sent to the exited process fails (the adapter was gone); no case
    # fails for reading, in the new process, an id the old one had given.
    twice = [r.case.id for r in results if "an id given twice" in r.report()]
    assert not twice, twice
    assert sum(r.verdict == "passed" for r in results) >= len(results) // 2, [
        r.verdict for r in results
    ]


#: Three cases on one process whose allocation ids are all the same number: the
#: first reads it; the second breaks on its first step and reads it only after; the
#: third reads it again with nothing broken.
_AFTER_A_BREAK = """\
kvconform: scenarios/2
area: identity
description: ids read after a break
scenarios:
  - id: t.first
    title: reads the id
    class: identity
    basis: seed
    requires: [ALLOC-1]
    why: the first read
    steps:
      - cache_new: {as: c, n_layers: 1, n_kv_heads: 1, head_dim: 1, max_seq_len: 4}
  - id: t.after-a-break
    title: breaks, then reads the id again
    class: identity
    basis: seed
    requires: [ALLOC-1]
    why: a read after the break
    steps:
      - hash: {as: h, ops: [{op: str, value: a}, {op: finish}]}
      - cache_new: {as: c, n_layers: 1, n_kv_heads: 1, head_dim: 1, max_seq_len: 4}
  - id: t.again
    title: reads the id again
    class: identity
    basis: seed
    requires: [ALLOC-1]
    why: a judged read
    steps:
      - cache_new: {as: c, n_layers: 1, n_kv_heads: 1, head_dim: 1, max_seq_len: 4}
"""


def test_an_id_read_after_the_adapter_broke_is_remembered_but_not_judged(tmp_path: Path) -> None:
    """INTERPRETING §5 item 7 and §7.3: the second case fails at its break, not on the id
    it read after it; the third, which broke nothing, fails on the id given again."""
    from kvconform.adapters.reference import ReferenceAdapter
    from kvconform.harness.scenario import load_scenario_file
    from kvconform.protocol.driver import InProcessDriver

    class OneIdAndNoHash(ReferenceAdapter):
        def cache_alloc_id(self, cache: object) -> int:
            return 7

        def hash(self, program: object) -> list[int]:
            raise RuntimeError("no hash here")

    path = tmp_path / "ids.yaml"
    path.write_text(_AFTER_A_BREAK)
    first, broken, again = run_cases(load_scenario_file(path), InProcessDriver(OneIdAndNoHash()))
    assert first.verdict == "passed", first.report()
    assert broken.verdict == "failed" and "an id given twice" not in broken.report()
    assert again.verdict == "failed" and "an id given twice" in again.report(), again.report()
    assert again.stake == "unsafe" and broken.stake == "other"
