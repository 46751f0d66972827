"""The whole suite against an independent implementation: the Rust adapter.

``examples/rust-adapter/`` implements the specification from ``spec/`` in
Rust (std only) and serves it over the stdio protocol. Its ids start
elsewhere and step differently, its plan key is composed differently and its
messages are worded differently from the reference's, so a green run here is
evidence that the suite judges the specification and not the reference
(CONF-12).

Needs ``cargo``. Without it every test here is skipped, loudly.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from kvconform.harness import runner, suite
from kvconform.protocol.client import StdioDriver
from tests import toolchain
from tests.toolchain import tool
from tests.verdicts import for_another_option

#: One worker builds the release binary (the module's fixture) and runs every test here:
#: in a fresh checkout the build takes a while, and other workers would only wait on
#: cargo's lock to find it built.
pytestmark = [pytest.mark.covers("CONF-12"), pytest.mark.xdist_group("rust-adapter")]

CRATE = Path(__file__).resolve().parent.parent / "examples" / "rust-adapter"
BINARY = CRATE / "target" / "release" / "kvconform-rust-adapter"
NEWLINE = b"\n"
NO_CARGO = "cargo not found: the Rust adapter was NOT tested (install a Rust toolchain to run it)"


def _sources() -> list[Path]:
    return [CRATE / "Cargo.toml", *(CRATE / "src").rglob("*.rs")]


def _up_to_date() -> bool:
    if not BINARY.is_file():
        return False
    built = BINARY.stat().st_mtime
    return all(path.stat().st_mtime < built for path in _sources())


@pytest.fixture(scope="module")
def binary() -> Path:
    """The release binary, built unless it is newer than every source file."""
    cargo = tool("cargo", NO_CARGO)
    if not _up_to_date():
        toolchain.cargo(cargo, CRATE, "build", "--release")
    assert BINARY.is_file(), f"cargo build succeeded but {BINARY} is missing"
    return BINARY


def test_cargo_test_passes() -> None:
    toolchain.cargo(tool("cargo", NO_CARGO), CRATE, "test")


def test_handshake_declares_every_class_and_profile_v1(binary: Path) -> None:
    with StdioDriver([str(binary)]) as driver:
        info = driver.info
    assert info.name == "kvconform-rust-adapter"
    assert info.language == "rust"
    assert info.classes == frozenset(
        {"hash", "identity", "plan", "signature", "verify", "plan_validity", "prefix_cache"}
    )
    assert (info.format_writes, info.format_reads) == (1, frozenset({1}))
    # Its own answers where the class prefix_cache leaves a choice: the salt in every
    # block's record, and a shared tier (PREFIX-13, PREFIX-21).
    assert dict(info.options) == {"prefix_salt_scope": "every_block", "prefix_tier": "shared"}


#: The adapter's declarations chosen by flag: profile v2 on either upstream line, the
#: two steps of a rolling upgrade, the window left out of the plan key, and the other
#: answers to five options of the class prefix_cache.
FLAGS = {
    "v2": ["--writes", "2"],
    "v2-layout-only": ["--writes", "2", "--v2-revision", "layout_only"],
    "rolling-v1": ["--writes", "1", "--reads", "1,2"],
    "rolling-v2": ["--writes", "2", "--reads", "1,2"],
    "window-structure": ["--plan-key-window", "structure"],
    "prefix-partial-tokens": ["--prefix-partial", "tokens"],
    "prefix-salt-root": ["--prefix-salt-scope", "root"],
    "prefix-adapter-content": ["--prefix-adapter-identity", "content"],
    "prefix-media-caller": ["--prefix-media-identity", "caller"],
    "prefix-empty-salt-refused": ["--prefix-empty-salt", "refuse"],
    "prefix-partial-exact-tail": ["--prefix-partial", "exact_tail"],
    "prefix-tier-converted": ["--prefix-tier-layout", "converted"],
}
#: The prefix_cache cases each of those declarations must pass: the cases written for
#: the option value it declares (the flag's point is to run them).
FLAG_CASES = {
    "prefix-partial-tokens": (
        "prefix.partial.tail-reused-position-by-position",
        "prefix.partial.padding-is-not-a-computed-token-under-tokens",
        "prefix.partial.divergence-inside-a-block-under-tokens",
        "prefix.partial.lookup-shorter-than-the-stored-block",
    ),
    "prefix-salt-root": (),
    "prefix-adapter-content": ("prefix.adapter.reload-of-equal-weights-shares-under-content",),
    "prefix-media-caller": (
        "prefix.media.caller-ids-differ-under-caller",
        "prefix.media.caller-id-still-keys-shape-and-place",
    ),
    "prefix-empty-salt-refused": ("prefix.salt.empty-is-refused",),
    "prefix-partial-exact-tail": (
        "prefix.partial.exact-tail-is-reused-whole-and-only-whole",
        "prefix.partial.exact-tail-is-found-through-the-tier",
        "prefix.partial.exact-tail-survives-a-restart",
        "prefix.partial.padding-is-not-a-computed-token-under-exact-tail",
        "prefix.partial.exact-tail-is-keyed-by-its-prefix",
        "prefix.capacity.a-kept-tail-counts-toward-the-bound",
        "prefix.reuse.block-size-two-in-whole-blocks",
    ),
    "prefix-tier-converted": ("prefix.tier.other-layout-is-reused-when-converted",),
}


@pytest.mark.covers("PROF-5", "PROF-11", "PROF-12", "PLAN-25", "CONF-11")
@pytest.mark.parametrize("name", sorted(FLAGS))
def test_every_declaration_of_the_rust_adapter_passes(binary: Path, name: str) -> None:
    """Each declaration passes everything it applies to; what it sets aside is for
    another option value or another format declaration, never for a class it lacks.
    Under ``prefix_partial: tokens``, whose checkpoints are not whole blocks, it does not
    declare ``prefix_capacity``, and the cases of a bounded cache are set aside (PREFIX-24)."""
    with StdioDriver([str(binary), *FLAGS[name]]) as driver:
        bounded = driver.info.prefix_capacity
        results = runner.run_cases(suite.all_cases(), driver)
    assert bounded == (name != "prefix-partial-tokens")
    failed = [r.report() for r in results if r.verdict == "failed"]
    assert not failed, "\n\n".join(failed)
    unexplained = [
        f"{r.case.id}: {r.reason}"
        for r in results
        if r.verdict == "not_applicable"
        and not for_another_option(r)
        and (bounded or "capabilities.prefix_capacity, PREFIX-24" not in r.reason)
    ]
    assert not unexplained, "\n".join(unexplained)
    assert sum(r.verdict == "passed" for r in results) > len(results) // 2
    verdicts = {r.case.id: r.verdict for r in results}
    missed = [case for case in FLAG_CASES.get(name, ()) if verdicts.get(case) != "passed"]
    assert not missed, f"not run or not passed under {FLAGS[name]}: {missed}"


def test_a_bad_flag_is_one_line_and_exit_status_2(binary: Path) -> None:
    done = subprocess.run(
        [str(binary), "--writes", "3"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "--writes" in done.stderr


def test_whole_suite_passes_against_the_rust_adapter(binary: Path) -> None:
    cases = suite.all_cases()
    with StdioDriver([str(binary)]) as driver:
        results = runner.run_cases(cases, driver)
        incidents = list(driver.incidents)
    verdicts = Counter(result.verdict for result in results)
    failed = [result for result in results if result.verdict == "failed"]
    not_applicable = [
        result
        for result in results
        if result.verdict == "not_applicable" and not for_another_option(result)
    ]
    summary = (
        f"{len(results)} cases: {verdicts['passed']} passed, {verdicts['failed']} failed, "
        f"{verdicts['not_applicable']} not applicable"
    )
    print(summary)
    report = "\n\n".join(result.report() for result in failed)
    assert not failed, f"{summary}\n\n{report}"
    # Every class and profile v1 are declared, and every option answered by default, so
    # nothing may be set aside but the cases written for other answers (CONF-3, CONF-6).
    assert not not_applicable, "\n".join(f"{r.case.id}: {r.reason}" for r in not_applicable)
    assert not incidents, "the adapter had to be restarted:\n" + "\n".join(incidents)


@pytest.mark.covers("PREFIX-1", "PREFIX-2", "PREFIX-19", "PREFIX-21", "PREFIX-22", "CONF-16")
def test_the_prefix_cache_class_passes_against_the_rust_adapter(binary: Path) -> None:
    """The class prefix_cache on its own: every case passes but those written for the
    option values the adapter does not declare by default (partial blocks, content
    adapter identity, caller media identity, refused empty salts; its flags declare
    them), shared tier included."""
    cases = [case for case in suite.all_cases() if case.cls == "prefix_cache"]
    with StdioDriver([str(binary)]) as driver:
        results = runner.run_cases(cases, driver)
    verdicts = Counter(result.verdict for result in results)
    failed = [result.report() for result in results if result.verdict == "failed"]
    assert not failed, "\n\n".join(failed)
    set_aside = [r for r in results if r.verdict == "not_applicable"]
    assert all(for_another_option(r) for r in set_aside), [r.reason for r in set_aside]
    assert not any("prefix_tier: " in r.reason for r in set_aside), "the tier cases were set aside"
    assert verdicts["passed"] == len(cases) - len(set_aside) and verdicts["passed"] >= 60
    # The case written for the salt scope it declares (not the reference's) was run.
    scope = next(r for r in results if r.case.id == "prefix.salt.every-block-scope-reuses-alike")
    assert scope.verdict == "passed"


@pytest.mark.covers("PROTO-4")
def test_no_answer_to_a_batch_is_held_back_while_the_next_request_is_half_written(
    binary: Path,
) -> None:
    """The adapter may buffer its answers while whole requests wait in its input, but
    writes them before it waits for more: every answer of a batch arrives although
    the request after it is only half written."""
    proc = subprocess.Popen(
        [str(binary)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=0,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        batch = b"".join(b'{"seq":%d,"op":"reset"}\n' % seq for seq in range(1, 201))
        proc.stdin.write(batch + b'{"seq":201,"op":"re')
        got = b""
        while got.count(b"\n") < 200:
            ready, _, _ = select.select([proc.stdout], [], [], 10.0)
            assert ready, f"answers held back: {got.count(NEWLINE)} of 200 arrived"
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            assert chunk, "the adapter ended its output"
            got += chunk
        assert got.count(b"\n") == 200 and got.endswith(b"\n")
        proc.stdin.write(b'set"}\n')
        ready, _, _ = select.select([proc.stdout], [], [], 10.0)
        assert ready, "the answer to the completed request is held back"
        assert json.loads(os.read(proc.stdout.fileno(), 1 << 16)) == {"seq": 201, "ok": None}
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stdin.close()
