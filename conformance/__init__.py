"""The conformance harness: scenarios as data, adapters, drivers and runners.

- :mod:`.values` -- language-neutral values exchanged with an implementation.
- :mod:`.ops` -- the operations a scenario asks an implementation to perform.
- :mod:`.adapter` -- the typed interface an in-process (Python) adapter implements.
- :mod:`.driver` -- runs a program of operations against an adapter.
- :mod:`.scenario` -- scenario files: loading, validation, compilation.
- :mod:`.checks` -- expectations and how an outcome is judged against them.
- :mod:`.suite` -- the installed suite: scenarios, vectors, requirement index.
- :mod:`.runner` -- applicability and verdicts.
- :mod:`.plugin` -- the pytest plugin.
"""
