"""Faults: a worker killed with SIGKILL, a graceful SIGTERM, RabbitMQ's app restarted, partitions shared by
two worker processes. Real processes, real broker, real receiver."""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import quote

import orjson
import pytest

from tests.support.processes import WorkerProcess, write_config
from tests.support.rabbit import rabbitmqctl, rabbitmqctl_command
from tests.support.receiver import Receiver, Reply, always
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(90)


async def test_kill_9_mid_run_loses_nothing(endpoint_config, receiver: Receiver, publish, tmp_path: Path) -> None:
    # Given a worker process delivering 400 events to a receiver that takes 5 ms per request
    receiver.behaviour = always(200, delay=0.005)
    config = await endpoint_config([{"name": "crash", "concurrency": 32}])
    path = write_config(tmp_path, config)
    events = [Event(type="x.y", data={"i": i}) for i in range(400)]
    first = await WorkerProcess(path).start()
    second = WorkerProcess(path)
    try:
        await first.wait_ready()
        await publish(config, events)
        # When it is killed with SIGKILL part-way, and another worker takes over
        await receiver.wait_for(lambda r: len(r.received) >= 100, 20)
        first.kill()
        await second.start()
        await second.wait_ready()
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 400, 40)
    finally:
        await first.cleanup()
        await second.cleanup()
    # Then every event was delivered; duplicates only for what was in flight at the kill (at most prefetch)
    assert receiver.ok_ids() == {e.id for e in events}
    assert len(receiver.received) - 400 <= 32


async def test_sigterm_finishes_in_flight_and_exits_0(
    endpoint_config, receiver: Receiver, publish, tmp_path: Path
) -> None:
    # Given a worker whose 4 in-flight requests each take 600 ms, and 20 events queued
    receiver.behaviour = always(200, delay=0.6)
    config = await endpoint_config([{"name": "grace", "concurrency": 4}], delivery={"grace_period": "5s"})
    path = write_config(tmp_path, config)
    events = [Event(type="x.y", data={"i": i}) for i in range(20)]
    worker = await WorkerProcess(path).start()
    try:
        await worker.wait_ready()
        await publish(config, events)
        await receiver.wait_for(lambda r: r.in_flight >= 4, 10)
        # When it gets SIGTERM mid-request
        stopped_at = time.monotonic()
        code = await worker.terminate()
        elapsed = time.monotonic() - stopped_at
    finally:
        await worker.cleanup()
    # Then it exits 0 after letting the in-flight requests finish, and takes no new work
    assert code == 0, worker.log_text()[-2000:]
    assert elapsed < 5
    assert len(receiver.received) == 4 and all(r.status == 200 for r in receiver.received)
    # And the rest is still in RabbitMQ: a new worker delivers exactly the remaining 16
    receiver.behaviour = always(200)
    async with Worker(config):
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 20, 20)
    assert receiver.ok_ids() == {e.id for e in events}
    assert len(receiver.received) == 20


@pytest.mark.restarts_broker
@pytest.mark.skipif(rabbitmqctl_command() is None, reason="needs rabbitmqctl for the broker under test")
async def test_rabbitmq_app_restart_mid_run_loses_nothing(endpoint_config, receiver: Receiver, publish) -> None:
    # Given a worker delivering 300 events (unordered and ordered endpoints) at a steady pace
    receiver.behaviour = always(200, delay=0.01)
    config = await endpoint_config(
        [{"name": "plain", "concurrency": 8}, {"name": "keyed", "ordering": "key", "partitions": 2}],
        worker={"rebalance_interval": "500ms"},
    )
    events = [Event(type="x.y", data={"i": i}, key=f"k{i % 5}") for i in range(300)]
    await publish(config, events)
    async with Worker(config):
        await receiver.wait_for(lambda r: len(r.received) >= 60, 20)
        # When RabbitMQ's application is stopped and started again mid-run
        await rabbitmqctl("stop_app")
        await rabbitmqctl("start_app")
        await rabbitmqctl("await_startup", "--timeout", "60")
        # Then the robust connection comes back and every event reaches both endpoints
        expected = {e.id for e in events}

        def both_done(r: Receiver) -> bool:  # each of the 300 events answered 2xx at both endpoints
            return len(r.ok_ids("/hook/plain")) >= 300 and len(r.ok_ids("/hook/keyed")) >= 300

        await receiver.wait_for(both_done, 60)
    assert receiver.ok_ids("/hook/plain") == expected == receiver.ok_ids("/hook/keyed")


