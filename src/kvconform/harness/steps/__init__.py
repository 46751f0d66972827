"""The compiler of a scenario's steps into a program of operations and its checks.

One module per family of verbs, each a mixin of :class:`~.compiler._CompilerBase`,
which holds the scope of names, the plumbing and the verbs of the format itself
(``repeat`` and the relations); :mod:`kvconform.harness.scenario` assembles them
into the compiler it runs:

- :mod:`.compiler` -- the scope, the plumbing, a step read from the operation table,
  ``repeat``, the relations (``same``, ``differ``, ``nonzero``, ``increasing``);
- :mod:`.identity` -- models and caches;
- :mod:`.plan` -- sessions and plan keys;
- :mod:`.hashing` -- hash programs, and the values no primitive may mix;
- :mod:`.blocks` -- payloads, signatures, measure, stamp and verify.
"""
