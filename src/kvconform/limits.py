"""Every bound on what an adapter or a user file can make the harness do, in one place.

spec/security.md ("The harness and a hostile adapter") promises that a run always
ends, that nothing an adapter sends can raise in the harness and that no adapter
can make a report of megabytes. Those promises rest on the numbers below: each
caps a length, a count, a nesting depth or a time, and everything that reads
untrusted input (the wire codec and its channel, the YAML and JSON readers, the
manifest check, the suite cache, ``compare``) takes its bound from here, so that
a bound is changed once and shown the same everywhere.

Time spent decoding is bounded by size, not by a clock: every check that runs on
what an adapter or a file says is linear (or n log n) in its size, so the time to
refuse the largest input accepted (:data:`MAX_LINE_BYTES`, :data:`MAX_FILE_BYTES`)
is a fraction of a second, never quadratic. A clock that interrupts Python code
could leave the harness's state half-changed, which a size bound cannot.

This module imports nothing of kvconform, so any module may import it.
"""

from __future__ import annotations

# Lengths ------------------------------------------------------------------------

#: The longest line the harness accepts from an adapter, newline excluded; a longer
#: line is a protocol fault ("oversized") and is never held whole.
MAX_LINE_BYTES = 16 * 1024 * 1024
#: The largest file read whole: a scenario, vector, expectations or report file, a
#: file hashed by the manifest check, an entry of the suite cache. A larger one is
#: refused (or, for the manifest check and the cache, counted as altered or as a miss)
#: after reading at most this much.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: The most characters of an adapter's name, version or language kept for reports.
INFO_TEXT_CHARS = 200
#: The most characters of an adapter's failure text (an answer it gave, its stderr) shown.
SHOWN_CHARS = 2000
#: The most characters of one declared name in a ``hello`` answer or a describe()
#: (a dtype, a key-schema family, parameter or type; an option's name and value are
#: held to the known ones instead).
DECLARED_NAME_CHARS = 64

# Counts -------------------------------------------------------------------------

#: The most entries of any one list or mapping an adapter declares about itself
#: (classes, format.reads, options, capabilities.dtypes, capabilities.key_schema and
#: each of its families): the suite knows a few of each, so a longer list is refused
#: at the handshake rather than carried into every report.
MAX_DECLARED_ENTRIES = 64
#: The most requirements, and the most case results, a report given to ``compare`` may
#: list: a run of the whole suite holds a few hundred of each.
MAX_REPORT_ENTRIES = 20_000
#: The most incidents (breaches of the protocol that are not part of the verdict) a run
#: keeps; past it the last one kept is the latest, with a count of the others.
MAX_INCIDENTS = 100
#: The most nodes a YAML file may hold, aliases expanded (a "billion laughs" file).
MAX_YAML_NODES = 200_000

# Nesting ------------------------------------------------------------------------

#: The deepest a YAML file may nest mappings and sequences.
MAX_YAML_DEPTH = 64
# JSON (an adapter's line, a report, a vector file) nests at most as deep as the
# interpreter's recursion limit lets the decoder go: a deeper text is malformed, one
# line, never a crash; and an error's values are flat (PROTO-21), so nothing an adapter
# nests reaches the judge.

# Time ---------------------------------------------------------------------------

#: The longest ``--timeout`` (seconds) a response may be awaited.
MAX_TIMEOUT = 3600.0
#: Seconds an adapter process is given, in all, to answer ``shutdown`` and exit
#: before its process group is killed (``--shutdown-grace``; PROTO-24). After a
#: signal stopped the run the group is killed at once, with no grace.
SHUTDOWN_GRACE = 1.0
#: The longest ``--shutdown-grace`` accepted (seconds).
MAX_SHUTDOWN_GRACE = 60.0


def seconds(text: str, low: float, high: float, *, low_allowed: bool = False) -> float:
    """``text`` as a number of seconds above ``low`` (or from it, when ``low_allowed``) and
    at most ``high``: written in ASCII, with no space or underscore. ``float`` alone would
    also take spaces, underscores and other scripts' digits (an Arabic-Indic 3 is 3.0),
    which ``--timeout`` then read as a number no one wrote. Raises ValueError saying what
    was expected; the text is shown as ``ascii`` sees it, so nothing in it acts."""
    shown = ascii(text)[:60]
    number = text.isascii() and text == text.strip() and "_" not in text
    try:
        value = float(text) if number else None
    except ValueError:
        value = None
    if value is None:
        raise ValueError(f"{shown} is not a number")
    inside = (low <= value if low_allowed else low < value) and value <= high  # not nan
    if not inside:
        span = f"from {low:g} to {high:g}" if low_allowed else f"above {low:g} and at most {high:g}"
        raise ValueError(f"must be a number of seconds {span}, got {shown}")
    return value
