"""Limits on a live worker: concurrency never above the limit, and a 429 with Retry-After pauses the fleet.

Two in-process Workers stand for two worker processes here: each has its own connections, roster
membership and control queue, exactly like a process would.
"""

from __future__ import annotations

import time
from contextlib import AsyncExitStack
from typing import Any

import pytest

from tests.support.health import wait_until
from tests.support.receiver import Receiver, Reply, always
from warren.broker.events import Event
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(40)


async def test_concurrency_never_exceeds_max_in_flight_across_two_workers(
    endpoint_config, receiver: Receiver, publish
) -> None:
    # Given two workers of an endpoint allowing 16 deliveries each but 4 in flight fleet-wide, a slow receiver
    receiver.behaviour = always(200, delay=0.05)
    config = await endpoint_config(
        [{"name": "narrow", "concurrency": 16, "max_in_flight": 4}], worker={"rebalance_interval": "200ms"}
    )
    async with AsyncExitStack() as stack:
        workers = [await stack.enter_async_context(Worker(config)) for _ in range(2)]
        for worker in workers:
            guard = worker.health.guards["narrow"]  # type: ignore[union-attr]
            await wait_until(lambda g=guard: g.workers == 2, 5, "both workers counted")
        # When 80 events arrive at once
        await publish(config, [Event(type="x.y", data={"i": i}) for i in range(80)])
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 80, 30)
    # Then the receiver never saw more than 4 requests at once (and did see 4: the limit is used)
    assert receiver.max_in_flight == 4


async def test_a_429_with_retry_after_pauses_every_worker(endpoint_config, receiver: Receiver, publish) -> None:
    # Given a receiver that answers one 429 asking for 1 s, then accepts everything
    throttled_at: list[float] = []

    def once(r: Receiver, request: Any, body: bytes) -> Reply:
        if not throttled_at:
            throttled_at.append(time.monotonic())
            return Reply(429, headers={"Retry-After": "1"})
        return Reply(200, delay=0.01)

    receiver.behaviour = once
    config = await endpoint_config([{"name": "busy", "concurrency": 2}], retry={"base": "50ms", "cap": "5s"})
    async with AsyncExitStack() as stack:
        for _ in range(2):
            await stack.enter_async_context(Worker(config))
        # When events flow to both workers and the first request is told to wait
        events = [Event(type="x.y", data={"i": i}) for i in range(60)]
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 60, 20)
    # Then after the 429 (and what was already in flight, or sent by the other worker before the throttled state
    # reached it: 0.104-0.113 s once with two whole suites at once on 4.0.5), nobody sent anything for the second
    # it asked for, and most events waited for its end (without the pause all 60 are delivered within about
    # 0.2 s: 4 in flight, 10 ms each)
    t0 = throttled_at[0]
    during = [round(r.at - t0, 3) for r in receiver.received if t0 + 0.3 < r.at < t0 + 0.95]
    assert during == []
    waited = [r for r in receiver.received if r.at >= t0 + 0.95]
    assert len(waited) >= 30, [round(r.at - t0, 3) for r in receiver.received]
    # And every event was delivered, none dead-lettered or lost (the 429'd one waited, its budget intact)
    assert receiver.ok_ids() == {e.id for e in events}
