"""The consumer and channel bookkeeping of one endpoint: which queues are consumed, on which channels.

An unordered endpoint consumes its work queue on one channel (competing consumers, prefetch = concurrency).
An ordered endpoint consumes each partition it is assigned on a channel of its own with a prefetch window
(``partition_prefetch``), its deliveries dispatched to per-key lanes (warren/consumers/key_lanes.py). Closing that
channel is how held messages go back to the *head* of their partition, in order. A quorum queue puts a nacked
message at the *back* (checked on 3.10.8), which would let the messages behind it overtake it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection

from warren.broker.amqp.channels import close_channel, consume_on, queue_on
from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS
from warren.broker.amqp.direct_consumer import consume_in_one_task
from warren.broker.amqp.uninterrupted import uninterrupted
from warren.consumers.claimed_partitions import consume_again
from warren.consumers.key_lanes import PartitionLanes, new_consumer_tag
from warren.core.deadlines import within
from warren.topology.config import Endpoint

__all__ = ["EndpointConsumers"]

log = logging.getLogger("warren.worker")


class EndpointConsumers:
    """Consumers of one endpoint's queues; subclasses handle each message in ``_on_message``."""

    def __init__(self, endpoint: Endpoint, queues: Sequence[str]) -> None:
        self.endpoint = endpoint
        self.ordered = endpoint.ordering == "key"
        self.queue_names = list(queues)  # the work queue, or every partition (from the plan)
        self._connection: AbstractRobustConnection | None = None
        self._consume_channel: AbstractChannel | None = None  # the work queue's (unordered endpoints)
        self._partition_channels: dict[str, AbstractChannel] = {}  # ordered endpoints: one per partition
        self._lanes: dict[str, PartitionLanes] = {}  # ordered endpoints: the lanes of each partition channel
        self._tag_queue: dict[str, str] = {}  # consumer tag -> queue name, kept after the consumer is gone
        self._queues: dict[str, AbstractQueue] = {}
        self._consumer_tags: dict[str, str] = {}
        self._consume_locks: dict[str, asyncio.Lock] = {}
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._busy: dict[str, int] = {}  # consumer tag -> messages being delivered
        self._accepting = False
        self.paused_reason: str | None = None
        self.assigned: list[str] = list(self.queue_names)

    def probes_here(self) -> bool:
        """Whether endpoint health may take an open circuit's probe here: something is assigned to probe with."""
        return bool(self.assigned)

    async def _on_message(self, message: AbstractIncomingMessage) -> None:
        raise NotImplementedError

    def _unstarted(self, message: AbstractIncomingMessage) -> None:
        """A partition's delivery goes back with its channel never started (key_lanes.py): nothing to remember here."""

    async def open_consuming(self, connection: AbstractRobustConnection) -> None:
        """Open the work queue's channel (per-consumer prefetch: quorum queues refuse global QoS)."""
        self._connection = connection
        if not self.ordered:
            self._consume_channel = await connection.channel()
            self._queues[self.queue_names[0]] = await queue_on(
                self._consume_channel, self.queue_names[0], self.endpoint.concurrency
            )

    async def start_consuming(self) -> None:
        """Consume every assigned queue (all of this endpoint's unless partition claims assign fewer)."""
        self._accepting = True
        self.paused_reason = None
        for name in self.assigned:
            await self._consume(name)

    async def _consume(self, name: str) -> None:
        # One at a time per queue: a resume and a handed-back partition's reopening can ask at once, and two
        # consumers of one partition would leave one channel behind whose consumer feeds lanes that are gone
        # (its messages never settled, and as the single active consumer it would hold the partition for good).
        async with self._consume_lock(name):
            if name in self._consumer_tags:
                return  # consumed already, or being handed back (consumed again once its channel is closed)
            if not self._wanted(name):
                return  # paused, stopped or given up while this consume waited for the lock
            tag = new_consumer_tag()  # known before the consume: its first deliveries are accepted (key_lanes.py)
            self._consumer_tags[name], self._tag_queue[tag] = tag, name
            try:
                if not self.ordered:
                    await consume_in_one_task(self._queues[name], self._on_message, tag)
                else:
                    await self._consume_partition(name, tag)
            except BaseException:
                if self._consumer_tags.get(name) == tag:
                    del self._consumer_tags[name]
                raise

    def _consume_lock(self, name: str) -> asyncio.Lock:
        return self._consume_locks.setdefault(name, asyncio.Lock())

    def _wanted(self, name: str) -> bool:
        """Whether ``name`` should be consumed now: accepting, not paused, and assigned here."""
        return self._accepting and self.paused_reason is None and name in self.assigned

    async def _consume_partition(self, name: str, tag: str) -> None:
        """A partition gets a channel of its own: its prefetch is the window its key lanes share."""
        assert self._connection is not None
        if (stale := self._partition_channels.pop(name, None)) is not None:
            # Never replaced while open: a channel left behind would stay the partition's single active consumer.
            log.warning("closing a channel of %s left open before consuming it again", name)
            self._lanes.pop(name, None)
            await close_channel(stale)
        channel = await self._connection.channel()
        prefetch = self.endpoint.partition_prefetch
        lanes = PartitionLanes(
            self._on_message, lambda: self._returned(name, lanes), unstarted=self._unstarted, prefetch=prefetch
        )
        self._partition_channels[name], self._lanes[name] = channel, lanes  # before the consume: its deliveries
        try:
            self._queues[name] = await consume_on(channel, name, prefetch, lanes.dispatch, tag)
        except BaseException:  # the channel is closed already (never left open beside the next try's)
            if self._partition_channels.get(name) is channel:
                self._lanes.pop(name, None)
                self._partition_channels.pop(name, None)
            raise

    async def _returned(self, name: str, lanes: PartitionLanes) -> None:
        """A handed-back partition has no lane running: close its channel, consume again if still served."""
        if self._lanes.get(name) is not lanes:
            return
        await self._close_partition(name)
        await consume_again(
            name,
            lambda: self._wanted(name),
            lambda: self._consume(name),
            lambda: self._close_partition(name),
        )

    async def _close_partition(self, name: str) -> None:
        self._lanes.pop(name, None)
        self._consumer_tags.pop(name, None)
        channel = self._partition_channels.pop(name, None)
        # Closed even when the link is down (broker/amqp/channels.py): a zombie consumer restored with its channel,
        # feeding lanes that are gone, would stay the partition's single active consumer and hold it forever.
        await close_channel(channel)

    async def _cancel(self, name: str) -> PartitionLanes | None:
        """Stop consuming ``name``. A partition is handed back: its channel closes once no lane is running.

        Returns the partition's lanes, whose ``returned`` is set when that has happened.

        A consume of ``name`` on its way is waited for first (the lock): looked at halfway, the partition has a
        consumer tag but no lanes yet, and cancelling that tag on the previous channel's queue would leave the
        new channel consuming, untracked: its deliveries refused and never returned, and as the partition's
        single active consumer it would hold the partition until the worker stopped (the long run's stall).
        """
        async with self._consume_lock(name):
            lanes = self._lanes.get(name)
            tag = self._consumer_tags.pop(name, None) if lanes is None else None
        if lanes is not None:
            await lanes.hand_back_now()
            return lanes
        if tag is not None:
            with contextlib.suppress(*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError):
                await uninterrupted(self._queues[name].cancel(tag))
        return None

    async def assign(self, name: str) -> None:
        """This worker now owns partition ``name``: consume it unless the endpoint is paused."""
        if name not in self.assigned:
            self.assigned.append(name)
        if self.paused_reason is None and self._accepting:
            await self._consume(name)

    async def unassign(self, name: str) -> None:
        """Give partition ``name`` up: stop consuming it, and for a partition wait until its channel is closed.

        The claim must outlive the channel: another worker's consumer becomes active as the channel closes, and
        it must not while an attempt of this partition is still in flight here (bounded by the endpoint's timeout).
        """
        if name in self.assigned:
            self.assigned.remove(name)
        lanes = await self._cancel(name)
        if lanes is not None:
            with contextlib.suppress(TimeoutError):
                await within(lanes.returned.wait(), self.endpoint.timeout + 5)

    async def stop_consuming(self) -> None:
        """Cancel every consumer; messages already delivered but not started are handed back as they arrive.

        A partition is handed back as a whole: its lanes start nothing new and stop waiting to retry, attempts in
        flight finish and settle, then its channel closes and RabbitMQ puts the rest back at its head, in order.
        Cancelling its consumer earlier would make another single-active consumer active at once, and it would
        overtake the messages still held here.
        """
        self._accepting = False
        for name in list(self._consumer_tags):
            await self._cancel(name)

    async def pause(self, reason: str) -> None:
        """Stop consuming: messages wait in RabbitMQ, neither attempted nor dead-lettered."""
        await self.stop_consuming()
        self.paused_reason = reason

    async def resume(self) -> None:
        await self.start_consuming()

    @property
    def partitioned(self) -> bool:
        """Whether this endpoint consumes partitions of its own (claimed per worker): an ordered dedicated one."""
        return self.ordered and self.endpoint.home != "lane"

    def connected(self) -> bool:
        """Whether the delivery connection is up (a robust connection may be between two attempts)."""
        return self._connection is not None and self._connection.connected.is_set()

    def consuming(self) -> list[str]:
        return list(self._consumer_tags)

    def busy(self, queue_name: str) -> bool:
        """Whether a message of this queue is being delivered (or held for a retry in place) right now."""
        lanes = self._lanes.get(queue_name)
        if lanes is not None:
            return lanes.busy
        tag = self._consumer_tags.get(queue_name)
        return tag is not None and self._busy.get(tag, 0) > 0

    def lanes_of(self, message: AbstractIncomingMessage) -> PartitionLanes | None:
        """The lanes a partition's delivery was dispatched to (None once its channel is gone)."""
        name = self._tag_queue.get(message.consumer_tag or "")
        if name is None or self._consumer_tags.get(name) != message.consumer_tag:
            return None
        return self._lanes.get(name)

    def accepts(self, message: AbstractIncomingMessage) -> bool:
        """Whether a delivery may be handled: not one that arrived after a pause or cancel began."""
        return self._accepting and message.consumer_tag in self._consumer_tags.values()

    def began(self, message: AbstractIncomingMessage, task: asyncio.Task[Any]) -> str:
        self._in_flight.add(task)
        tag = message.consumer_tag or ""
        self._busy[tag] = self._busy.get(tag, 0) + 1
        return tag

    def ended(self, tag: str, task: asyncio.Task[Any]) -> None:
        self._in_flight.discard(task)
        self._busy[tag] -= 1

    def return_partition(self, message: AbstractIncomingMessage) -> bool:
        """Hand a partition's message back to its head, with every other unsettled one of that partition.

        Its lanes stop (warren/consumers/key_lanes.py), then its channel closes, and the partition is consumed again
        on a fresh channel if it is still served. Returns whether it was handed back (False when its channel
        is gone already, which returned it by itself).
        """
        lanes = self.lanes_of(message)
        if lanes is None or lanes.returning:
            return False
        lanes.hand_back()
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

    async def flush_partition_acks(self) -> None:
        """Send the partitions' batched acks now (before their channels close)."""
        for lanes in list(self._lanes.values()):
            await lanes.acks.flush()

    async def close_consuming(self) -> None:
        for lanes in list(self._lanes.values()):
            await lanes.acks.close()
        for name in list(self._partition_channels):
            await self._close_partition(name)
        await close_channel(self._consume_channel)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)
