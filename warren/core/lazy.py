"""A package's exports loaded on first use (PEP 562), so that importing one light module of a package does not run
the package's heaviest imports first.

``warren.topology.names`` used to cost as much as the whole configuration (pydantic, pydantic-settings, the
event-type catalog's jsonschema), and ``warren.broker.dlq.selection`` as much as aio-pika: each package's
``__init__`` imported its exports eagerly. A package that loads them lazily declares, under ``TYPE_CHECKING``, the
same imports for mypy, and sets ``__getattr__ = exports(__name__, {name: home module, ...})``.

Not for a name that is also one of the package's submodules: importing that submodule binds its name on the
package, and the module would then shadow the export.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["exports"]


def exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``homes`` maps each export to the module that defines it."""

    def load(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # once loaded, a plain attribute
        return value

    return load
