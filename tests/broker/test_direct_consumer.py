"""A consumer's messages handled in aiormq's task, not a second one (warren/broker/amqp/direct_consumer.py)."""

from __future__ import annotations

import asyncio
import time

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage

from warren.broker.amqp.channels import consume_on
from warren.broker.amqp.direct_consumer import consume_directly


@pytest.mark.timeout(20)
async def test_messages_reach_the_callback_as_aio_pika_made_them_in_one_task_and_are_acked(
    amqp_url: str, prefix: str
) -> None:
    connection = await aio_pika.connect_robust(amqp_url)
    try:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=10)
        queue = await channel.declare_queue(f"{prefix}.direct", durable=True, arguments={"x-queue-type": "quorum"})
        seen: list[tuple[bytes, str | None, object, str]] = []

        async def on_message(message: AbstractIncomingMessage) -> None:
            task = asyncio.current_task()
            assert task is not None
            runs = getattr(task.get_coro(), "__qualname__", "")  # the coroutine the task was started with
            seen.append((message.body, message.message_id, message.headers.get("warren-key"), runs))
            await message.ack()

        tag = await queue.consume(on_message, consumer_tag=f"{prefix}-direct")
        assert await consume_directly(queue, tag, on_message) is True
        for i in range(3):
            message = aio_pika.Message(f"m{i}".encode(), message_id=f"evt_{i}", headers={"warren-key": f"k{i}"})
            await channel.default_exchange.publish(message, routing_key=queue.name)
        deadline = time.monotonic() + 5
        while len(seen) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        # The same message as aio-pika's consumer makes, handed over in aiormq's task (no task of aio-pika's).
        assert [(body, mid, key) for body, mid, key, _ in seen] == [
            (b"m0", "evt_0", "k0"),
            (b"m1", "evt_1", "k1"),
            (b"m2", "evt_2", "k2"),
        ]
        assert {coro for *_, coro in seen} == {"_delivered"}
        await queue.cancel(tag)
        await asyncio.sleep(0.2)
        declared = await channel.declare_queue(queue.name, passive=True)
        assert declared.declaration_result.message_count == 0  # every ack applied: none redelivered

        # A consumer that is gone is left alone.
        assert await consume_directly(queue, tag, on_message) is False
        await queue.delete(if_unused=False, if_empty=False)
    finally:
        await connection.close()


@pytest.mark.timeout(20)
async def test_consume_on_hands_a_partition_s_messages_over_in_one_task_in_the_order_they_came(
    amqp_url: str, prefix: str
) -> None:
    # Given a queue consumed the way an ordered endpoint's partitions, claimed partitions and parks are, with 10
    # messages waiting when it is consumed (the first of them may reach the callback through aio-pika's own task,
    # before consume_on replaces it) and 10 published after
    connection = await aio_pika.connect_robust(amqp_url)
    try:
        setup = await connection.channel()
        queue = await setup.declare_queue(f"{prefix}.direct-on", durable=True, arguments={"x-queue-type": "quorum"})

        async def publish(numbers: range) -> None:
            for i in numbers:
                await setup.default_exchange.publish(aio_pika.Message(f"m{i}".encode()), routing_key=queue.name)

        await publish(range(10))
        seen: list[tuple[bytes, str]] = []

        async def dispatch(message: AbstractIncomingMessage) -> None:  # as a partition's: order set before any wait
            task = asyncio.current_task()
            assert task is not None
            seen.append((message.body, getattr(task.get_coro(), "__qualname__", "")))
            await asyncio.sleep(0.001 * (20 - len(seen)))  # the earlier ones wait longer
            await message.ack()

        # When it is consumed through consume_on
        channel = await connection.channel()
        consumed = await consume_on(channel, queue.name, 20, dispatch, f"{prefix}-on")
        await publish(range(10, 20))
        deadline = time.monotonic() + 5
        while len(seen) < 20 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        # Then every message reached the callback in the order published, across the switch of path too, and those
        # published after the consume in aiormq's task
        assert [body for body, _ in seen] == [f"m{i}".encode() for i in range(20)]
        assert {coro for _, coro in seen[10:]} == {"_delivered"}
        await consumed.cancel(f"{prefix}-on")
        await queue.delete(if_unused=False, if_empty=False)
    finally:
        await connection.close()
