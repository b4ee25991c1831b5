"""Messages returned to their queue over and over are never lost: far more returns than RabbitMQ 4.x's
default delivery limit of 20 (each scenario below lost messages on 4.0.5 before Warren declared its own).

Real ``warren worker`` processes, a real receiver on 127.0.0.1, the real broker (3.10 or 4.x).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.support.health import dlq_count
from tests.support.processes import WorkerProcess, write_config
from tests.support.receiver import Receiver, Reply
from warren.broker.events import Event
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)

FAILURES = 30  # well past the 20 returns 4.x allows by default


async def _running(path: Path) -> WorkerProcess:
    worker = await WorkerProcess(path).start()
    await worker.wait_ready()
    return worker


async def _kill(worker: WorkerProcess) -> None:
    worker.kill()
    assert worker.process is not None
    await worker.process.wait()


async def test_an_ordered_head_handed_back_on_every_retry_is_delivered_on_attempt_31(
    endpoint_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given an ordered endpoint whose hold limit (1 ms) hands the head message back to its partition at
    # every retry, and a receiver that fails E1 30 times
    calls: list[int] = []

    def fail_e1(r: Receiver, request: Any, body: bytes) -> Reply:
        calls.append(orjson.loads(body)["sequence"])
        return Reply(503) if calls.count(0) <= FAILURES and calls[-1] == 0 else Reply(200)

    receiver.behaviour = fail_e1
    config = await endpoint_config(
        [{"name": "held", "ordering": "key", "partitions": 1, "circuit": {"enabled": False}}],
        retry={"base": "10ms", "cap": "10ms", "max_attempts": FAILURES + 1, "jitter": "none"},
        delivery={"ordered_hold_limit": "1ms"},
    )
    worker = await _running(write_config(tmp_path, config))
    try:
        # When E1 and E2 of one key are published
        await publish(config, [Event(type="x.y", data={}, key="k", sequence=i) for i in range(2)])
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 2, 60)
    finally:
        await worker.cleanup()
    # Then E1 was delivered on its 31st attempt and E2 after it: no gap in the key, nothing dead-lettered
    assert [r.json["sequence"] for r in receiver.received] == [0] * (FAILURES + 1) + [1]
    assert await dlq_count(config, "held") == 0


@pytest.mark.timeout(240)
async def test_an_open_circuit_keeps_the_head_message_through_30_failed_probes(
    endpoint_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given an unordered and an ordered endpoint whose circuit opens at the first failure and probes every
    # 50-100 ms, and a receiver that is down
    down = True
    failed: dict[str, int] = {"plain": 0, "keyed": 0}

    def behaviour(r: Receiver, request: Any, body: bytes) -> Reply:
        endpoint = request.path.rsplit("/", 1)[-1]
        if down:
            failed[endpoint] += 1
            return Reply(503)
        return Reply(200)

    receiver.behaviour = behaviour
    circuit = {
        "consecutive_failures": 1,
        "failure_ratio": None,
        "cooldown": "50ms",
        "cooldown_factor": 2.0,
        "cooldown_max": "100ms",
    }
    config = await endpoint_config(
        [
            {"name": "plain", "events": ["plain.*"], "concurrency": 1, "circuit": circuit},
            {"name": "keyed", "events": ["keyed.*"], "ordering": "key", "partitions": 1, "circuit": circuit},
        ],
        retry={"base": "10ms", "cap": "20ms", "max_attempts": 1000},
    )
    events = [Event(type="plain.x", data={"i": 0}), Event(type="keyed.x", data={}, key="k", sequence=0)]
    events.append(Event(type="keyed.x", data={}, key="k", sequence=1))
    worker = await _running(write_config(tmp_path, config))
    try:
        await publish(config, events)
        # When both endpoints have failed more than 30 probes (seconds on a quiet machine; an ordered probe hands
        # its partition back and consumes it again each time, which took up to 4 s a cycle on a 4.x node under two
        # whole suites at once, so the bound is a hang guard)
        deadline = time.monotonic() + 150
        while min(failed.values()) <= FAILURES:
            if time.monotonic() > deadline:
                stuck = [line for line in worker.log_text().splitlines() if '"plain"' not in line]
                pytest.fail(f"too few probes: {failed}; the worker's log but plain's:\n" + "\n".join(stuck[-60:]))
            await asyncio.sleep(0.05)
        # and the receiver recovers
        down = False
        await receiver.wait_for(lambda r: len(r.ok_ids()) == len(events), 30)
    finally:
        await worker.cleanup()
    # Then each head message was kept through every failed probe and delivered, in order, and none is dead
    ok = [r for r in receiver.received if r.status == 200]
    assert {r.event_id for r in ok} == {e.id for e in events}
    assert [r.json["sequence"] for r in ok if r.path.endswith("/keyed")] == [0, 1]
    assert await dlq_count(config, "plain") == 0 and await dlq_count(config, "keyed") == 0


class Fleet:
    """Ready ``warren worker`` processes forked from a zygote (tests/support/worker_zygote.py), each POSTing to
    its own path of the receiver (so a request names its worker), replaced in the background as they die."""

    def __init__(self, config: WarrenConfig, receiver: Receiver, directory: Path) -> None:
        self.config, self.receiver, self.directory = config, receiver, directory
        self.pids: dict[str, int] = {}
        self.starting: list[asyncio.Task[None]] = []
        self._zygote: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        self._zygote = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tests.support.worker_zygote",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        )  # fmt: skip

    def spawn(self) -> None:
        self.starting.append(asyncio.create_task(self._start(f"w{len(self.starting)}")))

    async def _start(self, name: str) -> None:
        data = self.config.model_dump(mode="json", exclude_none=True)
        data["endpoints"][0]["url"] = f"{self.receiver.url}/{name}"
        path = write_config(self.directory, WarrenConfig.model_validate(data), f"{name}.toml")
        log = self.directory / f"{name}.log"
        assert self._zygote is not None and self._zygote.stdin is not None and self._zygote.stdout is not None
        async with self._lock:
            self._zygote.stdin.write(f"{path} {log}\n".encode())
            self.pids[name] = int(await self._zygote.stdout.readline())
        deadline = time.monotonic() + 30
        while not (log.exists() and b"worker consuming" in log.read_bytes()):
            assert time.monotonic() < deadline, f"{name} not ready: {log.read_text() if log.exists() else ''}"
            await asyncio.sleep(0.05)

    def kill(self, name: str) -> None:
        with contextlib.suppress(ProcessLookupError):  # a worker may have ended on its own
            os.kill(self.pids[name], signal.SIGKILL)

    async def close(self) -> None:
        for task in self.starting:
            task.cancel()
        await asyncio.gather(*self.starting, return_exceptions=True)
        for pid in self.pids.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self._zygote is not None and self._zygote.stdin is not None:
            self._zygote.stdin.close()  # at EOF the zygote kills any child whose pid never reached us
            try:
                await asyncio.wait_for(self._zygote.wait(), 10)
            except TimeoutError:
                self._zygote.kill()
                await self._zygote.wait()


@pytest.mark.timeout(240)  # 31 worker processes started: 72-82 s with two whole suites at once, 120 s once
async def test_a_worker_killed_30_times_mid_delivery_loses_nothing(
    endpoint_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given a receiver that holds every request for 10 s (so a worker dies with the delivery in flight), and
    # three workers ready to take over
    slow = True
    holders: list[str] = []  # the worker of each request, in arrival order
    answered: list[str] = []  # the workers answered at once (after the receiver recovered)

    def behaviour(r: Receiver, request: Any, body: bytes) -> Reply:
        holders.append(request.path.rsplit("/", 1)[-1])
        if slow:
            return Reply(200, delay=10.0)  # (the killed worker never sees this answer)
        answered.append(holders[-1])
        return Reply(200)

    receiver.behaviour = behaviour
    config = await endpoint_config([{"name": "crash", "circuit": {"enabled": False}}])
    fleet = Fleet(config, receiver, tmp_path)
    event = Event(type="x.y", data={"i": 1})
    started = time.monotonic()
    try:
        await fleet.open()
        for _ in range(3):
            fleet.spawn()
        await publish(config, [event])
        await receiver.wait_for(lambda r: len(holders) >= 1, 30)
        # When, 30 times, the worker holding it is killed with SIGKILL as soon as its request reached the receiver
        # (and once more after the receiver recovered)
        for kill in range(FAILURES + 1):
            if kill == FAILURES:
                slow = False
            seen = len(holders)
            fleet.kill(holders[-1])
            fleet.spawn()
            await receiver.wait_for(lambda r, seen=seen: len(holders) > seen, 30)
        elapsed = time.monotonic() - started
    finally:
        await fleet.close()
    # Then the event was delivered after the last kill, with nothing dead-lettered
    print(f"\n{FAILURES + 1} kills mid-delivery in {elapsed:.1f}s")
    # (more than one answer would be a duplicate, which at-least-once allows and the receiver drops by id)
    assert answered and len(holders) >= FAILURES + 2
    assert await dlq_count(config, "crash") == 0
