"""The park queues' own connection, and the AMQP commands a worker runs on park queues (ordered_parks.py).

A plain connection, not the worker's robust one, opened again whenever it has ended. A robust connection
restores, with each channel it keeps, every queue declared on it, and a queue that is gone by then (a moved
queue drained and deleted, a park queue deleted by another worker) fails that restore, which makes aio-pika
close the new connection and try again, for ever: every channel of the worker then failed with "connection
closed" until a restart (issue 34). Park queues come and go by design, so nothing of them is restored: a drain
that loses its connection hands its messages back (the channel's close returns them to the head of the queue)
and starts over on the next connection, and the drain lock (an exclusive queue on this connection) goes with
the connection it was taken on.

Every command runs ``uninterrupted`` (warren/broker/amqp/uninterrupted.py): a drain or a lane callback stopped
meanwhile never cuts one in half, and a lock is never half taken.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import Any

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.connection import Nodes, connect_once
from warren.broker.amqp.queue_delete import delete_if_empty
from warren.broker.amqp.uninterrupted import uninterrupted
from warren.core.deadlines import within

__all__ = ["PARK_ARGUMENTS", "ParkLink", "ended"]

PARK_ARGUMENTS: dict[str, Any] = {"x-queue-type": "classic"}
CLOSE_TIMEOUT = 5.0  # seconds the link's close may take at shutdown


def ended(connection: AbstractConnection) -> bool:
    """Whether ``connection`` is over. aio-pika's ``is_closed`` says only whether it was closed by its owner:
    a connection RabbitMQ (or the network) ended keeps answering False, and every channel asked of it then
    fails with "<Connection ...> closed" (the drain that kept failing so in issue 34)."""
    if connection.is_closed:
        return True
    transport = getattr(connection, "transport", None)
    return transport is None or bool(transport.connection.is_closed)


class ParkLink:
    """A worker's connection for its park queues; ``open_channel`` on the current connection, made as needed."""

    def __init__(self, urls: Nodes, name: str | None = None) -> None:
        self.urls = urls
        self.name = name or f"warren-parks-{os.getpid()}"
        self._connection: AbstractConnection | None = None
        self._opening = asyncio.Lock()
        self.opened = 0  # connections made, for logs and tests

    async def connection(self) -> AbstractConnection:
        """The open connection; a new one when the last has ended (BrokerUnavailable when none can be made)."""
        async with self._opening:
            current = self._connection
            if current is None or ended(current):
                if current is not None:
                    with contextlib.suppress(Exception):
                        await within(uninterrupted(current.close(), grace=0), CLOSE_TIMEOUT)
                self._connection = current = None
                current = self._connection = await connect_once(self.urls, name=self.name)
                self.opened += 1
            return current

    async def open_channel(self) -> AbstractChannel:
        return await uninterrupted(self._open_channel())

    async def _open_channel(self) -> AbstractChannel:
        return await (await self.connection()).channel()

    async def count(self, queue: str) -> int | None:
        """``queue``'s ready messages; None when it does not exist."""
        return await uninterrupted(self._count(queue))

    async def _count(self, queue: str) -> int | None:
        channel = await self._open_channel()
        try:
            q = await channel.declare_queue(queue, passive=True)
            return q.declaration_result.message_count
        except aiormq.exceptions.ChannelNotFoundEntity:
            return None
        finally:
            await close_channel(channel)

    async def declare(self, queue: str) -> None:
        await uninterrupted(self._declare(queue))

    async def _declare(self, queue: str) -> None:
        channel = await self._open_channel()
        try:
            await channel.declare_queue(queue, durable=True, arguments=PARK_ARGUMENTS)
        finally:
            await close_channel(channel)

    async def delete_if_empty(self, queue: str) -> bool:
        """Delete ``queue`` if it holds no ready message: True when it is gone, False when something arrived
        meanwhile (drained next); TopologyError for any other refusal (warren/broker/amqp/queue_delete.py)."""
        return await uninterrupted(self._delete_if_empty(queue))

    async def _delete_if_empty(self, queue: str) -> bool:
        return await delete_if_empty(await self.connection(), queue)  # a classic queue: RabbitMQ checks (if-empty)

    async def lock(self, queue: str) -> AbstractChannel | None:
        """Take ``queue``'s drain lock (the exclusive queue ``<queue>.drain``): its channel, or None when taken."""
        return await uninterrupted(self._lock(queue))

    async def _lock(self, queue: str) -> AbstractChannel | None:
        channel = await self._open_channel()
        try:
            await channel.declare_queue(f"{queue}.drain", exclusive=True, auto_delete=True)
        except aiormq.exceptions.ChannelLockedResource:
            await close_channel(channel)
            return None
        except BaseException:
            await close_channel(channel)
            raise
        return channel

    async def unlock(self, channel: AbstractChannel, queue: str) -> None:
        await uninterrupted(self._unlock(channel, queue))

    @staticmethod
    async def _unlock(channel: AbstractChannel, queue: str) -> None:
        with contextlib.suppress(Exception):
            await channel.queue_delete(f"{queue}.drain")
        await close_channel(channel)

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await within(uninterrupted(connection.close(), grace=0), CLOSE_TIMEOUT)
