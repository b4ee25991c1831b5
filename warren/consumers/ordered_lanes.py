"""Ordered lane endpoints: ``ordering = "key"`` with ``home = "lane"`` (docs/architecture.md, "Ordered lanes").

Their copies go to ``[lanes] ordered_count`` ordered lanes (``{prefix}.lane.o<i>``, the lane of the endpoint and
the event's key: ``names.ordered_lane_of``), quorum queues with single active consumer, claimed a fair share per
worker (warren/consumers/partition_claims.py, roster ``{prefix}.lane.ordered.roster``). Each claimed lane is
consumed on a channel of its own into per-(endpoint, key) FIFOs (warren/consumers/key_lanes.py): one message of
an endpoint's key at a time, in queue order, every other FIFO side by side. The router puts one key's copies
into the lane in order (warren/consumers/lane_router.py), so the lane holds each endpoint's keys in order.

An ordered lane endpoint's runner is a dedicated ordered endpoint's (``EndpointRunner``, retry in place up to
``delivery.ordered_hold_limit``, the lane handed back whole past it), with two differences, both because the lane
is shared: a held endpoint (paused, circuit open, disabled) has its copies moved, in order, into a park queue
of its own (warren/consumers/ordered_parks.py) instead of handing the whole lane back (which would return its
lane-mates' messages too, and be delivered straight back); and its dead letters go to the DLQ of its unordered
lane (``lane_of(endpoint)``), so that ``warren dlq`` and recover find them where they find every lane endpoint's.
A replayed letter reaches that unordered lane, whose consumer forwards it to its key's ordered lane (lanes.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from aio_pika.abc import AbstractIncomingMessage

from warren.broker import wire
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.consumers.claimed_partitions import ClaimedPartitions
from warren.consumers.decision import HandBack
from warren.consumers.delivery import Delivery
from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.key_lanes import PartitionLanes, lane_key
from warren.consumers.lane_fences import lane_fence_id, pass_lane_fence
from warren.consumers.lanes import UNSERVED_PARK_DELAY, UNSERVED_PARKS, SharedHomeRunner
from warren.consumers.ordered_parks import OrderedParks
from warren.core.errors import PublishError, describe
from warren.topology import names
from warren.topology.config import DeliverySettings, Endpoint, RetryPolicy

__all__ = ["HELD_WAIT", "OrderedLaneRunner", "OrderedLanes"]

log = logging.getLogger("warren.worker")

HELD_WAIT = 1.0  # seconds between two looks at a held endpoint (its message waits in its FIFO meanwhile)


def ordered_key(message: AbstractIncomingMessage) -> str:
    """A delivery's FIFO in an ordered lane: its endpoint and its key."""
    endpoint = wire.header_text((message.headers or {}).get(wire.H_ENDPOINT)) or ""
    return f"{endpoint}\x00{lane_key(message)}"


class OrderedLanes(ClaimedPartitions):
    """The ordered lanes this worker claimed, consumed into per-(endpoint, key) FIFOs."""

    def __init__(
        self,
        prefix: str,
        count: int,
        prefetch: int,
        runners: Mapping[str, EndpointRunner],
        hooks: DeliveryHooks,
        known: Callable[[str], bool],
        hold_limit: float,
        lanes: int = 1,
    ) -> None:
        super().__init__(
            [names.ordered_lane_queue(prefix, i) for i in range(count)],
            prefetch,
            self._deliver,
            key=ordered_key,
            unstarted=self._unstarted,
        )
        self.runners = runners
        self.hooks = hooks
        self.known = known
        self.hold_limit = hold_limit
        self.prefix, self.lanes = prefix, lanes
        self.publisher: ConfirmChannel | None = None  # the lane stage's: copies that follow their endpoint elsewhere
        self.parks: OrderedParks | None = None  # held endpoints' park queues (the lane stage's)

    def lanes_of(self, message: AbstractIncomingMessage) -> PartitionLanes | None:
        """The lanes of an ordered lane's delivery, or of a park queue's (drained through the same runners)."""
        lanes = super().lanes_of(message)
        if lanes is None and self.parks is not None:
            lanes = self.parks.lanes_of(message)
        return lanes

    def _unstarted(self, message: AbstractIncomingMessage) -> None:
        """A copy returned with its lane behind its FIFO's head, never started: its endpoint's runner does not count
        that return (x-delivery-count) as a hand-back of its own (held_attempts.py)."""
        runner = self.runners.get(wire.header_text((message.headers or {}).get(wire.H_ENDPOINT)) or "")
        if runner is not None:
            runner.held.not_started(message.message_id)

    async def _deliver(self, message: AbstractIncomingMessage) -> None:
        """Hand the copy to its endpoint's runner; one not served here waits in its FIFO (order: never parked)."""
        name = wire.header_text((message.headers or {}).get(wire.H_ENDPOINT)) or ""
        lanes = self.lanes_of(message)
        if (fence := lane_fence_id(message)) is not None and self.publisher is not None:
            # An ordered promotion's fence (lane_fences.py): passed on behind this lane's copies of its endpoint.
            return await pass_lane_fence(
                message, fence, lanes, self.publisher, names.ordered_park_queue(self.prefix, name)
            )
        unknown_since = time.monotonic()
        refused = False  # by its endpoint's gate, on the last turn
        while lanes is not None and not lanes.returning:
            runner = self.runners.get(name)
            if isinstance(runner, OrderedLaneRunner):
                try:
                    if self.parks is not None and await self.parks.divert(lanes, name, runner, message, refused):
                        return  # held or parked: into its park queue, and the lane moves on (ordered_parks.py)
                except PublishError as exc:
                    what = f"{message.message_id} of {name}"
                    log.warning("could not park %s (%s); its lane goes back", what, describe(exc))
                    await asyncio.sleep(HELD_WAIT)
                    lanes.hand_back()
                    return
                if await runner.deliver(message, parkable=self.parks is not None):
                    return
                # Held meanwhile: parked on the next turn, as held, whatever the runner's own flags say yet. Their
                # change (the circuit's opening seen by the runner) is a callback of this loop: asking them again
                # made a turn that never suspended, which froze the loop and that callback with it.
                refused = True
                continue
            if runner is not None and self.publisher is not None:
                await self._follow(message, runner, lanes)
                return
            if self.known(name):
                unknown_since = time.monotonic()
            elif time.monotonic() - unknown_since > UNSERVED_PARKS * UNSERVED_PARK_DELAY:
                # Deleted (or not an ordered lane endpoint any more): never delivered to anyone else.
                log.warning("discarded %s from an ordered lane: no ordered lane endpoint %r", message.message_id, name)
                self.hooks.settled(name or "(none)", "discarded")
                with contextlib.suppress(Exception):
                    await lanes.acks.ack(message)
                return
            left = self.hold_limit - (time.monotonic() - lanes.held_since(message))
            if left <= 0:
                lanes.hand_back()  # RabbitMQ's consumer_timeout must not close the channel
                return
            if await lanes.wait(min(HELD_WAIT, left)):  # the next look is at the hold limit at the latest
                return

    async def _follow(self, message: AbstractIncomingMessage, runner: EndpointRunner, lanes: PartitionLanes) -> None:
        """A copy of an endpoint that is no ordered lane endpoint any more (its ordering changed in the file, or
        it moved in a way the admin API refuses): moved untouched to where it is served now, confirmed, then acked."""
        assert self.publisher is not None
        name = runner.endpoint.name
        if runner.endpoint.home == "lane":
            exchange, key = "", names.lane_queue(self.prefix, names.lane_of(name, self.lanes))
        else:
            exchange, key = names.endpoint_exchange(self.prefix, name), message.routing_key or ""
        try:
            onward = wire.onward(message, wire.untouched_headers(message))
            await self.publisher.publish(exchange, onward, key, what=f"{message.message_id} of {name}")
        except PublishError as exc:
            log.warning("could not move %s of %s (%s); its lane goes back", message.message_id, name, describe(exc))
            await asyncio.sleep(HELD_WAIT)
            lanes.hand_back()
            return
        self.hooks.settled(name, "parked")
        with contextlib.suppress(Exception):
            await lanes.acks.ack(message)


