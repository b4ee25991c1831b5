"""Helpers for the endpoint-health tests: waiting on conditions, reading queues and operator events."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import aio_pika
import orjson
from aio_pika.abc import AbstractIncomingMessage

from warren.topology import names
from warren.topology.config import WarrenConfig


async def wait_until(predicate: Callable[[], bool], timeout: float, what: str = "condition") -> float:
    """Poll ``predicate`` every 20 ms until it holds; return the time it took, or fail the test."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what} not reached within {timeout}s")
        await asyncio.sleep(0.02)
    return time.monotonic() - started


async def _declared(config: WarrenConfig, queue: str) -> tuple[int, int]:
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        result = (await channel.declare_queue(queue, passive=True)).declaration_result
        return int(result.message_count or 0), int(result.consumer_count or 0)
    finally:
        await connection.close()


async def message_count(config: WarrenConfig, queue: str) -> int:
    """Messages ready in a queue, exact (a passive declare, not the management API's sampled figure)."""
    return (await _declared(config, queue))[0]


async def consumer_count(config: WarrenConfig, queue: str) -> int:
    """Consumers of a queue, exact (a passive declare)."""
    return (await _declared(config, queue))[1]


async def settled_count(config: WarrenConfig, queue: str, expected: int, timeout: float = 10.0) -> int:
    """The queue's exact count once it equals ``expected`` (polled), or its last count at the deadline."""
    deadline = time.monotonic() + timeout
    while (count := await message_count(config, queue)) != expected and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return count


async def dlq_count(config: WarrenConfig, endpoint: str) -> int:
    return await message_count(config, names.dlq(config.broker.prefix, endpoint))


BARRIER = "test.barrier"


class OperatorInbox:
    """A queue bound to the operator exchange (``#``) collecting the events' envelopes."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.routing_keys: list[str] = []
        self.exchange: aio_pika.abc.AbstractExchange | None = None

    async def barrier(self, timeout: float = 10.0) -> None:
        """Publish a marker of our own to the operator exchange and wait until it arrives: every event published
        (confirmed) before this call has then arrived too, so the lists are complete up to now."""
        assert self.exchange is not None
        marker = uuid.uuid4().hex
        await self.exchange.publish(
            aio_pika.Message(orjson.dumps({"type": BARRIER, "data": {"marker": marker}})), routing_key=BARRIER
        )
        await wait_until(lambda: any(e["data"].get("marker") == marker for e in self.events), timeout, "the barrier")
        kept = [(k, e) for k, e in zip(self.routing_keys, self.events, strict=True) if e["type"] != BARRIER]
        self.routing_keys = [k for k, _ in kept]
        self.events = [e for _, e in kept]

    def types(self, endpoint: str | None = None) -> list[str]:
        return [e["type"] for e in self.events if endpoint is None or e.get("data", {}).get("endpoint") == endpoint]

    async def wait_for(self, event_type: str, endpoint: str, timeout: float = 10.0) -> dict[str, Any]:
        await wait_until(lambda: event_type in self.types(endpoint), timeout, f"{event_type} for {endpoint}")
        return next(e for e in self.events if e["type"] == event_type and e["data"].get("endpoint") == endpoint)


@asynccontextmanager
async def operator_inbox(config: WarrenConfig) -> AsyncIterator[OperatorInbox]:
    inbox = OperatorInbox()
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(exclusive=True, arguments={"x-queue-type": "classic"})
        await queue.bind(names.operator_exchange(config.broker.prefix), routing_key="#")
        inbox.exchange = await channel.get_exchange(names.operator_exchange(config.broker.prefix), ensure=False)

        async def on_message(message: AbstractIncomingMessage) -> None:
            inbox.routing_keys.append(message.routing_key or "")
            inbox.events.append(orjson.loads(message.body))

        await queue.consume(on_message, no_ack=True)
        yield inbox
    finally:
        with contextlib.suppress(Exception):  # gone already if RabbitMQ restarted meanwhile
            await connection.close()
