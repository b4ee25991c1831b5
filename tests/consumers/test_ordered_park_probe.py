"""An open circuit's probe of an ordered lane endpoint, with two workers (docs/architecture.md, "A held endpoint").

While the endpoint is held, every copy of it goes to its park queue, which one worker drains (its drain lock): the
park queue's head is the only message there is to probe with. Found by a long run (bench/long_run.py): the other
worker took the probe slot fleet-wide, had nothing to send, and kept it; the drainer waited for the slot. Nothing
was delivered for minutes, until one of the two was killed. Only the drainer probes now."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.consumers.test_ordered_lanes import all_delivered, keyed, ordered_endpoint, violations_at
from tests.consumers.test_ordered_parks import wait_gone, wait_parked
from tests.support.receiver import Receiver, Reply
from tests.support.topology import declare
from warren.consumers.health.guard import EndpointGuard
from warren.consumers.worker import Worker
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)

LANES = {"count": 1, "ordered_count": 1, "route_partitions": 1, "prefetch": 8, "route_prefetch": 8}
HANDICAP = 1.0  # seconds the drainer's probe comes after the other worker's could: the race the long run lost


def handicap_the_drainer(worker: Worker, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``worker`` look for its probe ``HANDICAP`` seconds late while it drains the park queue, so that a worker
    not draining it, should it be allowed to take the probe, always takes it first."""
    health = worker.health
    assert health is not None
    due = health._probe_due
    parks = worker.runners["held"].ordered_lanes.parks

    def late(name: str, guard: EndpointGuard, now: float) -> bool:
        return due(name, guard, now - HANDICAP if parks.draining(name) else now)

    monkeypatch.setattr(health, "_probe_due", late)


async def wait_draining(workers: list[Worker], timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(w.runners["held"].ordered_lanes.parks.draining("held") for w in workers):
        assert asyncio.get_running_loop().time() < deadline, "nobody drains the park queue"
        await asyncio.sleep(0.05)


async def test_the_probe_of_an_ordered_lane_endpoint_is_taken_by_its_park_queues_drainer(
    make_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an ordered lane endpoint answering 503, its circuit opening after 3 failures and probing again after
    # 300 ms (at most 500 ms), served by two workers in one ordered lane
    failing = {"on": True}
    receiver.behaviour = lambda r, request, body: Reply(503) if failing["on"] else Reply(200)
    circuit = {"consecutive_failures": 3, "cooldown": "300ms", "cooldown_max": "500ms", "min_requests": 1000}
    config: WarrenConfig = make_config(
        [ordered_endpoint(receiver, "held", circuit=circuit)],
        lanes=LANES,
        worker={"rebalance_interval": "500ms"},
        retry={"base": "50ms", "cap": "200ms", "jitter": "none", "max_attempts": 1000},
    )
    await declare(config)
    async with Worker(config) as first, Worker(config) as second:
        for worker in (first, second):
            handicap_the_drainer(worker, monkeypatch)
        # When events come while it fails (its circuit opens: its copies are parked, one worker drains them)
        events = keyed([f"k{i}" for i in range(5)], 6)
        await publish(config, events)
        await wait_parked(config, 20)
        await wait_draining([first, second], 20)
        # And its receiver recovers
        failing["on"] = False
        # Then the drainer probes with the park queue's head, the circuit closes, and every event arrives, each
        # key in order: within seconds (the long run's stall lasted minutes, until a worker was killed)
        await receiver.wait_for(all_delivered(events, ["held"]), 30)
        await wait_gone(config, 20)
    assert violations_at(receiver, ["held"]) == []
