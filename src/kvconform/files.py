"""Writing a run's output files (reports, the trace, expectations, exported
counterexamples): whole or not at all, and never onto something that is not a file."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same folder.

    A reader sees the previous file or the new one, never a part; an error
    (an unwritable folder, a full disk, a path that is not a regular file) leaves
    ``path`` as it was and raises :class:`OSError`. Text that cannot be encoded (a
    lone surrogate) is written as an escape rather than raising: renderers make text
    visible first.
    """
    refuse_replacing(path)
    data = text.encode("utf-8", "backslashreplace")
    try:
        handle, temporary = tempfile.mkstemp(
            prefix=f".{path.name}.", suffix=".tmp", dir=path.parent
        )
    except OSError as exc:  # named by the path asked for, not by a temporary name
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        os.chmod(temporary, 0o666 & ~_umask())  # as an ordinary new file would be
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException as exc:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise


def refuse_replacing(path: Path) -> None:
    """:class:`OSError` if ``path`` exists and is not a regular file: a device (as root,
    ``/dev/null`` itself), a FIFO or a symbolic link is never replaced by a report."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise OSError(
            f"{path} exists and is not a regular file (a device, FIFO or link is never replaced)"
        )


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
