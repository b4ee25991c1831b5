"""Warren: a webhook delivery broker on RabbitMQ.

The public surface for producers is short and lives here::

    from warren import Event, Publisher, connect, load_config

Everything else is importable from its own subpackage (``warren.topology``, ``warren.broker``,
``warren.consumers``, ``warren.consumers.receiving`` for the receiving toolkit), and each public subpackage
pins what it exports in ``__all__``.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from warren.broker.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import Publisher, PublishReport
from warren.topology.config import ConfigError, WarrenConfig, load_config
from warren.topology.errors import (
    BrokerUnavailable,
    EventError,
    PublishError,
    UnroutableError,
    WarrenError,
)

try:
    __version__ = _metadata.version("warren-webhooks")
except _metadata.PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0+unknown"

__all__ = [
    "BrokerUnavailable",
    "ConfigError",
    "Event",
    "EventError",
    "PublishError",
    "PublishReport",
    "Publisher",
    "UnroutableError",
    "WarrenConfig",
    "WarrenError",
    "__version__",
    "connect",
    "load_config",
]
