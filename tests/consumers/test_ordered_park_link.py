"""A park queue's drain outlives its connection (warren/consumers/park_link.py): RabbitMQ closing the parks'
connection under a drain makes it start over on a new one, and every parked event is delivered (issue 34)."""

from __future__ import annotations

import asyncio
from typing import Any

import aio_pika
import pytest

from tests.consumers.test_ordered_lanes import all_delivered, keyed, violations_at
from tests.consumers.test_ordered_parks import admin, park_depth, two_in_one_lane, wait_gone
from tests.support.connections import close_named
from tests.support.receiver import Receiver, always
from warren.broker.management import ManagementClient
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(90)


async def park_consumers(config: WarrenConfig) -> int:
    """The park queue's consumers (0 when it does not exist)."""
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(names.ordered_park_queue(config.broker.prefix, "held"), passive=True)
        return queue.declaration_result.consumer_count or 0
    except Exception:
        return 0
    finally:
        await connection.close()


async def until(check: Any, timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.1)


async def test_a_drain_whose_connection_rabbitmq_closes_starts_over_and_delivers_every_parked_event(
    make_config: Any, receiver: Receiver, publish: Any, management: ManagementClient
) -> None:
    # Given a paused ordered lane endpoint whose copies are parked, and drained by the worker (held in place)
    receiver.behaviour = always(200)
    config = await two_in_one_lane(make_config, receiver)
    await admin(config, "pause")
    events = keyed([f"k{i}" for i in range(6)], 5)
    async with Worker(config) as worker:
        assert worker.lanes is not None
        link = worker.lanes.parks.link
        await publish(config, events)
        await receiver.wait_for(all_delivered(events, ["mate"]), 30)
        await until(lambda: _consumed(config), 20, "the park queue was never drained")
        opened = link.opened
        # When RabbitMQ closes the parks' connection under the drain (as it closed the worker's in issue 34)
        await close_named(management, link.name)
        # and the endpoint is resumed
        await admin(config, "resume")
        # Then the drain starts over on a new connection: every parked event is delivered, each key in order,
        # and the park queue goes
        await receiver.wait_for(all_delivered(events, ["held"]), 45)
        await wait_gone(config, 30)
        assert link.opened > opened
    assert violations_at(receiver, ["held", "mate"]) == []


async def _consumed(config: WarrenConfig) -> bool:
    return await park_depth(config) is not None and await park_consumers(config) > 0
