"""Everything Warren does on RabbitMQ, and nothing else: the AMQP plumbing (``amqp``), publishing events with
confirms, declaring the topology (apply, drift, prune, capacity), the DLQ moves (``dlq``), and the announcements
workers follow (live endpoint records, endpoint states in ``endpoint_state``), with the management API's client.

Publishing (``connect``, ``Event``, ``Publisher``) is also exported from ``warren`` itself. ``apply_setup`` is
what ``warren setup`` runs.
"""

from __future__ import annotations

import typing as _typing

from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import Publisher, PublishReport

if _typing.TYPE_CHECKING:
    from warren.broker.applier import SetupFailed, SetupReport, apply_setup

__all__ = ["Event", "PublishReport", "Publisher", "SetupFailed", "SetupReport", "apply_setup", "connect"]

_SETUP = ("SetupFailed", "SetupReport", "apply_setup")


def __getattr__(name: str) -> _typing.Any:
    # Setup (and through it the management API's HTTP client) loads on first use: a worker module that imports
    # `warren` must not pull HTTP in.
    if name in _SETUP:
        from warren.broker import applier

        return getattr(applier, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
