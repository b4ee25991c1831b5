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
