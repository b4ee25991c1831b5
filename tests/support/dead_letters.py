"""Dead letters for tests: made fast (published straight into a DLQ with the worker's own headers) or
made for real (a worker exhausting events against a failing receiver); and queues read exactly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import aio_pika
from aio_pika.abc import AbstractIncomingMessage

from warren.broker.amqp.channels import SETTLE_PAUSE
from warren.broker.events import Event, encode_event
from warren.consumers.delivery import dead_headers, parse_delivery
from warren.topology import names
from warren.topology.config import WarrenConfig


async def seed_dead_letters(
    config: WarrenConfig,
    endpoint: str,
    events: Sequence[Event],
    *,
    dead_ms: Sequence[int] | None = None,
    lanes: int = 0,
) -> None:
    """Publish each event into the endpoint's DLQ as the worker would after two failed attempts (HTTP 500).

    ``lanes`` > 0: a lane endpoint among that many lanes: into its lane's shared DLQ, naming it as the worker does.
    """
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(names.dead_exchange(config.broker.prefix))
        routing_key = endpoint
        if lanes:
            exchange = channel.default_exchange
            routing_key = names.lane_dlq(config.broker.prefix, names.lane_of(endpoint, lanes))
        pending: list[Any] = []
        for index, event in enumerate(events):
            message = encode_event(event)
            now = int(time.time() * 1000)
            delivery = parse_delivery(message.body, event.id, message.headers, now, max_payload=1 << 20)
            headers = dead_headers(
                message.headers,
                delivery,
                endpoint=endpoint,
                reason="max_attempts (2) reached; last: HTTP 500",
                attempt_ms=now,
                status=500,
                error="HTTP 500",
                duration=0.004,
            )
            headers["warren-attempt"] = 2
            if dead_ms is not None:
                headers["warren-dead-ms"] = dead_ms[index]
            message.headers = headers
            pending.append(exchange.publish(message, routing_key=routing_key))
            if len(pending) >= 200:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await connection.close()


ACK_EVERY = 100


async def drain(config: WarrenConfig, queue: str, *, quiet: float = 0.5) -> list[AbstractIncomingMessage]:
    """Take every message out of a queue, in order, stopping once ``quiet`` seconds passed with nothing new and
    the queue has nothing ready.

    A consumer, not basic.get: quorum queues with a single active consumer refuse basic.get.
    """
    connection = await aio_pika.connect(config.broker.url)
    got: list[AbstractIncomingMessage] = []
    arrived = asyncio.Event()
    try:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=500)
        q = await channel.get_queue(queue)

        acked = 0  # the highest delivery tag acked: acks go every ACK_EVERY messages, multiple=True (one frame
        # per message made a drain of 12,000 letters take minutes on a loaded machine)

        async def ack_upto(message: AbstractIncomingMessage) -> None:
            nonlocal acked
            tag = message.delivery_tag or 0
            if tag > acked:
                acked = tag
                await message.ack(multiple=True)

        async def take(message: AbstractIncomingMessage) -> None:
            got.append(message)
            if len(got) % ACK_EVERY == 0:
                await ack_upto(max(got[-ACK_EVERY:], key=lambda m: m.delivery_tag or 0))
            arrived.set()

        await q.consume(take)
        depth = await connection.channel()
        stalled = 0.0
        while True:
            arrived.clear()
            try:
                await asyncio.wait_for(arrived.wait(), quiet)
                stalled = 0.0
            except TimeoutError:
                # Quiet is not empty on a busy machine (a quorum queue can pause its deliveries for longer):
                # done only when the queue has nothing ready either.
                ready = (await depth.declare_queue(queue, passive=True)).declaration_result.message_count
                if not ready:
                    if got:
                        await ack_upto(max(got, key=lambda m: m.delivery_tag or 0))
                        await asyncio.sleep(SETTLE_PAUSE)  # the acks apply before the close returns the rest
                    return got
                stalled += quiet
                assert stalled < 30, f"{queue}: {ready} messages ready but none delivered for {stalled:g} s"
    finally:
        await connection.close()


async def peek_ids(config: WarrenConfig, queue: str) -> list[str]:
    """The message ids in a queue, head first, read without removing any (consume unacked, then close).

    Read once the queue's ready count held still for 0.3 s: messages a reader that just ended was holding
    come back a moment after its channel closed (a loaded machine: long enough for a read to find none)."""
    from tests.support.health import message_count
    from warren.broker.dlq.browse import browse

    previous, deadline = -1, time.monotonic() + 10
    while (ready := await message_count(config, queue)) != previous and time.monotonic() < deadline:
        previous = ready
        await asyncio.sleep(0.3)
    connection = await aio_pika.connect(config.broker.url)
    try:
        letters, _ = await browse(connection, queue)
        return [letter.event_id for letter in letters]
    finally:
        await connection.close()


async def _wait_count(
    config: WarrenConfig, queue: str, done: Callable[[int], bool], timeout: float, pause: float
) -> int:
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        deadline = time.monotonic() + timeout
        while True:
            declared = await channel.declare_queue(queue, passive=True)
            count = int(declared.declaration_result.message_count or 0)
            if done(count) or time.monotonic() > deadline:
                return count
            await asyncio.sleep(pause)
    finally:
        await connection.close()


async def wait_depth(config: WarrenConfig, queue: str, expected: int, timeout: float = 10) -> int:
    """Wait until the queue holds exactly ``expected`` ready messages (AMQP count); return the last count."""
    return await _wait_count(config, queue, lambda count: count == expected, timeout, 0.05)


async def wait_depth_at_least(config: WarrenConfig, queue: str, least: int, timeout: float = 60) -> int:
    """Wait until the queue holds at least ``least`` ready messages (looked at every 5 ms); return the count.

    A precondition, so it fails when not met (it returned the short count, and a loaded run then failed later
    with a misleading figure: a CLI replay had moved 71 of the 300 awaited in 30 s, with two suites at once).
    """
    count = await _wait_count(config, queue, lambda count: count >= least, timeout, 0.005)
    assert count >= least, f"{queue} held {count} ready messages after {timeout:g} s, not the {least} awaited"
    return count


def dlq_name(config: WarrenConfig, endpoint: str) -> str:
    return names.dlq(config.broker.prefix, endpoint)
