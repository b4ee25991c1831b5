"""The queues a worker declares for itself (rosters, partition claims, probe locks, its state feed) are durable
or exclusive: RabbitMQ 4.x can refuse transient non-exclusive queues, and the 4.x test node does."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.support.receiver import Receiver
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.consumers.worker import Worker
from warren.topology.planner import plan_topology

pytestmark = pytest.mark.timeout(120)


async def test_a_worker_starts_with_only_durable_or_exclusive_queues_of_its_own(
    endpoint_config: Any, receiver: Receiver, publish: Any, management: ManagementClient, prefix: str
) -> None:
    # Given a rate-limited endpoint (a roster counts its workers) and an ordered one (partition claims)
    config = await endpoint_config(
        [
            {"name": "limited", "events": ["l.*"], "rate_limit": 50},
            {"name": "keyed", "events": ["k.*"], "ordering": "key", "partitions": 2},
        ],
        worker={"rebalance_interval": "200ms"},
    )
    planned = {q.name for q in plan_topology(config).queues}
    # When a worker starts (on a node refusing transient non-exclusive queues it would fail here) and delivers
    async with Worker(config):
        await publish(config, [Event(type="l.x", data={}), Event(type="k.x", data={}, key="a", sequence=0)])
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 2, 20)
        own: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + 20
        while not (any(n.endswith(".roster") and ".health." in n for n in own) and any(".owner" in n for n in own)):
            assert time.monotonic() < deadline, f"the worker's own queues never showed: {sorted(own)}"
            await asyncio.sleep(0.3)
            own = {
                q["name"]: q
                for q in await management.queues()
                if q["name"].startswith(prefix + ".") and q["name"] not in planned
            }
        # Then every queue it declared for itself is durable or exclusive, never transient and shared
        shared_transient = [n for n, q in own.items() if not q.get("durable") and not q.get("exclusive")]
        assert not shared_transient, shared_transient
        rosters = [n for n in own if n.endswith(".roster")]
        assert len(rosters) == 2 and all(own[n]["durable"] and own[n]["auto_delete"] for n in rosters)
