"""Payload filters end to end: real RabbitMQ, a real receiver on 127.0.0.1, a worker with its metrics; a dedicated
endpoint's filter applied before the POST, a lane endpoint's in the routing stage (docs/endpoints.md)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.conftest import TEST_SECRET
from tests.consumers.test_hostile_messages import publish_raw
from tests.consumers.test_lanes_flow import put_on_lane
from tests.consumers.test_metrics import scrape, value
from tests.support.dead_letters import wait_depth
from tests.support.health import wait_until
from tests.support.receiver import Receiver
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

pytestmark = pytest.mark.timeout(90)

BIG_EU = {"amount": {"$gt": 1000}, "region": "eu"}  # "order.paid where amount > 1000", "only region = eu"


def orders() -> tuple[list[Event], set[str]]:
    """Orders of every sort a filter meets, and the ids of those BIG_EU passes."""
    datas: list[Any] = [
        {"amount": 1500, "region": "eu"},  # passes
        {"amount": 1000.5, "region": "eu", "extra": [1, 2]},  # passes
        {"amount": 1000, "region": "eu"},  # not above 1000
        {"amount": 5000, "region": "us"},  # another region
        {"amount": 5000},  # no region: the path is missing
        {"amount": "5000", "region": "eu"},  # a string is not a number: false, not an error
        {"region": "eu"},  # no amount
        ["not", "an", "object"],  # data that is not an object: every path missing
        None,
        {"amount": 2000, "region": ["eu", "uk"]},  # an array matches by any element: passes
    ]
    events = [Event(type="order.paid", data=d, key=f"k{i % 3}") for i, d in enumerate(datas)]
    passing = {events[i].id for i in (0, 1, 9)}
    return events, passing


async def settled_metrics(port: int, endpoint: str, acked: int, filtered: int) -> dict[Any, float]:
    """The worker's samples once ``endpoint``'s acks and filtered events reach these counts (within 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        samples = await scrape(port)
        done = (
            value(samples, "warren_settlements_total", endpoint=endpoint, how="acked") >= acked
            and value(samples, "warren_filtered_total", endpoint=endpoint) >= filtered
        )
        if done or time.monotonic() > deadline:
            return samples
        await asyncio.sleep(0.05)


async def test_a_dedicated_endpoints_filter_lets_matching_events_through_and_acks_the_others_counted(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a dedicated endpoint with a filter, an ordered one with the same, and one without a filter
    config: WarrenConfig = await endpoint_config(
        [
            {"name": "big", "events": ["order.*"], "filter": BIG_EU},
            {"name": "big-ordered", "events": ["order.*"], "filter": BIG_EU, "ordering": "key", "partitions": 2},
            {"name": "all", "events": ["order.*"]},
        ],
        worker={"metrics_port": 0},
    )
    events, passing = orders()
    async with Worker(config) as worker:
        assert worker.metrics_server is not None
        # When every sort of order is published
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.ok_ids("/hook/all")) == len(events), 20)
        await receiver.wait_for(lambda r: r.ok_ids("/hook/big") == passing == r.ok_ids("/hook/big-ordered"), 20)
        prefix = config.broker.prefix
        assert await wait_depth(config, names.work_queue(prefix, "big"), 0) == 0
        for p in range(2):
            assert await wait_depth(config, names.partition_queue(prefix, "big-ordered", p), 0) == 0
        samples = await settled_metrics(worker.metrics_server.port, "big", 3, len(events) - 3)
        ordered = await settled_metrics(worker.metrics_server.port, "big-ordered", 3, len(events) - 3)
        await asyncio.sleep(0.3)  # nothing more arrives
    # Then each filtered endpoint was POSTed the matching events only, once each; the unfiltered one every event
    assert sorted(r.event_id for r in receiver.received if r.path == "/hook/big") == sorted(passing)
    assert sorted(r.event_id for r in receiver.received if r.path == "/hook/big-ordered") == sorted(passing)
    # And the others were acked without a POST and counted, not retried and not dead-lettered
    for name, counted in (("big", samples), ("big-ordered", ordered)):
        assert value(counted, "warren_filtered_total", endpoint=name) == len(events) - 3, name
        assert value(counted, "warren_settlements_total", endpoint=name, how="filtered") == len(events) - 3
        assert value(counted, "warren_settlements_total", endpoint=name, how="acked") == 3
        assert value(counted, "warren_delivery_attempts_total", endpoint=name, outcome="delivered") == 3
        assert value(counted, "warren_settlements_total", endpoint=name, how="retry-scheduled") == 0
        assert await wait_depth(config, names.dlq(config.broker.prefix, name), 0) == 0
    assert value(samples, "warren_filtered_total", endpoint="all") == 0


def lane_endpoint(receiver: Receiver, name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "url": f"{receiver.url}/{name}", "events": ["order.*"], "home": "lane", **fields}


