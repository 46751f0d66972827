"""The program writers of the generated checks, and their Hypothesis strategies.

Every program stays inside the operations' preconditions (a handle is used only
while it is live, a hook toggled only if the model's configuration declares it,
shapes and counts are positive where the operations require it), so the
reference answers every operation; what varies is everything an implementation
can get wrong. Every value a program holds can be written in a scenario file
(:mod:`kvconform.differential.export`; NaN payloads by their bits), so any
counterexample can be replayed.

A program is written by a plain function of a :class:`Source` of integer
choices (``source.integer(lo, hi)``); every other value (a u64, a float's bits,
a string, a list) is made of such choices. Three sources feed the same writers:

- :class:`RandomSource`, a seeded pseudo-random source that records its choices:
  the fast path the engine uses to write programs (no Hypothesis involved);
- :class:`ReplaySource`, which replays a recorded (and edited) choice sequence:
  the engine's shrinker edits the choices of a failing program and replays them;
- :class:`HypothesisSource`, which draws every choice from Hypothesis: the
  strategies of this module (:func:`key_programs`, :func:`hash_programs`,
  :func:`block_programs`, :data:`texts`, ...) for use with ``@given``.

Choices are ordered so that smaller is simpler: the choice 0 is the first rule,
the first preset, the absence of a fault, the end of a list; a program whose
choices run out ends early and plainly. The shrinker relies on this.

One module per part, so that a new operation class adds a module rather than growing
one (this package names every public writer, for ``strategies.X``):

- :mod:`.source` -- the sources of choices, :func:`strategy`, :func:`pick`, :func:`flag`,
  :func:`items`; :mod:`.values` -- values of every class (integers at their edges,
  floats, texts, bytes, parameters, models, geometries, step inputs); :mod:`.scope` --
  what an implementation's declarations let a program hold (:class:`Scope`).
- The key-side program (:func:`key_program`), one rules class per operation class, each
  building on the last: :mod:`.state` (what is live, the steps every rule shares),
  :mod:`.identity` (models), :mod:`.alloc` (caches), :mod:`.plan` (held plans, key
  probes), :mod:`.plan_validity` (placed caches, three-valued validity), :mod:`.table`
  (every other operation of a declared class, from its table entry), :mod:`.keys` (the
  rules in their fixed order, the stories that cross classes).
- :mod:`.hash` -- mix programs (:func:`hash_program_list`).
- :mod:`.prefix` (with :mod:`.prefix_scope`, and :mod:`.prefix_bounded` for a bounded
  cache) -- stores and lookups of related requests, the class ``prefix_cache``
  (:func:`prefix_program`, :class:`PrefixScope`).
- :mod:`.signature` (blocks, payload faults, lying stamps, measures and stamps),
  :mod:`.profile_v2` (version-2 blocks and layouts), :mod:`.verify` (verifications, and
  :func:`block_program`).

A new operation class whose operations join the key-side programs adds a rules module
(a class over the last one in the chain, its rules named in :meth:`.keys.KeyBuilder.rules`);
one with programs of its own adds a writer module and a property in :mod:`..engine`.
The programs drawn for a seed stay the same only if every choice is made in the same
order: moving code between modules is safe, reordering rules or draws is not.
"""

from __future__ import annotations

