"""A lane's parks wait their own time whatever `[retry] cap` is: the delay chain reaches the lanes' waits when lanes
are on (warren/topology/planner.py ``LANE_DELAY_REACH``), and a park longer than the chain reaches is parked again
for the rest when it comes back early (``warren-park-until``, warren/consumers/lanes.py)."""

from __future__ import annotations

import logging
import time
from typing import Any

import aio_pika
import pytest

from tests.consumers.test_lanes_flow import LANES, lane_endpoint
from tests.support.health import wait_until
from tests.support.receiver import Receiver
from warren.broker.endpoint_state.admin import change_admin
from warren.broker.events import Event
from warren.consumers import lanes
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.lane_fairness import park_left
from warren.consumers.route_attempts import ROUTE_DELAY_CAP
from warren.consumers.worker import Worker
from warren.topology import planner
from warren.topology.delays import reach
from warren.topology.planner import LANE_DELAY_REACH, delay_levels

pytestmark = pytest.mark.timeout(90)

SHORT_CAP = {"base": "20ms", "cap": "100ms", "max_attempts": 5}  # a delay chain of 7 levels (127 ms) alone


async def _second_round_of_parks(endpoint_config: Any, receiver: Receiver, publish: Any) -> list[float]:
    """When a paused lane endpoint receives 3 events under a 100 ms retry cap: when each of its parks was made,
    until the first message has come round a second time."""
    config = await endpoint_config([lane_endpoint(receiver, "held")], lanes={"count": LANES}, retry=SHORT_CAP)
    connection = await aio_pika.connect(config.broker.url)
    try:
        await change_admin(connection, config, "held", "pause")
    finally:
        await connection.close()
    parks: list[float] = []
    hooks = DeliveryHooks()
    hooks.settlements.append(lambda endpoint, how: parks.append(time.monotonic()) if how == "parked" else None)
    events = [Event(type="order.paid", data={"n": i}) for i in range(3)]
    async with Worker(config, hooks=hooks):
        await publish(config, events)
        await wait_until(lambda: len(parks) > len(events), 40, "a second round of parks")
    assert receiver.received == []  # held throughout
    return parks


async def test_a_held_lane_endpoints_parks_wait_their_own_time_under_a_short_retry_cap(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    parks = await _second_round_of_parks(endpoint_config, receiver, publish)
    # Then no message came round before its 5 s park ended (cut to the 100 ms cap, all three came back at once)
    assert parks[3] - parks[0] >= lanes.PAUSED_PARK_DELAY - 0.05, parks


async def test_a_park_longer_than_the_delay_chain_reaches_is_parked_again_for_the_rest_not_counted(
    endpoint_config: Any,
    receiver: Receiver,
    publish: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a delay chain built for the 100 ms cap alone (as before lanes reached further: an older topology)
    monkeypatch.setattr(planner, "LANE_DELAY_REACH", 0.0)
    caplog.set_level(logging.DEBUG, logger="warren.worker")
    parks = await _second_round_of_parks(endpoint_config, receiver, publish)
    # Then the 5 s parks still lasted 5 s: each came back early and went round again, uncounted
    assert parks[3] - parks[0] >= lanes.PAUSED_PARK_DELAY - 0.05, parks
    early = [r for r in caplog.records if "back early from its park" in r.getMessage()]
    assert len(early) >= 3, len(early)


async def test_a_worker_whose_delay_chain_lacks_levels_it_needs_says_to_run_warren_setup(
    endpoint_config: Any, receiver: Receiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Given lanes declared before the delay chain reached their waits (the 100 ms cap's 7 levels alone)
    with monkeypatch.context() as earlier:
        earlier.setattr(planner, "LANE_DELAY_REACH", 0.0)
        config = await endpoint_config([lane_endpoint(receiver, "tail")], lanes={"count": LANES}, retry=SHORT_CAP)
    # When a worker that needs 16 levels starts on it
    async with Worker(config):
        pass
    # Then it names the missing level and the fix
    top = f"{config.broker.prefix}.delay.l{delay_levels(config) - 1:02d}"
    assert any(top in r.getMessage() and "run `warren setup`" in r.getMessage() for r in caplog.records)


def test_with_lanes_the_delay_chain_reaches_the_lanes_waits_whatever_the_retry_cap(make_config: Any) -> None:
    short = make_config([], retry=SHORT_CAP)
    assert reach(delay_levels(short)) < 1  # without lanes, the cap alone
    levels = delay_levels(make_config([], retry=SHORT_CAP, lanes={"count": 2}))
    assert reach(levels) >= LANE_DELAY_REACH >= max(lanes.PARK_DELAY_MAX, ROUTE_DELAY_CAP)
    hour = {"cap": "1h"}
    assert delay_levels(make_config([], retry=hour, lanes={"count": 2})) == delay_levels(make_config([], retry=hour))


def test_a_park_is_over_when_its_end_is_near_or_past_or_unknown() -> None:
    assert park_left(None, 1_000_000) == 0.0
    assert park_left(1_000_000, 1_000_000) == 0.0
    assert park_left(1_000_010, 1_000_000) == 0.0  # within PARK_DUE: no trip for a few ms
    assert park_left(1_030_000, 1_000_000) == 30.0
