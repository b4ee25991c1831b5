"""Chaos on lanes (issue 34, part 8): two worker processes, each running the routing stage and the lane consumer,
one killed with SIGKILL mid-run; RabbitMQ's application restarted mid-run. Nothing is lost (every event reaches
every lane endpoint at least once) and the duplicates stay within the prefetch windows."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.consumers.test_lanes_flow import LANES, lane_endpoint
from tests.support.processes import WorkerProcess, running_workers, write_config
from tests.support.rabbit import rabbitmqctl, rabbitmqctl_command
from tests.support.receiver import Receiver, always
from tests.support.topology import declare
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(180)

ENDPOINTS = [f"tail-{i}" for i in range(6)]
LANE_PREFETCH, ROUTE_PREFETCH = 16, 16
# A worker's routing windows: one per route partition it consumes (each ROUTE_PREFETCH events, their copies to
# every endpoint), all of them at most; the bound counted one window, which held only while no event waited in
# them (since the inline waits, events wait there up to 1 s for their endpoint's slot: 198 and 319 seen on 4.0.5).
ROUTE_WINDOWS = 4  # [lanes] route_partitions, its default


async def lane_deployment(make_config: Any, receiver: Receiver) -> WarrenConfig:
    """The lane endpoints (declared), answered 2xx after 5 ms each."""
    receiver.behaviour = always(200, delay=0.005)
    config: WarrenConfig = make_config(
        [lane_endpoint(receiver, name) for name in ENDPOINTS],
        lanes={"count": LANES, "prefetch": LANE_PREFETCH, "route_prefetch": ROUTE_PREFETCH},
    )
    await declare(config)
    return config


def duplicates(receiver: Receiver) -> int:
    """Deliveries answered 2xx beyond the first of each event at each endpoint."""
    ok = Counter((r.path, r.event_id) for r in receiver.received if 200 <= r.status < 300)
    return sum(count - 1 for count in ok.values())


def all_delivered(events: list[Event]) -> Any:
    want = {e.id for e in events}
    return lambda r: all(r.ok_ids(f"/hook/{name}") >= want for name in ENDPOINTS)


async def test_one_of_two_workers_killed_mid_run_loses_nothing_on_any_lane_endpoint(
    make_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given 6 lane endpoints on 4 lanes served by two worker processes (each routes and consumes every lane)
    config = await lane_deployment(make_config, receiver)
    path = write_config(tmp_path, config)
    events = [Event(type="order.paid", data={"n": i}) for i in range(300)]
    async with running_workers(path, 2) as workers:
        # When 300 events are published and one worker is killed (SIGKILL) once some copies were delivered
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.received) >= 300, 60)
        workers[0].kill()
        # Then the other delivers every event to every endpoint
        await receiver.wait_for(all_delivered(events), 90)
    # with the duplicates bounded by what the killed worker held: its routing window (each event's copies once
    # more) and its lanes' windows (each message once more)
    bound = ROUTE_WINDOWS * ROUTE_PREFETCH * len(ENDPOINTS) + LANES * LANE_PREFETCH
    assert duplicates(receiver) <= bound, (duplicates(receiver), bound)


async def test_a_worker_killed_again_and_again_while_another_restarts_loses_nothing(
    make_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given the same lane endpoints, 400 events waiting, and a worker process
    config = await lane_deployment(make_config, receiver)
    path = write_config(tmp_path, config)
    events = [Event(type="order.paid", data={"n": i}) for i in range(400)]
    await publish(config, events)
    kills = 0
    survivor = await WorkerProcess(path).start()
    try:
        await survivor.wait_ready()
        # When a second worker is started and killed with SIGKILL three times as deliveries go on
        for round_ in range(3):
            doomed = await WorkerProcess(path).start()
            try:
                await doomed.wait_ready()
                await receiver.wait_for(lambda r, n=round_: len(r.received) >= 300 * (n + 1), 60)
                doomed.kill()
                kills += 1
            finally:
                await doomed.cleanup()
        # Then every event reaches every endpoint
        await receiver.wait_for(all_delivered(events), 90)
    finally:
        await survivor.cleanup()
    assert kills == 3
    bound = kills * (ROUTE_WINDOWS * ROUTE_PREFETCH * len(ENDPOINTS) + LANES * LANE_PREFETCH)
    assert duplicates(receiver) <= bound, (duplicates(receiver), bound)


@pytest.mark.restarts_broker
@pytest.mark.skipif(rabbitmqctl_command() is None, reason="needs rabbitmqctl for the broker under test")
async def test_rabbitmq_restarted_mid_run_loses_nothing_on_any_lane_endpoint(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given lane endpoints served by a worker, 300 events on their way
    config = await lane_deployment(make_config, receiver)
    events = [Event(type="order.paid", data={"n": i}) for i in range(300)]
    await publish(config, events)
    async with Worker(config):
        await receiver.wait_for(lambda r: len(r.received) >= 200, 60)
        # When RabbitMQ's application is stopped and started again mid-run
        await rabbitmqctl("stop_app")
        await rabbitmqctl("start_app")
        await rabbitmqctl("await_startup", "--timeout", "60")
        # Then the worker comes back and every event reaches every endpoint
        await receiver.wait_for(all_delivered(events), 120)
    # The duplicates: what the worker held unacked when the connection dropped (its routing and lane windows)
    assert duplicates(receiver) <= ROUTE_WINDOWS * ROUTE_PREFETCH * len(ENDPOINTS) + LANES * LANE_PREFETCH
