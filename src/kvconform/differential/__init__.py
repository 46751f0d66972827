"""Generated differential checks: random programs, the adapter against the reference.

Hand-written scenarios check what their authors thought of. The checks here write
random programs instead (seeded, reproducible), run each one on the implementation under
test and on the reference -- each through a :class:`~..driver.Driver`, the whole
program at once so it pipelines over stdio -- and compare every observable
answer under the judging rules of CONF-12:

- validity booleans, lengths, signatures and hash values exactly;
- errors by kind, field, layer and values (the message is not judged here);
- ids and plan keys only by relation: each id read is compared with every
  earlier read of the same kind (equal, smaller, greater), and each plan key
  with every earlier key (equal or not), so an implementation may number its
  ids from anywhere in any step.

Four properties (:data:`.engine.PROPERTIES`):

``generated.key-state-machine``
    models (construct, reload, drop, hooks), caches (append past capacity,
    truncate past length, clear, replace a layer out of range or of another
    shape, drop), held plans checked with random per-step inputs, plan-key
    probes, and id and length reads, with live-handle bookkeeping; and every other
    operation of the table in a class the implementation declares (under
    ``plan_validity``: placed caches and three-valued validity), unless its table
    entry says why not (``not_generated``).
``generated.hash``
    mix programs of every kind (NaN payloads, signed zeros, subnormals,
    infinities, non-ASCII and astral strings, u64 extremes, finish
    mid-sequence, long repeated bytes); over stdio they travel in one
    ``hash_batch`` request.
``generated.verify``
    coherent blocks with random faults in the payload, the stamp and the
    expectation (under version 2 their layouts too, and split V widths): blocks of
    each version the implementation reads verified, blocks of the version it writes
    measured and stamped, compared with the reference declaring the same format
    profile and v2 revision.
``generated.prefix``
    stores and lookups of requests drawn from one another (so that prefixes, salts
    and adapter names collide), each lookup's count compared with the reference's
    under the implementation's declared prefix options (:mod:`.declared`): fewer is
    under-reuse (PREFIX-2), more is over-reuse (:mod:`.prefix`, :mod:`.strategies.prefix`).

A disagreement is shrunk (its recorded choices edited and replayed, then its
operations deleted one at a time) and can be written out as a ready-to-commit
scenario file whose expectations are the reference's answers
(:mod:`kvconform.differential.export`). The program writers of :mod:`.strategies`
draw their choices from a seeded pseudo-random source on this path; the same
writers are Hypothesis strategies too, for ``@given`` tests.

Entry points: ``kvconform run --generated N [--seed S] [--export-counterexamples DIR]``,
:func:`.engine.run_property` from Python, and
``python -m tests.kill_matrix`` for the kill matrix.

This module imports nothing heavy (the checks' descriptions, from the harness);
:mod:`.engine` and :mod:`.strategies` import Hypothesis (the ``test`` extra),
:mod:`.compare` and :mod:`.export` do not.
"""

from __future__ import annotations

from kvconform.harness.generated import IDS

#: Case ids of the generated properties, in the order they run (each one's description,
#: which the harness lists and explains, is :data:`kvconform.harness.generated.CHECKS`).
PROPERTY_IDS = IDS
