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
delivered, so after the return each key's first unsettled message is again its first in the queue. The
exception is a message whose order nobody needs, finished apart from its lane (``detach``): it may come back
behind its key's later messages. So may one handled *apart* (``apart``): a message whose order nobody needs,
known as it arrives, is handled at once in its delivery's own task and never joins its key's lane (no lane, no
task of its own: the routing stage's common case, an event with no ordered subscriber).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from warren.broker.amqp.ack_batcher import AckBatcher, WindowPace
from warren.core.deadlines import within
from warren.core.errors import describe
from warren.topology.headers import H_KEY

__all__ = ["Apart", "PartitionLanes", "Unstarted", "lane_key", "new_consumer_tag"]

log = logging.getLogger("warren.worker")

Handler = Callable[[AbstractIncomingMessage], Awaitable[None]]
# Told of each delivery that goes back with the channel without ever having been handed to the handler.
Unstarted = Callable[[AbstractIncomingMessage], None]
# A message's handling apart from its key's lane, or None: it joins the lane (``PartitionLanes.dispatch``).
Apart = Callable[[AbstractIncomingMessage], Coroutine[Any, Any, None] | None]


def new_consumer_tag() -> str:
    """A consumer tag chosen before the consume, so that its deliveries find their lanes by it from the first: a
    delivery can be handled before the consume's answer is back with its caller (one more task in between, as
    an uninterrupted consume has, was enough for a park queue's first deliveries to find no lanes)."""
    return f"warren.{uuid.uuid4().hex}"


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
        apart: Apart | None = None,
        unstarted: Unstarted | None = None,
        prefetch: int | None = None,
        pace: WindowPace | None = None,
    ) -> None:
        self._handle = handle
        # Told of each delivery returned with the channel that no lane ever started (behind its key's head, or
        # delivered once the hand-back began): RabbitMQ counts that return in its x-delivery-count all the same,
        # and the runner does not take it for a hand-back of its own (held_attempts.py, ``not_started``).
        self._unstarted = unstarted
        self._apart = apart  # asked first of each delivery: a handling that needs no lane (the dispatch runs it)
        self._key = key  # which lane a delivery joins (an ordered lane's: endpoint and key)
        self._on_returned = on_returned
        self._lanes: dict[str, deque[AbstractIncomingMessage]] = {}
        self._delivered_at: dict[int, float] = {}  # delivery tag -> when it arrived (the hold clock starts)
        self._running = 0  # lanes whose coroutine is running
        self._returning = asyncio.Event()
        self.returned = asyncio.Event()  # set once on_returned has run (the channel is closed)
        self._finishing: asyncio.Task[None] | None = None
        # This channel's acks, batched (flushed before the channel closes); knowing its window (``prefetch``), they
        # wait longer for company (``AckBatcher.for_window``: a partition sees only its share of the deliveries).
        # ``pace``: how long an ack waits behind a delivery still unsettled, and how near a full window.
        self.acks = AckBatcher() if prefetch is None else AckBatcher.for_window(prefetch, pace or WindowPace())
        self._detached: set[asyncio.Task[None]] = set()  # handlings finished apart from their key's lane (detach)

    @property
    def returning(self) -> bool:
        return self._returning.is_set()

    @property
    def busy(self) -> bool:
        """Whether any lane is handling or holding a message (or a detached handling is running)."""
        return self._running > 0

    def detach(self, handling: Coroutine[Any, Any, None]) -> None:
        """Finish a message's handling in a task of its own, so that its key's lane moves on at once.

        For a message whose order nobody needs (the router's event with no ordered subscriber): it stays unacked
        (in the window) until ``handling`` settles it, and a hand-back waits for it as for a running lane, so
        nothing is acked after the channel closes. Its key's later messages may then be settled before it: after
        a return it is routed again behind them, which only an unordered message may be.
        """
        self._running += 1
        task = asyncio.get_running_loop().create_task(handling)
        self._detached.add(task)
        task.add_done_callback(self._detached_done)

    def _detached_done(self, task: asyncio.Task[None]) -> None:
        self._detached.discard(task)
        error = None if task.cancelled() else task.exception()
        if error is not None:  # its message is left unacked: returned with the channel
            log.error("a detached handling failed: %s", describe(error))
        self._running -= 1
        self._maybe_returned()

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
            self._not_started([message])
            return  # left unacked: closing the channel returns it, behind the ones delivered before it
        self.acks.track(message)
        if self._apart is not None and (handling := self._apart(message)) is not None:
            # ``detach`` without a task: this delivery's task runs it (counted as a running lane, so that a
            # hand-back waits for it), and its key's lane is never held by it.
            self._running += 1
            try:
                await handling
            except Exception as exc:  # its message is left unacked: returned with the channel
                log.error("a detached handling failed: %s", describe(exc))
            finally:
                self._running -= 1
                self._maybe_returned()
            return
        tag = message.delivery_tag or 0
        self._delivered_at[tag] = time.monotonic()
        key = self._key(message)
        lane = self._lanes.get(key)
        if lane is not None:
            lane.append(message)
            return
        lane = self._lanes[key] = deque((message,))
        self._running += 1
        started = False  # whether the lane's head has been handed to the handler (and not yet let go)
        try:
            while lane and not self.returning:
                head = lane[0]
                started = True
                await self._handle(head)
                lane.popleft()
                started = False
                self._delivered_at.pop(head.delivery_tag or 0, None)
        finally:
            # The rest of a lane cut short stays unacked in RabbitMQ: the channel's close returns it in order.
            if lane:
                self._not_started(list(lane)[1:] if started else list(lane))
            if self._lanes.get(key) is lane:
                del self._lanes[key]
            self._running -= 1
            self._maybe_returned()

    def _not_started(self, messages: list[AbstractIncomingMessage]) -> None:
        if self._unstarted is not None:
            for message in messages:
                self._unstarted(message)

    async def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True when the partition is being handed back (stop holding at once)."""
        if seconds > 0 and not self.returning:
            with contextlib.suppress(TimeoutError):
                await within(self._returning.wait(), seconds)
        return self.returning

    async def settled_before(self, message: AbstractIncomingMessage) -> bool:
        """Wait until every delivery that arrived before ``message`` is settled, whichever key's lane (or detached
        handling) has it: True then; False as soon as the partition is being handed back (stop waiting: what is
        unsettled, ``message`` with it, returns to the head in order)."""
        if self.returning:
            return False
        settled = asyncio.ensure_future(self.acks.settled_before(message))
        returning = asyncio.ensure_future(self._returning.wait())
        try:
            await asyncio.wait((settled, returning), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (settled, returning):
                task.cancel()
            await asyncio.gather(settled, returning, return_exceptions=True)
        return not self.returning

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
