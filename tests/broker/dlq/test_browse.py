"""Holding a queue's messages (what `warren dlq list/show/replay/purge` read) on a real RabbitMQ: every message,
even when this process stalls longer than the pass's quiet time while RabbitMQ delivers (a loaded machine)."""

from __future__ import annotations

import asyncio
import importlib
import time
from typing import Any

import aio_pika
import pytest

from warren.broker.dlq.browse import QUIET, hold_messages

browse = importlib.import_module("warren.broker.dlq.browse")  # the module (the package exports a function so named)

pytestmark = pytest.mark.timeout(60)

COUNT = 2000


async def test_a_pass_that_stalls_longer_than_its_quiet_time_still_holds_every_message(
    amqp_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(f"{prefix}.held", durable=True, arguments={"x-queue-type": "quorum"})
        for start in range(0, COUNT, 200):
            await asyncio.gather(
                *(
                    channel.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key=queue.name)
                    for i in range(start, start + 200)
                )
            )
        # Given a process that stalls (blocks its event loop) for longer than QUIET just as the pass starts waiting
        # for deliveries, so that RabbitMQ hands every message over meanwhile and none is ready afterwards
        waits = 0
        real_within = browse.within

        async def stalling_within(awaitable: Any, seconds: float) -> Any:
            nonlocal waits
            waits += 1
            if waits == 1:
                asyncio.get_running_loop().call_soon(time.sleep, QUIET + 0.5)
            return await real_within(awaitable, seconds)

        monkeypatch.setattr(browse, "within", stalling_within)
        # When the queue is held
        async with hold_messages(connection, queue.name) as held:
            # Then every message is held, in the queue's order (a pass ended at the first quiet second held a few)
            assert held.depth == COUNT
            assert [m.body for m in held.messages] == [str(i).encode() for i in range(COUNT)]
        # And giving them back removed none
        check = await connection.channel()
        deadline = time.monotonic() + 10
        while (ready := (await check.declare_queue(queue.name, passive=True)).declaration_result.message_count) < COUNT:
            assert time.monotonic() < deadline, ready
            await asyncio.sleep(0.05)
        assert ready == COUNT
        await check.queue_delete(queue.name)
    finally:
        await connection.close()


async def test_a_pass_on_a_robust_connection_ends_when_another_consumer_took_what_it_waits_for(
    amqp_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = await aio_pika.connect_robust(amqp_url)  # what the admin API's recover holds
    other = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(f"{prefix}.taken", durable=True, arguments={"x-queue-type": "quorum"})
        for i in range(6):
            await channel.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key=queue.name)
        # Given another consumer that takes two of the messages just after the pass counted six ready
        taken: list[aio_pika.abc.AbstractIncomingMessage] = []
        got_two = asyncio.Event()
        real_existing_queue = browse.existing_queue

        async def counted_then_taken(on: Any, name: str) -> Any:
            counted = await real_existing_queue(on, name)
            if not taken:
                competitor = await other.channel()
                await competitor.set_qos(prefetch_count=2)

                async def take(message: aio_pika.abc.AbstractIncomingMessage) -> None:
                    taken.append(message)
                    if len(taken) == 2:
                        got_two.set()

                await (await competitor.get_queue(name)).consume(take)
                await asyncio.wait_for(got_two.wait(), 10)
            return counted

        monkeypatch.setattr(browse, "existing_queue", counted_then_taken)
        # When the queue is held
        started = time.monotonic()
        async with hold_messages(connection, queue.name) as held:
            took = time.monotonic() - started
            # Then the pass holds the four left and ends at its first quiet look, which counts none ready and two
            # consumers (a robust channel's cached declare counted six ready for good: it waited PATIENCE, 30 s)
            assert held.depth == 6
            assert [m.body for m in held.messages] == [str(i).encode() for i in range(2, 6)]
        assert QUIET < took < QUIET + 10, took  # (the competitor's start is inside it: seconds on a loaded machine)
    finally:
        await other.close()
        await connection.close()
    cleanup = await aio_pika.connect(amqp_url)
    try:
        await (await cleanup.channel()).queue_delete(f"{prefix}.taken")
    finally:
        await cleanup.close()
