"""Shared lanes, worker side: consume every lane, and deliver each message as its endpoint's own runner would.

A lane (``{prefix}.lane.<i>``) holds the messages of every lane endpoint that hashes to it, each naming its
endpoint in ``warren-endpoint`` (the routing stage, warren/consumers/lane_router.py, put it there). The worker
consumes each lane on a channel of its own with ``[lanes] prefetch`` and hands each message to its endpoint's
``LaneRunner``: an ``EndpointRunner`` that consumes nothing itself, so signing, the tenant check, the decision,
retries through the delay chain (back to the lane, by the lane's name), dead letters (to the lane's DLQ, with
the endpoint in a header), the attempt log, metrics and endpoint health are the dedicated path's, unchanged.

Fairness inside a lane (the policy is warren/consumers/lane_fairness.py, pure; this is its shell): an
endpoint that already holds its share of the lane's window (``window_share``) has each further message
*parked*: moved through the delay chain back to the lane untouched (confirmed, then acked; no attempt counted),
for about as long as the endpoint needs to work through what it holds (``park_delay``), so the lane's head
moves. The messages it holds wait in a FIFO of its own, and which endpoint's head starts next is decided by
deficit round robin billed in delivery time (``DeficitRoundRobin``), at most half the window in flight on the
lane at once and each endpoint at most its ``concurrency``. A held endpoint (its circuit open, paused,
disabled) has its messages parked too, for longer, and longer each time in a row (``warren-lane-holds``).

A message naming an endpoint this worker does not serve on a lane is parked too, up to ``UNSERVED_PARKS``
times (counted in ``warren-lane-misses``): another worker may have heard of a new endpoint first and routed
to it. Past that it is taken for a deleted endpoint's: acked and counted (``discarded``), never delivered to
anyone else.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection

from warren.broker import wire
from warren.broker.amqp.ack_batcher import AckBatcher
from warren.broker.amqp.channels import close_channel, queue_on
from warren.broker.amqp.direct_consumer import consume_in_one_task
from warren.broker.amqp.uninterrupted import uninterrupted
from warren.consumers.decision import HandBack
from warren.consumers.delivery import Delivery
from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.key_lanes import lane_key, new_consumer_tag
from warren.consumers.lane_fairness import (
    DeficitRoundRobin,
    held_park_delay,
    may_hold,
    park_delay,
    park_left,
    window_share,
)
from warren.consumers.settling import Settler
from warren.topology import names
from warren.topology.config import DeliverySettings, Endpoint, RetryPolicy
from warren.transport.base import Transport

__all__ = [
    "PARK_DELAY",
    "PARK_DELAY_MAX",
    "PAUSED_PARK_DELAY",
    "UNSERVED_PARKS",
    "UNSERVED_PARK_DELAY",
    "LaneConsumer",
    "LaneRunner",
    "SharedHomeRunner",
]

log = logging.getLogger("warren.worker")

PARK_DELAY = 1.0  # seconds a message over its endpoint's share of the lane waits in the delay chain, at least
PARK_DELAY_MAX = 30.0  # and at most (a slow endpoint's surplus waits about as long as it needs for what it holds)
PAUSED_PARK_DELAY = 5.0  # seconds a message of a paused endpoint (circuit open, paused, disabled) waits there,
# doubling each time in a row (warren-lane-holds) up to PARK_DELAY_MAX
PROBE_SLACK = 1.0  # seconds after an open circuit's next probe is due that its parked messages come back
UNSERVED_PARKS = 10  # times a message for an endpoint not served here is parked before it is discarded
UNSERVED_PARK_DELAY = 2.0  # seconds each such park waits: together, time for every worker to hear of a new one


class SharedHomeRunner(EndpointRunner):
    """A lane endpoint's runner: consumes no queue of its own (its lane's consumer feeds it); its dead letters go
    to its lane's DLQ (``lane_of`` its name), whichever lane its copies travel in."""

    def __init__(
        self,
        endpoint: Endpoint,
        policy: RetryPolicy,
        delivery: DeliverySettings,
        *,
        prefix: str,
        lanes: int,
        delay_levels: int,
        transport: Transport,
        hooks: DeliveryHooks,
        channel_acks: Callable[[AbstractIncomingMessage], AckBatcher | None] | None = None,
    ) -> None:
        self.lane = names.lane_of(endpoint.name, lanes)
        super().__init__(
            endpoint,
            policy,
            delivery,
            queues=(names.lane_queue(prefix, self.lane),),
            prefix=prefix,
            delay_levels=delay_levels,
            transport=transport,
            hooks=hooks,
            channel_acks=channel_acks,  # acks on the lane's channel, batched with its other endpoints'
        )
        self.settler.dead_key = names.lane_dead_key(self.lane)  # dead letters to the lane's DLQ
        self.slots = asyncio.Semaphore(endpoint.concurrency)  # the endpoint's FIFO: at most concurrency at once
        # Its lane counts as assigned: endpoint health probes an open circuit only of a runner with something
        # assigned (an ordered endpoint whose partitions all went elsewhere has nothing to probe with); with none,
        # a lane endpoint's open circuit was never probed by any worker, and it stayed held for good. (An ordered
        # lane endpoint probes only where its park queue is drained: OrderedLaneRunner.probes_here.)

    async def open(self, connection: AbstractRobustConnection) -> None:
        await self.settler.open(connection, self.prefix)  # no consumer channel: the lane's consumer has it

    async def start_consuming(self) -> None:
        self._accepting = True
        self.paused_reason = None

    def accepts(self, message: AbstractIncomingMessage) -> bool:
        return self._accepting


