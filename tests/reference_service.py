"""The reference, served to the fixture adapter processes a test process starts.

See ``tests/fixtures/reference_link.py``: a fixture process sends each protocol line
here and this process answers it, with a ``Server`` over a ``ReferenceAdapter`` made
for that connection alone (one per fixture process, as when the fixture made its own),
so the fixture process imports nothing of kvconform. A frame is the line's length as
8 bytes (little-endian) and the line; the answer is one byte (1 when the server has
finished, after ``shutdown``), the answer's length as 8 bytes and the answer. The
socket is in a folder of this user's alone, and goes with the process.
"""

from __future__ import annotations

import os
import shutil
import socketserver
import tempfile
import threading
from collections.abc import Callable

from tests.fixtures.reference_link import ENV

#: How many fixture processes this process's service has answered (read by a test).
served = 0


class _Connection(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        from kvconform.adapters.reference import ReferenceAdapter
        from kvconform.protocol.server import Server

        global served
        served += 1  # under the GIL; only a test that runs one fixture at a time reads it

        server = Server(ReferenceAdapter())
        while True:
            head = self.rfile.read(8)
            if len(head) != 8:
                return  # the fixture process ended
            line = self.rfile.read(int.from_bytes(head, "little"))
            reply = server.handle_line(line)
            finished = b"\x01" if server.finished else b"\x00"
            self.wfile.write(finished + len(reply).to_bytes(8, "little") + reply)
            self.wfile.flush()


#: How often, in seconds, the service looks whether it is to stop: ``stop`` waits for that
#: look (the standard library's half a second, at the end of every test process).
POLL = 0.02


class _Service(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def start() -> Callable[[], None]:
    """Serve the reference on a socket of this process, named in :data:`ENV`; the
    function returned stops serving and removes the socket's folder."""
    folder = tempfile.mkdtemp(prefix="kvconform-reference-")  # mode 0700
    path = os.path.join(folder, "socket")
    service = _Service(path, _Connection)
    threading.Thread(
        target=service.serve_forever, args=(POLL,), name="reference-service", daemon=True
    ).start()
    os.environ[ENV] = path

    def stop() -> None:
        os.environ.pop(ENV, None)
        service.shutdown()
        service.server_close()
        shutil.rmtree(folder, ignore_errors=True)

    return stop