async def test_two_workers_share_partitions_and_keep_order(
    endpoint_config, receiver: Receiver, publish, tmp_path: Path
) -> None:
    # Given an ordered endpoint with 8 partitions, a receiver failing 20% of requests, and two worker processes
    rng = random.Random(11)
    receiver.behaviour = lambda r, request, body: Reply(503) if rng.random() < 0.2 else Reply(200)
    config = await endpoint_config(
        [{"name": "ledger", "ordering": "key", "partitions": 8}],
        retry={"base": "10ms", "cap": "40ms", "max_attempts": 50},
        worker={"rebalance_interval": "300ms"},
    )
    path = write_config(tmp_path, config)
    workers = [WorkerProcess(path), WorkerProcess(path)]
    try:
        for worker in workers:
            await worker.start()
        for worker in workers:
            await worker.wait_ready()

        # When they have had a few rebalance rounds
        def owned(worker: WorkerProcess) -> int:
            lines = [orjson.loads(x) for x in worker.log_text().splitlines() if '"partitions owned"' in x]
            return len(lines[-1]["owned"]) if lines else 0

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and sorted(owned(w) for w in workers) != [4, 4]:
            await asyncio.sleep(0.2)
        owners = {str(w.process.pid if w.process else 0): owned(w) for w in workers}
        # Then each worker owns half of the partitions
        assert sorted(owners.values()) == [4, 4], owners
        # And events for 20 keys are delivered, every key in publish order
        events = [Event(type="x.y", data={}, key=f"acct{i % 20}", sequence=i // 20) for i in range(400)]
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 400, 40)
    finally:
        for worker in workers:
            await worker.cleanup()
    delivered: dict[str, list[int]] = defaultdict(list)
    for request in receiver.received:
        if request.status == 200:
            delivered[request.json["key"]].append(request.json["sequence"])
    assert sum(1 for s in delivered.values() for a, b in itertools.pairwise(s) if b <= a) == 0
    assert receiver.ok_ids() == {e.id for e in events}


async def test_stopping_while_a_partition_holds_a_message_keeps_its_order(
    endpoint_config, receiver: Receiver, publish
) -> None:
    # Given an ordered endpoint whose head message is being retried in place when the worker stops
    failing = {"on": True}
    receiver.behaviour = lambda r, request, body: Reply(503) if failing["on"] else Reply(200)
    config = await endpoint_config(
        [{"name": "ledger", "ordering": "key", "partitions": 1, "circuit": {"enabled": False}}],
        retry={"base": "300ms", "cap": "300ms", "jitter": "none", "max_attempts": 50},
        delivery={"grace_period": "50ms"},
    )
    events = [Event(type="x.y", data={}, key="k", sequence=i) for i in range(5)]
    await publish(config, events)
    async with Worker(config):
        await receiver.wait_for(lambda r: len(r.received) >= 2, 10)
    # When a new worker takes over after the receiver recovered
    failing["on"] = False
    async with Worker(config):
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 5, 15)
    # Then the held message went back to the head of its partition (not the back): order is intact
    assert [r.json["sequence"] for r in receiver.received if r.status == 200] == [0, 1, 2, 3, 4]


async def test_a_worker_process_on_uvloop_comes_back_when_rabbitmq_closes_its_connections(
    endpoint_config, receiver: Receiver, publish, tmp_path: Path, management: ManagementClient, vhost: str
) -> None:
    # Given a worker process (on uvloop, as `warren worker` runs) delivering 400 events, 8 at a time, 50 ms each
    receiver.behaviour = always(200, delay=0.05)
    config = await endpoint_config([{"name": "forced", "concurrency": 8}])
    path = write_config(tmp_path, config)
    events = [Event(type="x.y", data={"i": i}) for i in range(400)]
    worker = await WorkerProcess(path).start()
    try:
        await worker.wait_ready()
        assert "event loop uvloop" in worker.log_text()
        connections = await _vhost_connections(management, vhost)  # the worker's, listed before we publish
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.received) >= 100, 20)
        # When RabbitMQ closes the worker's connections mid-run (what a node shutting down does, minus the restart)
        for connection in connections:
            await management.request("DELETE", f"connections/{quote(str(connection['name']), safe='')}", allow_404=True)
        assert len(receiver.ok_ids()) < 400
        # Then the worker reconnects and every event is delivered
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 400, 40)
    finally:
        await worker.cleanup()
    assert receiver.ok_ids() == {e.id for e in events}
    assert "CONNECTION_FORCED" in worker.log_text()


async def _vhost_connections(management: ManagementClient, vhost: str) -> list[dict[str, object]]:
    """The vhost's connections, once the management API lists them (its statistics lag a few seconds)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        connections: list[dict[str, object]] = await management.request(
            "GET", f"vhosts/{quote(vhost, safe='')}/connections"
        )
        if connections:
            return connections
        await asyncio.sleep(0.2)
    raise AssertionError("the management API listed no connection in 15s")
