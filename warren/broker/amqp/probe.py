"""Passive declares, in one place: whether an object exists, and a queue's exact counts.

A passive ``queue.declare`` answers with the ready count and the consumers at that instant (the management
API's figures are samples refreshed every few seconds); it does not tell unacknowledged messages: those only the
management API knows. A passive declare of a missing object closes its channel (404): ``QueueProbe`` opens a
fresh one then, and ``existing_queue``/``existing_exchange`` turn it into the one TopologyError wording.
Ask on the raw channel: aio-pika's robust channel answers a repeated passive declare from a cache, with the
counts of the first one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import aiormq.abc
import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractExchange, AbstractQueue

from warren.broker.amqp.channels import close_channel
from warren.core.errors import TopologyError

__all__ = ["QueueDepth", "QueueProbe", "all_exist", "counts", "existing_exchange", "existing_queue", "missing"]


def missing(kind: str, name: str) -> str:
    """The one wording for an object Warren needs that is not on the broker."""
    return f"{kind} {name} does not exist: run `warren setup`"


async def existing_exchange(channel: AbstractChannel, name: str) -> AbstractExchange:
    """The exchange ``name`` (checked with a passive declare); TopologyError when it does not exist."""
    try:
        return await channel.get_exchange(name, ensure=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        raise TopologyError(missing("exchange", name)) from None


async def existing_queue(channel: AbstractChannel, name: str, kind: str = "queue") -> AbstractQueue:
    """The queue ``name`` (checked with a passive declare); TopologyError when it does not exist."""
    try:
        return await channel.declare_queue(name, passive=True)
    except aiormq.exceptions.ChannelNotFoundEntity:
        raise TopologyError(missing(kind, name)) from None


@dataclass(frozen=True)
class QueueDepth:
    name: str
    ready: int  # messages waiting, not delivered to any consumer
    consumers: int


async def counts(raw: aiormq.abc.AbstractChannel, name: str) -> QueueDepth:
    """Queue ``name``'s counts now, on a raw channel; ChannelNotFoundEntity (the channel closed) when it is gone."""
    result = await raw.queue_declare(name, passive=True)
    assert result is not None  # only a nowait declare answers None
    return QueueDepth(name, int(result.message_count or 0), int(result.consumer_count or 0))


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
        raw = await (await self._ready_channel()).get_underlay_channel()
        try:
            return await counts(raw, name)
        except aiormq.exceptions.ChannelNotFoundEntity:
            await self._discard()
            return None

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


async def all_exist(
    connection: AbstractConnection, *, exchanges: Sequence[str] = (), queues: Sequence[str] = ()
) -> bool:
    """Whether every exchange and queue named exists (``warren setup`` declared them), on a channel of its own."""
    probe = QueueProbe(connection)
    try:
        for exchange in exchanges:
            if not await probe.exchange_exists(exchange):
                return False
        for queue in queues:
            if await probe.depth(queue) is None:
                return False
        return True
    finally:
        await probe.close()
