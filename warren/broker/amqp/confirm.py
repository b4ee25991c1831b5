"""RabbitMQ's answers to a publish mapped to Warren's errors once: a confirmed mandatory publish.

Every path that moves a message (the publisher, the worker's retries and dead letters, DLQ replays, the
receiving side) publishes through ``publish_confirmed``: the message is stored when it returns, and an
:class:`UnroutableError` or :class:`PublishError` otherwise. aiormq's exceptions are caught here and nowhere
else on those paths.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import NamedTuple

import aiormq.exceptions
from aio_pika.abc import AbstractExchange, AbstractMessage
from aiormq import spec

from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS
from warren.core.errors import PublishError, UnroutableError, describe

__all__ = [
    "ANSWERS",
    "LINK_ERRORS",
    "LinkLost",
    "Nacked",
    "Outgoing",
    "Turns",
    "answer_error",
    "await_turn",
    "end_turn",
    "one_at_a_time",
    "publish_confirmed",
]

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
    and builds these same properties again on the way out; ``ConfirmChannel.publish`` hands them to aiormq as
    aio-pika's ``Exchange.publish`` does, with the same ``mandatory`` and the same confirm. A named tuple: a
    frozen dataclass sets each field through ``object.__setattr__``, once per event."""

    body: bytes
    properties: spec.Basic.Properties

    @classmethod
    def of(cls, message: AbstractMessage) -> Outgoing:
        """``message`` as aio-pika's ``Exchange.publish`` sends it (its body, its ``properties``), for the batched
        writes of ``ConfirmChannel.publish`` (publish_frames.py) in place of one channel-lock round per publish."""
        return cls(message.body, message.properties)


# What RabbitMQ and the link answer a publish with, that answer_error maps to Warren's errors.
ANSWERS: tuple[type[BaseException], ...] = (aiormq.exceptions.AMQPError, *LINK_ERRORS, asyncio.CancelledError)


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
    try:
        await exchange.publish(message, routing_key=routing_key, mandatory=True)
    except ANSWERS as exc:
        error = answer_error(exc, exchange.name, routing_key, what, event_id, unroutable)
        if error is None:
            raise
        raise error  # noqa: B904 (its cause is set by answer_error, as ``raise ... from`` would)


def answer_error(
    exc: BaseException, exchange: str, routing_key: str, what: str | None, event_id: str | None, unroutable: str | None
) -> PublishError | None:
    """RabbitMQ's or the link's answer to a mandatory publish (one of ``ANSWERS``) as Warren's error, its cause
    set as ``raise ... from`` sets it; None for this task being cancelled, which is passed on."""
    what = what or f"event {event_id}"
    cause: BaseException | None = exc
    error: PublishError
    if isinstance(exc, aiormq.exceptions.PublishError):
        text = unroutable or f"{what} is unroutable: {exchange} routes {routing_key!r} to no queue"
        error = UnroutableError(text, event_id)
    elif isinstance(exc, aiormq.exceptions.DeliveryError):
        error = Nacked(f"RabbitMQ refused {what} (nack)", event_id)
    elif isinstance(exc, LINK_ERRORS):
        error = LinkLost(f"{what} not confirmed: connection to RabbitMQ lost ({describe(exc)})", event_id)
    elif isinstance(exc, asyncio.CancelledError):
        # aiormq cancels the confirms still owed when it gives a link up (a node that stopped answering: the
        # heartbeat found it stuck). That is a lost link, not this task being cancelled, which is passed on.
        task = asyncio.current_task()
        if task is None or task.cancelling():
            return None
        error = LinkLost(f"{what} not confirmed: connection to RabbitMQ lost (its confirm cancelled)", event_id)
        cause = None
    else:  # another AMQPError, e.g. the channel closed by the broker (a deleted exchange)
        error = PublishError(f"{what} not stored: RabbitMQ failed: {describe(exc)}", event_id)
    error.__cause__ = cause
    error.__suppress_context__ = True
    return error


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


# A publisher's ids in flight: None while nothing waits behind one, the future its next publish waits for else.
Turns = dict[str, "asyncio.Future[None] | None"]


async def await_turn(turns: Turns, message_id: str) -> None:
    """``one_at_a_time`` without a future or a coroutine per publish (the publisher's hot path, issue 38): a
    caller takes the turn itself when ``message_id not in turns`` (``turns[message_id] = None``), else awaits
    this, which takes it once no other publish of the id is in flight; ``end_turn`` in its ``finally``."""
    loop = asyncio.get_running_loop()
    while message_id in turns:
        waiter = turns[message_id]
        if waiter is None:
            waiter = turns[message_id] = loop.create_future()
        await asyncio.shield(waiter)
    turns[message_id] = None


def end_turn(turns: Turns, message_id: str) -> None:
    """The turn ``await_turn`` (or the caller) took given up: the next publish of the id waiting, if any, goes."""
    waiter = turns.pop(message_id)
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
