"""A lane endpoint held by an open circuit has its messages parked until its next probe is due, not every 5 s
(warren/consumers/lanes.py ``park_held``, warren/broker/endpoint_state/records.py ``hold_end``)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from tests.consumers.test_lanes_flow import LANES, by_path, lane_endpoint
from tests.support.receiver import Receiver, Reply
from warren.broker.endpoint_state.records import (
    ADMIN,
    CIRCUIT,
    OPEN,
    PAUSED,
    THROTTLE,
    THROTTLED,
    EndpointView,
    StateRecord,
    hold_end,
)
from warren.broker.events import Event
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(90)

COOLDOWN = 12.0  # seconds before the first probe: longer than the first held park (5 s)


async def test_an_open_circuits_messages_wait_for_its_next_probe_instead_of_passing_the_lane_every_5s(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a lane endpoint answering 503 forever, its circuit opening after 3 failures for 12 s
    receiver.behaviour = by_path({"down": lambda _: Reply(503)})
    config = await endpoint_config(
        [lane_endpoint(receiver, "down", circuit={"consecutive_failures": 3, "cooldown": f"{COOLDOWN:g}s"})],
        lanes={"count": LANES},
        retry={"base": "50ms", "cap": "30s", "max_attempts": 100},  # a delay chain that holds 30 s
    )
    parked: Counter[str] = Counter()
    hooks = DeliveryHooks()
    hooks.settlements.append(lambda endpoint, how: parked.update([endpoint] if how == "parked" else []))
    events = [Event(type="order.paid", data={"n": i}) for i in range(20)]
    async with Worker(config, hooks=hooks):
        # When 20 events are published and its circuit opens
        started = time.monotonic()
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.received) >= 3, 10)
        await asyncio.sleep(COOLDOWN - 1.5 - (time.monotonic() - started))
        # Then, until its probe is due, each message was parked once (every 5, then 10 s, it would be twice)
        assert 1 <= parked["down"] <= len(events) + 3, parked
        attempts = len(receiver.received)
        assert attempts < 20, attempts  # the circuit held them: no attempt while open


def test_the_hold_end_is_the_next_probe_or_the_throttles_end_and_none_for_the_operators_hold() -> None:
    now = 1000.0
    circuit = StateRecord("x", CIRCUIT, OPEN, "503s", now - 1, 1, "w", opened_at=now - 1, retry_at=now + 30)
    assert hold_end(EndpointView("x", circuit=circuit), now) == now + 30
    assert hold_end(EndpointView("x", circuit=circuit), now, probing=True) is None  # this worker probes it
    throttle = StateRecord("x", THROTTLE, THROTTLED, "429", now, 2, "w", until=now + 60)
    assert hold_end(EndpointView("x", circuit=circuit, throttle=throttle), now) == now + 60
    paused = StateRecord("x", ADMIN, PAUSED, "by hand", now, 3, "w")
    assert hold_end(EndpointView("x", admin=paused, circuit=circuit), now) is None
    assert hold_end(EndpointView("x"), now) is None