async def test_a_lane_endpoints_filter_is_applied_when_routed_so_a_filtered_event_gets_no_copy(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given two lanes, a lane endpoint with a filter from the file, one without, and a worker that records
    # every settlement
    config: WarrenConfig = await endpoint_config(
        [lane_endpoint(receiver, "lane-big", filter=BIG_EU), lane_endpoint(receiver, "lane-all")],
        lanes={"count": 2},
        worker={"metrics_port": 0},
    )
    settled: list[tuple[str, str]] = []
    hooks = DeliveryHooks()
    hooks.settlements.append(lambda endpoint, how: settled.append((endpoint, how)))
    events, passing = orders()
    async with Worker(config, hooks=hooks) as worker:
        assert worker.metrics_server is not None and worker.lanes is not None
        stage = worker.lanes
        # And a live lane endpoint with another filter, created while the worker runs (the admin API's path)
        live = Endpoint.model_validate(
            lane_endpoint(receiver, "lane-live", filter={"region": {"$nin": ["us"]}}, secret=TEST_SECRET)
        )
        await apply_endpoint(config, live)
        await wait_until(lambda: "lane-live" in stage.index, 10, "the worker hears of it")
        # When every sort of order is published
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.ok_ids("/hook/lane-all")) == len(events), 20)
        await receiver.wait_for(lambda r: r.ok_ids("/hook/lane-big") == passing, 20)
        live_passing = {e.id for e in events if isinstance(e.data, dict) and e.data.get("region") not in (None, "us")}
        await receiver.wait_for(lambda r: r.ok_ids("/hook/lane-live") == live_passing, 20)
        samples = await settled_metrics(worker.metrics_server.port, "lane-big", 3, len(events) - 3)
        await asyncio.sleep(0.3)  # nothing more arrives
        # each subscriber's first attempt went either inline from the router or through a copy in its lane
        inline = stage.router.inline
        copies = stage.router.copies + (inline.delivered if inline is not None else 0)
        for lane in range(2):
            assert await wait_depth(config, names.lane_queue(config.broker.prefix, lane), 0) == 0
    # Then the filtered lane endpoints were POSTed the matching events only
    assert sorted(r.event_id for r in receiver.received if r.path == "/hook/lane-big") == sorted(passing)
    assert sorted(r.event_id for r in receiver.received if r.path == "/hook/lane-live") == sorted(live_passing)
    # And the router delivered (inline, or by a copy) only those: the others never reached an endpoint or a lane
    assert copies == len(events) + len(passing) + len(live_passing)
    assert settled.count(("lane-big", "filtered")) == len(events) - 3
    assert settled.count(("lane-big", "acked")) == 3
    assert settled.count(("lane-live", "filtered")) == len(events) - len(live_passing)
    assert value(samples, "warren_filtered_total", endpoint="lane-big") == len(events) - 3
    assert ("lane-all", "filtered") not in settled
    for lane in range(2):
        assert await wait_depth(config, names.lane_dlq(config.broker.prefix, lane), 0) == 0


async def test_a_lane_message_that_reached_its_lane_another_way_still_meets_the_filter(
    endpoint_config: Any, receiver: Receiver
) -> None:
    # Given a filtered lane endpoint, and two of its events put straight on its lane (as a demoted endpoint's
    # queue is moved there): one its filter passes, one it does not
    config: WarrenConfig = await endpoint_config(
        [lane_endpoint(receiver, "lane-big", filter=BIG_EU)], lanes={"count": 2}
    )
    lane = names.lane_queue(config.broker.prefix, names.lane_of("lane-big", 2))
    kept = Event(type="order.paid", data={"amount": 2000, "region": "eu"})
    dropped = Event(type="order.paid", data={"amount": 2000, "region": "us"})
    await put_on_lane(config, lane, [(dropped, "lane-big"), (kept, "lane-big")])
    settled: list[tuple[str, str]] = []
    hooks = DeliveryHooks()
    hooks.settlements.append(lambda endpoint, how: settled.append((endpoint, how)))
    async with Worker(config, hooks=hooks):
        # When the worker serves the lane
        await receiver.wait_for(lambda r: kept.id in r.ok_ids("/hook/lane-big"), 15)
        await wait_until(lambda: ("lane-big", "filtered") in settled, 10, "the other one filtered")
        assert await wait_depth(config, lane, 0) == 0
    # Then only the one the filter passes was POSTed; the other was acked, counted, and is in no DLQ
    assert [r.event_id for r in receiver.received] == [kept.id]
    assert settled.count(("lane-big", "filtered")) == 1
    assert await wait_depth(config, names.lane_dlq(config.broker.prefix, names.lane_of("lane-big", 2)), 0) == 0


async def test_a_body_that_is_not_an_envelope_is_dead_lettered_as_without_a_filter_never_filtered(
    endpoint_config: Any, receiver: Receiver
) -> None:
    # Given a filtered dedicated endpoint and a filtered lane endpoint
    config: WarrenConfig = await endpoint_config(
        [
            {"name": "big", "events": ["x.y"], "filter": BIG_EU},
            {**lane_endpoint(receiver, "lane-big"), "events": ["x.y"], "filter": BIG_EU},
        ],
        lanes={"count": 2},
    )
    settled: list[tuple[str, str]] = []
    hooks = DeliveryHooks()
    hooks.settlements.append(lambda endpoint, how: settled.append((endpoint, how)))
    async with Worker(config, hooks=hooks):
        # When a producer that bypassed the publisher sends a body that is not JSON
        await publish_raw(config, {"evt_raw": b"not an envelope"})
        # Then each endpoint dead-letters it as malformed, as it would without a filter
        prefix = config.broker.prefix
        assert await wait_depth(config, names.dlq(prefix, "big"), 1) == 1
        assert await wait_depth(config, names.lane_dlq(prefix, names.lane_of("lane-big", 2)), 1) == 1
    assert receiver.received == []
    assert ("big", "filtered") not in settled and ("lane-big", "filtered") not in settled
