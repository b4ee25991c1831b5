"""``worker.metrics_lane_endpoints = "by-lane"``: lane endpoints' numbers in their lane's series, "(lane N)", so that
/metrics grows with the lanes and the dedicated endpoints, not with every lane endpoint (docs/operations.md,
"Metrics at scale"). Real RabbitMQ, a real receiver, /metrics scraped over HTTP."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from prometheus_client import generate_latest

from tests.consumers.test_metrics import scrape, value
from tests.support.receiver import Receiver
from warren.broker.events import Event
from warren.consumers.hooks import AttemptRecord
from warren.consumers.metrics import WorkerMetrics
from warren.consumers.metrics_server import _unusual_lane_states, lane_label, lane_series
from warren.consumers.worker import Worker
from warren.topology import names

pytestmark = pytest.mark.timeout(90)

LANES = 2
LANE_ENDPOINTS = ["tail-a", "tail-b", "tail-c", "tail-d"]


async def test_lane_endpoints_count_in_their_lanes_series_and_dedicated_ones_in_their_own(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a dedicated endpoint and four lane endpoints on two lanes, a worker serving metrics by lane
    config = await endpoint_config(
        [{"name": "shop"}, *({"name": n, "home": "lane"} for n in LANE_ENDPOINTS)],
        lanes={"count": LANES},
        worker={"metrics_port": 0, "metrics_lane_endpoints": "by-lane"},
    )
    per_lane = {lane: sum(names.lane_of(n, LANES) == lane for n in LANE_ENDPOINTS) for lane in range(LANES)}
    events = [Event(type="x.y", data={"i": i}, id=f"evt-{i}") for i in range(10)]
    async with Worker(config) as worker:
        assert worker.metrics_server is not None
        port = worker.metrics_server.port
        before = await scrape(port)
        # When ten events are published, each for all five endpoints
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 10 and len(r.received) >= 50, 20)
        deadline, after = time.monotonic() + 5, await scrape(port)
        while time.monotonic() < deadline and sum(
            value(after, "warren_settlements_total", endpoint=lane_label(lane), how="acked") for lane in range(LANES)
        ) < 10 * len(LANE_ENDPOINTS):
            await asyncio.sleep(0.05)
            after = await scrape(port)
    # Then each lane's series holds its endpoints' attempts and settlements, present at 0 from the start
    for lane in range(LANES):
        label = lane_label(lane)
        assert value(before, "warren_delivery_attempts_total", endpoint=label, outcome="delivered") == 0
        assert ("warren_settlements_total", (("endpoint", label), ("how", "acked"))) in before
        delivered = value(after, "warren_delivery_attempts_total", endpoint=label, outcome="delivered")
        assert delivered == 10 * per_lane[lane]
        assert value(after, "warren_settlements_total", endpoint=label, how="acked") == 10 * per_lane[lane]
        assert value(after, "warren_delivery_attempt_number_count", endpoint=label) == 10 * per_lane[lane]
    # And the dedicated endpoint keeps its own
    assert value(after, "warren_delivery_attempts_total", endpoint="shop", outcome="delivered") == 10
    assert value(after, "warren_circuit_state", endpoint="shop") == 0
    # And no series names a lane endpoint: not its attempts, in-flight count or (closed, active) state
    named = {dict(labels).get("endpoint") for _, labels in after}
    assert named.isdisjoint(LANE_ENDPOINTS), named & set(LANE_ENDPOINTS)
    assert {lane_label(lane) for lane in range(LANES)} <= named


def test_a_lane_endpoints_state_is_shown_only_while_it_is_not_closed_and_active() -> None:
    # Given the worker's states of a dedicated endpoint and three lane endpoints
    states = {
        "shop": ("closed", "active"),
        "tail-a": ("closed", "active"),
        "tail-b": ("open", "active"),
        "tail-c": ("closed", "paused"),
    }
    lane_of = {"tail-a": 0, "tail-b": 1, "tail-c": 0}.get
    # Then what /metrics shows is the dedicated endpoint's, and the lane endpoints' that need a look
    assert _unusual_lane_states(lambda: states, lane_of)() == {
        "shop": ("closed", "active"),
        "tail-b": ("open", "active"),
        "tail-c": ("closed", "paused"),
    }


def test_the_series_relabel_the_tallies_and_the_cells_alike() -> None:
    # Given two workers' metrics by lane, one through the tallies (this prometheus_client), one through the cells
    lane_of = {"tail-a": 0, "tail-b": 0}.get
    tallied = WorkerMetrics(["shop", lane_label(0)], series=lane_series(lane_of))
    cells = WorkerMetrics(["shop", lane_label(0)], series=lane_series(lane_of))
    cells._observe_as, cells._settle_as = cells._observe_cells, cells._settle_cells
    # When both see the same attempts and settlements
    for endpoint in ("tail-a", "tail-b", "shop", "tail-a"):
        record = AttemptRecord(endpoint, "e", 1, 200, None, 0.01, "delivered", None, 0.5, None)
        for metrics in (tallied, cells):
            metrics.observe(record)
            metrics.settle(endpoint, "acked")
    # Then both count three in the lane's series and one in the dedicated endpoint's
    for metrics in (tallied, cells):
        text = generate_latest(metrics.registry).decode()
        assert 'warren_delivery_attempts_total{endpoint="(lane 0)",outcome="delivered"} 3.0' in text
        assert 'warren_delivery_attempts_total{endpoint="shop",outcome="delivered"} 1.0' in text
        assert 'warren_settlements_total{endpoint="(lane 0)",how="acked"} 3.0' in text
        assert "tail-a" not in text and "tail-b" not in text
