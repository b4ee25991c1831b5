"""The routing stage: each published event once, fanned out to the lane endpoints that subscribe to it.

``{prefix}.route`` is bound with ``#`` on the events and the tenants exchange, so it holds every published
event once. For each, the router asks its in-memory index (warren/consumers/lane_index.py, kept current by
the configuration and the live endpoints) which lane endpoints want it, and publishes one copy per endpoint to
that endpoint's lane (the default exchange, keyed by the lane's name), the endpoint named in
``warren-endpoint``: confirmed and ``mandatory``. The event is acked only once every copy is confirmed. If any
copy fails, the event is sent round again through the delay chain (confirmed, then acked), owing only the
copies that failed, and after ``[lanes] route_attempts`` attempts it goes to ``{prefix}.route.dlq``
(warren/consumers/route_attempts.py): no loss, no loop, no delivery limit spent. The copies stored before a
failure are duplicates, bounded by the attempts, which receivers drop by ``webhook-id``. A worker killed mid-way
leaves its unacked events to RabbitMQ, which hands them to another router.

The input is partitioned by key (docs/architecture.md, "Routing partitioned by key"): ``{prefix}.route.hash``,
a consistent-hash exchange on ``warren-key``, feeds ``[lanes] route_partitions`` queues with single active
consumer, claimed a fair share per router (warren/consumers/partition_claims.py, roster ``{prefix}.route.roster``).
Inside a partition the events of one key are routed one at a time in arrival order, different keys side by
side (warren/consumers/key_lanes.py), so the copies of one key's events reach an ordered lane in order; an event
with no ordered subscriber is routed apart from its key's turn (``_on_event``), so that an inline delivery to a
hanging endpoint holds no later event of its key; with the index current, such an event is seen for what it is
as it arrives and routed at once in its delivery's own task, never joining its key's lane (``_apart``). A failed
copy owed to an ordered lane endpoint is retried in place, holding its key (``route_retry_delay``, doubling);
an event that owes only unordered endpoints goes round through the delay chain back to its partition.

The copies of one event share its ``message_id`` (it is the ``webhook-id``), and aiormq matches a returned
message to its publish by that id; so two deliveries of one event (a publisher's retry) are routed one after
the other here, never side by side on the one publishing channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection

from warren.broker import wire
from warren.broker.amqp.ack_batcher import WindowPace
from warren.broker.amqp.confirm import Outgoing, Turns, await_turn, end_turn
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.consumers.admission import wanted
from warren.consumers.claimed_partitions import ClaimedPartitions
from warren.consumers.hooks import Settlement
from warren.consumers.inline_policy import SLOW
from warren.consumers.key_lanes import lane_key
from warren.consumers.lane_index import SubscriptionIndex
from warren.consumers.lane_inline import InlineDeliveries
from warren.consumers.route_attempts import (
    RouteState,
    copy_headers,
    owed_after,
    route_dead_headers,
    route_delay,
    route_retry_headers,
    route_state,
)
from warren.consumers.route_fences import answer_fence, fence_id
from warren.consumers.route_migration import RouteMigration
from warren.core.errors import PublishError, UnroutableError, describe
from warren.topology import names
from warren.topology.config import Endpoint
from warren.topology.delays import delay_routing_key

__all__ = ["ROUTE_FAILURE_PAUSE", "ROUTE_STAGE", "LaneRouter"]

log = logging.getLogger("warren.router")

ROUTE_FAILURE_PAUSE = 1.0  # seconds before an event that could not even be moved goes back to the routing queue
# How a route partition's acks wait behind an event still being routed (AckBatcher.for_window). A straggler goes
# alone after the longest the stage holds an event by design (a trial inline, or a wait for an inline slot or a
# new endpoint's first answer: the slow mark), and as long again for its copy's confirm. With the work queue's
# 50 ms, every later ack of a partition went alone while one event waited for its copy's confirm: 0.85 s on
# average from a broker busy with a saturated run, so a 503 endpoint's and a hanging one's copies (2% of the
# events) made 97% of the acks single frames, each a settle of its own on the quorum queue (docs/deployment.md,
# "The route partitions' acks"). Acks waiting cost nothing while the window has room, so they go at once only
# once they fill all but a sixteenth of it ("waiting": with a backlog RabbitMQ keeps the window full, and the
# events not yet routed keep the stage busy; counting them, as an ordered endpoint's partitions do at three
# quarters, a held copy's confirm still sent 80% of a saturated run's acks alone).
ROUTE_PACE = WindowPace(straggler_after=2 * SLOW, spare=1 / 16, hurry_counts="waiting")
ROUTE_STAGE = (
    names.ROUTE_STAGE
)  # the routing stage's name in the settlement metrics (warren_settlements_total{endpoint})


class LaneRouter:
    """``await router.start(connection)`` routes until ``stop()``; ``index`` may change while it runs.

    ``attempts`` and ``retry_delay`` are ``[lanes] route_attempts`` and ``route_retry_delay``; ``settled`` is told
    of each event sent round again or dead-lettered (the worker's metrics, under ``ROUTE_STAGE``), and of each lane
    endpoint whose payload filter an event did not pass (under its name, ``filtered``: admission.py).
    """

    def __init__(
        self,
        prefix: str,
        lanes: int,
        prefetch: int,
        index: SubscriptionIndex,
        *,
        delay_levels: int,
        attempts: int = 10,
        retry_delay: float = 1.0,
        settled: Callable[[str, Settlement], None] = lambda endpoint, how: None,
        partitions: int = 1,
        ordered_lanes: int = 1,
    ) -> None:
        self.prefix = prefix
        self.lanes = lanes
        self.prefetch = prefetch
        self.index = index
        self.delay_levels = delay_levels
        self.attempts = attempts
        self.retry_delay = retry_delay
        self.settled = settled
        self.routed = 0  # events routed (acked), for logs and tests
        self.copies = 0  # copies confirmed into lanes (an inline delivery's is not counted: lane_inline.py)
        self.retried = 0  # events sent round again through the delay chain
        self.dead_lettered = 0  # events moved to the route DLQ
        self.detached = 0  # events routed apart from their key's lane (no ordered subscriber): _apart, _on_event
        self.ordered_lanes = ordered_lanes
        self._in_flight: Turns = {}  # event ids being routed, one delivery of each at a time (await_turn)
        self._publisher: ConfirmChannel | None = None
        self.migration = RouteMigration(prefix)
        self._migration: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._events, self._tenants = names.events_exchange(prefix), names.tenants_exchange(prefix)
        # The route partitions this worker claimed (partition_claims.py assigns them), each into per-key lanes.
        self.partitions = ClaimedPartitions(
            [names.route_partition(prefix, i) for i in range(partitions)],
            prefetch,
            self._on_event,
            key=_route_key,
            apart=self._apart,
            pace=ROUTE_PACE,
        )
        # The endpoint served here with queues of its own under that name, if any (LaneStage sets it): a copy owed
        # to it since it was a lane endpoint goes there (an event sent round before its promotion).
        self.elsewhere: Callable[[str], Endpoint | None] = lambda name: None
        self.inline: InlineDeliveries | None = None  # first attempts made here, no lane copy (LaneStage sets it)
        # Set while the index is current (the worker gives it its live follower's, LiveEndpoints.current): an
        # event routed with an index that may lack a new endpoint would be acked as wanted by nobody, so events
        # wait (unacked, at most the prefetch) while the follower reconnects and reads the stream again.
        self.index_current: asyncio.Event = asyncio.Event()
        self.index_current.set()

    async def start(self, connection: AbstractRobustConnection) -> None:
        """Open the publishing channel; the partitions are consumed as the claims assign them."""
        self._publisher = await ConfirmChannel(connection).open()
        self.partitions.open(connection)
        # An earlier release's single routing queue, if any, moved into the partitions (route_migration.py).
        self._migration = asyncio.create_task(self.migration.run(connection, self._publisher), name="route-migration")

    def _apart(self, message: AbstractIncomingMessage) -> Coroutine[Any, Any, None] | None:
        """An event's routing to run at once apart from its key's lane (its delivery's task runs it: no lane, no
        task of its own), when the index is current and no subscriber of it is ordered; None: it takes its
        key's turn (``_on_event``). Filters are applied only once the event is let go apart, so that an event
        sent to its lane is not counted ``filtered`` twice. A promotion's fence takes its turn (``_on_event``)."""
        if not self.index_current.is_set() or fence_id(message) is not None:
            return None
        headers, state, targets = self._subscribers(message)
        if _ordered(targets):
            return None
        self.detached += 1
        targets = wanted(targets, message.body, self.settled)  # payload filters (admission.py)
        return self._route(message, headers, state, targets, False)

    def _subscribers(self, message: AbstractIncomingMessage) -> tuple[Mapping[str, Any], RouteState, list[Endpoint]]:
        """The event's headers (read, never changed), what it is, and the lane endpoints it is (still) owed to."""
        headers = message.headers or {}
        state = route_state(headers, message.exchange, message.routing_key, events=self._events, tenants=self._tenants)
        targets = self.index.subscribers(state.tenant, state.event_type)
        if state.owed is not None:
            targets = [e for e in targets if e.name in state.owed]
        if state.owed:  # owed since its lane time by an endpoint promoted since: to its own queues (_store)
            gone = sorted(state.owed.difference(e.name for e in targets))
            targets = targets + [e for e in map(self.elsewhere, gone) if e is not None]
        return headers, state, targets

    async def _on_event(self, message: AbstractIncomingMessage) -> None:
        """Route one event of a partition's key lane (one that ``_apart`` did not take: the index was not current,
        or it has an ordered subscriber). An event with no ordered subscriber is routed apart from its key
        (``PartitionLanes.detach``): only an ordered lane needs one key's events in order, and an inline
        delivery to a slow endpoint (up to its timeout) would otherwise hold every later event of its key,
        whatever endpoints those are for. It stays unacked, in the router's window, until its fate is safe.
        A promotion's fence is no event: answered once what came before it is routed (route_fences.py)."""
        if (fence := fence_id(message)) is not None:
            assert self._publisher is not None
            lanes, partition = self.partitions.lanes_of(message), self.partitions.partition_of(message)
            await answer_fence(message, fence, lanes, partition, self._publisher)
            return
        await self.index_current.wait()
        headers, state, targets = self._subscribers(message)
        targets = wanted(targets, message.body, self.settled)  # payload filters (admission.py)
        lanes = self.partitions.lanes_of(message)
        ordered = _ordered(targets)
        routing = self._route(message, headers, state, targets, ordered)
        if targets and lanes is not None and not ordered:
            lanes.detach(routing)
            self.detached += 1
            return
        await routing

    async def _route(
        self,
        message: AbstractIncomingMessage,
        headers: Mapping[str, Any],
        state: RouteState,
        targets: list[Endpoint],
        ordered: bool,
    ) -> None:
        """Route one event in the task that runs this (counted in ``_tasks``, which ``close`` waits for), no two
        deliveries of one id side by side (``await_turn``: no future, no context manager per event). ``ordered``:
        one of ``targets`` is an ordered endpoint."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        turns, event_id = self._in_flight, message.message_id or ""
        try:
            if event_id in turns:  # another delivery of this id is being routed (a publisher's retry): after it
                await await_turn(turns, event_id)
            else:
                turns[event_id] = None
            try:
                await self._route_once(message, headers, state, targets, ordered)
            finally:
                end_turn(turns, event_id)
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def _route_once(
        self,
        message: AbstractIncomingMessage,
        headers: Mapping[str, Any],
        state: RouteState,
        targets: list[Endpoint],
        ordered: bool,
    ) -> None:
        assert self._publisher is not None
        copy = copy_headers(headers)
        key = lane_key(message) if ordered else ""  # only an ordered lane's
        while True:
            results: list[BaseException | None]
            if len(targets) == 1:  # the common case: awaited in this task, with neither gather's task nor a frame
                try:
                    await self._store(message, copy, targets[0], key)
                    results = [None]
                except Exception as exc:
                    results = [exc]
            else:  # side by side, each None or what it raised, in order
                results = await asyncio.gather(
                    *(self._store(message, copy, e, key) for e in targets), return_exceptions=True
                )
            failed = [e for e, r in zip(targets, results, strict=True) if isinstance(r, BaseException)]
            if not failed:
                break
            errors = [r for r in results if isinstance(r, BaseException)]
            returned = any(isinstance(r, UnroutableError) for r in errors)
            owed = owed_after(
                [e.name for e in targets], [e.name for e in failed], returned=returned, previous=state.owed
            )
            why = f"{len(failed)} of {len(results)} copies failed: {describe(errors[0])}"
            if not any(e.ordering == "key" for e in failed) or state.attempts + 1 >= self.attempts:
                await self._route_again(message, headers, state, owed, why)
                return
            # An ordered endpoint is owed: retried in place, holding the key, so no later event of it overtakes.
            state = RouteState(state.tenant, state.event_type, state.attempts + 1, owed)
            targets = [e for e in targets if owed is None or e.name in owed]
            delay = route_delay(state.attempts, self.retry_delay)
            log.warning("event %s not routed (%s); routing attempt %d in place in %.1f s", message.message_id, why,
                        state.attempts + 1, delay)  # fmt: skip
            self.settled(ROUTE_STAGE, "retry-scheduled")
            lanes = self.partitions.lanes_of(message)
            if lanes is None or await lanes.wait(delay):
                return  # the partition is being handed back: the event returns to its head, unacked
        await self._ack(message)
        self.routed += 1

    async def _store(
        self, message: AbstractIncomingMessage, copy: dict[str, Any], endpoint: Endpoint, key: str
    ) -> None:
        """Make ``endpoint``'s copy of the event safe: its first attempt inline (warren/consumers/lane_inline.py)
        when it may have one (unordered only) and it settles there, else a copy confirmed into its lane (raises if
        not): an ordered endpoint's into its key's ordered lane."""
        assert self._publisher is not None
        headers = {**copy, wire.H_ENDPOINT: endpoint.name}
        if endpoint.home != "lane":  # an owed copy following the endpoint to its own queues, as its lane's copies do
            what = f"event {message.message_id} owed to endpoint {endpoint.name}, promoted"
            exchange = names.endpoint_exchange(self.prefix, endpoint.name)
            copied = Outgoing.of(wire.onward(message, headers))
            await self._publisher.publish(exchange, copied, message.routing_key or "", what=what)
            return
        if endpoint.ordering == "key":
            lane = names.ordered_lane_queue(self.prefix, names.ordered_lane_of(endpoint.name, key, self.ordered_lanes))
        else:
            inline = self.inline
            if inline is not None:
                runner, why = inline.take(endpoint.name)  # at once, nearly always; else it waits as acquire says
                if why is not None:
                    runner = await inline.acquire(endpoint.name, (runner, why))
                if runner is not None and await inline.deliver(runner, message, headers):
                    return
            lane = names.lane_queue(self.prefix, names.lane_of(endpoint.name, self.lanes))
        what = f"event {message.message_id} for lane endpoint {endpoint.name}"
        # Written with the other copies ready in the same loop iteration, under one lock round of the channel
        # (publish_frames.py): through aio-pika each copy held the channel's lock until the connection's writer
        # had sent it, so a busy loop capped the copies at a few dozen a second (bench/README.md, "The copies
        # waited for the channel's lock").
        await self._publisher.publish("", Outgoing.of(wire.onward(message, headers)), lane, what=what)
        self.copies += 1

    async def _ack(self, message: AbstractIncomingMessage) -> None:
        lanes = self.partitions.lanes_of(message)
        if lanes is None:
            return  # its channel is gone: RabbitMQ has it back, and routes it again (duplicates)
        try:
            await lanes.acks.ack(message)
        except Exception:  # a lost ack: the event is routed again, its copies are duplicates
            pass

    async def _route_again(
        self,
        message: AbstractIncomingMessage,
        headers: Mapping[str, Any],
        state: RouteState,
        owed: frozenset[str] | None,
        why: str,
    ) -> None:
        """Send the event round again through the delay chain, or past its attempts to the route DLQ; then ack.

        Should even that move fail (RabbitMQ away), the event is handed back to the routing queue after a pause,
        as every failed move in Warren is (warren/consumers/settling.py).
        """
        assert self._publisher is not None
        attempts = state.attempts + 1
        if attempts >= self.attempts:
            reason = f"not routed after {attempts} attempts ([lanes] route_attempts = {self.attempts}); last: {why}"
            log.error("event %s to the route DLQ: %s", message.message_id, reason)
            exchange, key = names.dead_exchange(self.prefix), names.route_dead_key()
            moved = route_dead_headers(headers, state, owed, reason, int(time.time() * 1000))
            how: Settlement = "dead-lettered"
        else:
            delay = route_delay(attempts, self.retry_delay)
            log.warning(
                "event %s not routed (%s); routing attempt %d in %.1f s", message.message_id, why, attempts + 1, delay
            )
            exchange = names.delay_exchange(self.prefix, self.delay_levels - 1)
            partition = self.partitions.partition_of(message) or names.route_partition(self.prefix, 0)
            key = delay_routing_key(delay, self.delay_levels, partition)
            moved = route_retry_headers(headers, state, owed)
            how = "retry-scheduled"
        try:
            await self._publisher.publish(
                exchange, wire.onward(message, moved), key, what=f"event {message.message_id} ({how})"
            )
        except PublishError as exc:
            log.error(
                "could not move event %s (%s); it goes back to the routing queue", message.message_id, describe(exc)
            )
            await asyncio.sleep(ROUTE_FAILURE_PAUSE)
            self.partitions.hand_back(message)  # the whole partition, to its head in order
            return
        await self._ack(message)
        self.settled(ROUTE_STAGE, how)
        if how == "dead-lettered":
            self.dead_lettered += 1
        else:
            self.retried += 1

    async def stop(self) -> None:
        """Stop taking events; those being routed finish, the rest go back with their partitions' channels."""
        await self.partitions.stop()

    async def close(self, grace: float) -> None:
        if self._migration is not None:
            self._migration.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._migration
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        await self.partitions.close(grace)
        if self._publisher is not None:
            await self._publisher.close()


def _ordered(targets: list[Endpoint]) -> bool:
    """Whether any of ``targets`` is an ordered endpoint (a loop: cheaper than ``any`` over a generator)."""
    for endpoint in targets:  # noqa: SIM110
        if endpoint.ordering == "key":
            return True
    return False


def _route_key(message: AbstractIncomingMessage) -> str:
    """An event's lane in its partition: its ``warren-key``; without one (a raw AMQP publish), a lane of its own."""
    return lane_key(message) or f"\x00{message.delivery_tag}"