class OrderedLaneRunner(SharedHomeRunner):
    """One ordered lane endpoint's delivery: fed by ``OrderedLanes``; ``ordered`` is that consumer."""

    def __init__(self, endpoint: Endpoint, policy: RetryPolicy, delivery: DeliverySettings, **kw: Any) -> None:
        self.ordered_lanes: OrderedLanes = kw.pop("ordered")
        super().__init__(endpoint, policy, delivery, **kw)
        self._held_back: set[int] = set()  # deliveries given back while held: they wait in their FIFO

    def lanes_of(self, message: AbstractIncomingMessage) -> PartitionLanes | None:
        return self.ordered_lanes.lanes_of(message)

    def probes_here(self) -> bool:
        """Only the drainer of its park (or moved) queue probes it: while it is held every copy goes there, so
        the queue's head is the only probe there is, and a probe slot taken elsewhere would wait for ever."""
        parks = self.ordered_lanes.parks
        return parks.draining(self.endpoint.name) if parks is not None else bool(self.assigned)

    def return_partition(self, message: AbstractIncomingMessage) -> bool:
        return self.ordered_lanes.hand_back(message)

    async def _give_back(self, message: AbstractIncomingMessage, delivery: Delivery | None, why: HandBack) -> None:
        lanes = self.lanes_of(message)
        if lanes is not None and self._hold_left(message, lanes) <= 0:
            await self.settler.hand_back(message)  # the hold limit: the whole lane goes back, in order
            return
        self._held_back.add(id(message))  # held (paused, circuit open): it waits in its FIFO, unattempted

    async def deliver(self, message: AbstractIncomingMessage, parkable: bool = False) -> bool:
        """Deliver one copy: True once settled. While the endpoint is held it waits in place (bounded by the hold
        limit), or, when ``parkable`` (taken from an ordered lane, not from its park queue), False at once: the
        caller parks it (ordered_parks.py)."""
        lanes = self.lanes_of(message)
        try:
            while lanes is not None and not lanes.returning:
                if self._accepting and self.paused_reason is None:
                    self._held_back.discard(id(message))
                    async with self.slots:
                        await self._on_message(message)
                    if id(message) not in self._held_back:
                        return True
                if parkable:
                    return False
                if (left := self._hold_left(message, lanes)) <= 0:
                    await self.settler.hand_back(message)
                    return True
                if await lanes.wait(min(HELD_WAIT, left)):  # the next look is at the hold limit at the latest
                    return True
            return True
        finally:
            self._held_back.discard(id(message))

    def _hold_left(self, message: AbstractIncomingMessage, lanes: PartitionLanes) -> float:
        """Seconds ``message`` may still be held unacked (``delivery.ordered_hold_limit``, from its delivery). A held
        copy waits in its FIFO until then, looked at again no later than that, so none is handed back before it."""
        return self.delivery.ordered_hold_limit - (time.monotonic() - lanes.held_since(message))