class LaneRunner(SharedHomeRunner):
    """One lane endpoint's delivery: fed by the ``LaneConsumer``."""

    async def _give_back(self, message: AbstractIncomingMessage, delivery: Delivery | None, why: HandBack) -> None:
        # Held by a gate (circuit open, paused, disabled) or not consuming: parked, not nacked, so that the lane's
        # head moves and no hand-back is counted against the message.
        await park_held(self.settler, message, self.hooks.held_until(self.endpoint.name))

    async def deliver(self, message: AbstractIncomingMessage) -> None:
        """Deliver one message of the lane (its turn in this endpoint's FIFO first)."""
        async with self.slots:
            await self._on_message(message)


class _Lane:
    """One lane's consumer channel, its ack batcher, how many messages each endpoint holds of it, and whose
    held message starts next (``order``: deficit round robin, at most half the window in flight at once)."""

    def __init__(self, index: int, name: str, prefetch: int) -> None:
        self.index = index
        self.name = name
        self.channel: AbstractChannel | None = None
        self.queue: AbstractQueue | None = None
        self.tag: str | None = None
        self.acks = AckBatcher()
        self.held: Counter[str] = Counter()
        self.order: DeficitRoundRobin[asyncio.Future[None]] = DeficitRoundRobin(budget=max(1, prefetch // 2))
        self.began: dict[str, list[float]] = {}  # when each endpoint's deliveries in flight began (monotonic)

    def typical_cost(self, name: str) -> float:
        """The median mean delivery time of the lane's other busy endpoints (``name``'s own if it is alone)."""
        others = sorted(self.order.cost(other) for other in self.held if other != name)
        return others[len(others) // 2] if others else self.order.cost(name)

    def seconds_each(self, name: str) -> float:
        """How long a delivery of ``name`` takes: its mean, or its oldest one in flight's age if that is longer."""
        began = self.began.get(name)
        return max(self.order.cost(name), time.monotonic() - min(began)) if began else self.order.cost(name)

    def pump(self) -> None:
        """Start every held message whose turn it is (the round robin says whose, and how many may start)."""
        while (turn := self.order.pop()) is not None:
            name, started = turn
            if started.done():  # its task is gone (cancelled): give its slot back at once
                self.order.finished(name, 0.0)
                continue
            started.set_result(None)


class LaneConsumer:
    """Consumes every lane; ``runners`` is the worker's live map of runners (the lane endpoints' among them)."""

    def __init__(
        self,
        prefix: str,
        count: int,
        prefetch: int,
        runners: Mapping[str, EndpointRunner],
        hooks: DeliveryHooks,
        known: Callable[[str], bool] = lambda name: False,
        ordered_count: int = 1,
    ) -> None:
        """``known(name)``: the endpoint is a lane endpoint this worker routes to (in its router's index)."""
        self.ordered_count = ordered_count
        self.prefetch = prefetch
        self.runners = runners
        self.known = known
        self.hooks = hooks
        self.prefix = prefix
        self.lanes = [_Lane(i, names.lane_queue(prefix, i), prefetch) for i in range(count)]
        self._tasks: set[asyncio.Task[Any]] = set()
        self.settler: Settler | None = None  # parks the messages of endpoints not served here

    def acks_of(self, message: AbstractIncomingMessage) -> AckBatcher | None:
        """The ack batcher of the lane channel ``message`` came on (None once that lane is not consumed)."""
        if message.consumer_tag is None:
            return None  # an inline delivery's stand-in (lane_inline.py): no lane channel, so none to scan for
        for lane in self.lanes:
            if lane.tag is not None and lane.tag == message.consumer_tag:
                return lane.acks
        return None

    async def start(self, connection: AbstractRobustConnection, delay_levels: int) -> None:
        self.settler = Settler(
            "(lanes)",
            ordered=False,
            delay_levels=delay_levels,
            return_queue=self.lanes[0].name,
            return_partition=_never,
            settled=lambda how: None,  # counted by the caller, under the endpoint the message names
            clock=time.time,
            partition_acks=self.acks_of,
        )
        await self.settler.open(connection, self.prefix)
        for lane in self.lanes:
            lane.channel = await connection.channel()
            lane.queue = await queue_on(lane.channel, lane.name, self.prefetch)  # closed by close() if anything fails
            lane.tag = new_consumer_tag()  # known before the consume: a delivery settled at once finds its batcher
            await consume_in_one_task(lane.queue, functools.partial(self._on_message, lane), lane.tag)

    async def _on_message(self, lane: _Lane, message: AbstractIncomingMessage) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        lane.acks.track(message)
        try:
            await self._dispatch(lane, message)
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def _dispatch(self, lane: _Lane, message: AbstractIncomingMessage) -> None:
        assert self.settler is not None
        until = wire.header_int((message.headers or {}).get(wire.H_PARK_UNTIL))
        if (left := park_left(until, int(time.time() * 1000))) > 0:
            # Back early from a park longer than the delay chain reaches: away again for the rest, nothing counted.
            log.debug("%s back early from its park: parked again for %.1f s", message.message_id, left)
            await self.settler.park(message, left, return_queue=lane.name, until_ms=until)
            return
        name = (
            wire.header_text((message.headers or {}).get(wire.H_ENDPOINT))
            or names.endpoint_of_work_key(self.prefix, message.routing_key or "")  # a demoted endpoint's retry
            or ""
        )
        runner = self.runners.get(name)
        if runner is not None and runner.ordered and runner.endpoint.home == "lane":
            # An ordered lane endpoint's letter replayed from its lane's DLQ: to its key's ordered lane.
            key = names.ordered_lane_of(name, lane_key(message), self.ordered_count)
            await self.settler.forward(message, "", names.ordered_lane_queue(self.prefix, key))
            self.hooks.settled(name, "parked")
            return
        if not isinstance(runner, LaneRunner):
            if runner is not None:
                # The endpoint has queues of its own now (promoted while this copy was in its lane, or on its way
                # back to it through the delay chain): the copy follows it, into its exchange, attempts kept.
                await self.settler.forward(message, names.endpoint_exchange(self.prefix, name))
                self.hooks.settled(name, "parked")
                return
            if name and self.known(name):
                # Known, but without a runner here (its secrets not opened here, its runner failing to start):
                # held like a paused endpoint's, never counted towards being taken for a deleted one.
                await self.settler.park(message, PAUSED_PARK_DELAY, return_queue=lane.name)
                self.hooks.settled(name, "parked")
                return
            await self._unserved(lane, message, name)
            return
        if runner.paused_reason is not None or not runner.accepts(message):
            await park_held(runner.settler, message, runner.hooks.held_until(name))
            return
        concurrency, held, seconds_each = runner.endpoint.concurrency, lane.held[name], lane.seconds_each(name)
        share = self.share(lane, name, concurrency)
        if held >= share and not may_hold(
            held, share, self.prefetch, concurrency, seconds_each, PARK_DELAY, lane.typical_cost(name)
        ):
            # Over its share, and not fast enough to keep more: the lane's head must move. Back when it has
            # worked through what it holds.
            await runner.settler.park(message, park_delay(PARK_DELAY, PARK_DELAY_MAX, seconds_each, held, concurrency))
            return
        lane.held[name] += 1
        try:
            await self._in_turn(lane, name, runner, message)
        finally:
            lane.held[name] -= 1
            if not lane.held[name]:
                del lane.held[name]

    async def _in_turn(self, lane: _Lane, name: str, runner: LaneRunner, message: AbstractIncomingMessage) -> None:
        """Wait for this message's turn in its endpoint's FIFO (the lane's round robin), then deliver it."""
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        lane.order.push(name, turn, runner.endpoint.concurrency)
        lane.pump()
        try:
            await turn
        except asyncio.CancelledError:
            if not lane.order.drop(name, turn) and turn.done() and not turn.cancelled():
                lane.order.finished(name, 0.0)  # started, never delivered: its slot back
                lane.pump()
            raise
        began = time.monotonic()
        lane.began.setdefault(name, []).append(began)
        try:
            await runner.deliver(message)
        finally:
            lane.order.finished(name, time.monotonic() - began)
            starts = lane.began[name]
            starts.remove(began)
            if not starts:
                del lane.began[name]
            lane.pump()

    async def _unserved(self, lane: _Lane, message: AbstractIncomingMessage, name: str) -> None:
        """Parked while another worker may know the endpoint and this one not yet; then taken for deleted."""
        assert self.settler is not None
        misses = wire.header_int((message.headers or {}).get(wire.H_LANE_MISSES)) or 0
        if name and 0 <= misses < UNSERVED_PARKS:
            extra = {wire.H_LANE_MISSES: misses + 1}
            await self.settler.park(message, UNSERVED_PARK_DELAY, extra, return_queue=lane.name)
            self.hooks.settled(name, "parked")
            return
        # Deleted (or never a lane endpoint): never delivered to anyone else, and not left to loop.
        log.warning("discarded %s from %s: no lane endpoint %r here", message.message_id, lane.name, name)
        self.hooks.settled(name or "(none)", "discarded")
        with contextlib.suppress(Exception):
            await lane.acks.ack(message)

    def forget(self, name: str) -> None:
        """``name`` is no longer served here: the lanes keep nothing of it (its mean delivery time)."""
        for lane in self.lanes:
            lane.order.forget(name)

    def share(self, lane: _Lane, name: str, concurrency: int) -> int:
        """How many of ``lane``'s messages endpoint ``name`` may hold (in flight or waiting its turn) at once."""
        busy_others = sum(1 for other, held in lane.held.items() if held and other != name)
        return window_share(self.prefetch, busy_others, concurrency)

    async def stop(self) -> None:
        """Stop taking messages from the lanes (those delivered already are handled, or handed back)."""
        for lane in self.lanes:
            if lane.queue is not None and lane.tag is not None:
                with contextlib.suppress(Exception):
                    await uninterrupted(lane.queue.cancel(lane.tag))

    async def close(self, grace: float) -> None:
        """Wait up to ``grace`` for the messages being handled, send their acks, close the lanes' channels."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        for lane in self.lanes:
            await lane.acks.close()
            await close_channel(lane.channel)
            lane.channel, lane.tag = None, None
        if self.settler is not None:
            await self.settler.close()


async def park_held(settler: Settler, message: AbstractIncomingMessage, until: float | None = None) -> None:
    """Park a message of a held endpoint, longer each time in a row (``held_park_delay``), counted in a header;
    and, when its hold ends by itself at ``until`` (an open circuit's next probe, epoch seconds), until then."""
    holds = wire.header_int((message.headers or {}).get(wire.H_LANE_HOLDS)) or 0
    delay = held_park_delay(PAUSED_PARK_DELAY, PARK_DELAY_MAX, holds)
    if until is not None:
        delay = max(delay, until - time.time() + PROBE_SLACK)
    await settler.park(message, delay, {wire.H_LANE_HOLDS: holds + 1})


async def _never(message: AbstractIncomingMessage) -> None:
    raise AssertionError("a lane is never handed back as a partition")
