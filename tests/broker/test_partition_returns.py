"""What the per-key lanes of an ordered endpoint rely on, checked on the real broker (3.10 and 4.x alike).

A partition is consumed with a prefetch window, and its deliveries are acked out of order across keys. When
the channel or the connection goes away, a quorum queue must put every unacked delivery back at its *head*,
in the order it was delivered, ahead of what was never delivered, and give them to the next single active
consumer first (docs/architecture.md, "Per-key lanes").
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage

from warren.broker.applier import apply_setup
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(30)

ACKED = {1, 3, 4, 7, 9}  # acked out of order, as lanes of different keys finish


async def _take(channel: aio_pika.abc.AbstractChannel, queue: str, count: int) -> list[AbstractIncomingMessage]:
    """Consume ``count`` deliveries on ``channel`` without settling them."""
    got: list[AbstractIncomingMessage] = []
    done = asyncio.Event()

    async def on_message(message: AbstractIncomingMessage) -> None:
        got.append(message)
        if len(got) >= count:
            done.set()

    q = await channel.get_queue(queue, ensure=False)
    await q.consume(on_message)
    await asyncio.wait_for(done.wait(), 10)
    return got


@pytest.mark.parametrize("how", ["channel", "connection"])
async def test_unacked_deliveries_return_to_the_head_in_delivery_order(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str, how: str
) -> None:
    # Given a partition queue as setup declares it (quorum, single active consumer, Warren's delivery limit)
    config = make_config(
        [{"name": "ledger", "url": "http://127.0.0.1:9/l", "events": ["#"], "ordering": "key", "partitions": 1}]
    )
    await apply_setup(config)
    partition = names.partition_queue(prefix, "ledger", 0)
    first = await aio_pika.connect(amqp_url)
    second = await aio_pika.connect(amqp_url)
    try:
        publishing = await first.channel(publisher_confirms=True)
        for i in range(16):
            await publishing.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key=partition)
        # And a consumer holding a window of 12 deliveries, acking 5 of them out of order
        held = await first.channel()
        await held.set_qos(prefetch_count=12)
        window = await _take(held, partition, 12)
        assert [int(m.body) for m in window] == list(range(12))
        for i in sorted(ACKED, reverse=True):
            await window[i].ack()
        # And a second worker's consumer waiting on the same partition (single active consumer)
        waiting = await second.channel()
        await waiting.set_qos(prefetch_count=16)
        taken = asyncio.create_task(_take(waiting, partition, 16 - len(ACKED)))
        await asyncio.sleep(0.2)
        assert not taken.done()
        # When the first consumer's channel (or its whole connection: a worker killed) goes away
        if how == "channel":
            await held.close()
        else:
            await first.close()
        redelivered = await taken
    finally:
        for connection in (first, second):
            if not connection.is_closed:
                await connection.close()
    # Then the next consumer gets the unacked ones first, in their order, then the rest of the queue
    expected = [i for i in range(12) if i not in ACKED] + list(range(12, 16))
    assert [int(m.body) for m in redelivered] == expected
