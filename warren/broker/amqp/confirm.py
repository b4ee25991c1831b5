"""RabbitMQ's answers to a publish mapped to Warren's errors once: a confirmed mandatory publish.

Every path that moves a message (the publisher, the worker's retries and dead letters, DLQ replays, the
receiving side) publishes through ``publish_confirmed``: the message is stored when it returns, and an
:class:`UnroutableError` or :class:`PublishError` otherwise. aiormq's exceptions are caught here and nowhere
else on those paths.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager
from typing import NamedTuple

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractExchange, AbstractMessage
from aiormq import spec

from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS
from warren.core.errors import PublishError, UnroutableError, describe

__all__ = ["LINK_ERRORS", "LinkLost", "Nacked", "Outgoing", "one_at_a_time", "publish_confirmed", "publish_outgoing"]

# The link, not the message: aio-pika raises RuntimeError for a channel that is closed or not reopened yet.
LINK_ERRORS: tuple[type[Exception], ...] = (*CONNECTION_EXCEPTIONS, RuntimeError)


class Nacked(PublishError):
    """RabbitMQ answered the publish with a nack: not stored. On 3.10 the channel may be stale (confirm_channel.py)."""


class LinkLost(PublishError):
    """The connection went away before the confirm came: maybe stored, maybe not (a robust connection comes back,
    on another node when its own is gone)."""


class Outgoing(NamedTuple):
    """A message built for the wire once: its body and its AMQP properties, without an aio-pika ``Message``.

    The publisher's hot path (issue 38): aio-pika's ``Message`` converts and checks each field on the way in
    and builds these same properties again on the way out; ``publish_outgoing`` hands them to aiormq as
    aio-pika's ``Exchange.publish`` does, with the same ``mandatory`` and the same confirm. A named tuple: a
    frozen dataclass sets each field through ``object.__setattr__``, once per event."""

    body: bytes
    properties: spec.Basic.Properties


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
    broker returns the message because no queue is bound for it. Raises UnroutableError or PublishError,
    and nothing else that comes from RabbitMQ or the link.
    """
    sent = exchange.publish(message, routing_key=routing_key, mandatory=True)
    await _answered(sent, exchange.name, routing_key, what, event_id, unroutable)


async def publish_outgoing(
    channel: AbstractChannel,
    exchange: str,
    message: Outgoing,
    routing_key: str,
    *,
    what: str,
    event_id: str | None = None,
    unroutable: str | None = None,
) -> None:
    """``publish_confirmed`` for an :class:`Outgoing` on ``channel`` (confirming), to the exchange named."""
    await _answered(
        _basic_publish(channel, exchange, message, routing_key), exchange, routing_key, what, event_id, unroutable
    )


async def _basic_publish(channel: AbstractChannel, exchange: str, message: Outgoing, routing_key: str) -> None:
    """What aio-pika's ``Exchange.publish`` does with a message: a closed channel refused, then aiormq's publish."""
    if channel.is_closed:
        raise aiormq.exceptions.ChannelInvalidStateError(f"{channel!r} closed")
    underlay = await channel.get_underlay_channel()
    await underlay.basic_publish(
        message.body, exchange=exchange, routing_key=routing_key, properties=message.properties, mandatory=True
    )


async def _answered(
    sent: Awaitable[object], exchange: str, routing_key: str, what: str, event_id: str | None, unroutable: str | None
) -> None:
    """Await a mandatory publish's confirm; RabbitMQ's and the link's answers mapped to Warren's errors."""
    try:
        await sent
    except aiormq.exceptions.PublishError as exc:
        text = unroutable or f"{what} is unroutable: {exchange} routes {routing_key!r} to no queue"
        raise UnroutableError(text, event_id) from exc
    except aiormq.exceptions.DeliveryError as exc:
        raise Nacked(f"RabbitMQ refused {what} (nack)", event_id) from exc
    except LINK_ERRORS as exc:
        raise LinkLost(f"{what} not confirmed: connection to RabbitMQ lost ({describe(exc)})", event_id) from exc
    except asyncio.CancelledError:
        # aiormq cancels the confirms still owed when it gives a link up (a node that stopped answering: the
        # heartbeat found it stuck). That is a lost link, not this task being cancelled, which is passed on.
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        raise LinkLost(f"{what} not confirmed: connection to RabbitMQ lost (its confirm cancelled)", event_id) from None
    except aiormq.exceptions.AMQPError as exc:  # e.g. the channel closed by the broker (a deleted exchange)
        raise PublishError(f"{what} not stored: RabbitMQ failed: {describe(exc)}", event_id) from exc


class _OneAtATime:
    """``one_at_a_time``'s block: a class, not a generator-based context manager, since every publish of the
    publisher and the routing stage enters one (a third of the cost of ``contextlib``'s, profiled in issue 38)."""

    __slots__ = ("_done", "_in_flight", "_message_id")

    def __init__(self, in_flight: dict[str, asyncio.Future[None]], message_id: str) -> None:
        self._in_flight = in_flight
        self._message_id = message_id

    async def __aenter__(self) -> None:
        in_flight, message_id = self._in_flight, self._message_id
        while (previous := in_flight.get(message_id)) is not None:
            await asyncio.shield(previous)
        self._done = done = asyncio.get_running_loop().create_future()
        in_flight[message_id] = done

    async def __aexit__(self, *_: object) -> None:
        del self._in_flight[self._message_id]
        self._done.set_result(None)


def one_at_a_time(in_flight: dict[str, asyncio.Future[None]], message_id: str) -> AbstractAsyncContextManager[None]:
    """Hold the block while no other publish of ``message_id`` is in flight on the channel ``in_flight`` tracks.

    aiormq matches a returned message to its publish by message_id, so two publishes of one id awaiting
    their confirms together on one channel could be mismatched: the second waits for the first.
    """
    return _OneAtATime(in_flight, message_id)
