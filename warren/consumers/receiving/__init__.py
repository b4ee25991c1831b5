"""The receiving toolkit's earlier import path, kept so that users' imports keep working.

The toolkit lives in ``warren.receiving`` (a home of its own: a different product for a different user than the
delivery worker). Every name and submodule of ``warren.consumers.receiving`` is the same object as in
``warren.receiving``: ``from warren.consumers.receiving.stores.sqlite import SqliteStore`` gives the very class
``warren.receiving.stores.sqlite`` defines, so ``isinstance`` and ``except`` agree whichever path a user took.
"""

from __future__ import annotations

import importlib
import sys
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from importlib.util import spec_from_loader
from types import ModuleType
from typing import Any

from warren.receiving import *  # noqa: F403 (the same public names, re-exported)
from warren.receiving import __all__ as __all__

_OLD = __name__
_NEW = "warren.receiving"


class _Alias(MetaPathFinder, Loader):
    """Finds ``warren.consumers.receiving.<x>`` as the module ``warren.receiving.<x>`` itself."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith(_OLD + "."):
            return None
        return spec_from_loader(fullname, self, is_package=True)

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        return importlib.import_module(_NEW + spec.name[len(_OLD) :])

    def exec_module(self, module: ModuleType) -> None:
        """Nothing: the module ran once, under its own name."""


if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
