"""Knowing the rest of the fleet through RabbitMQ: exclusive-queue locks and roster queues.

- A lock is an exclusive queue: RabbitMQ lets one connection declare it; the others get RESOURCE_LOCKED.
  It disappears with its connection, so a worker that dies never leaves a lock behind.
- A roster is an auto-delete queue every worker serving an endpoint consumes; its consumer count, read
  exactly with a passive declare, is the number of live workers (as partition_claims.py does for partitions).
  It is durable: RabbitMQ 4.x can refuse transient queues that are not exclusive, and a roster is shared by
  every worker, so it cannot be exclusive. Auto-delete still removes it when its last worker goes (after a
  broker restart an unused one stays, empty and harmless, until a worker consumes and leaves it again).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractQueue
from pamqp.common import FieldTable

from warren.broker.amqp.uninterrupted import uninterrupted

__all__ = ["ExclusiveLocks", "Roster", "join_roster"]

log = logging.getLogger("warren.health")

_CLASSIC: FieldTable = {"x-queue-type": "classic"}


class ExclusiveLocks:
    """Named locks held as exclusive queues of one connection."""

    def __init__(self) -> None:
        self._held: dict[str, AbstractChannel] = {}

    def holds(self, name: str) -> bool:
        return name in self._held

    async def try_take(self, connection: AbstractConnection, name: str) -> bool:
        if name in self._held:
            return True
        channel = await connection.channel()
        try:
            await uninterrupted(channel.declare_queue(name, exclusive=True, arguments=_CLASSIC))
        except (aiormq.exceptions.ChannelLockedResource, aiormq.exceptions.ChannelClosed):
            with contextlib.suppress(Exception):
                await channel.close()
            return False
        self._held[name] = channel
        return True

    async def release(self, name: str) -> None:
        channel = self._held.pop(name, None)
        if channel is None:
            return
        with contextlib.suppress(Exception):
            await uninterrupted(channel.queue_delete(name))
        with contextlib.suppress(Exception):
            await channel.close()

    def forget_all(self) -> None:
        """The connection is gone, and every lock with it."""
        self._held.clear()


async def _ignore(message: object) -> None:
    """A roster queue never carries messages; consuming it is how a worker is counted."""


async def join_roster(connection: AbstractConnection, name: str) -> tuple[AbstractChannel, AbstractQueue]:
    """Consume roster queue ``name`` on a channel of its own (returned): from now on this worker is counted."""
    channel = await connection.channel()
    try:
        queue = await channel.declare_queue(name, durable=True, auto_delete=True, arguments=_CLASSIC)
    except aiormq.exceptions.ChannelPreconditionFailed:
        # Workers of an earlier release, still running, hold it as a transient queue: join it as it is.
        channel = await connection.channel()
        queue = await channel.declare_queue(name, passive=True)
    await queue.consume(_ignore, no_ack=True)
    return channel, queue


class Roster:
    """Live workers per endpoint, counted on roster queues."""

    def __init__(self, queues: dict[str, str]) -> None:
        self.queues = queues  # endpoint -> roster queue name
        self._channels: dict[str, AbstractChannel] = {}

    async def join(self, connection: AbstractConnection) -> None:
        self._channels = {endpoint: (await join_roster(connection, name))[0] for endpoint, name in self.queues.items()}

    async def add(self, connection: AbstractConnection | None, endpoint: str, queue: str) -> None:
        """Count this worker for ``endpoint`` too (a live endpoint); joined now when connected, else on reconnect."""
        self.queues[endpoint] = queue
        if connection is not None:
            self._channels[endpoint] = (await join_roster(connection, queue))[0]

    async def leave(self, endpoint: str) -> None:
        """No longer count this worker for ``endpoint`` (closing its channel cancels the roster consumer)."""
        self.queues.pop(endpoint, None)
        channel = self._channels.pop(endpoint, None)
        if channel is not None:
            with contextlib.suppress(Exception):
                await channel.close()

    async def counts(self, connection: AbstractConnection, endpoints: Iterable[str]) -> dict[str, int]:
        """Workers serving each endpoint (at least 1: this one)."""
        channel = await connection.channel()
        counts: dict[str, int] = {}
        try:
            for endpoint in endpoints:
                queue = await channel.declare_queue(self.queues[endpoint], passive=True)
                counts[endpoint] = max(1, int(queue.declaration_result.consumer_count or 1))
        finally:
            with contextlib.suppress(Exception):
                await channel.close()
        return counts
