"""A probe in flight when its park queue's drainer loses its channel (warren/consumers/ordered_parks.py,
park_link.py; warren/consumers/health/guard.py, control.py).

The probe of an open circuit of an ordered lane endpoint is the head of its park queue, delivered by the drainer.
When the parks' connection goes under it, the channel's close cancels the delivery: the gate is released with no
result (``EndpointGuard.release(None)``), so no verdict, and the circuit stays half-open. It does not stay stuck:
the probe slot is free again (``_probe_task`` cleared), the health tick gives the probe lock up while this worker
drains nothing (``probes_here``), and the drain, started over on a new connection, takes the lock again and
probes with the redelivered head; once the endpoint answers, the circuit closes and every parked event arrives."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from tests.consumers.test_ordered_lanes import all_delivered, keyed, ordered_endpoint, violations_at
from tests.consumers.test_ordered_parks import wait_gone, wait_parked
from tests.support.connections import close_named
from tests.support.receiver import Receiver, Reply
from tests.support.topology import declare
from warren.broker.endpoint_state.records import CLOSED, HALF_OPEN
from warren.broker.management import ManagementClient
from warren.consumers.worker import Worker
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)

LANES = {"count": 1, "ordered_count": 1, "route_partitions": 1, "prefetch": 8, "route_prefetch": 8}


async def until(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.01)


async def test_a_probe_cut_by_its_drainers_lost_connection_is_taken_again_and_the_circuit_closes(
    make_config: Any, receiver: Receiver, publish: Any, management: ManagementClient
) -> None:
    # Given an ordered lane endpoint answering 503, its circuit opening after 3 failures and probing again after
    # 300 ms (at most 500 ms), its copies parked and drained by the worker
    mode = {"now": "fail"}
    probes: list[float] = []  # when each request that hangs (a probe: the circuit lets one through) arrived
    let_go = asyncio.Event()

    async def behaviour(r: Receiver, request: web.Request, body: bytes) -> Reply:
        if mode["now"] == "fail":
            return Reply(503)
        if mode["now"] == "hang":
            probes.append(asyncio.get_running_loop().time())
            await let_go.wait()
        return Reply(200)

    receiver.behaviour = behaviour
    circuit = {"consecutive_failures": 3, "cooldown": "300ms", "cooldown_max": "500ms", "min_requests": 1000}
    config: WarrenConfig = make_config(
        [ordered_endpoint(receiver, "held", circuit=circuit, timeout="60s")],
        lanes=LANES,
        worker={"rebalance_interval": "500ms"},
        retry={"base": "50ms", "cap": "200ms", "jitter": "none", "max_attempts": 1000},
    )
    await declare(config)
    events = keyed([f"k{i}" for i in range(5)], 6)
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.parks is not None and worker.health is not None
        link, parks, guard = worker.lanes.parks.link, worker.lanes.parks, worker.health.guards["held"]
        await publish(config, events)
        await wait_parked(config, 20)
        # When the endpoint's next probe is in flight (it hangs: no verdict yet) from the park queue's head
        mode["now"] = "hang"
        await until(lambda: len(probes) == 1, 20, "no probe came")
        assert guard.probing and guard._probe_task is not None and parks.draining("held")
        opened = link.opened
        # and RabbitMQ closes the parks' connection under the drain
        await close_named(management, link.name)
        # Then the probe is released without a verdict: the slot is free and the circuit still half-open
        await until(lambda: guard._probe_task is None, 10, "the cut probe still holds the probe slot")
        assert guard.view.circuit_state == HALF_OPEN
        # and the endpoint is not held for good: the drain starts over on a new connection and a new probe goes
        await until(lambda: len(probes) == 2, 20, "no probe after the drainer's connection was lost")
        assert link.opened > opened and parks.draining("held") and guard.probing
        # which, once the endpoint answers, closes the circuit; every parked event arrives, each key in order
        mode["now"] = "ok"
        let_go.set()
        await receiver.wait_for(all_delivered(events, ["held"]), 40)
        await until(lambda: guard.view.circuit_state == CLOSED, 10, "the circuit did not close")
        await wait_gone(config, 20)
    assert violations_at(receiver, ["held"]) == []
