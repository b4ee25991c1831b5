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

The copies of one event share its ``message_id`` (it is the ``webhook-id``), and aiormq matches a returned
message to its publish by that id; so two deliveries of one event (a publisher's retry) are routed one after
the other here, never side by side on the one publishing channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection

from warren.broker import wire
from warren.broker.amqp.ack_batcher import AckBatcher
from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm import one_at_a_time
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.consumers.admission import wanted
from warren.consumers.hooks import Settlement
from warren.consumers.lane_index import SubscriptionIndex
from warren.consumers.route_attempts import (
    RouteState,
    copy_headers,
    owed_after,
    route_dead_headers,
    route_delay,
    route_retry_headers,
    route_state,
)
from warren.core.errors import PublishError, UnroutableError, describe
from warren.topology import names
from warren.topology.delays import delay_routing_key

__all__ = ["ROUTE_FAILURE_PAUSE", "ROUTE_STAGE", "LaneRouter"]

log = logging.getLogger("warren.router")

ROUTE_FAILURE_PAUSE = 1.0  # seconds before an event that could not even be moved goes back to the routing queue
ROUTE_STAGE = "(route)"  # the routing stage's name in the settlement metrics (warren_settlements_total{endpoint})


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
        self.copies = 0  # copies confirmed into lanes
        self.retried = 0  # events sent round again through the delay chain
        self.dead_lettered = 0  # events moved to the route DLQ
        self._in_flight: dict[str, asyncio.Future[None]] = {}  # event ids being routed (one_at_a_time)
        self._channel: AbstractChannel | None = None
        self._publisher: ConfirmChannel | None = None
        self._queue: AbstractQueue | None = None
        self._tag: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._acks = AckBatcher()  # the routed events' acks, coalesced as the work queues' are
        # Set while the index is current (the worker gives it its live follower's, LiveEndpoints.current): an
        # event routed with an index that may lack a new endpoint would be acked as wanted by nobody, so events
        # wait (unacked, at most the prefetch) while the follower reconnects and reads the stream again.
        self.index_current: asyncio.Event = asyncio.Event()
        self.index_current.set()

    async def start(self, connection: AbstractRobustConnection) -> None:
        self._publisher = await ConfirmChannel(connection).open()
        self._channel = await connection.channel()
        await self._channel.set_qos(prefetch_count=self.prefetch)
        self._queue = await self._channel.get_queue(names.route_queue(self.prefix), ensure=True)
        self._tag = await self._queue.consume(self._on_event)

    async def _on_event(self, message: AbstractIncomingMessage) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        self._acks.track(message)
        try:
            await self._route(message)
        finally:
            if task is not None:
                self._tasks.discard(task)

    async def _route(self, message: AbstractIncomingMessage) -> None:
        async with one_at_a_time(self._in_flight, message.message_id or ""):
            await self._route_once(message)

    async def _route_once(self, message: AbstractIncomingMessage) -> None:
        assert self._publisher is not None
        await self.index_current.wait()
        headers = dict(message.headers or {})
        state = route_state(
            headers,
            message.exchange,
            message.routing_key,
            events=names.events_exchange(self.prefix),
            tenants=names.tenants_exchange(self.prefix),
        )
        targets = [
            e
            for e in self.index.subscribers(state.tenant, state.event_type)
            if state.owed is None or e.name in state.owed
        ]
        targets = wanted(targets, message.body, self.settled)  # payload filters (admission.py)
        copy = copy_headers(headers)
        publishes = []
        for endpoint in targets:
            lane = names.lane_queue(self.prefix, names.lane_of(endpoint.name, self.lanes))
            what = f"event {message.message_id} for lane endpoint {endpoint.name}"
            publishes.append(
                self._publisher.publish(
                    "", wire.onward(message, {**copy, wire.H_ENDPOINT: endpoint.name}), lane, what=what
                )
            )
        results = await asyncio.gather(*publishes, return_exceptions=True)
        failed = [e.name for e, r in zip(targets, results, strict=True) if isinstance(r, BaseException)]
        if failed:
            errors = [r for r in results if isinstance(r, BaseException)]
            returned = any(isinstance(r, UnroutableError) for r in errors)
            owed = owed_after([e.name for e in targets], failed, returned=returned, previous=state.owed)
            await self._route_again(
                message, headers, state, owed, f"{len(failed)} of {len(results)} copies failed: {describe(errors[0])}"
            )
            return
        with contextlib.suppress(Exception):  # a lost ack: the event is routed again, its copies are duplicates
            await self._acks.ack(message)
        self.routed += 1
        self.copies += len(results)

    async def _route_again(
        self,
        message: AbstractIncomingMessage,
        headers: dict[str, Any],
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
            key = delay_routing_key(delay, self.delay_levels, names.route_queue(self.prefix))
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
            with contextlib.suppress(Exception):
                await message.nack(requeue=True)
            self._acks.settled(message)
            return
        with contextlib.suppress(Exception):  # a lost ack: the event is routed again, its copies are duplicates
            await self._acks.ack(message)
        self.settled(ROUTE_STAGE, how)
        if how == "dead-lettered":
            self.dead_lettered += 1
        else:
            self.retried += 1

    async def stop(self) -> None:
        """Stop taking events; those being routed finish (or go back with the channel)."""
        if self._queue is not None and self._tag is not None:
            with contextlib.suppress(Exception):
                await self._queue.cancel(self._tag)
            self._tag = None

    async def close(self, grace: float) -> None:
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=grace)
        await self._acks.close()
        await close_channel(self._channel)
        if self._publisher is not None:
            await self._publisher.close()
