"""``python -m kvconform.serve``: serve a Python adapter (default: the reference) over stdio.

See ``spec/protocol.md`` for the protocol and :mod:`kvconform.protocol.server`
for the implementation.
"""

from __future__ import annotations

from kvconform.protocol.server import main

if __name__ == "__main__":
    raise SystemExit(main())
