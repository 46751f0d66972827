"""The protocol between the harness and an implementation (spec/protocol.md).

- :mod:`.operations` -- the operation table: every operation declared once.
- :mod:`.codec` -- the wire form of operations, results and declarations.
- :mod:`.adapter` -- the typed interface an in-process (Python) adapter implements.
- :mod:`.driver` -- runs a program of operations against an in-process adapter.
- :mod:`.channel` -- the byte streams to and from an adapter process, bounded and timed.
- :mod:`.client` -- runs programs against an adapter process over stdio (supervision, restarts).
- :mod:`.server` -- serves a Python adapter over stdio.
"""
