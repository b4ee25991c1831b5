"""Park queues of held ordered lane endpoints (docs/architecture.md, "Ordered lanes", "A held endpoint").

While an ordered lane endpoint E is held (paused, circuit open, disabled), the ordered lanes' consumer moves each
copy of E it takes, in its per-(endpoint, key) FIFO order, into E's park queue ``{prefix}.lane.park.<E>``
(durable; confirmed, mandatory, then acked), so that the lane's head moves on for its lane-mates. The queue's
*existence* is the parked state: it lives in the broker, so it survives a worker's crash and a lane's hand-over.
While it exists every copy of E goes there, held or not (behind the earlier ones of its key). A publish to it
once it is gone is returned as unroutable: nothing of any key can be behind that copy, which is delivered directly.

One worker at a time drains a park queue: the holder of its drain lock (an exclusive queue ``<park>.drain`` on
its connection, released by a crash). It consumes the park queue into per-key FIFOs and hands each message to
E's runner, which delivers it (or holds it in place while E is held: the head of the park queue is the probe of an
open circuit). Once E is served, nothing of the queue is in flight and it holds nothing, the holder closes its
channel (whatever was on its way returns to the queue) and deletes the queue *if empty* (a classic durable queue:
quorum queues refuse if-empty), then releases the lock. A copy routed to the queue before the delete makes the
delete fail (drained next); one after it is returned. The lock makes that safe: nobody else consumes the queue,
so no message is unacked anywhere when it goes (RabbitMQ's if-empty does not count unacked ones).

An ordered endpoint moved here from its partitions (warren/broker/live_demote_ordered.py) also has a *moved
queue* ``{prefix}.lane.park.<E>.moved``: what its partitions held, in order, ended by a marker. Its drainer drains
that queue first, the same way, and deletes it (with the marker, left unacked: if-empty counts ready messages only)
once everything before the marker is delivered; only then the park queue, which the routers' copies of E entered
meanwhile, so each key's older events come first.

What a lane consumer knows of E's park queue is per claimed lane (``PartitionLanes``): only the consumer of that
lane puts that lane's keys into the park queue, so "not parked" learnt while consuming this lane (a passive
declare, or a returned publish) stays true for its keys until this consumer parks one of them itself; a new
consumer of the lane starts knowing nothing and asks RabbitMQ (a passive declare) with its first copy of E.

"Held" is what E's gate says (``DeliveryHooks.parks``: the endpoint's ``EndpointGuard.parks``), never the runner's
own flags, which follow the gate a loop callback later. A copy its gate refuses between the two looks is parked
on the next turn (``refused``, ordered_lanes.py).

Which park queues to drain is learnt, not polled for: the queue of every copy parked here; at start, and whenever
an endpoint becomes an ordered lane endpoint here (its live announcement: a move declares its queues before it),
one look for its moved and park queues. What no event can tell is a park queue whose drainer stopped (a
crash) while nothing of E comes any more: a slow sweep looks for those, one endpoint at a time, ``SWEEP_EVERY``
seconds for all of them and never more than one look every ``LOOK_GAP`` seconds (docs/architecture.md,
"A held endpoint").

Every command on park queues goes over the parks' own connection (park_link.py), which a lost link replaces:
a drain that loses it starts over on the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import Callable, Mapping
from typing import Any

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage

from warren.broker import wire
from warren.broker.amqp.channels import close_channel, consume_on
from warren.broker.amqp.confirm import LINK_ERRORS
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.key_lanes import PartitionLanes, new_consumer_tag
from warren.consumers.lane_fences import answer_lane_fence, lane_fence_id
from warren.consumers.park_link import PARK_ARGUMENTS, ParkLink
from warren.core.deadlines import within
from warren.core.errors import PublishError, UnroutableError, WarrenError, describe
from warren.topology import names

__all__ = ["PARK_ARGUMENTS", "OrderedParks"]

log = logging.getLogger("warren.worker")

# What reaching a park queue can fail with: the link (its connection made again next time) or RabbitMQ.
PARK_FAILURES: tuple[type[BaseException], ...] = (WarrenError, *LINK_ERRORS, aiormq.exceptions.AMQPError)

DRAIN_TICK = 1.0  # seconds between two looks of a drain (lock, emptiness)
SWEEP_EVERY = 60.0  # seconds a sweep takes to look once at every ordered lane endpoint served here (at least)
LOOK_GAP = 0.1  # seconds between two looks of a sweep, at least: 10 passive declares a second at most
RETURN_WAIT = 30.0  # seconds a drain waits for its lanes to hand back before looking again


def _ordered_lane_runner(runner: Any) -> bool:
    """Whether ``runner`` serves an ordered lane endpoint (a park queue is delivered by nothing else)."""
    return getattr(runner, "ordered_lanes", None) is not None


class OrderedParks:
    """The park queues this worker parks into and drains. ``runners`` is the worker's map of runners."""

    def __init__(
        self,
        prefix: str,
        prefetch: int,
        runners: Mapping[str, Any],
        hooks: DeliveryHooks,
        known: Callable[[str], bool],
        link: ParkLink,
    ) -> None:
        self.prefix, self.prefetch = prefix, prefetch
        self.known = known  # whether an endpoint is (still) routed to: a removed one's drain stops
        self.runners, self.hooks = runners, hooks
        self.publisher: ConfirmChannel | None = None
        self.link = link
        self._known: weakref.WeakKeyDictionary[PartitionLanes, dict[str, bool]] = weakref.WeakKeyDictionary()
        self._drains: dict[str, asyncio.Task[None]] = {}
        self._draining: dict[str, PartitionLanes] = {}  # endpoint -> the lanes of its park queue's channel here
        self._tags: dict[str, PartitionLanes] = {}
        self._declared: set[str] = set()
        self._discovery: asyncio.Task[None] | None = None
        self._looks: set[asyncio.Task[None]] = set()
        self._looking: set[str] = set()
        self._ended: weakref.WeakSet[PartitionLanes] = weakref.WeakSet()  # moved queues' channels past the marker
        self.running = False

    def open(self, publisher: ConfirmChannel) -> None:
        self.publisher, self.running = publisher, True
        self._discovery = asyncio.get_running_loop().create_task(self._discover())

    def lanes_of(self, message: AbstractIncomingMessage) -> PartitionLanes | None:
        return self._tags.get(message.consumer_tag or "")

    def forget(self, name: str) -> None:
        """Forget what the lanes learnt of ``name``'s park queue: it is (again) an ordered lane endpoint here, and
        a move may have declared its park queue meanwhile (live_demote_ordered.py): look for it once."""
        for known in self._known.values():
            known.pop(name, None)
        if self.running:
            self._look_soon(name)

    def draining(self, name: str) -> bool:
        """Whether this worker consumes ``name``'s moved or park queue now (it holds that queue's drain lock)."""
        return name in self._draining

    def held(self, name: str) -> bool:
        """Whether ``name``'s gate holds it (paused, disabled, throttled, circuit open, or the worker stopping)."""
        return self.hooks.parks(name)

    async def divert(
        self, lanes: PartitionLanes, name: str, runner: Any, message: AbstractIncomingMessage, refused: bool = False
    ) -> bool:
        """Move ``message`` (of ordered lane endpoint ``name``, taken from ordered lane ``lanes``) into the park
        queue when the endpoint is held or parked, or its gate has just ``refused`` it, and ack it: True. False:
        deliver it directly."""
        assert self.publisher is not None
        known = self._known.setdefault(lanes, {})
        for _ in range(3):
            held = refused or self.held(name)
            try:
                if not held and known.get(name) is None:  # this lane's consumer parked nothing of it yet: ask
                    known[name] = await self.link.count(names.ordered_park_queue(self.prefix, name)) is not None
                if held:
                    await self._declare(name)
            except PARK_FAILURES as exc:
                raise PublishError(f"the park queue of {name} could not be reached: {describe(exc)}") from exc
            if not held and known.get(name) is False:
                return False
            try:
                onward = wire.onward(message, wire.untouched_headers(message))
                await self.publisher.publish(
                    "", onward, names.ordered_park_queue(self.prefix, name), what=f"{message.message_id} of {name}"
                )
            except UnroutableError:
                self._declared.discard(name)
                known[name] = False  # no park queue: nothing of this lane's keys can be waiting in one
                if not held:
                    return False
                continue  # drained and deleted meanwhile, and held again: park it anew
            known[name] = True
            self.hooks.settled(name, "parked")
            with contextlib.suppress(Exception):
                await lanes.acks.ack(message)
            self.drain(name)
            return True
        return False

    async def _declare(self, name: str) -> None:
        if name in self._declared:
            return
        await self.link.declare(names.ordered_park_queue(self.prefix, name))
        self._declared.add(name)

    def drain(self, name: str) -> None:
        """Make sure this worker tries to drain ``name``'s park queue (it does once it holds the drain lock)."""
        if self.running and name not in self._drains:
            task = asyncio.get_running_loop().create_task(self._drain(name))
            self._drains[name] = task
            task.add_done_callback(lambda _t: self._drains.pop(name, None))

    async def _drain(self, name: str) -> None:
        """Drain what ``name`` brought from its partitions when it moved here (the moved queue), then its park
        queue: nothing of the park queue is delivered while the moved queue exists (live_demote_ordered.py)."""
        for queue in (names.ordered_moved_queue(self.prefix, name), names.ordered_park_queue(self.prefix, name)):
            if not await self._drain_queue(name, queue):
                return

    async def _drain_queue(self, name: str, queue: str) -> bool:
        """Drain ``queue`` (one worker at a time: its drain lock); True once it is gone, False when stopping."""
        while self.running:
            try:
                lock = await self.link.lock(queue)
                if lock is None:
                    await asyncio.sleep(DRAIN_TICK * 2)
                    if await self.link.count(queue) is None:
                        return True
                    continue
                try:
                    if await self._drain_held(name, queue, lock):
                        return True
                finally:
                    await self.link.unlock(lock, queue)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("draining %s: %s; trying again", queue, describe(exc))
                await asyncio.sleep(DRAIN_TICK)
        return False

    async def _drain_held(self, name: str, queue: str, lock: AbstractChannel) -> bool:
        """Drain ``queue`` holding its lock; True once it is deleted (or gone)."""
        moved = queue == names.ordered_moved_queue(self.prefix, name)
        while self.running:
            consumed = await self._consume(name, queue)
            if consumed is None:
                return True  # gone
            lanes, channel = consumed
            while self.running and not lanes.returning:
                await asyncio.sleep(DRAIN_TICK)
                if channel.is_closed or lock.is_closed:  # the link went (or RabbitMQ closed one): start over
                    await lanes.hand_back_now()
                    raise ConnectionError(f"the channel of {queue} or of its lock was closed")
                if not self.known(name):  # removed: its removal deletes the queue once its consumers left
                    await lanes.hand_back_now()
                    return True
                runner = self.runners.get(name)
                if not _ordered_lane_runner(runner) or self.held(name) or lanes.busy:
                    continue
                if moved and lanes not in self._ended:
                    continue  # the mover has not written its last message yet: more may come
                if await self.link.count(queue) == 0 and not lanes.busy:
                    break
            if moved and lanes in self._ended and not lanes.returning:
                # Everything before the end marker is settled and the marker is unacked: the delete (if-empty
                # counts ready messages only) takes the marker with the queue, so no crash leaves it empty and
                # markless (which would hold the park queue for ever).
                await lanes.acks.flush()
                if await self.link.delete_if_empty(queue):
                    await lanes.hand_back_now()
                    log.info("moved queue %s delivered and deleted", queue)
                    return True
            await lanes.hand_back_now()
            with contextlib.suppress(TimeoutError):
                await within(lanes.returned.wait(), RETURN_WAIT)
            if not self.running:
                return False
            if not moved and await self.link.delete_if_empty(queue):
                log.info("park queue %s drained and deleted", queue)
                self._declared.discard(name)
                return True
        return False

    async def _consume(self, name: str, queue: str) -> tuple[PartitionLanes, AbstractChannel] | None:
        """Consume ``queue`` on a channel of its own: its lanes and that channel; None when it is gone.

        The consumer tag is chosen, and known here, before the consume: a delivery can come before the consume's
        answer does, and its lanes must be found by its tag (``lanes_of``) from the first."""
        channel = await self.link.open_channel()
        lanes = PartitionLanes(self._deliver, lambda: self._closed(name, channel))
        tag = new_consumer_tag()
        self._tags[tag] = lanes
        try:
            await consume_on(channel, queue, self.prefetch, lanes.dispatch, tag)  # closes the channel if it fails
        except aiormq.exceptions.ChannelNotFoundEntity:
            self._tags.pop(tag, None)
            return None
        except BaseException:
            self._tags.pop(tag, None)
            raise
        self._draining[name] = lanes
        return lanes, channel

    async def _closed(self, name: str, channel: AbstractChannel) -> None:
        self._tags = {t: lanes for t, lanes in self._tags.items() if lanes is not self._draining.get(name)}
        self._draining.pop(name, None)
        await close_channel(channel)

    async def _deliver(self, message: AbstractIncomingMessage) -> None:
        lanes = self.lanes_of(message)
        if (message.headers or {}).get(wire.H_MOVE_END) is not None:
            if lanes is not None:
                self._ended.add(lanes)  # left unacked: the queue's delete takes it (_drain_held)
            return
        if (fence := lane_fence_id(message)) is not None and self.publisher is not None:
            return await answer_lane_fence(message, fence, lanes, self.publisher)  # an ordered promotion's
        name = wire.header_text((message.headers or {}).get(wire.H_ENDPOINT)) or ""
        runner = self.runners.get(name)
        while not _ordered_lane_runner(runner) and lanes is not None and not lanes.returning and self.known(name):
            if await lanes.wait(DRAIN_TICK):  # its runner is being built (or the endpoint went: removal deletes)
                return
            runner = self.runners.get(name)
        if runner is not None and _ordered_lane_runner(runner):
            await runner.deliver(message)

    def _look_soon(self, name: str) -> None:
        if name not in self._drains and name not in self._looking:
            self._looking.add(name)
            task = asyncio.get_running_loop().create_task(self._look(name))
            self._looks.add(task)
            task.add_done_callback(self._looks.discard)

    async def _look(self, name: str) -> None:
        """Drain ``name``'s queues if it has a moved queue or a park queue (one look at each)."""
        try:
            for queue in (names.ordered_moved_queue(self.prefix, name), names.ordered_park_queue(self.prefix, name)):
                if name in self._drains or not self.running:
                    return
                if await self.link.count(queue) is not None:
                    self.drain(name)
                    return
        except PARK_FAILURES as exc:
            log.warning("looking for the park queue of %s: %s (the next sweep looks again)", name, describe(exc))
        finally:
            self._looking.discard(name)

    def _ordered_served(self) -> list[str]:
        """The ordered lane endpoints served here: with a runner, or read at start and not built yet."""
        deferred: Mapping[str, Any] = getattr(self.runners, "deferred", {})
        built = [name for name, runner in list(self.runners.items()) if _ordered_lane_runner(runner)]
        return built + [name for name, e in list(deferred.items()) if getattr(e, "ordering", None) == "key"]

    async def _discover(self) -> None:
        """Look at every ordered lane endpoint served here at start (a look every ``LOOK_GAP`` seconds), then in a
        slow sweep: a park queue whose drainer stopped while nothing of its endpoint comes any more is known to no
        event (module docstring). At most one look every ``LOOK_GAP`` seconds, however many endpoints."""
        first = True
        while self.running:
            served = self._ordered_served()
            if not served:
                await asyncio.sleep(SWEEP_EVERY)
                continue
            gap = LOOK_GAP if first else max(SWEEP_EVERY / len(served), LOOK_GAP)
            for name in served:
                if self.running and name not in self._drains:
                    await self._look(name)
                await asyncio.sleep(gap)
            first = False

    async def close(self, grace: float) -> None:
        self.running = False
        for looking in [*([self._discovery] if self._discovery is not None else []), *self._looks]:
            looking.cancel()
        for lanes in list(self._draining.values()):
            await lanes.hand_back_now()
        waits = [lanes.returned.wait() for lanes in self._draining.values()]
        if waits:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*waits), grace)
        for task in list(self._drains.values()):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await self.link.close()
