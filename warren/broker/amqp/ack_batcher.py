"""Coalescing acks: one ``basic.ack(multiple=True)`` for a run of settled deliveries instead of one frame each.

Deliveries on a channel carry increasing tags, but with many in flight they finish out of order, and a
multiple ack covers every outstanding tag up to its own. So the batcher acks only the longest prefix of
arrived tags that are all settled (acked, or settled another way such as a nack). A finished delivery stuck
behind a slow one is acked on its own once it has waited ``straggler_after`` seconds, so one slow request
never holds the prefetch window hostage. With ``flush_at`` set, a batch goes as soon as that many acks wait,
without waiting out ``max_delay``: a long window then bounds the time acks wait, ``flush_at`` how many. With
``hurry_at`` set, acks go at once while that many deliveries are outstanding on the channel (unsettled as RabbitMQ
counts them: acked here but not yet sent, or not acked), stragglers too: the prefetch window is nearly full, and
an ack that waited would keep RabbitMQ's next delivery waiting. A delivery already acked on its own no longer
counts: it left the window, though it stays behind the head here until the head is settled. With ``hurry_counts``
"waiting", only the acks waiting here count: the deliveries not yet handled keep the consumer busy, and making
room for more of them is no hurry (a route partition's, whose events wait for one another only for an ordered
subscriber's turn).

One batcher per consumer channel: the work queue's (in the settler), and each ordered partition's (in its lanes).
A partition's batcher waits longer (``for_window``): its channel sees only its share of the endpoint's deliveries.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from aio_pika.abc import AbstractIncomingMessage
from aiormq.exceptions import ChannelInvalidStateError

from warren.broker.amqp.channels import SETTLE_PAUSE

__all__ = ["WINDOW_ACK_DELAY", "AckBatcher", "WindowPace"]

# How long a partition channel's acks wait for company (``AckBatcher.for_window``). An ordered endpoint's
# deliveries are spread over its partitions, a channel each, so each channel sees 1/N of them: with the work
# queue's 2 ms, 32 partitions at 2,000 deliveries/s sent an ack frame for every 4 deliveries where the work queue
# sent one for every 18 (bench/ordered_probe.py), and each frame is a command through the quorum queue's Raft
# log, which made the broker's CPU per delivery ~45% higher (bench/README.md, issue 38). Waiting costs no
# delivery any time (the POST is done) while the window has room: the acks hurry once three quarters of it is
# outstanding (``hurry_at``), so that a full window never waits for them, and a busy partition's batches are
# sized by its window rather than by this delay. 50 ms still left a slow run's 32 partitions (a few deliveries a
# second each on a loaded machine) near one frame per delivery.
WINDOW_ACK_DELAY = 0.25


# What ``hurry_at`` is compared with: the deliveries RabbitMQ holds unsettled on the channel, or the acks waiting.
HurryCounts = Literal["outstanding", "waiting"]


@dataclass(frozen=True)
class WindowPace:
    """How a partition channel's acks wait (``AckBatcher.for_window``): an ack behind a delivery still unsettled
    goes alone after ``straggler_after`` seconds, and every ack goes at once while all but ``spare`` (a share of
    the window) is outstanding, or with ``hurry_counts`` "waiting" while the acks waiting fill that much of it.
    The defaults are an ordered endpoint's partitions'. A straggler waits twice the delay for its head: with as
    long as the delay, every ack behind a delivery still in flight when the batch went was a straggler already
    (a third of a slow run's acks went alone, bench/ordered_probe.py)."""

    straggler_after: float = 2 * WINDOW_ACK_DELAY
    spare: float = 0.25
    hurry_counts: HurryCounts = "outstanding"


def _channel_of(message: AbstractIncomingMessage) -> Any:
    """The aiormq channel a delivery came on, or None when that channel is closed (its tags are void)."""
    try:
        return message.channel
    except ChannelInvalidStateError:
        return None


class AckBatcher:
    """Acks for the deliveries of one consumer channel, sent in batches within ``max_delay`` seconds.

    ``flush_at``: send at once when this many acks wait (0: only ``max_delay`` decides). ``hurry_at``: send at
    once while this many deliveries are outstanding on the channel (0: never), or with ``hurry_counts``
    "waiting", while this many acks wait.
    """

    def __init__(
        self,
        max_delay: float = 0.002,
        straggler_after: float = 0.05,
        flush_at: int = 0,
        hurry_at: int = 0,
        hurry_counts: HurryCounts = "outstanding",
    ) -> None:
        self.max_delay = max_delay
        self.straggler_after = straggler_after
        self.flush_at = flush_at
        self.hurry_at = hurry_at
        self.hurry_counts = hurry_counts
        self._channel: Any = None  # the aiormq channel the tags belong to; a reopened channel starts afresh
        self._order: deque[int] = deque()
        self._acked: dict[int, float] = {}  # tag -> when it was acked (not yet sent)
        self._settled: set[int] = set()  # settled otherwise (nacked) or already acked on their own
        self._timer: asyncio.TimerHandle | None = None
        self._flushing: asyncio.Task[None] | None = None
        self._again = False  # hurried during a send: send again as it ends
        self._last_sent = -SETTLE_PAUSE  # monotonic time of the last ack sent on the channel
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []  # settled_before: (tag, woken once all before)

    @classmethod
    def for_window(cls, prefetch: int, pace: WindowPace = WindowPace()) -> AckBatcher:
        """A partition channel's batcher, whose window is ``prefetch``: acks wait up to ``WINDOW_ACK_DELAY``, and
        as ``pace`` says behind a delivery still unsettled and near a full window (a route partition's wait
        longer, ``ROUTE_PACE`` in warren/consumers/lane_router.py)."""
        return cls(
            max_delay=WINDOW_ACK_DELAY,
            straggler_after=pace.straggler_after,
            hurry_at=max(1, prefetch - int(prefetch * pace.spare)),
            hurry_counts=pace.hurry_counts,
        )

    def track(self, message: AbstractIncomingMessage) -> None:
        """Record an arrival, in delivery order."""
        channel = _channel_of(message)
        if channel is None:
            return
        if channel is not self._channel:
            self._reset(channel)
        if message.delivery_tag is not None:
            self._order.append(message.delivery_tag)

    async def ack(self, message: AbstractIncomingMessage) -> None:
        """Ack ``message`` soon, together with its neighbours."""
        tag = message.delivery_tag
        channel = _channel_of(message)
        if channel is None:
            return  # its channel is gone, and with it the delivery: RabbitMQ delivers the message again
        if channel is not self._channel or tag is None:
            await message.ack()  # a delivery from a channel since replaced: ack it as it is
            return
        self._acked[tag] = time.monotonic()
        self._wake()
        if self._hurrying():
            self._hurry()
            return
        if self.flush_at and len(self._acked) >= self.flush_at and self._timer is not None:
            self._timer.cancel()
            self._fire()
            return
        self._schedule()

    def settled(self, message: AbstractIncomingMessage) -> None:
        """``message`` was settled without the batcher (a nack): it no longer blocks the prefix."""
        if message.delivery_tag is not None and _channel_of(message) is self._channel:
            self._settled.add(message.delivery_tag)
            self._wake()
            self._schedule()

    def done_before(self, message: AbstractIncomingMessage) -> bool:
        """Whether every delivery of ``message``'s channel that arrived before it is settled (acked or otherwise).

        False for a delivery of a channel since replaced (its tags are void): nothing of it can be vouched for."""
        if _channel_of(message) is not self._channel or message.delivery_tag is None:
            return False
        for tag in self._order:  # in delivery order; tags sent already are no longer in it
            if tag >= message.delivery_tag:
                break
            if tag not in self._acked and tag not in self._settled:
                return False
        return True

    async def settled_before(self, message: AbstractIncomingMessage) -> None:
        """Return once every delivery that arrived before ``message`` on its channel is settled (a route fence's
        wait, warren/consumers/route_fences.py). Never returns for a delivery of a replaced channel: the caller
        bounds it (its channel's close)."""
        while not self.done_before(message):
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append((message.delivery_tag or 0, waiter))
            try:
                await waiter
            finally:
                self._waiters = [(t, w) for t, w in self._waiters if w is not waiter]

    def _wake(self) -> None:
        for _, waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def flush(self) -> None:
        """Send every ack that can be sent now (shutdown calls this after the in-flight deliveries end)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        await self._send()

    async def close(self) -> None:
        """Send every ack still waiting, stragglers included, and stop: the channel is about to be closed.

        Nothing is sent on the channel after this returns (an ack sent on a closed channel's number, reused by
        the next channel opened, is a connection error: ``CHANNEL_ERROR - expected 'channel.open'``). It returns
        no sooner than ``SETTLE_PAUSE`` after the last ack sent, so that a quorum queue applies those acks
        before the channel's close returns its unacked deliveries (broker/amqp/channels.py): otherwise a partition
        handed back, or a worker stopping, sees its last acked deliveries come back and be delivered again.
        """
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing is not None and not self._flushing.done():
            with contextlib.suppress(Exception):
                await self._flushing
        self.straggler_after = 0.0
        await self._send()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._reset(None)
        settle = self._last_sent + SETTLE_PAUSE - time.monotonic()
        if settle > 0:
            await asyncio.sleep(settle)

    def _reset(self, channel: Any) -> None:
        self._channel = channel
        self._order.clear()
        self._acked.clear()
        self._settled.clear()

    def _hurrying(self) -> bool:
        """Whether ``hurry_at`` deliveries are outstanding with RabbitMQ: the ones tracked, less the ones settled
        already (acked alone, or nacked); or, counting "waiting", whether ``hurry_at`` acks wait here. Counting
        the settled ones too, a head held for long made every ack behind it go alone as soon as the head's span
        reached ``hurry_at``; and with a backlog, RabbitMQ keeps the window full, so counting what it holds
        hurried all the time, each ack behind a held head alone (a route partition held by a lane copy's
        confirm, docs/deployment.md, "Hurrying on the acks waiting")."""
        if not self.hurry_at:
            return False
        if self.hurry_counts == "waiting":
            return len(self._acked) >= self.hurry_at
        return len(self._order) - len(self._settled) >= self.hurry_at

    def _schedule(self) -> None:
        if self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.max_delay, self._fire)

    def _hurry(self) -> None:
        """Send now, or right after the send under way (whose prefix may not have held this ack yet)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flushing is None or self._flushing.done():
            self._fire()
        else:
            self._again = True

    def _fire(self) -> None:
        self._timer = None
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._send())
        else:
            self._schedule()

    async def _send(self) -> None:
        channel = self._channel
        if channel is None or channel.is_closed:
            return
        highest: int | None = None
        while self._order and (self._order[0] in self._acked or self._order[0] in self._settled):
            tag = self._order.popleft()
            if self._acked.pop(tag, None) is not None:
                highest = tag
            self._settled.discard(tag)
        singles: list[int] = []
        if self._acked:
            # Hurrying, every settled delivery goes (the window is nearly full): the stragglers too, alone.
            hurry = self._hurrying()
            cutoff = time.monotonic() - (0.0 if hurry else self.straggler_after)
            # _acked is in the order of acking, so the stragglers are its head: stop at the first one that is
            # not (scanning every waiting ack each flush cost the worker a few percent under a slow receiver).
            for tag, at in self._acked.items():
                if at > cutoff:
                    break
                singles.append(tag)
            for tag in singles:
                del self._acked[tag]
                self._settled.add(tag)
            if self._acked:
                self._schedule()  # the rest waits behind a slow delivery; look again shortly
        # Every frame is queued at once and only the last waits for the connection's writer: awaited one by one,
        # each single ack cost a pass of the writer, and a few hundred of them (a window behind a slow delivery)
        # kept this send, the prefetch window, and so RabbitMQ's next deliveries, waiting for a second on a busy
        # machine (bench/README.md, the user's mode). A lost channel takes its unacked deliveries back to the queue:
        # RabbitMQ redelivers them.
        frames = ([(highest, True)] if highest is not None else []) + [(tag, False) for tag in singles]
        with contextlib.suppress(Exception):
            for i, (tag, multiple) in enumerate(frames, 1):
                await channel.basic_ack(tag, multiple=multiple, wait=i == len(frames))
        if highest is not None or singles:
            self._last_sent = time.monotonic()
        if self._again:
            self._again = False
            asyncio.get_running_loop().call_soon(self._fire)
