"""Per-key lanes inside one partition: different keys in flight at once, each key one message at a time.

A partition's channel has a prefetch window (``partition_prefetch``). Its deliveries arrive in queue order and
are dispatched by ordering key (the ``warren-key`` header) to lanes: a lane is the FIFO of one key's
delivered messages, run by one coroutine that handles its head, settles it, and only then starts the next.
Different keys' lanes run side by side, so a slow or failing key holds only its own lane, and its later
messages wait unacked in the window; when held messages fill the window, RabbitMQ sends nothing more and the
partition stalls, so memory stays bounded by the prefetch.

A partition is never given back message by message: ``hand_back`` stops the lanes from starting anything
new, interrupts retry waits (``wait``), lets attempts already in flight finish and settle, and only then
calls ``on_returned``, which closes the channel. RabbitMQ then puts every unacked delivery back at the head
of the partition in delivery order (tests/broker/test_partition_returns.py, 3.10 and 4.x). Since a lane
settles a key's messages strictly in order, each key's unacked messages are a suffix of what it was
delivered, so after the return each key's first unsettled message is again its first in the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable

from aio_pika.abc import AbstractIncomingMessage

from warren.broker.amqp.ack_batcher import AckBatcher
from warren.core.deadlines import within
from warren.topology.headers import H_KEY

__all__ = ["PartitionLanes", "lane_key"]

Handler = Callable[[AbstractIncomingMessage], Awaitable[None]]


def lane_key(message: AbstractIncomingMessage) -> str:
    """The ordering key a message's lane is chosen by (what the consistent-hash exchange hashed)."""
    value = (message.headers or {}).get(H_KEY)
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)  # no key (raw AMQP): one lane of its own, in queue order


class PartitionLanes:
    """The lanes of one partition channel. ``dispatch`` is the channel's consumer callback."""

    def __init__(
        self,
        handle: Handler,
        on_returned: Callable[[], Awaitable[None]],
        key: Callable[[AbstractIncomingMessage], str] = lane_key,
    ) -> None:
        self._handle = handle
        self._key = key  # which lane a delivery joins (an ordered lane's: endpoint and key)
        self._on_returned = on_returned
        self._lanes: dict[str, deque[AbstractIncomingMessage]] = {}
        self._delivered_at: dict[int, float] = {}  # delivery tag -> when it arrived (the hold clock starts)
        self._running = 0  # lanes whose coroutine is running
        self._returning = asyncio.Event()
        self.returned = asyncio.Event()  # set once on_returned has run (the channel is closed)
        self._finishing: asyncio.Task[None] | None = None
        self.acks = AckBatcher()  # this channel's acks, batched (flushed before the channel closes)

    @property
    def returning(self) -> bool:
        return self._returning.is_set()

    @property
    def busy(self) -> bool:
        """Whether any lane is handling or holding a message."""
        return self._running > 0

    @property
    def held(self) -> int:
        """Messages delivered and not yet settled or let go (at most the prefetch)."""
        return sum(len(lane) for lane in self._lanes.values())

    def held_since(self, message: AbstractIncomingMessage) -> float:
        """When ``message`` was delivered (``time.monotonic``): RabbitMQ's consumer_timeout counts from then."""
        return self._delivered_at.get(message.delivery_tag or 0, time.monotonic())

    async def dispatch(self, message: AbstractIncomingMessage) -> None:
        """Queue a delivery on its key's lane; with no lane running for that key, run one here."""
        if self.returning:
            return  # left unacked: closing the channel returns it, behind the ones delivered before it
        tag = message.delivery_tag or 0
        self._delivered_at[tag] = time.monotonic()
        self.acks.track(message)
        key = self._key(message)
        lane = self._lanes.get(key)
        if lane is not None:
            lane.append(message)
            return
        lane = self._lanes[key] = deque((message,))
        self._running += 1
        try:
            while lane and not self.returning:
                head = lane[0]
                await self._handle(head)
                lane.popleft()
                self._delivered_at.pop(head.delivery_tag or 0, None)
        finally:
            # The rest of a lane cut short stays unacked in RabbitMQ: the channel's close returns it in order.
            if self._lanes.get(key) is lane:
                del self._lanes[key]
            self._running -= 1
            self._maybe_returned()

    async def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when the partition is being handed back (stop holding at once)."""
        if seconds > 0 and not self.returning:
            with contextlib.suppress(TimeoutError):
                await within(self._returning.wait(), seconds)
        return self.returning

    def hand_back(self) -> None:
        """Give the whole partition back: no new starts; the channel closes once no lane is running."""
        if not self.returning:
            self._returning.set()
            self._maybe_returned()

    async def hand_back_now(self) -> None:
        """``hand_back``; with no lane running, close in the caller's task (whose time bound then covers it)."""
        self._returning.set()
        if self._running or self._finishing is not None:
            self._maybe_returned()
            return
        self._finishing = asyncio.current_task()
        self._lanes.clear()
        self._delivered_at.clear()
        await self._finish()

    def _maybe_returned(self) -> None:
        if self.returning and not self._running and self._finishing is None:
            self._lanes.clear()
            self._delivered_at.clear()
            self._finishing = asyncio.get_running_loop().create_task(self._finish())

    async def _finish(self) -> None:
        try:
            await self.acks.close()  # what the lanes settled is acked before the channel closes, nothing after
            await self._on_returned()
        finally:
            self.returned.set()
