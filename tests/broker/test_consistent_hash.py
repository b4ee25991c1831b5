"""The consistent-hash exchange of an ordered endpoint, on a real RabbitMQ: keys spread, and a key stays put."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

import aio_pika

from tests.support.setup_helpers import Collector
from warren.broker.applier import apply_setup
from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import HASH_HEADER

PARTITIONS = 8
KEYS = 1000
STICKY_KEYS = 5  # keys published many times, to see they never move
REPEATS = 20


async def test_keys_spread_over_all_partitions_and_a_key_stays_in_one(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str
) -> None:
    # Given an ordered endpoint with 8 partitions
    endpoint = {"name": "billing", "url": "http://127.0.0.1:9/b", "events": ["order.*"], "ordering": "key"}
    config = make_config([{**endpoint, "partitions": PARTITIONS}])
    await apply_setup(config)
    partitions = [names.partition_queue(prefix, "billing", i) for i in range(PARTITIONS)]
    events = [Event("order.paid", {"n": i}, key=f"customer-{i}") for i in range(KEYS)]
    events += [Event("order.paid", {"r": r}, key=f"sticky-{k}") for k in range(STICKY_KEYS) for r in range(REPEATS)]
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        publisher = await Publisher.open(connection, prefix)
        consumer = await connection.channel()
        await consumer.set_qos(prefetch_count=500)
        # When 1,000 distinct keys and 5 repeated keys are published through the events exchange
        async with Collector(consumer, partitions) as collector:
            report = await publisher.publish_many(events)
            arrivals = await collector.wait(len(events), timeout=10.0)
        await publisher.close()
    assert not report.failed and len(report.confirmed) == len(events)
    assert len(arrivals) == len(events)
    # Then every partition gets a fair share of the distinct keys (expected 125 each)
    where: dict[str, set[str]] = defaultdict(set)
    for arrival in arrivals:
        where[str((arrival.message.headers or {})[HASH_HEADER])].add(arrival.queue)
    spread = Counter(next(iter(where[f"customer-{i}"])) for i in range(KEYS))
    assert set(spread) == set(partitions)
    expected = KEYS / PARTITIONS
    assert all(0.5 * expected <= n <= 1.6 * expected for n in spread.values()), spread
    # And each key, distinct or repeated, always lands in the same partition
    assert all(len(queues) == 1 for queues in where.values())
    assert all(
        sum(1 for a in arrivals if (a.message.headers or {})[HASH_HEADER] == f"sticky-{k}") == REPEATS
        for k in range(STICKY_KEYS)
    )
