"""User handlers named ``package.module:function`` in the configuration, and how they are called.

A handler is ``handler(event: InboundEvent, tx: Transaction)``, plain or ``async``. It runs inside the
idempotency transaction: what it writes through ``tx`` commits with the record of the event, and an
exception rolls both back and sends the event to be retried (``NonRetryable``: straight to the DLQ).
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from typing import cast

from warren.consumers.receiving.errors import HandlerError
from warren.consumers.receiving.messages import InboundEvent
from warren.consumers.receiving.stores.base import Transaction

__all__ = ["Handler", "load_handler"]

Handler = Callable[[InboundEvent, Transaction], Awaitable[None] | None]


def load_handler(spec: str) -> Handler:
    """Import ``module:function``; HandlerError says what is wrong in one line."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise HandlerError(f"handler {spec!r} is not 'module:function'")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the user's module may fail to import in any way; say which and why
        raise HandlerError(f"handler {spec!r}: cannot import {module_name}: {exc}") from exc
    handler = getattr(module, attribute, None)
    if handler is None:
        raise HandlerError(f"handler {spec!r}: {module_name} has no attribute {attribute!r}")
    if not callable(handler):
        raise HandlerError(f"handler {spec!r} is not callable")
    return cast(Handler, handler)
