"""RabbitMQ's answers mapped to Warren's errors once: a confirmed mandatory publish, and objects that must exist.

Every path that moves a message (the publisher, the worker's retries and dead letters, DLQ replays, the
receiving side) publishes through ``publish_confirmed``: the message is stored when it returns, and an
:class:`UnroutableError` or :class:`PublishError` otherwise. aiormq's exceptions are caught here and nowhere
else on those paths.
"""

from __future__ import annotations

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractMessage, AbstractQueue

from warren.broker.connection import CONNECTION_EXCEPTIONS
from warren.topology.errors import PublishError, TopologyError, UnroutableError, describe

__all__ = ["LINK_ERRORS", "existing_exchange", "existing_queue", "missing", "publish_confirmed"]

# The link, not the message: aio-pika raises RuntimeError for a channel that is closed or not reopened yet.
LINK_ERRORS: tuple[type[Exception], ...] = (*CONNECTION_EXCEPTIONS, RuntimeError)


def missing(kind: str, name: str) -> str:
    """The one wording for an object Warren needs that is not on the broker."""
    return f"{kind} {name} does not exist: run `warren setup`"


async def publish_confirmed(
    exchange: AbstractExchange,
    message: AbstractMessage,
    routing_key: str,
    *,
    what: str,
    event_id: str | None = None,
    unroutable: str | None = None,
) -> None:
    """Publish with ``mandatory`` on a confirming channel and wait for the confirm.

    ``what`` names the message in errors ("event e1"); ``unroutable`` replaces the default text when the
    broker returns the message because no queue is bound for it. Raises UnroutableError or PublishError.
    """
    try:
        await exchange.publish(message, routing_key=routing_key, mandatory=True)
    except aiormq.exceptions.PublishError as exc:
        text = unroutable or f"{what} is unroutable: {exchange.name} routes {routing_key!r} to no queue"
        raise UnroutableError(text, event_id) from exc
    except aiormq.exceptions.DeliveryError as exc:
        raise PublishError(f"RabbitMQ refused {what} (nack)", event_id) from exc
    except LINK_ERRORS as exc:
        raise PublishError(f"{what} not confirmed: connection to RabbitMQ lost ({describe(exc)})", event_id) from exc


async def existing_exchange(channel: AbstractChannel, name: str) -> AbstractExchange:
    """The exchange ``name`` (checked with a passive declare); TopologyError when it does not exist."""
    try:
        return await channel.get_exchange(name, ensure=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        raise TopologyError(missing("exchange", name)) from None


async def existing_queue(channel: AbstractChannel, name: str) -> AbstractQueue:
    """The queue ``name`` (checked with a passive declare); TopologyError when it does not exist."""
    try:
        return await channel.get_queue(name, ensure=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        raise TopologyError(missing("queue", name)) from None