from kvconform.differential.strategies.alloc import AllocRules
from kvconform.differential.strategies.hash import (
    hash_program,
    hash_program_list,
    hash_programs,
    mix_op,
    mix_ops,
    mix_program,
)
from kvconform.differential.strategies.identity import IdentityRules
from kvconform.differential.strategies.keys import KeyBuilder, key_program, key_programs
from kvconform.differential.strategies.plan import PlanRules, ids, plan_id, vary_identity
from kvconform.differential.strategies.plan_validity import ValidityRules
from kvconform.differential.strategies.prefix import (
    PrefixBuilder,
    prefix_program,
    prefix_programs,
    prefix_writer,
)
from kvconform.differential.strategies.prefix_bounded import within_promises
from kvconform.differential.strategies.prefix_scope import PrefixScope
from kvconform.differential.strategies.profile_v2 import (
    coherent_block_v2,
    layout_lie,
    lie_v2,
    measuring_op_v2,
    split_width,
    valid_layout,
    verify_op_v2,
)
from kvconform.differential.strategies.scope import Scope, fills_schema, schema_spec, schema_specs
from kvconform.differential.strategies.signature import (
    Block,
    coherent_block,
    coherent_blocks,
    edge_width,
    faulty_payload,
    lie,
    measuring_op,
    measuring_ops,
    payload_fault,
    respell,
)
from kvconform.differential.strategies.source import (
    HypothesisSource,
    Overrun,
    RandomSource,
    RecordedSource,
    ReplaySource,
    Source,
    Span,
    Writer,
    flag,
    items,
    pick,
    strategy,
)
from kvconform.differential.strategies.state import KeyState
from kvconform.differential.strategies.table import DRAWN_BY_WRITERS, TableRules
from kvconform.differential.strategies.values import (
    DTYPES,
    F64_EDGES,
    PRESET_GEOMETRIES,
    PRESET_MODELS,
    SPECIAL_STRINGS,
    U64_EDGES,
    U64_MAX,
    any_float,
    any_text,
    binary,
    bounded_float,
    code_point,
    f64_bits,
    f64_from_bits,
    f64_pattern,
    f64_patterns,
    geometries,
    geometry,
    model_spec,
    model_specs,
    param_float,
    param_floats,
    param_value,
    param_values,
    step_inputs,
    text,
    texts,
    u64,
    u64s,
    wide,
)
from kvconform.differential.strategies.verify import (
    block_program,
    block_programs,
    verify_op,
    verify_ops,
)

__all__ = [
    "DRAWN_BY_WRITERS",
    "DTYPES",
    "F64_EDGES",
    "PRESET_GEOMETRIES",
    "PRESET_MODELS",
    "SPECIAL_STRINGS",
    "U64_EDGES",
    "U64_MAX",
    "AllocRules",
    "Block",
    "HypothesisSource",
    "IdentityRules",
    "KeyBuilder",
    "KeyState",
    "Overrun",
    "PlanRules",
    "PrefixBuilder",
    "PrefixScope",
    "RandomSource",
    "RecordedSource",
    "ReplaySource",
    "Scope",
    "Source",
    "Span",
    "TableRules",
    "ValidityRules",
    "Writer",
    "any_float",
    "any_text",
    "binary",
    "block_program",
    "block_programs",
    "bounded_float",
    "code_point",
    "coherent_block",
    "coherent_block_v2",
    "coherent_blocks",
    "edge_width",
    "f64_bits",
    "f64_from_bits",
    "f64_pattern",
    "f64_patterns",
    "faulty_payload",
    "fills_schema",
    "flag",
    "geometries",
    "geometry",
    "hash_program",
    "hash_program_list",
    "hash_programs",
    "ids",
    "items",
    "key_program",
    "key_programs",
    "layout_lie",
    "lie",
    "lie_v2",
    "measuring_op",
    "measuring_op_v2",
    "measuring_ops",
    "mix_op",
    "mix_ops",
    "mix_program",
    "model_spec",
    "model_specs",
    "param_float",
    "param_floats",
    "param_value",
    "param_values",
    "payload_fault",
    "pick",
    "plan_id",
    "prefix_program",
    "prefix_programs",
    "prefix_writer",
    "respell",
    "schema_spec",
    "schema_specs",
    "split_width",
    "step_inputs",
    "strategy",
    "text",
    "texts",
    "u64",
    "u64s",
    "valid_layout",
    "vary_identity",
    "verify_op",
    "verify_op_v2",
    "verify_ops",
    "wide",
    "within_promises",
]
