"""Warren: a webhook delivery broker on RabbitMQ.

The public surface for producers is short and lives here::

    from warren import Event, Publisher, connect, load_config

Everything else is importable from its own subpackage (``warren.topology``, ``warren.broker``,
``warren.consumers``, ``warren.receiving`` for the receiving toolkit), and each public subpackage
pins what it exports in ``__all__``.
"""

from __future__ import annotations

import typing as _typing

if _typing.TYPE_CHECKING:
    from warren.broker.amqp.connection import connect
    from warren.broker.events import Event
    from warren.broker.publisher import Publisher, PublishReport
    from warren.core.errors import (
        BrokerUnavailable,
        EventError,
        PublishError,
        UnroutableError,
        WarrenError,
    )
    from warren.topology.config import ConfigError, WarrenConfig, load_config

    __version__: str

# Each name loads on first use (PEP 562): `python -m warren dlq list` imports what that command needs, not the
# publisher, aio-pika and the package metadata first (every CLI call paid for them: about a third of a second of CPU).
_HOMES = {
    "connect": "warren.broker.amqp.connection",
    "Event": "warren.broker.events",
    "Publisher": "warren.broker.publisher",
    "PublishReport": "warren.broker.publisher",
    "ConfigError": "warren.topology.config",
    "WarrenConfig": "warren.topology.config",
    "load_config": "warren.topology.config",
    "BrokerUnavailable": "warren.core.errors",
    "EventError": "warren.core.errors",
    "PublishError": "warren.core.errors",
    "UnroutableError": "warren.core.errors",
    "WarrenError": "warren.core.errors",
}


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("warren-webhooks")
    except metadata.PackageNotFoundError:  # running from a checkout that was never installed
        return "0+unknown"


def __getattr__(name: str) -> _typing.Any:
    if name == "__version__":
        value: _typing.Any = _version()
    elif name in _HOMES:
        import importlib

        value = getattr(importlib.import_module(_HOMES[name]), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # once loaded, a plain attribute
    return value


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
