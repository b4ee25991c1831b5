"""User handlers named ``package.module:function`` in the configuration, and how they are called.

A handler is ``handler(event: InboundEvent, tx: Transaction)``, plain or ``async``. It runs inside the
idempotency transaction: what it writes through ``tx`` commits with the record of the event, and an
exception rolls both back and sends the event to be retried (``NonRetryable``: straight to the DLQ).

The module is imported from ``sys.path``. ``warren inbox`` is a console script, whose ``sys.path`` starts with
the script's own directory, not the working directory: it calls ``import_from_working_directory`` first, so
that a handler in the directory it runs from imports as it would under ``python -m``.
"""

from __future__ import annotations

import importlib
import os
import site
import sys
import sysconfig
from collections.abc import Awaitable, Callable
from typing import cast

from warren.receiving.errors import HandlerError
from warren.receiving.messages import InboundEvent
from warren.receiving.stores.base import Transaction

__all__ = ["Handler", "import_from_working_directory", "load_handler", "search_path"]

Handler = Callable[[InboundEvent, Transaction], Awaitable[None] | None]


def load_handler(spec: str) -> Handler:
    """Import ``module:function``; HandlerError says what is wrong in one line."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise HandlerError(f"handler {spec!r} is not 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise HandlerError(f"handler {spec!r}: {_not_found(exc.name)}") from exc
        raise HandlerError(f"handler {spec!r}: cannot import {module_name}: {exc}") from exc  # one it imports
    except Exception as exc:  # the user's module may fail to import in any way; say which and why
        raise HandlerError(f"handler {spec!r}: cannot import {module_name}: {exc}") from exc
    handler = getattr(module, attribute, None)
    if handler is None:
        raise HandlerError(f"handler {spec!r}: {module_name} has no attribute {attribute!r}")
    if not callable(handler):
        raise HandlerError(f"handler {spec!r} is not callable")
    return cast(Handler, handler)


def import_from_working_directory() -> None:
    """Put the working directory first on ``sys.path``, as ``python -m`` does, unless it is there already. It
    stays for the process's life: a handler may import its neighbours when it runs, not only when it loads."""
    here = os.getcwd()
    if not any(os.path.abspath(entry or os.curdir) == here for entry in sys.path):
        sys.path.insert(0, here)


def search_path() -> str:
    """``sys.path`` for a message, short: its directories in order, the standard library's and the installed
    packages' each folded into one word."""
    paths = sysconfig.get_paths()
    stdlib = {os.path.abspath(paths[key]) for key in ("stdlib", "platstdlib")}
    installed = {os.path.abspath(paths[key]) for key in ("purelib", "platlib")}
    installed.add(os.path.abspath(site.getusersitepackages()))
    shown: list[str] = []
    for entry in sys.path:
        path = os.path.abspath(entry or os.curdir)
        if path in installed:  # first: a venv's platstdlib holds its site-packages
            word = "site-packages"
        elif path in stdlib or any(path.startswith(s + os.sep) for s in stdlib) or path.endswith(".zip"):
            word = "the standard library"
        else:
            word = path
        if word not in shown:
            shown.append(word)
    return ", ".join(shown)


def _not_found(missing: str) -> str:
    """Why the module named ``missing`` (the handler's module, or a package above it) was not found, and the fix."""
    parent, _, name = missing.rpartition(".")
    if parent:  # the package is there, the module is not in it
        where = getattr(sys.modules.get(parent), "__path__", None)
        return f"no module named {name!r} in the package {parent} ({', '.join(where or ())})"
    return (
        f"no module named {missing!r} on the import path (sys.path: {search_path()}); run the command from the "
        f"directory that holds {missing}.py (or the package {missing}/), or add that directory to PYTHONPATH"
    )
