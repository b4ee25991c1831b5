"""The lane path on a RabbitMQ 3.10 node with the default open-files limit of 1024 (issue 34, part 7): far more lane
endpoints than the node could give queues of their own, applied live, served by a worker, the queue count unchanged.

Runs only against a node of its own (``scripts/cluster lowfiles up``; tests/support/low_files.py), like the capacity
test that fills such a node (tests/broker/test_capacity.py).
"""

from __future__ import annotations

import asyncio
import random

import aio_pika
import pytest

from tests.broker.test_capacity import SECTIONS, fixed_quorum_queues, overflowing
from tests.conftest import TEST_SECRET, TEST_STORE_KEY
from tests.support.health import wait_until
from tests.support.low_files import LOW_MANAGEMENT, low_node_vhost, needs_low_node
from tests.support.receiver import Receiver
from warren.broker.amqp.connection import connect
from warren.broker.applier import apply_setup
from warren.broker.capacity import read_nodes
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.broker.publisher import Publisher
from warren.consumers.worker import Worker
from warren.topology.config import Endpoint, WarrenConfig

LANE_ENDPOINTS = 500
SAMPLE = 25


@pytest.mark.lowfiles
@needs_low_node
@pytest.mark.timeout(300)
async def test_a_low_limit_node_serves_500_live_lane_endpoints_with_no_queue_of_their_own() -> None:
    async with low_node_vhost("warren-lowfd-lanes") as (api, url):
        broker = {"url": url, "management_url": LOW_MANAGEMENT, "prefix": "low"}
        config = WarrenConfig(broker=broker, lanes={"count": 8}, store={"keys": [TEST_STORE_KEY]}, **SECTIONS)
        # Given a 1024-open-files node on which dedicated endpoints would stop far short of 500
        nodes = await read_nodes(api)
        ceiling = overflowing(nodes, fixed_quorum_queues(config))
        assert ceiling is not None and nodes[0].fd_total <= 4096, "not a low-limit 3.10 node"
        assert ceiling * 3 < LANE_ENDPOINTS, ceiling
        await apply_setup(config)
        async with Receiver() as receiver, Worker(config) as worker:
            queues_before = {q["name"] for q in await api.queues(stats=False)}  # the worker's own among them
            # When 500 lane endpoints are applied live (each wants its own event type)
            for i in range(LANE_ENDPOINTS):
                await apply_endpoint(config, lane_endpoint(receiver, i))
            await wait_until(
                lambda: worker.lanes is not None and len(worker.lanes.index) >= LANE_ENDPOINTS,
                60,
                "every lane endpoint served",
            )
            # Then the node holds the queues it held before
            assert {q["name"] for q in await api.queues(stats=False)} == queues_before
            # and a sample of them gets its events, and only its own
            sample = random.Random(34).sample(range(LANE_ENDPOINTS), SAMPLE)
            events = {i: [Event(type=f"order.n{i}", data={"k": k}) for k in range(2)] for i in sample}
            await publish(url, [e for group in events.values() for e in group])

            def each_got_its_own(r: Receiver) -> bool:
                return all(r.ok_ids(f"/hook/tail-{i}") == {e.id for e in events[i]} for i in sample)

            await receiver.wait_for(each_got_its_own, 60)
            assert len(receiver.received) == 2 * SAMPLE
        # And the node still takes new connections
        for _ in range(3):
            probe = await asyncio.wait_for(aio_pika.connect(url), 10)
            await probe.close()


def lane_endpoint(receiver: Receiver, i: int) -> Endpoint:
    fields = {"name": f"tail-{i}", "url": f"{receiver.url}/tail-{i}", "events": [f"order.n{i}"], "home": "lane"}
    return Endpoint.model_validate({**fields, "secret": TEST_SECRET})


async def publish(url: str, events: list[Event]) -> None:
    connection = await connect(url)
    try:
        report = await (await Publisher.open(connection, "low")).publish_many(events)
        assert not report.failed, report.failed
    finally:
        await connection.close()
