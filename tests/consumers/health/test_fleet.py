"""Endpoint health across worker processes: one worker's verdict holds for all, one probe at a time, and
the rate limit holds for the fleet. Real ``warren worker`` subprocesses, real RabbitMQ, a real receiver."""

from __future__ import annotations

import asyncio
import itertools
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.support.health import OperatorInbox, operator_inbox, wait_until
from tests.support.processes import WorkerProcess, write_config
from tests.support.receiver import Receiver, Reply
from warren.broker.events import Event
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)


def with_url(config: WarrenConfig, url: str) -> WarrenConfig:
    """The same configuration, its one endpoint reaching ``url`` (same name, so same queues and state)."""
    endpoint = config.endpoints[0].model_copy(update={"url": url})
    return config.model_copy(update={"endpoints": (endpoint,)})


async def start_workers(*paths: Path) -> list[WorkerProcess]:
    """Start one worker per path and wait until all are ready; if any fails, none is left running."""
    workers: list[WorkerProcess] = []
    try:
        for path in paths:
            workers.append(await WorkerProcess(path).start())
        for worker in workers:
            await worker.wait_ready()
    except BaseException:
        for worker in workers:
            await worker.cleanup()
        raise
    return workers


def openings(operator: OperatorInbox) -> list[dict[str, Any]]:
    return [e for e in operator.events if e["type"] == "endpoint.circuit_opened" and e["data"]["endpoint"] == "shared"]


async def test_a_circuit_opened_by_one_worker_stops_the_other(
    endpoint_config, receiver: Receiver, publish, tmp_path: Path
) -> None:
    # Given two workers of one endpoint, each reaching the receiver on its own path: /a always fails, /b works
    paths_seen: list[tuple[float, str]] = []

    def by_path(r: Receiver, request: Any, body: bytes) -> Reply:
        paths_seen.append((time.time(), request.path[-1]))
        return Reply(503) if request.path.endswith("/a") else Reply(200, 0.01)

    receiver.behaviour = by_path
    config = await endpoint_config(
        [{"name": "shared", "concurrency": 2, "circuit": {"consecutive_failures": 3, "cooldown": "3s"}}],
        retry={"base": "50ms", "cap": "100ms", "max_attempts": 20},
    )
    paths = [
        write_config(tmp_path, with_url(config, f"{receiver.url}/a"), "a.toml"),
        write_config(tmp_path, with_url(config, f"{receiver.url}/b"), "b.toml"),
    ]
    async with operator_inbox(config) as operator:
        workers = await start_workers(*paths)
        try:
            # When events flow to both, worker A's failures open the circuit
            await publish(config, [Event(type="x.y", data={"i": i}) for i in range(300)])
            # (the first opening whose event reaches the test well before its probe: on a loaded machine the
            # event once arrived 2.7 s into the 3 s cool-down, too late to check anything; A's failures open the
            # circuit again after each probe)
            for seen in range(1, 4):
                await wait_until(lambda n=seen: len(openings(operator)) >= n, 30, f"circuit opening {seen}")
                opened = time.time()
                probe_at = datetime.fromisoformat(openings(operator)[seen - 1]["data"]["next_probe_at"]).timestamp()
                if probe_at - opened > 0.3:
                    break
            b_before = sum(1 for at, path in paths_seen if path == "b" and at < opened)
            # Then worker B, whose requests were all succeeding, stops too until the cool-down is over: nothing
            # from the moment the test saw the broadcast (plus 0.15 s for B's requests in flight) to the probe the
            # event announces (the event can reach the test late on a busy machine, so the window ends at the
            # probe time the event carries, not at a time counted from its arrival)
            await asyncio.sleep(max(0.0, probe_at - time.time()))
            quiet = [(round(at - opened, 3), path) for at, path in paths_seen if opened + 0.15 < at < probe_at - 0.05]
            assert probe_at - opened > 0.3, "the test saw the circuit open too late to check anything"
        finally:
            for worker in workers:
                await worker.cleanup()
    assert b_before > 0
    assert quiet == []
    assert any("decided by" in w.log_text() for w in workers)  # the other worker applied the broadcast


async def test_one_probe_at_a_time_across_the_fleet(
    endpoint_config, receiver: Receiver, publish, tmp_path: Path
) -> None:
    # Given two workers and an endpoint that is down (each failed request takes 50 ms)
    in_flight = 0
    spans: list[tuple[float, float]] = []

    async def down(r: Receiver, request: Any, body: bytes) -> Reply:
        nonlocal in_flight
        started = time.monotonic()
        in_flight += 1
        await asyncio.sleep(0.05)
        in_flight -= 1
        spans.append((started, time.monotonic()))
        return Reply(503)

    receiver.behaviour = down
    cooldown = 0.3
    config = await endpoint_config(
        [
            {
                "name": "down",
                "concurrency": 4,
                "circuit": {"consecutive_failures": 3, "cooldown": f"{cooldown}s", "cooldown_factor": 1.0},
            }
        ],
        retry={"base": "50ms", "cap": "100ms", "max_attempts": 50},
    )
    path = write_config(tmp_path, config)
    async with operator_inbox(config) as operator:
        workers = await start_workers(path, path)
        try:
            await publish(config, [Event(type="x.y", data={"i": i}) for i in range(100)])
            await operator.wait_for("endpoint.circuit_opened", "down")
            # When the circuit has been open for a while (what was in flight at the opening has finished)
            watch_from = time.monotonic() + 0.3
            await asyncio.sleep(0.3 + 2.4)  # the observation window: probes every cool-down
            watch_to = time.monotonic()
        finally:
            for worker in workers:
                await worker.cleanup()
    probes = sorted(s for s in spans if watch_from <= s[0] <= watch_to)
    # Then the requests are single probes: never two at once, each after a cool-down since the last one ended
    overlapping = [(a, b) for a, b in itertools.pairwise(probes) if b[0] < a[1]]
    gaps = [round(b[0] - a[1], 3) for a, b in itertools.pairwise(probes)]
    assert overlapping == []
    assert 3 <= len(probes) <= 2.4 / cooldown + 1, probes
    assert min(gaps) >= cooldown * 0.9, gaps


async def test_the_rate_limit_holds_for_two_workers(
    endpoint_config, receiver: Receiver, publish, tmp_path: Path
) -> None:
    # Given an endpoint limited to 25 requests/s (burst 2) served by two worker processes
    rate = 25.0
    config = await endpoint_config(
        [{"name": "slowly", "concurrency": 8, "rate_limit": rate, "burst": 2}],
        worker={"rebalance_interval": "300ms"},
    )
    path = write_config(tmp_path, config)
    workers = await start_workers(path, path)
    try:
        # (each worker has counted the other: they split the rate)
        for worker in workers:
            await wait_until(lambda w=worker: "limits shared by 2 workers" in w.log_text(), 10, "roster of 2")
        # When 100 events are published at once
        events = [Event(type="x.y", data={"i": i}) for i in range(100)]
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 100, 30)
    finally:
        for worker in workers:
            await worker.cleanup()
    # Then the fleet delivered them at the rate, within 20% (not twice it), after the initial burst
    arrivals = sorted(r.at for r in receiver.received)[4:]
    measured = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
    print(f"\nrate with two workers: {measured:.1f}/s for a limit of {rate:g}/s")
    assert rate * 0.8 <= measured <= rate * 1.2, measured
