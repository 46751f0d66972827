"""``python -m kvconform.serve``: serve a Python adapter (default: the reference) over stdio.

See ``spec/protocol.md`` for the protocol and :mod:`kvconform.protocol.server`
for the server; this module is the command: it loads the adapter named on its
command line and hands it to :func:`kvconform.protocol.server.serve`.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

import kvconform
from kvconform.adapters import DEFAULT_ADAPTER, AdapterSpecError, load_adapter
from kvconform.protocol.server import serve
from kvconform.protocol.v2 import VERSIONS


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kvconform.serve",
        description="Serve a Python kvconform adapter over the stdio protocol (spec/protocol.md).",
    )
    parser.add_argument(
        "--adapter",
        metavar="MODULE:FACTORY",
        default=DEFAULT_ADAPTER,
        help=f"the adapter factory to serve (default: the reference, {DEFAULT_ADAPTER})",
    )
    parser.add_argument(
        "--protocol",
        type=int,
        choices=VERSIONS,
        action="append",
        help="a protocol version to serve (repeatable; default: every one, "
        f"{', '.join(map(str, VERSIONS))}: the one hello offers is spoken)",
    )
    parser.add_argument("--version", action="version", version=kvconform.__version__)
    args = parser.parse_args(argv)
    protocols = tuple(sorted(set(args.protocol))) if args.protocol else VERSIONS
    try:
        adapter = load_adapter(args.adapter)
    except AdapterSpecError as exc:
        print(f"kvconform.serve: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        print(
            f"kvconform.serve: the adapter factory {args.adapter} raised "
            f"{type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return 2
    # The protocol owns the original stdout; file descriptor 1 and sys.stdout now
    # lead to stderr, so nothing an adapter prints (even from C) can corrupt the stream.
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        return serve(adapter, 0, protocol_fd, protocols)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
