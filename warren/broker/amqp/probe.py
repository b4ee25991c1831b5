"""Exact queue counts through AMQP: a passive ``queue.declare`` answers with the ready count and consumers.

The management API's figures are samples refreshed every few seconds; ``declare-ok`` is the queue's own
answer at that instant. It does not tell unacknowledged messages: those only the management API knows.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection

from warren.broker.amqp.channels import close_channel

__all__ = ["QueueDepth", "QueueProbe"]


@dataclass(frozen=True)
class QueueDepth:
    name: str
    ready: int  # messages waiting, not delivered to any consumer
    consumers: int


class QueueProbe:
    """``await QueueProbe(connection).depth(name)``: counts of one queue, or None when it does not exist.

    A passive declare of a missing queue closes its channel (404), so the probe opens a fresh one then.
    """

    def __init__(self, connection: AbstractConnection) -> None:
        self._connection = connection
        self._channel: AbstractChannel | None = None

    async def _ready_channel(self) -> AbstractChannel:
        if self._channel is None or self._channel.is_closed:
            self._channel = await self._connection.channel()
        return self._channel

    async def depth(self, name: str) -> QueueDepth | None:
        # The raw channel: aio-pika's robust channel answers a repeated passive declare from a cache, with
        # the counts of the first one.
        raw = await (await self._ready_channel()).get_underlay_channel()
        try:
            result = await raw.queue_declare(name, passive=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            await self._discard()
            return None
        return QueueDepth(name, int(result.message_count or 0), int(result.consumer_count or 0))

    async def exchange_exists(self, name: str) -> bool:
        raw = await (await self._ready_channel()).get_underlay_channel()
        try:
            await raw.exchange_declare(name, passive=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            await self._discard()
            return False
        return True

    async def _discard(self) -> None:
        channel, self._channel = self._channel, None
        await close_channel(channel)

    async def close(self) -> None:
        await self._discard()
