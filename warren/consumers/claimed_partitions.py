"""Single-active-consumer queues shared by every worker and claimed a fair share each (partition_claims.py),
each consumed on a channel of its own whose deliveries go to per-key lanes (key_lanes.py).

The routing stage's partitions and the ordered lanes are consumed this way; an ordered endpoint's partitions
are its runner's (consuming.py), which does the same for one endpoint. Handing a partition back closes its
channel once no lane of it is running, so RabbitMQ returns its unsettled messages to its head in order; a
partition still assigned is then consumed again on a fresh channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractRobustConnection

from warren.broker.amqp.ack_batcher import WindowPace
from warren.broker.amqp.channels import close_channel, consume_on
from warren.consumers.key_lanes import Apart, PartitionLanes, Unstarted, lane_key, new_consumer_tag
from warren.core.deadlines import within
from warren.core.errors import describe

__all__ = ["ClaimedPartitions", "consume_again"]

log = logging.getLogger("warren.worker")

REOPEN_TRIES = 30
REOPEN_PAUSE = 1.0

Handler = Callable[[AbstractIncomingMessage], Awaitable[None]]


class ClaimedPartitions:
    """The partitions this worker was assigned (``assign``/``unassign``, by ``PartitionClaims``), consumed into
    per-key lanes by ``handle``; ``key`` picks a delivery's lane, ``apart`` may handle it without one;
    ``grace`` bounds a hand-back's wait."""

    def __init__(
        self,
        queue_names: Sequence[str],
        prefetch: int,
        handle: Handler,
        *,
        key: Callable[[AbstractIncomingMessage], str] = lane_key,
        apart: Apart | None = None,
        unstarted: Unstarted | None = None,
        grace: float = 30.0,
        pace: WindowPace | None = None,
    ) -> None:
        """``pace``: each partition's acks batched for its window (``AckBatcher.for_window``) at that pace; None:
        batched as the work queue's are (``AckBatcher()``)."""
        self.queue_names = list(queue_names)
        self.prefetch = prefetch
        self.handle = handle
        self.key = key
        self.apart = apart  # a delivery handled apart from its key's lane (key_lanes.py), or None: it joins it
        self.unstarted = unstarted  # told of deliveries returned with a channel that no lane started (key_lanes.py)
        self.grace = grace
        self.pace = pace
        self.assigned: list[str] = []
        self.accepting = False
        self._connection: AbstractRobustConnection | None = None
        self._channels: dict[str, AbstractChannel] = {}
        self._lanes: dict[str, PartitionLanes] = {}
        self._tags: dict[str, str] = {}  # consumer tag -> partition (only the current consumer of each)
        self._locks: dict[str, asyncio.Lock] = {}

    def open(self, connection: AbstractRobustConnection) -> None:
        self._connection = connection
        self.accepting = True

    def connected(self) -> bool:
        return self._connection is not None and self._connection.connected.is_set()

    def busy(self, queue_name: str) -> bool:
        lanes = self._lanes.get(queue_name)
        return lanes is not None and lanes.busy

    def lanes_of(self, message: AbstractIncomingMessage) -> PartitionLanes | None:
        """The lanes a delivery was dispatched to (None once its channel is gone: RabbitMQ has it back)."""
        name = self._tags.get(message.consumer_tag or "")
        return None if name is None else self._lanes.get(name)

    def partition_of(self, message: AbstractIncomingMessage) -> str | None:
        return self._tags.get(message.consumer_tag or "")

    def hand_back(self, message: AbstractIncomingMessage) -> bool:
        """Hand ``message``'s whole partition back (its channel closes once no lane runs); False if gone already."""
        lanes = self.lanes_of(message)
        if lanes is None or lanes.returning:
            return False
        lanes.hand_back()
        return True

    async def assign(self, name: str) -> None:
        if name not in self.assigned:
            self.assigned.append(name)
        if self.accepting:
            await self._consume(name)

    async def unassign(self, name: str) -> None:
        """Give ``name`` up; returns once its channel is closed (the claim must outlive it)."""
        if name in self.assigned:
            self.assigned.remove(name)
        async with self._lock(name):  # a consume on its way finishes first: its lanes are then there to hand back
            lanes = self._lanes.get(name)
        if lanes is not None:
            await lanes.hand_back_now()
            with contextlib.suppress(TimeoutError):
                await within(lanes.returned.wait(), self.grace)

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    def _wanted(self, name: str) -> bool:
        return self.accepting and name in self.assigned

    async def _consume(self, name: str) -> None:
        async with self._lock(name):
            if name in self._lanes or self._connection is None or not self._wanted(name):
                return  # consumed already, or stopped or given up while this consume waited for the lock
            channel = await self._connection.channel()
            lanes = PartitionLanes(
                self.handle,
                lambda: self._returned(name, lanes),
                key=self.key,
                apart=self.apart,
                unstarted=self.unstarted,
                prefetch=None if self.pace is None else self.prefetch,
                pace=self.pace,
            )
            self._lanes[name], self._channels[name] = lanes, channel
            tag = new_consumer_tag()  # known before the consume: its first deliveries find their lanes
            self._tags = {t: q for t, q in self._tags.items() if q != name}
            self._tags[tag] = name
            try:
                await consume_on(channel, name, self.prefetch, lanes.dispatch, tag)
            except BaseException:  # the channel is closed already
                self._lanes.pop(name, None)
                self._channels.pop(name, None)
                self._tags = {t: q for t, q in self._tags.items() if q != name}
                raise

    async def _returned(self, name: str, lanes: PartitionLanes) -> None:
        if self._lanes.get(name) is not lanes:
            return
        await self._close(name)
        await consume_again(
            name,
            lambda: self._wanted(name),
            lambda: self._consume(name),
            lambda: self._close(name),
        )

    async def _close(self, name: str) -> None:
        self._lanes.pop(name, None)
        self._tags = {t: q for t, q in self._tags.items() if q != name}
        await close_channel(self._channels.pop(name, None))

    async def stop(self) -> None:
        """Take nothing new: every partition is handed back (its running lanes finish first)."""
        self.accepting = False
        for lock in list(self._locks.values()):
            async with lock:  # consumes on their way finish first (their lanes are then handed back below)
                pass
        for lanes in list(self._lanes.values()):
            await lanes.hand_back_now()

    async def close(self, grace: float) -> None:
        """Wait up to ``grace`` for the hand-backs to close their channels, then close what is left."""
        await self.stop()
        waits = [lanes.returned.wait() for lanes in self._lanes.values()]
        if waits:
            with contextlib.suppress(TimeoutError):
                await within(asyncio.gather(*waits), grace)
        for name in list(self._channels):
            await self._close(name)


async def consume_again(
    name: str,
    wanted: Callable[[], bool],
    consume: Callable[[], Awaitable[None]],
    close: Callable[[], Awaitable[None]],
) -> None:
    """Consume handed-back partition ``name`` again on a fresh channel while it is still ``wanted``: tried up to
    ``REOPEN_TRIES`` times, ``REOPEN_PAUSE`` apart (the link may be down; the claim stays ours meanwhile)."""
    for _ in range(REOPEN_TRIES):
        if not wanted():
            return
        try:
            await consume()
            return
        except Exception as exc:  # the link is down, most likely: the partition stays claimed, so try again
            log.warning("could not consume %s again (%s); retrying", name, describe(exc))
            await close()
            await asyncio.sleep(REOPEN_PAUSE)
    log.error("partition %s not consumed again after %d tries", name, REOPEN_TRIES)
