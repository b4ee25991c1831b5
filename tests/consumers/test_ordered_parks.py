"""A held ordered lane endpoint's park queue (warren/consumers/ordered_parks.py; docs/architecture.md,
"Ordered lanes"): its lane-mates flow while it is held, and once it is served again every event arrives, each key
in order, even when the worker draining it is killed."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aio_pika
import aiormq.exceptions
import pytest

from tests.conftest import TEST_SECRET
from tests.consumers.test_ordered_lanes import all_delivered, keyed, ordered_endpoint, violations_at
from tests.support.processes import WorkerProcess, write_config
from tests.support.receiver import Receiver, Reply, always
from tests.support.topology import declare
from warren.broker.endpoint_state.admin import change_admin
from warren.broker.live_apply import apply_endpoint
from warren.broker.live_remove import Removal, remove_endpoint
from warren.broker.live_set import with_live_endpoints
from warren.broker.status import collect_status
from warren.consumers.ordered_parks import PARK_ARGUMENTS, OrderedParks
from warren.consumers.worker import Worker
from warren.core.errors import EndpointNotEmpty
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

pytestmark = pytest.mark.timeout(150)

# One ordered lane, a small window: before park queues, a paused endpoint's copies filled it and its mate stalled.
LANES = {"count": 1, "ordered_count": 1, "route_partitions": 1, "prefetch": 8, "route_prefetch": 8}


async def two_in_one_lane(make_config: Any, receiver: Receiver) -> WarrenConfig:
    config: WarrenConfig = make_config(
        [ordered_endpoint(receiver, "held"), ordered_endpoint(receiver, "mate")],
        lanes=LANES,
        worker={"rebalance_interval": "500ms"},
        retry={"base": "50ms", "cap": "200ms", "jitter": "none", "max_attempts": 1000},
    )
    await declare(config)
    return config


async def admin(config: WarrenConfig, action: str) -> None:
    connection = await aio_pika.connect(config.broker.url)
    try:
        await change_admin(connection, config, "held", action)
    finally:
        await connection.close()


async def park_depth(config: WarrenConfig) -> int | None:
    return await park_depth_of(config, names.ordered_park_queue(config.broker.prefix, "held"))


async def park_depth_of(config: WarrenConfig, park: str) -> int | None:
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(park, passive=True)
        return queue.declaration_result.message_count
    except aiormq.exceptions.ChannelNotFoundEntity:
        return None
    finally:
        await connection.close()


async def wait_parked(config: WarrenConfig, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while await park_depth(config) is None:
        assert asyncio.get_running_loop().time() < deadline, "the park queue was never declared"
        await asyncio.sleep(0.1)


async def wait_gone(config: WarrenConfig, timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while await park_depth(config) is not None:
        assert asyncio.get_running_loop().time() < deadline, "the park queue was never deleted"
        await asyncio.sleep(0.5)


async def test_a_paused_ordered_lane_endpoint_with_traffic_no_longer_stalls_its_lane_mate(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given two ordered lane endpoints sharing one ordered lane with a window of 8, one of them paused
    receiver.behaviour = always(200)
    config = await two_in_one_lane(make_config, receiver)
    await admin(config, "pause")
    async with Worker(config) as worker:
        await asyncio.sleep(1.0)
        assert worker.runners["held"].paused_reason is not None
        # When steady traffic comes for both (10 keys x 6 events: far more than the window)
        events = keyed([f"k{i}" for i in range(10)], 6)
        for start in range(0, len(events), 10):
            await publish(config, events[start : start + 10])
            await asyncio.sleep(0.05)
        # Then the lane-mate gets every event while the paused one gets none: its copies wait in its park queue
        await receiver.wait_for(all_delivered(events, ["mate"]), 30)
        assert receiver.ok_ids("/hook/held") == set()
        depth = await park_depth(config)  # ready: its drain holds up to a window of them in place, unattempted
        assert depth is not None and len(events) - LANES["prefetch"] <= depth <= len(events)
        # And once it is resumed, every event reaches it, each key in order, and its park queue goes away
        await admin(config, "resume")
        await receiver.wait_for(all_delivered(events, ["held"]), 30)
        await wait_gone(config, 20)
        # after which its copies are delivered directly again
        later = keyed(["k0", "k1"], 8)[:4]
        await publish(config, later)
        await receiver.wait_for(all_delivered(later, ["held", "mate"]), 20)
        assert await park_depth(config) is None
    assert violations_at(receiver, ["held", "mate"]) == []


async def test_workers_killed_while_parking_and_while_draining_lose_nothing_and_break_no_key_order(
    make_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given a paused ordered lane endpoint and its lane-mate, answered slowly (10 ms)
    receiver.behaviour = always(200, delay=0.01)
    config = await two_in_one_lane(make_config, receiver)
    await admin(config, "pause")
    path = write_config(tmp_path, config)
    events = keyed([f"k{i}" for i in range(8)], 25)
    workers = [WorkerProcess(path) for _ in range(3)]
    try:
        await (await workers[0].start()).wait_ready()
        # When the worker parking its copies is killed (SIGKILL) mid-flow, and another takes over
        await publish(config, events[:100])
        await receiver.wait_for(lambda r: len(r.ok_ids("/hook/mate")) >= 30, 30)
        workers[0].kill()
        await (await workers[1].start()).wait_ready()
        await receiver.wait_for(all_delivered(events[:100], ["mate"]), 40)
        # And, once it is resumed, the worker draining its park queue is killed too, while traffic goes on
        await admin(config, "resume")
        await receiver.wait_for(lambda r: len([x for x in r.received if x.path == "/hook/held"]) >= 30, 30)
        await publish(config, events[100:150])
        workers[1].kill()
        await (await workers[2].start()).wait_ready()
        await publish(config, events[150:])
        # Then the last worker delivers every event, each key in order among first deliveries
        await receiver.wait_for(all_delivered(events, ["held", "mate"]), 90)
        await wait_gone(config, 30)
    finally:
        for worker in workers:
            await worker.cleanup()
    assert violations_at(receiver, ["held", "mate"]) == []


async def test_an_open_circuit_parks_its_copies_is_probed_from_its_park_queue_and_closes(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given an ordered lane endpoint answering 503 for a while, its circuit opening after 3 failures and probing
    # again after 300 ms, and a lane-mate in the same ordered lane (window 8)
    failing = {"on": True}
    receiver.behaviour = lambda r, request, body: (
        Reply(503) if failing["on"] and request.path == "/hook/held" else Reply(200)
    )
    circuit = {"consecutive_failures": 3, "cooldown": "300ms", "min_requests": 1000}
    config: WarrenConfig = make_config(
        [ordered_endpoint(receiver, "held", circuit=circuit), ordered_endpoint(receiver, "mate")],
        lanes=LANES,
        worker={"rebalance_interval": "500ms"},
        retry={"base": "50ms", "cap": "200ms", "jitter": "none", "max_attempts": 1000},
    )
    await declare(config)
    async with Worker(config):
        # When steady traffic comes while it fails (its circuit opens: its copies are parked)
        events = keyed([f"k{i}" for i in range(10)], 6)
        for start in range(0, len(events), 10):
            await publish(config, events[start : start + 10])
            await asyncio.sleep(0.05)
        # Then the lane-mate gets every event meanwhile
        await receiver.wait_for(all_delivered(events, ["mate"]), 30)
        await wait_parked(config, 20)
        probes = len([x for x in receiver.received if x.path == "/hook/held"])
        # (probed while open: every 300 ms, so within seconds even on a loaded machine)
        await receiver.wait_for(lambda r: len([x for x in r.received if x.path == "/hook/held"]) > probes, 20)
        # And once it recovers, a probe from the park queue closes the circuit and every event arrives in order
        failing["on"] = False
        await receiver.wait_for(all_delivered(events, ["held"]), 40)
        await wait_gone(config, 20)
    assert violations_at(receiver, ["held", "mate"]) == []


@pytest.mark.timeout(60)
async def test_a_copy_its_gate_refused_is_parked_even_before_its_runner_knows_it_is_held(
    make_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an ordered lane endpoint whose circuit opens on its first failure, for a minute, and whose runner's
    # own flags lag its gate (as they do until a callback of the loop runs: here, forever), and a lane-mate
    monkeypatch.setattr(OrderedParks, "held", lambda self, name: False)
    receiver.behaviour = lambda r, request, body: Reply(503) if request.path == "/hook/held" else Reply(200)
    circuit = {"consecutive_failures": 1, "cooldown": "60s", "min_requests": 1000}
    config: WarrenConfig = make_config(
        [ordered_endpoint(receiver, "held", circuit=circuit), ordered_endpoint(receiver, "mate")],
        lanes=LANES,
        retry={"base": "50ms", "cap": "200ms", "jitter": "none", "max_attempts": 1000},
    )
    await declare(config)
    events = keyed([f"k{i}" for i in range(5)], 4)
    async with Worker(config):
        # When its copies come while its gate refuses them
        await publish(config, events)
        # Then each refused copy is parked and the lane moves on: the lane-mate gets every event (the loop did
        # not spin on a copy that its gate refused and its runner still took for deliverable)
        await receiver.wait_for(all_delivered(events, ["mate"]), 30)
        await wait_parked(config, 10)
    assert violations_at(receiver, ["mate"]) == []


async def test_a_park_queue_shows_in_status_and_goes_with_its_endpoint_removed_with_force(
    make_config: Any, receiver: Receiver
) -> None:
    # Given a live ordered lane endpoint with three messages in its park queue (parked while it was held)
    config: WarrenConfig = make_config([], lanes=LANES)
    await declare(config)
    fields = {**ordered_endpoint(receiver, "gone"), "secret": TEST_SECRET}
    live = Endpoint.model_validate(fields)
    await apply_endpoint(config, live)
    park = names.ordered_park_queue(config.broker.prefix, "gone")
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        await channel.declare_queue(park, durable=True, arguments=PARK_ARGUMENTS)
        for i in range(3):
            await channel.default_exchange.publish(aio_pika.Message(b"{}", message_id=f"m{i}"), park)
        # Then `warren status` lists it under the endpoint
        status = await collect_status(with_live_endpoints(config, {"gone": live}), connection, None)
        (endpoint,) = [e for e in status.endpoints if e.name == "gone"]
        assert [(q.name, q.ready) for q in endpoint.queues][-1] == (park, 3)
    finally:
        await connection.close()
    # When it is removed without force: refused, nothing changed
    with pytest.raises(EndpointNotEmpty, match="3 message"):
        await remove_endpoint(config, "gone", force=False)
    # And with force: its parked messages are discarded with its park queue, and counted
    assert await remove_endpoint(config, "gone", force=True) == Removal(3, 0)
    assert await park_depth_of(config, park) is None
