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
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.consumers.claimed_partitions import ClaimedPartitions
from warren.consumers.worker import Worker
from warren.topology import names

pytestmark = pytest.mark.timeout(120)


async def wait_consumers(config: Any, queue: str, expected: int, timeout: float = 10.0) -> int:
    deadline = time.monotonic() + timeout
    while (count := await consumer_count(config, queue)) != expected and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return count


@pytest.mark.parametrize("race", ["resumed and reassigned", "resumed and stopped"])
async def test_a_partition_consumed_and_stopped_at_once_ends_with_one_consumer_or_none(
    endpoint_config: Any, receiver: Receiver, publish: Any, race: str
) -> None:
    # Given a worker serving an ordered endpoint of one partition that stopped consuming (its partition handed
    # back; not a pause, which the worker's health control would undo at once)
    config = await endpoint_config([{"name": "keyed", "ordering": "key", "partitions": 1}])
    partition = names.partition_queue(config.broker.prefix, "keyed", 0)
    async with Worker(config) as worker:
        runner = worker.runners["keyed"]
        for round_ in range(5):
            await runner.stop_consuming()
            assert await wait_consumers(config, partition, 0) == 0
            if race == "resumed and reassigned":
                # When it is resumed and reassigned at once (each consumes the partition)
                await asyncio.gather(runner.resume(), runner.assign(partition))
            else:
                # When it is resumed and stopped at once (a parked probe's partition consumed again as the circuit's
                # pause stops it: the long run's stall, where the stop cancelled a consume that had a tag but no
                # lanes yet, on the previous channel, and the new channel went on consuming, untracked)
                await asyncio.gather(runner.resume(), runner.stop_consuming())
                # Then no channel is left consuming it (it would be its single active consumer for good)
                assert await wait_consumers(config, partition, 0) == 0, f"round {round_}"
                await runner.resume()
            # Then the partition has one consumer, and keeps delivering in order
            assert await wait_consumers(config, partition, 1) == 1, f"round {round_}"
            await publish(config, [Event(type="x.y", data={}, key="k", sequence=round_)])
            await receiver.wait_for(lambda r, n=round_ + 1: len(r.ok_ids()) == n, 10)
    assert [r.json["sequence"] for r in receiver.received] == list(range(5))


async def test_a_claimed_partition_given_up_while_its_consume_is_on_its_way_keeps_no_consumer(
    endpoint_config: Any,
) -> None:
    # Given a single-active-consumer queue consumed through ClaimedPartitions (the routing stage's and the ordered
    # lanes' way of consuming)
    config = await endpoint_config([{"name": "keyed", "ordering": "key", "partitions": 1}])
    partition = names.partition_queue(config.broker.prefix, "keyed", 0)
    connection = await connect(config.broker.url)
    claimed = ClaimedPartitions([partition], 4, lambda message: asyncio.sleep(0))
    claimed.open(connection)
    try:
        for round_ in range(5):
            # When it is assigned and given up at once (a rebalance that changed its mind)
            await asyncio.gather(claimed.assign(partition), claimed.unassign(partition))
            # Then no consumer is left on it
            assert await wait_consumers(config, partition, 0) == 0, f"round {round_}"
        # And assigned, it is consumed once
        await claimed.assign(partition)
        assert await wait_consumers(config, partition, 1) == 1
    finally:
        await claimed.close(5)
        await connection.close()
