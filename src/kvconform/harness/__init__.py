"""The harness: how the suite's data become verdicts.

- :mod:`.yamlsource` -- safe loading of the suite's files, with line numbers, and schema checks.
- :mod:`.paths` -- where the installed suite's folders are.
- :mod:`.suite` -- the installed suite: scenarios, vectors, requirement index.
- :mod:`.case` -- a conformance case, what a scenario or a vector compiles into.
- :mod:`.scenario` -- scenario files: validation and compilation into programs, with the
  step compiler in :mod:`.steps` (one module per family of verbs).
- :mod:`.checks` -- expectations and how an outcome is judged against them.
- :mod:`.declarations` -- what an implementation's declared options and capabilities change.
- :mod:`.runner` -- applicability and verdicts.
- :mod:`.expectations` -- expectation files (known failures) for CI gating.
- :mod:`.generated` -- the generated differential checks' descriptions (their code is
  :mod:`kvconform.differential`, above the harness, which the harness never imports).
- :mod:`.manifest`, :mod:`.coverage`, :mod:`.published`, :mod:`.vectorgen` -- the
  maintenance tools that keep the data files, the spec and each other in step (the
  vector files' parts are in :mod:`.vectors`).
"""
