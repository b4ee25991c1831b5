"""``warren setup`` with lanes on a real RabbitMQ: the lanes and the router declared, idempotent, no leftovers,
and the broker's objects the same however many lane endpoints there are."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import aio_pika
import pytest

from tests.support.setup_helpers import prefix_state
from warren.broker.applier import apply_setup
from warren.broker.management import ManagementClient
from warren.broker.status import collect_status
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology, queue_arguments

pytestmark = pytest.mark.timeout(90)


def lane_endpoints(count: int) -> list[dict[str, Any]]:
    url = "http://127.0.0.1:9/in"
    return [{"name": f"tail-{i}", "url": url, "events": ["order.*"], "home": "lane"} for i in range(count)]


async def test_setup_declares_the_lanes_and_a_second_setup_finds_no_drift_and_no_leftovers(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    # Given a dedicated endpoint and lane endpoints on 3 lanes
    config = make_config(
        [{"name": "acme", "url": "http://127.0.0.1:9/in", "events": ["order.*"]}, *lane_endpoints(2)],
        lanes={"count": 3},
    )
    # When set up twice
    first = await apply_setup(config)
    second = await apply_setup(config)
    # Then the broker holds exactly the plan: the lanes, their DLQs and the router among it
    state = await prefix_state(management, prefix)
    plan = plan_topology(config)
    assert set(state.queues) == {q.name for q in plan.queues}
    assert {names.lane_queue(prefix, 2), names.lane_dlq(prefix, 2), names.route_partition(prefix, 3)} <= set(
        state.queues
    )
    assert names.ordered_lane_queue(prefix, 3) in state.queues and names.route_queue(prefix) not in state.queues
    assert (names.events_exchange(prefix), names.route_exchange(prefix), "exchange", "#") in state.bindings
    # and the second setup changes nothing and takes nothing for a leftover
    assert first.applied and not first.no_change
    assert second.no_change and not second.leftovers and not second.drift


async def test_the_broker_holds_as_many_objects_with_200_lane_endpoints_as_with_2(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    # Given the same deployment with 2, then with 200 lane endpoints, each set up
    counts = []
    for n in (2, 200):
        report = await apply_setup(make_config(lane_endpoints(n), lanes={"count": 4}))
        assert report.applied and not report.leftovers
        state = await prefix_state(management, prefix)
        counts.append((len(state.exchanges), len(state.queues), len(state.bindings)))
    # Then the vhost's queues, exchanges and bindings are the same
    assert counts[0] == counts[1]
    assert counts[0][1] == len(plan_topology(make_config(lanes={"count": 4})).queues)


async def test_status_shows_a_lane_endpoint_its_shared_lane_and_dlq(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    # Given a lane endpoint, set up, with nothing in its lane
    config = make_config(lane_endpoints(1), lanes={"count": 3})
    await apply_setup(config)
    connection = await aio_pika.connect(config.broker.url)
    try:
        status = await collect_status(config, connection, management)
    finally:
        await connection.close()
    # Then its rows are its lane's and its lane's DLQ, marked shared, both found on the broker
    (endpoint,) = status.endpoints
    lane = names.lane_of("tail-0", 3)
    assert [(q.name, q.role, q.exists) for q in endpoint.queues] == [
        (names.lane_queue(prefix, lane), f"lane {lane} (shared)", True)
    ]
    assert (endpoint.dlq.name, endpoint.dlq.exists) == (names.lane_dlq(prefix, lane), True)
    # and the routing stage's queue and DLQ have rows of their own
    assert [(q.name, q.exists, q.ready) for q in status.routing] == [
        *[(names.route_partition(prefix, i), True, 0) for i in range(4)],
        (names.route_dlq(prefix), True, 0),
        *[(names.ordered_lane_queue(prefix, i), True, 0) for i in range(4)],
    ]


async def test_a_routing_queue_declared_before_its_backstop_is_migrated_by_policy(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    # Given a route partition declared without a dead-letter route (as the first lanes release declared its queue)
    config = make_config(lane_endpoints(1), lanes={"count": 2})
    route = names.route_partition(prefix, 0)
    connection = await aio_pika.connect(config.broker.url)
    async with connection:
        channel = await connection.channel()
        arguments = dict(queue_arguments("quorum", single_active_consumer=True))
        await channel.declare_queue(route, durable=True, arguments=arguments)
    # When set up
    report = await apply_setup(config)
    # Then it is not drift: a policy of Warren's gives it the backstop into the routing stage's DLQ
    assert report.applied and not report.drift
    policies = [p for p in await management.policies() if p["name"].startswith(f"{prefix}.limits")]
    (policy,) = [p for p in policies if p["definition"].get("dead-letter-routing-key") == "route.stage"]
    assert policy["definition"]["dead-letter-exchange"] == names.dead_exchange(prefix)
    assert (await apply_setup(config)).no_change
