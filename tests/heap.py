"""Collections that look only at what a test makes, not at the whole of a worker's heap."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def made_here() -> Iterator[None]:
    """Inside, ``gc.collect()`` walks only the objects made inside the block.

    A worker's heap holds the suite several times over, and a full collection of it
    took 0.2 to 0.5 s. What stands when the block opens is set aside (``gc.freeze``)
    and given back when it closes, so a collection inside still frees every cycle of
    objects made inside (what a test that drops an object and collects asks about), and
    no object made before is freed or moved by it.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
