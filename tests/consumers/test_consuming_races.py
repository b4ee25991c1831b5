"""Consuming a partition again, asked for twice at once (a resume and a reassignment, or a handed-back
partition's reopening): one consumer, one channel, and the partition keeps delivering. Real RabbitMQ, the
Worker in this process, a real receiver.

Seen in a loaded run on RabbitMQ 4.0.5 before the fix: a probe's resume and the reopening of a handed-back
partition each consumed it; the channel left behind held the partition as its single active consumer, feeding
lanes that were gone, and the ordered endpoint stopped for good.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.support.health import consumer_count
from tests.support.receiver import Receiver
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology import names

pytestmark = pytest.mark.timeout(120)


async def test_a_partition_asked_to_be_consumed_twice_at_once_gets_one_consumer_and_delivers(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a worker serving an ordered endpoint of one partition that stopped consuming (its partition handed
    # back; not a pause, which the worker's health control would undo at once)
    config = await endpoint_config([{"name": "keyed", "ordering": "key", "partitions": 1}])
    partition = names.partition_queue(config.broker.prefix, "keyed", 0)
    async with Worker(config) as worker:
        runner = worker.runners["keyed"]
        for round_ in range(5):
            await runner.stop_consuming()
            deadline = time.monotonic() + 10
            while await consumer_count(config, partition) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert await consumer_count(config, partition) == 0
            # When it is resumed and reassigned at once (each consumes the partition)
            await asyncio.gather(runner.resume(), runner.assign(partition))
            # Then the partition has one consumer, and keeps delivering in order
            assert await consumer_count(config, partition) == 1, f"round {round_}"
            await publish(config, [Event(type="x.y", data={}, key="k", sequence=round_)])
            await receiver.wait_for(lambda r, n=round_ + 1: len(r.ok_ids()) == n, 10)
    assert [r.json["sequence"] for r in receiver.received] == list(range(5))
