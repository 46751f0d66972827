"""Adapters shipped with kvconform, and loading an adapter named on a command line."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kvconform.protocol.adapter import Adapter

#: What ``--kv-adapter`` means when it is not given.
DEFAULT_ADAPTER = "kvconform.adapters.reference:ReferenceAdapter"


class AdapterSpecError(ValueError):
    """A ``module:factory`` string that does not name a usable adapter factory."""


class AdapterLoadError(AdapterSpecError):
    """A well-formed ``module:factory`` whose module, factory or adapter cannot be had:
    the adapter could not start (the command line itself was right)."""


#: What OpenBLAS reads, in this order, for the number of threads it starts.
_BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


@contextlib.contextmanager
def _one_blas_thread() -> Iterator[None]:
    """numpy, if this import loads it, with one OpenBLAS thread, unless the environment
    chose a number; the environment is then given back as it was.

    The reference's arrays hold a few hundred numbers. Loaded, OpenBLAS starts a thread
    per core (about 0.1 s of CPU in every command and adapter process); where it cannot
    (a tight ``ulimit -v``) it sends its own process SIGINT, which the command would
    report as the user's Ctrl-C. The environment is restored so that an adapter process
    the command starts later inherits the user's, not this choice.
    """
    if "numpy" in sys.modules or any(name in os.environ for name in _BLAS_THREADS):
        yield
        return
    os.environ[_BLAS_THREADS[0]] = "1"
    try:
        yield
    finally:
        os.environ.pop(_BLAS_THREADS[0], None)


def load_adapter(spec: str) -> Adapter:
    """Import ``module:factory`` and call the factory with no arguments.

    For a module of the user's, the current directory is searched first, as ``python -m``
    does, so an adapter module beside the user needs no ``PYTHONPATH``. For an adapter
    kvconform ships (the default, the reference) it is not: a ``numpy.py`` in the folder
    the command runs in is never imported in place of the real one; and numpy is loaded
    with one BLAS thread where the environment chose none (:func:`_one_blas_thread`).
    """
    from kvconform.protocol.adapter import Adapter  # here: the pytest plugin loads this module

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise AdapterSpecError(f"adapter {spec!r}: expected 'module:factory'")
    shipped = module_name.split(".", 1)[0] in ("kvconform", "kvconform_reference")
    here = os.getcwd()
    inserted = not shipped and here not in sys.path and "" not in sys.path
    if inserted:
        sys.path.insert(0, here)
    try:
        try:
            with _one_blas_thread() if shipped else contextlib.nullcontext():
                module = importlib.import_module(module_name)
        except ImportError as exc:
            raise AdapterLoadError(
                f"adapter {spec!r}: cannot import {module_name!r}: {exc}"
            ) from exc
        factory: Any = module
        for part in attr.split("."):
            try:
                factory = getattr(factory, part)
            except AttributeError:
                raise AdapterLoadError(
                    f"adapter {spec!r}: module {module_name!r} has no attribute {attr!r}"
                ) from None
        adapter = factory()
    finally:
        if inserted and here in sys.path:  # still there for the adapter's later imports,
            sys.path.remove(here)  # but last: a user's html.py or fcntl.py must not stand
            sys.path.append(here)  # in for a standard module the reports import later
    if not isinstance(adapter, Adapter):
        raise AdapterLoadError(f"adapter {spec!r}: the factory returned no describe() method")
    return adapter
