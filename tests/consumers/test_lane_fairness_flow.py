"""Fairness inside a lane on real RabbitMQ: a slow and a failing endpoint do not hold back their healthy
lane-mates (docs/architecture.md, "Shared lanes"; the policy is warren/consumers/lane_fairness.py)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.consumers.test_lanes_flow import LANES, by_path, lane_endpoint, on_lane
from tests.support.dead_letters import wait_depth
from tests.support.receiver import Receiver, Reply
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology import names

pytestmark = pytest.mark.timeout(90)

EVENTS = 40
SLOW_ANSWER = 0.5  # seconds the slow endpoint takes to answer each request
SLOW_CONCURRENCY = 2
# Without fairness the lane's head would move at the slow endpoint's pace: its 40 messages, two at a time,
# 0.5 s each, are 10 s. The healthy mates' last event must arrive well before that.
HEALTHY_WITHIN = 5.0


async def test_a_slow_and_a_failing_endpoint_do_not_hold_back_their_healthy_lane_mates(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given five endpoints on one lane (prefetch 8): one answering after 0.5 s, one answering 503 forever (its
    # circuit opens after 3 failures), and three healthy ones
    slow, failing, *healthy = on_lane(2, 5, stem="fair")
    receiver.behaviour = by_path({slow: lambda _: Reply(200, delay=SLOW_ANSWER), failing: lambda _: Reply(503)})
    config = await endpoint_config(
        [
            lane_endpoint(receiver, slow, concurrency=SLOW_CONCURRENCY, timeout="5s"),
            lane_endpoint(receiver, failing, circuit={"consecutive_failures": 3, "cooldown": "30s"}),
            *(lane_endpoint(receiver, name) for name in healthy),
        ],
        lanes={"count": LANES, "prefetch": 8},
        retry={"base": "50ms", "cap": "200ms", "max_attempts": 100},
    )
    events = [Event(type="order.paid", data={"n": i}) for i in range(EVENTS)]
    want = {e.id for e in events}
    async with Worker(config):
        # When 40 events are published to all five, the slow and failing endpoints' copies among the healthy ones'
        started = time.monotonic()
        await publish(config, events)
        await receiver.wait_for(lambda r: all(r.ok_ids(f"/hook/{n}") == want for n in healthy), 30)
        took = time.monotonic() - started
        # Then the healthy endpoints have every event within the bound the slow one alone would break (10 s),
        assert took < HEALTHY_WITHIN, f"the healthy lane-mates took {took:.1f}s"
        # while the slow one is still at it, and the failing one's circuit stopped its attempts
        assert len(receiver.ok_ids(f"/hook/{slow}")) < EVENTS
        failed_attempts = sum(1 for r in receiver.received if r.path == f"/hook/{failing}")
        assert 3 <= failed_attempts < EVENTS, failed_attempts
        # and the slow endpoint, served its share, still gets every event in the end, never more than two at once
        await receiver.wait_for(lambda r: r.ok_ids(f"/hook/{slow}") == want, 40)
        slow_took = time.monotonic() - started
        assert slow_took >= EVENTS * SLOW_ANSWER / SLOW_CONCURRENCY * 0.9, slow_took
    arrivals = sorted(r.at for r in receiver.received if r.path == f"/hook/{slow}")
    overlapping = max(sum(1 for a in arrivals if t <= a < t + SLOW_ANSWER * 0.9) for t in arrivals)
    assert overlapping <= SLOW_CONCURRENCY, overlapping
    assert await wait_depth(config, names.lane_dlq(config.broker.prefix, 2), 0) == 0
