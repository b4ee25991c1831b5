"""Everything Warren does on RabbitMQ, and nothing else: the AMQP plumbing (``amqp``), publishing events with
confirms, declaring the topology (apply, drift, prune, capacity), the DLQ moves (``dlq``), and the announcements
workers follow (live endpoint records, endpoint states in ``endpoint_state``), with the management API's client.

Publishing (``connect``, ``Event``, ``Publisher``) is also exported from ``warren`` itself. ``apply_setup`` is
what ``warren setup`` runs.
"""

from __future__ import annotations

import typing as _typing

from warren.core.lazy import exports as _exports

if _typing.TYPE_CHECKING:
    from warren.broker.amqp.connection import connect
    from warren.broker.applier import SetupFailed, SetupReport, apply_setup
    from warren.broker.events import Event
    from warren.broker.publisher import Publisher, PublishReport

__all__ = ["Event", "PublishReport", "Publisher", "SetupFailed", "SetupReport", "apply_setup", "connect"]

# Each export loads on first use (warren.core.lazy): a worker module that imports `warren` must not pull HTTP in
# (setup, through the management API's client), and `warren status --help` must not pull in aio-pika.
__getattr__ = _exports(
    __name__,
    {
        "connect": "warren.broker.amqp.connection",
        "Event": "warren.broker.events",
        "Publisher": "warren.broker.publisher",
        "PublishReport": "warren.broker.publisher",
        "SetupFailed": "warren.broker.applier",
        "SetupReport": "warren.broker.applier",
        "apply_setup": "warren.broker.applier",
    },
)
