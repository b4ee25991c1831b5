"""The consumer and channel bookkeeping of one endpoint: which queues are consumed, on which channels.

An unordered endpoint consumes its work queue on one channel (competing consumers, prefetch = concurrency).
An ordered endpoint consumes each partition it is assigned on a channel of its own with prefetch 1: closing
that channel is how a held message goes back to the *head* of its partition. A quorum queue puts a nacked
message at the *back* (checked on 3.10.8), which would let the messages behind it overtake it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection

from warren.broker.connection import CONNECTION_EXCEPTIONS
from warren.topology.config import Endpoint

__all__ = ["EndpointConsumers"]


class EndpointConsumers:
    """Consumers of one endpoint's queues; subclasses handle each message in ``_on_message``."""

    def __init__(self, endpoint: Endpoint, queues: Sequence[str]) -> None:
        self.endpoint = endpoint
        self.ordered = endpoint.ordering == "key"
        self.queue_names = list(queues)  # the work queue, or every partition (from the plan)
        self._connection: AbstractRobustConnection | None = None
        self._consume_channel: AbstractChannel | None = None  # the work queue's (unordered endpoints)
        self._partition_channels: dict[str, AbstractChannel] = {}  # ordered endpoints: one per partition
        self._tag_queue: dict[str, str] = {}  # consumer tag -> queue name, kept after the consumer is gone
        self._queues: dict[str, AbstractQueue] = {}
        self._consumer_tags: dict[str, str] = {}
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._busy: dict[str, int] = {}  # consumer tag -> messages being delivered
        self._cancel_when_idle: set[str] = set()  # consumer tags to cancel once their message is settled
        self._accepting = False
        self.paused_reason: str | None = None
        self.assigned: list[str] = list(self.queue_names)

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        raise NotImplementedError

    async def open_consuming(self, connection: AbstractRobustConnection) -> None:
        """Open the work queue's channel (per-consumer prefetch: quorum queues refuse global QoS)."""
        self._connection = connection
        if not self.ordered:
            self._consume_channel = await connection.channel()
            await self._consume_channel.set_qos(prefetch_count=self.endpoint.concurrency)
            self._queues[self.queue_names[0]] = await self._consume_channel.get_queue(self.queue_names[0], ensure=True)

    async def start_consuming(self) -> None:
        """Consume every assigned queue (all of this endpoint's unless partition claims assign fewer)."""
        self._accepting = True
        self.paused_reason = None
        # Resumed before a busy partition's deferred cancel ran: keep that consumer, it is wanted again.
        self._cancel_when_idle.clear()
        for name in self.assigned:
            await self._consume(name)

    async def _consume(self, name: str) -> None:
        if name in self._consumer_tags:
            return
        if self.ordered:
            # A partition gets a channel of its own, prefetch 1: nothing behind a held message is delivered.
            assert self._connection is not None
            channel = await self._connection.channel()
            await channel.set_qos(prefetch_count=1)
            self._partition_channels[name] = channel
            self._queues[name] = await channel.get_queue(name, ensure=True)
        tag = await self._queues[name].consume(self._on_message)
        self._consumer_tags[name] = tag
        self._tag_queue[tag] = name

    async def _cancel(self, name: str) -> None:
        """Stop consuming ``name``. A partition's channel is closed, which returns a held message to its head."""
        tag = self._consumer_tags.pop(name, None)
        if tag is None:
            return
        with contextlib.suppress(*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError):
            channel = self._partition_channels.pop(name, None)
            if channel is not None:
                await channel.close()
            else:
                await self._queues[name].cancel(tag)

    async def assign(self, name: str) -> None:
        """This worker now owns partition ``name``: consume it unless the endpoint is paused."""
        if name not in self.assigned:
            self.assigned.append(name)
        if self.paused_reason is None and self._accepting:
            await self._consume(name)

    async def _cancel_tag(self, tag: str) -> None:
        for name, current in list(self._consumer_tags.items()):
            if current == tag:
                await self._cancel(name)

    async def unassign(self, name: str) -> None:
        """Give partition ``name`` up: cancel its consumer (deliveries arriving after are handed back)."""
        if name in self.assigned:
            self.assigned.remove(name)
        await self._cancel(name)

    async def stop_consuming(self) -> None:
        """Cancel every consumer; messages already delivered but not started are handed back as they arrive.

        A partition whose message is still being delivered keeps its consumer until that message is settled:
        cancelling a single-active consumer makes the next one active at once, and it would overtake the
        message still held here.
        """
        self._accepting = False
        for name in list(self._consumer_tags):
            if self.ordered and self.busy(name):
                self._cancel_when_idle.add(self._consumer_tags[name])
            else:
                await self._cancel(name)

    async def pause(self, reason: str) -> None:
        """Stop consuming: messages wait in RabbitMQ, neither attempted nor dead-lettered."""
        await self.stop_consuming()
        self.paused_reason = reason

    async def resume(self) -> None:
        await self.start_consuming()

    def connected(self) -> bool:
        """Whether the delivery connection is up (a robust connection may be between two attempts)."""
        return self._connection is not None and self._connection.connected.is_set()

    def consuming(self) -> list[str]:
        return list(self._consumer_tags)

    def busy(self, queue_name: str) -> bool:
        """Whether a message of this queue is being delivered (or held for a retry in place) right now."""
        tag = self._consumer_tags.get(queue_name)
        return tag is not None and self._busy.get(tag, 0) > 0

    def accepts(self, message: AbstractIncomingMessage) -> bool:
        """Whether a delivery may be handled: not one that arrived after a pause or cancel began."""
        return self._accepting and message.consumer_tag in self._consumer_tags.values()

    def began(self, message: AbstractIncomingMessage, task: asyncio.Task[Any]) -> str:
        self._in_flight.add(task)
        tag = message.consumer_tag or ""
        self._busy[tag] = self._busy.get(tag, 0) + 1
        return tag

    async def ended(self, tag: str, task: asyncio.Task[Any]) -> None:
        self._in_flight.discard(task)
        self._busy[tag] -= 1
        if tag in self._cancel_when_idle and not self._busy[tag]:
            self._cancel_when_idle.discard(tag)
            await self._cancel_tag(tag)

    async def return_partition(self, message: AbstractIncomingMessage) -> bool:
        """Hand a partition's message back to its head: close its channel, consume again if still served.

        Returns whether it was (False when its consumer is already gone, which returned it by itself).
        """
        name = self._tag_queue.get(message.consumer_tag or "")
        if name is None or self._consumer_tags.get(name) != message.consumer_tag:
            return False
        await self._cancel(name)
        if self._accepting and self.paused_reason is None and name in self.assigned:
            await self._consume(name)
        return True

    async def wait_in_flight(self, grace: float) -> int:
        """Wait up to ``grace`` seconds for in-flight deliveries; cancel the rest. Returns how many were."""
        still: set[asyncio.Task[Any]] = set()
        pending = set(self._in_flight)
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace)
            for task in still:
                task.cancel()
            if still:
                await asyncio.wait(still, timeout=5)
        return len(still)

    async def close_consuming(self) -> None:
        for name in list(self._partition_channels):
            self._consumer_tags.pop(name, None)
            partition_channel = self._partition_channels.pop(name)
            if not partition_channel.is_closed:
                with contextlib.suppress(*CONNECTION_EXCEPTIONS):
                    await partition_channel.close()
        if self._consume_channel is not None and not self._consume_channel.is_closed:
            with contextlib.suppress(*CONNECTION_EXCEPTIONS):
                await self._consume_channel.close()

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)
