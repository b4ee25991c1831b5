"""The ack batcher against RabbitMQ: a settled prefix goes in one multiple ack, a straggler is acked on its own."""

from __future__ import annotations

import asyncio
import time

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage

from warren.consumers.ack_batcher import AckBatcher


async def _unacked(queue: aio_pika.abc.AbstractQueue, channel: aio_pika.abc.AbstractChannel) -> int:
    """Messages of ``queue`` delivered and not acked, as RabbitMQ counts them (passive declare on a fresh channel)."""
    declared = await channel.declare_queue(queue.name, passive=True)
    count = declared.declaration_result.message_count
    assert count is not None
    return count


@pytest.mark.timeout(20)
async def test_acks_wait_for_the_head_then_go_together_and_a_straggler_goes_alone(amqp_url: str, prefix: str) -> None:
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        await channel.set_qos(prefetch_count=10)
        queue = await channel.declare_queue(f"{prefix}.acks", durable=True, arguments={"x-queue-type": "quorum"})
        for i in range(5):
            await channel.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key=queue.name)
        delivered: list[AbstractIncomingMessage] = []
        batcher = AckBatcher(max_delay=0.002, straggler_after=0.3)

        async def on_message(message: AbstractIncomingMessage) -> None:
            batcher.track(message)
            delivered.append(message)

        await queue.consume(on_message)
        deadline = time.monotonic() + 5
        while len(delivered) < 5 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert [m.body for m in delivered] == [b"0", b"1", b"2", b"3", b"4"]

        # Message 0 is still being delivered: the acks of 1..4 wait behind it, then go on their own once stale.
        for message in delivered[1:]:
            await batcher.ack(message)
        acked_behind_head = time.monotonic()
        await asyncio.sleep(0.1)
        assert len(batcher._acked) == 4  # within straggler_after: nothing sent, none dropped
        while batcher._acked and time.monotonic() - acked_behind_head < 3:
            await asyncio.sleep(0.01)
        assert not batcher._acked
        assert time.monotonic() - acked_behind_head >= 0.3
        # Now the head: its ack completes the prefix (1..4 settled already) and is sent as a multiple ack.
        await batcher.ack(delivered[0])
        await batcher.flush()
        await asyncio.sleep(0.05)
        assert not batcher._order and not batcher._settled
    finally:
        await connection.close()  # anything not acked would go back to the queue now

    check = await aio_pika.connect(amqp_url)
    try:
        assert await _unacked(queue, await check.channel()) == 0  # every message was acked exactly once
    finally:
        await check.close()
