"""Adapters shipped with kvconform, and loading an adapter named on a command line."""

from __future__ import annotations

import importlib
import os
import sys
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


def load_adapter(spec: str) -> Adapter:
    """Import ``module:factory`` and call the factory with no arguments.

    For a module of the user's, the current directory is searched first, as ``python -m``
    does, so an adapter module beside the user needs no ``PYTHONPATH``. For an adapter
    kvconform ships (the default, the reference) it is not: a ``numpy.py`` in the folder
    the command runs in is never imported in place of the real one.
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
