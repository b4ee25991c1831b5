"""Moving an earlier release's single routing queue (``{prefix}.route``) into the route partitions.

Before the routing stage was partitioned by key, ``{prefix}.route`` was bound ``#`` on the events and tenants
exchanges and consumed by every router. A worker of this release that finds it (``warren setup`` has made the
partitions and ``{prefix}.route.hash`` beside it) unbinds it from both exchanges, so that new events reach
only the partitions, and moves what it holds into ``{prefix}.route.hash``: each event published again,
confirmed, then acked, one at a time in queue order, by one worker at a time (an exclusive claim queue
``{prefix}.route.migrate.owner``), so a key's events keep their order. The event's type and tenant travel in
the router's headers (the exchange it was first published to is not the one it now comes from), its routing
attempts and debts unchanged. A routing retry still in the delay chain comes due into the old queue as long
as it exists, and is moved the same way: `warren setup` reports the old queue, and ``--prune`` deletes it once
it is empty and unconsumed (wait a minute after the first upgraded worker starts: a routing retry waits at most
that long).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection

from warren.broker import wire
from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.uninterrupted import uninterrupted
from warren.consumers.route_attempts import route_moved_headers, route_state_in
from warren.core.errors import describe
from warren.topology import names

__all__ = ["MIGRATION_INTERVAL", "RouteMigration"]

log = logging.getLogger("warren.router")

MIGRATION_INTERVAL = 5.0  # seconds between two looks at the old routing queue


class RouteMigration:
    """``await run(connection, publisher)`` until the old routing queue is gone (a task of the router)."""

    def __init__(self, prefix: str, interval: float = MIGRATION_INTERVAL) -> None:
        self.prefix = prefix
        self.interval = interval
        self.moved = 0

    async def run(self, connection: AbstractRobustConnection, publisher: ConfirmChannel) -> None:
        unbound = False
        while True:
            try:
                channel = await connection.channel()
                try:
                    try:
                        queue = await channel.declare_queue(names.route_queue(self.prefix), passive=True)
                    except aiormq.exceptions.ChannelNotFoundEntity:
                        return  # none (a new deployment), or deleted once empty: nothing more to move
                    if not unbound:
                        await self._unbind(channel, queue)
                        unbound = True
                    if queue.declaration_result.message_count:
                        await self._drain(connection, channel, publisher)
                finally:
                    # Closed on every path: a robust channel left open with the old queue declared on it would,
                    # once that queue is deleted, fail every reconnect of the worker's connection (park_link.py).
                    await close_channel(channel)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the link, most likely: try again next round
                log.warning("moving the old routing queue failed (%s); trying again", describe(exc))
            await asyncio.sleep(self.interval)

    async def _unbind(self, channel: AbstractChannel, queue: AbstractQueue) -> None:
        """New events to the partitions only (the old queue's ``#`` bindings go; unbinding twice is harmless)."""
        await channel.declare_exchange(names.route_exchange(self.prefix), passive=True)  # setup has made it
        for exchange in (names.events_exchange(self.prefix), names.tenants_exchange(self.prefix)):
            await queue.unbind(exchange, "#")
        log.info("old routing queue %s unbound: new events go to the route partitions", queue.name)

    async def _drain(
        self, connection: AbstractRobustConnection, channel: AbstractChannel, publisher: ConfirmChannel
    ) -> None:
        lock, owner = await connection.channel(), f"{names.route_queue(self.prefix)}.migrate.owner"
        try:
            await uninterrupted(lock.declare_queue(owner, exclusive=True, auto_delete=True))
        except (aiormq.exceptions.ChannelLockedResource, aiormq.exceptions.ChannelClosed):
            return  # another worker is moving it
        try:
            queue = await channel.get_queue(names.route_queue(self.prefix), ensure=False)
            while (message := await queue.get(no_ack=False, fail=False)) is not None:
                await self._move(message, publisher)
        finally:
            with contextlib.suppress(Exception):
                await uninterrupted(lock.queue_delete(owner))
            await close_channel(lock)

    async def _move(self, message: AbstractIncomingMessage, publisher: ConfirmChannel) -> None:
        headers = dict(message.headers or {})
        state = route_state_in(self.prefix, headers, message.exchange, message.routing_key)
        moved = wire.onward(message, route_moved_headers(headers, state))
        await publisher.publish(
            names.route_exchange(self.prefix), moved, message.routing_key or "", what=f"event {message.message_id}"
        )  # a failure raises: the message goes back to the old queue's head with the channel
        await message.ack()
        self.moved += 1
