"""The routing stage: each published event once, fanned out to the lane endpoints that subscribe to it.

``{prefix}.route`` is bound with ``#`` on the events and the tenants exchange, so it holds every published
event once. For each, the router asks its in-memory index (warren/consumers/lane_index.py, kept current by
the configuration and the live endpoints) which lane endpoints want it, and publishes one copy per endpoint to
that endpoint's lane (the default exchange, keyed by the lane's name), the endpoint named in
``warren-endpoint``: confirmed and ``mandatory``. The event is acked only once every copy is confirmed; if
any copy fails, it is nacked back to the routing queue and routed again later (no loss; the copies already
stored are duplicates, bounded by the route prefetch, which receivers drop by ``webhook-id``). A worker killed
mid-way leaves its unacked events to RabbitMQ, which hands them to another router.

The copies of one event share its ``message_id`` (it is the ``webhook-id``). aiormq matches a returned message
to its publish by that id, so with copies in flight together a return may be reported on the wrong copy; it
does not matter here, since any failure sends the whole event back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractQueue, AbstractRobustConnection

from warren.broker import wire
from warren.broker.amqp.ack_batcher import AckBatcher
from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.consumers.lane_index import SubscriptionIndex
from warren.core.errors import describe
from warren.topology import names

__all__ = ["ROUTE_FAILURE_PAUSE", "LaneRouter"]

log = logging.getLogger("warren.router")

ROUTE_FAILURE_PAUSE = 1.0  # seconds before an event whose copies could not all be stored goes back to be routed again


class LaneRouter:
    """``await router.start(connection)`` routes until ``stop()``; ``index`` may change while it runs."""

    def __init__(self, prefix: str, lanes: int, prefetch: int, index: SubscriptionIndex) -> None:
        self.prefix = prefix
        self.lanes = lanes
        self.prefetch = prefetch
        self.index = index
        self.routed = 0  # events routed (acked), for logs and tests
        self.copies = 0  # copies confirmed into lanes
        self._channel: AbstractChannel | None = None
        self._publisher: ConfirmChannel | None = None
        self._queue: AbstractQueue | None = None
        self._tag: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._acks = AckBatcher()  # the routed events' acks, coalesced as the work queues' are

    async def start(self, connection: AbstractRobustConnection) -> None:
        self._publisher = await ConfirmChannel(connection).open()
        self._channel = await connection.channel()
        await self._channel.set_qos(prefetch_count=self.prefetch)
        self._queue = await self._channel.get_queue(names.route_queue(self.prefix), ensure=True)
        self._tag = await self._queue.consume(self._on_event)

    def _tenant_and_type(self, message: AbstractIncomingMessage) -> tuple[str | None, str]:
        """What the bindings would have matched: the routing key, split after the tenant on the tenants exchange."""
        key = message.routing_key or ""
        if message.exchange == names.tenants_exchange(self.prefix):
            tenant, _, event_type = key.partition(".")
            return tenant, event_type
        return None, key

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
        assert self._publisher is not None
        tenant, event_type = self._tenant_and_type(message)
        subscribers = self.index.subscribers(tenant, event_type)
        headers = dict(message.headers or {})
        publishes = []
        for endpoint in subscribers:
            lane = names.lane_queue(self.prefix, names.lane_of(endpoint.name, self.lanes))
            copy = wire.onward(message, {**headers, wire.H_ENDPOINT: endpoint.name})
            what = f"event {message.message_id} for lane endpoint {endpoint.name}"
            publishes.append(self._publisher.publish("", copy, lane, what=what))
        results = await asyncio.gather(*publishes, return_exceptions=True)
        failures = [r for r in results if isinstance(r, Exception)]
        if failures:
            log.error(
                "event %s not routed (%d of %d copies failed: %s); it goes back to be routed again",
                message.message_id,
                len(failures),
                len(results),
                describe(failures[0]),
            )
            await asyncio.sleep(ROUTE_FAILURE_PAUSE)
            with contextlib.suppress(Exception):
                await message.nack(requeue=True)
            self._acks.settled(message)
            return
        with contextlib.suppress(Exception):  # a lost ack: the event is routed again, its copies are duplicates
            await self._acks.ack(message)
        self.routed += 1
        self.copies += len(results)

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
