"""A confirming channel that a nack replaces: the way out of RabbitMQ 3.10's stale-nack trap.

On RabbitMQ 3.10 a channel keeps, per quorum queue, the client state of the queue's leader. A channel whose
first publish to a quorum queue lands just after that queue's leader died holds on to the dead leader, and
every later publish of it to that queue is nacked, on every retry, until the old node returns (fixed upstream
in 3.11/3.12). A new channel asks the cluster afresh and finds the new leader.

So every confirmed publish of a long-lived process (the publisher behind ``warren api`` and ``warren publish``,
the worker's delay chain and DLQ moves, the inbox, DLQ replays) goes through ``ConfirmChannel.publish``: on a
nack it opens a new channel and, after a short pause, publishes again there. A new channel opened before the
new leader is elected is as stale as the old one, so this is done up to ``RENEWALS`` times with growing pauses
(0.25 s, 0.5 s, 1 s); a nack after that is the caller's PublishError. The old channel is closed once its
publishes still in flight have their answers, so a nack of one does not fail the others.
tests/cluster/test_stale_nack.py reproduces the trap on a real cluster.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from typing import cast

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractExchange, AbstractMessage

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm import (
    ANSWERS,
    LINK_ERRORS,
    LinkLost,
    Nacked,
    Outgoing,
    answer_error,
    publish_confirmed,
)
from warren.broker.amqp.publish_frames import FramedPublishes
from warren.core.errors import describe

__all__ = ["ConfirmChannel"]

log = logging.getLogger(__name__)

# New channels tried after a nack, and the pause before the first re-publish (doubling after each).
RENEWALS = 3
RENEW_PAUSE = 0.25


class ConfirmChannel:
    """``await ConfirmChannel(connection).open()``; ``publish(exchange_name, message, routing_key, what=...)``."""

    def __init__(self, connection: AbstractConnection) -> None:
        self._connection = connection
        self._channel: AbstractChannel | None = None
        self._exchanges: dict[str, AbstractExchange] = {}
        self._frames: FramedPublishes | None = None  # the current channel's batched writes (Outgoing messages)
        self._renewing = asyncio.Lock()
        self._in_flight: Counter[AbstractChannel] = Counter()
        self._retired: set[AbstractChannel] = set()
        self.renewals = 0  # channels replaced after a nack, for logs and tests

    async def open(self) -> ConfirmChannel:
        self._channel = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        self._exchanges = {}
        return self

    @property
    def channel(self) -> AbstractChannel:
        assert self._channel is not None, "ConfirmChannel.open() first"
        return self._channel

    async def exchange(self, name: str) -> AbstractExchange:
        """The exchange ``name`` on the current channel ("" is the default exchange); not checked to exist."""
        exchange = self._exchanges.get(name)
        if exchange is None:
            channel = self.channel
            try:
                exchange = channel.default_exchange if name == "" else await channel.get_exchange(name, ensure=False)
            except LINK_ERRORS as exc:
                raise LinkLost(f"connection to RabbitMQ lost: {describe(exc)}") from exc
            self._exchanges[name] = exchange
        return exchange

    async def publish(
        self,
        exchange: str,
        message: AbstractMessage | Outgoing,
        routing_key: str,
        *,
        what: str | None,
        event_id: str | None = None,
        unroutable: str | None = None,
    ) -> None:
        """``publish_confirmed`` on the current channel; after a nack, again on a new one (module docstring).
        ``what=None`` names the message "event <event_id>" in errors (the text made only for one)."""
        for renewal in range(RENEWALS + 1):
            channel = self.channel
            self._in_flight[channel] += 1
            try:
                if isinstance(message, Outgoing):  # the publisher's hot path: straight to aiormq (confirm.py)
                    # What aio-pika's Exchange.publish does: a closed channel refused, then aiormq's publish; here,
                    # not in a coroutine of its own (issue 38).
                    try:
                        if channel.is_closed:
                            raise aiormq.exceptions.ChannelInvalidStateError(f"{channel!r} closed")
                        underlay = await channel.get_underlay_channel()
                        frames = self._frames
                        if frames is None or frames.channel is not underlay:  # a new channel: its own writes
                            frames = self._frames = FramedPublishes(cast(aiormq.Channel, underlay))
                        # basic_publish's work, written with the other publishes ready now (publish_frames.py)
                        await frames.publish(message.body, exchange, routing_key, message.properties)
                    except ANSWERS as exc:
                        error = answer_error(exc, exchange, routing_key, what, event_id, unroutable)
                        if error is None:
                            raise
                        raise error  # noqa: B904 (its cause set by answer_error, as ``raise ... from`` would)
                    return
                target = self._exchanges.get(exchange)  # known: no coroutine to make and await (issue 38)
                if target is None:
                    target = await self.exchange(exchange)
                await publish_confirmed(
                    target,
                    message,
                    routing_key,
                    what=what or f"event {event_id}",
                    event_id=event_id,
                    unroutable=unroutable,
                )
                return
            except Nacked:
                if renewal == RENEWALS:
                    raise
                await self._renew(channel)
            finally:
                self._in_flight[channel] -= 1
                if channel in self._retired and self._in_flight[channel] <= 0:
                    await self._close(channel)
            await asyncio.sleep(RENEW_PAUSE * 2**renewal)

    async def _renew(self, nacked: AbstractChannel) -> None:
        """A new channel in place of ``nacked`` (once, however many of its publishes were nacked)."""
        async with self._renewing:
            if self._channel is not nacked:
                return
            log.warning("RabbitMQ nacked a publish; opening a new channel (a stale quorum queue leader on 3.10)")
            try:
                await self.open()
            except LINK_ERRORS as exc:
                raise LinkLost(f"connection to RabbitMQ lost: {describe(exc)}") from exc
            self.renewals += 1
            self._retired.add(nacked)

    async def _close(self, channel: AbstractChannel) -> None:
        self._retired.discard(channel)
        del self._in_flight[channel]
        await close_channel(channel)  # even while the link is down (warren/broker/amqp/channels.py)

    async def close(self) -> None:
        for channel in [*self._retired, *([self._channel] if self._channel is not None else [])]:
            await close_channel(channel)  # even while the link is down (warren/broker/amqp/channels.py)
        self._retired.clear()
