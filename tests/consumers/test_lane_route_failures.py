"""The routing stage's failures, bounded and lossless (warren/consumers/route_attempts.py): an event whose copies
cannot all be stored goes round again through the delay chain, owing only what failed, and after
``[lanes] route_attempts`` attempts lands in ``{prefix}.route.dlq``; never a nack loop, never a loss."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from tests.consumers.test_lanes_flow import LANES, by_path, lane_endpoint, on_lane
from tests.support.cli import warren
from tests.support.dead_letters import wait_depth
from tests.support.processes import write_config
from tests.support.receiver import Receiver, Reply
from tests.support.topology import declare
from warren.broker import wire
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.lane_router import ROUTE_STAGE
from warren.consumers.worker import Worker
from warren.topology import names

pytestmark = pytest.mark.timeout(120)


def counting_hooks() -> tuple[DeliveryHooks, Counter[tuple[str, str]]]:
    settled: Counter[tuple[str, str]] = Counter()
    hooks = DeliveryHooks()
    hooks.settlements.append(lambda endpoint, how: settled.update([(endpoint, how)]))
    return hooks, settled


async def delete_queue(url: str, queue: str) -> None:
    connection = await aio_pika.connect(url)
    async with connection:
        channel = await connection.channel()
        await channel.queue_delete(queue)


async def test_an_event_whose_lane_is_missing_ends_in_the_route_dlq_after_its_attempts_and_is_not_lost(
    endpoint_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given a lane endpoint whose lane was deleted (every copy to it is returned), a healthy one on another
    # lane, and a routing stage allowed 3 attempts 50 ms apart
    doomed, fine = on_lane(1, 1, "doomed")[0], on_lane(2, 1, "fine")[0]
    config = await endpoint_config(
        [lane_endpoint(receiver, doomed), lane_endpoint(receiver, fine, events=["order.*", "user.*"])],
        lanes={
            "count": LANES,
            "route_attempts": 3,
            "route_retry_delay": "50ms",
            "route_partitions": 1,
            "inline": False,
        },  # the copy path
    )
    prefix, url = config.broker.prefix, config.broker.url
    events = [Event(type="order.paid", data={"n": i}) for i in range(5)]
    others = [Event(type="user.created", data={"n": i}) for i in range(20)]
    hooks, settled = counting_hooks()
    async with Worker(config, hooks=hooks) as worker:
        await delete_queue(url, names.lane_queue(prefix, 1))
        # When its events are published, and events only the healthy endpoint wants
        await publish(config, events)
        await publish(config, others)
        # Then the others flow meanwhile, and each of the 5 ends in the route DLQ after 3 attempts
        await receiver.wait_for(lambda r: r.ok_ids(f"/hook/{fine}") >= {e.id for e in others}, 20)
        assert await wait_depth(config, names.route_dlq(prefix), len(events), 30) == len(events)
        assert await wait_depth(config, names.route_partition(prefix, 0), 0) == 0  # nothing loops
        router = worker.lanes.router if worker.lanes else None
        assert router is not None and router.dead_lettered == 5 and router.retried == 10
        assert settled[(ROUTE_STAGE, "dead-lettered")] == 5 and settled[(ROUTE_STAGE, "retry-scheduled")] == 10
    # The healthy endpoint got each of them (a return owes every copy again: at most once per attempt)
    fine_got = Counter(r.event_id for r in receiver.received if r.path == f"/hook/{fine}")
    assert all(1 <= fine_got[e.id] <= 3 for e in events), fine_got
    # And `warren dlq` reads the routing stage's DLQ by the name its metrics use, "(route)", headers and all
    path = write_config(tmp_path, config)
    code, out, err = await warren("dlq", "list", ROUTE_STAGE, "--config", str(path), "--json")
    assert code == 0, err
    assert sorted(row["event_id"] for row in json.loads(out)) == sorted(e.id for e in events)
    code, out, err = await warren("dlq", "show", ROUTE_STAGE, events[0].id, "--config", str(path), "--json")
    assert code == 0, err
    headers = json.loads(out)["headers"]
    assert int(headers[wire.H_ROUTE_ATTEMPT]) == 3 and headers[wire.H_ROUTE_TYPE] == "order.paid"
    assert "route_attempts = 3" in headers[wire.H_DEAD_REASON] and "x-death" not in headers
    # And once the lane is back (warren setup), `warren dlq replay '(route)'` sends them back to the routing stage
    # (client-side, each confirmed, a fresh routing budget) and they reach the endpoint
    await declare(config)
    code, out, err = await warren("dlq", "replay", ROUTE_STAGE, "--config", str(path))
    assert code == 0, err
    assert f"replayed {len(events)} dead letter(s) of (route) to {names.route_exchange(prefix)}" in " ".join(
        out.split()
    )
    assert await wait_depth(config, names.route_dlq(prefix), 0) == 0
    async with Worker(config) as worker:
        await receiver.wait_for(lambda r: r.ok_ids(f"/hook/{doomed}") == {e.id for e in events}, 20)
        assert worker.lanes is not None and worker.lanes.router.dead_lettered == 0


async def test_warren_dlq_refuses_the_routing_stage_with_lanes_off(make_config: Any, tmp_path: Path) -> None:
    path = write_config(tmp_path, make_config([{"name": "a", "url": "http://127.0.0.1:9/a", "events": ["x.*"]}]))
    code, _out, err = await warren("dlq", "list", ROUTE_STAGE, "--config", str(path))
    assert code == 2 and "lanes are off here" in err


async def test_a_lane_that_refuses_for_a_while_recovers_and_only_the_failed_copies_go_round_again(
    endpoint_config: Any, receiver: Receiver, publish: Any, management: ManagementClient
) -> None:
    # Given a lane that refuses copies while it holds a ready message (a length limit of 0), a lane prefetch of 1
    # and an endpoint there that holds a first event for 4 s, a healthy lane endpoint elsewhere, and a routing
    # stage allowed 50 attempts
    stuck, fine = on_lane(1, 1, "stuck")[0], on_lane(2, 1, "fine")[0]
    receiver.behaviour = by_path({stuck: lambda event_id: Reply(200, delay=4.0 if event_id == holder.id else 0)})
    holder = Event(type="hold.on", data={})
    config = await endpoint_config(
        [lane_endpoint(receiver, stuck, events=["order.*", "hold.*"]), lane_endpoint(receiver, fine)],
        lanes={
            "count": LANES,
            "prefetch": 1,
            "route_attempts": 50,
            "route_retry_delay": "100ms",
            "route_partitions": 1,
            "inline": False,  # the copy path
        },
    )
    prefix = config.broker.prefix
    lane = names.lane_queue(prefix, 1)
    policy = f"{prefix}-full-lane"
    definition = {"max-length": 0, "overflow": "reject-publish"}
    pattern = f"^{lane.replace('.', '[.]')}$"
    await management.put_policy(
        policy, {"pattern": pattern, "definition": definition, "priority": 50, "apply-to": "queues"}
    )
    try:
        deadline = time.monotonic() + 20
        while ((await management.queue(lane)) or {}).get("effective_policy_definition") != definition:
            assert time.monotonic() < deadline, "the policy never applied"
            await asyncio.sleep(0.3)
        events = [Event(type="order.paid", data={"n": i}) for i in range(3)]
        async with Worker(config) as worker:
            router = worker.lanes.router if worker.lanes else None
            assert router is not None
            # When events are published while the lane is full (the holder delivered, a second one ready behind it)
            await publish(config, [holder])
            await receiver.wait_for(lambda r: r.in_flight >= 1, 10)
            await publish(config, [Event(type="hold.too", data={})])
            assert await wait_depth(config, lane, 1) == 1
            await publish(config, events)
            # Then the healthy endpoint gets them at once, the stuck one's copies go round meanwhile
            await receiver.wait_for(lambda r: r.ok_ids(f"/hook/{fine}") == {e.id for e in events}, 30)
            # and once the lane has room, the stuck endpoint gets every event, none dead-lettered
            await receiver.wait_for(lambda r: r.ok_ids(f"/hook/{stuck}") >= {e.id for e in events}, 30)
            assert router.retried >= len(events) and router.dead_lettered == 0, (router.retried, router.dead_lettered)
            assert await wait_depth(config, names.route_partition(prefix, 0), 0) == 0
        # And the healthy endpoint got each event once: a nacked copy is owed alone, the others are not resent
        fine_got = Counter(r.event_id for r in receiver.received if r.path == f"/hook/{fine}")
        assert fine_got == Counter({e.id: 1 for e in events}), fine_got
        assert await wait_depth(config, names.route_dlq(prefix), 0) == 0
    finally:
        await management.delete_policy(policy)
