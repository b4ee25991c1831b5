"""The gate's logic for one endpoint in one worker, without a broker: trips, probes, ramp, limits, throttle."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from tests.conftest import TEST_SECRET
from warren.broker.endpoint_state.records import CLOSED, HALF_OPEN, OPEN, THROTTLE, StateRecord
from warren.consumers.health.guard import EndpointGuard
from warren.consumers.hooks import EndpointBlocked
from warren.topology.config import Endpoint
from warren.transport.http import http_result

pytestmark = pytest.mark.timeout(10)


# Lateness allowed for the rate-limit test: a share of the expected spacing plus a fixed allowance for a loaded
# machine's scheduler (two suites on two cores stall a process for 100 ms and more).
RATE_LATE_SHARE = 0.5
RATE_LATE_FIXED = 0.2


def make_guard(**endpoint: Any) -> tuple[EndpointGuard, list[StateRecord]]:
    circuit = {"consecutive_failures": 3, "failure_ratio": None, "cooldown": "1s", **endpoint.pop("circuit", {})}
    model = Endpoint(
        name="acme", url="https://hooks.example/in", secret=TEST_SECRET, events=["#"], circuit=circuit, **endpoint
    )
    emitted: list[StateRecord] = []
    guard: EndpointGuard

    def emit(record: StateRecord) -> None:  # what the controller does: apply here at once, then publish
        emitted.append(record)
        guard.apply(record)

    guard = EndpointGuard(model, throttle_cap=60.0, by="w1", emit=emit)
    return guard, emitted


async def settle() -> None:
    """Let every task that can run, run: the guard is plain asyncio (events, no timers on these paths), so a few
    turns of the loop are enough for a waiter that is free to go on; one still waiting after them is blocked."""
    for _ in range(20):
        await asyncio.sleep(0)


async def attempt(guard: EndpointGuard, status: int | None, retry_after: str | None = None) -> None:
    await guard.acquire()
    error = None if status is not None else "connection failed"
    guard.release(http_result(status, error, 0.01, retry_after=retry_after))


async def test_consecutive_failures_open_the_circuit_and_then_nothing_goes() -> None:
    guard, emitted = make_guard()
    for _ in range(3):
        await attempt(guard, 503)
    assert [r.state for r in emitted] == [OPEN]
    assert guard.parks()  # a failure arriving now leaves its message untouched
    with pytest.raises(EndpointBlocked, match="circuit open"):
        await guard.acquire()
    assert guard.in_flight == 0


async def test_attempts_in_flight_when_the_circuit_opens_are_refused_as_they_wake() -> None:
    guard, _ = make_guard(max_in_flight=1)
    await guard.acquire()  # takes the only slot
    waiter = asyncio.create_task(guard.acquire())
    await settle()
    assert not waiter.done()
    # When the circuit opens (another worker's verdict arrives), then the waiting attempt is refused
    now = time.time()
    guard.apply(StateRecord("acme", "circuit", OPEN, "fleet", now, int(now * 1000), "w2", now, 0, now + 5))
    with pytest.raises(EndpointBlocked):
        await waiter


async def test_one_probe_at_a_time_and_a_failed_probe_sends_the_others_back() -> None:
    guard, emitted = make_guard()
    for _ in range(3):
        await attempt(guard, 503)
    # Given this worker holds the probe lock (half-open)
    guard.apply(guard.view.record("circuit", HALF_OPEN, "probing", time.time(), "w1", opened_at=time.time()))
    guard.probing = True
    await guard.acquire()  # the probe
    second = asyncio.create_task(guard.acquire())
    await settle()
    assert not second.done()  # waits for the probe's verdict
    # When the probe fails, then the circuit opens again with one failed probe, and the other is refused
    guard.release(http_result(503, None, 0.01))
    with pytest.raises(EndpointBlocked):
        await second
    assert (emitted[-1].state, emitted[-1].failures) == (OPEN, 1)
    assert not guard.probing


async def test_a_successful_probe_closes_the_circuit_and_delivery_ramps_up() -> None:
    guard, emitted = make_guard(concurrency=8, circuit={"ramp_start": 1})
    for _ in range(3):
        await attempt(guard, 503)
    guard.apply(guard.view.record("circuit", HALF_OPEN, "probing", time.time(), "w1", opened_at=time.time()))
    guard.probing = True
    await attempt(guard, 200)
    assert emitted[-1].state == CLOSED and guard.view.circuit_state == CLOSED
    # Then concurrency starts at 1 and doubles with each success up to the endpoint's 8
    seen = []
    for _ in range(5):
        seen.append(guard.limit())
        await attempt(guard, 200)
    assert seen == [1, 2, 4, 8, 8]


async def test_concurrency_never_exceeds_the_fleet_share() -> None:
    guard, _ = make_guard(max_in_flight=4, concurrency=16)
    guard.set_workers(2)  # two workers share 4: two each
    peak = 0

    async def one() -> None:
        nonlocal peak
        await guard.acquire()
        peak = max(peak, guard.in_flight)
        await asyncio.sleep(0.01)
        guard.release(http_result(200, None, 0.01))

    await asyncio.gather(*(one() for _ in range(20)))
    assert peak == 2


async def test_the_rate_limit_spaces_attempts() -> None:
    guard, _ = make_guard(rate_limit=50.0, burst=1)
    started = time.monotonic()
    for _ in range(11):
        await attempt(guard, 200)
    # one at once, then 10 more at 50/s: at least 200 ms, and under 500 ms (a loaded machine's scheduling can add
    # 100 ms and more); a limiter at 20/s or slower (500 ms) still fails
    expected, took = 10 / 50, time.monotonic() - started
    assert expected - 0.01 <= took < expected * (1 + RATE_LATE_SHARE) + RATE_LATE_FIXED, took


async def test_429_with_retry_after_throttles_and_is_not_re_announced() -> None:
    guard, emitted = make_guard()
    await attempt(guard, 429, retry_after="2")
    assert [r.kind for r in emitted] == [THROTTLE]
    assert 1.9 < emitted[0].until - time.time() <= 2.0  # type: ignore[operator]
    with pytest.raises(EndpointBlocked, match="throttled"):
        await guard.acquire()
    # A 429 arriving from an attempt already in flight asks for nothing new: no second broadcast
    guard.in_flight += 1
    guard.release(http_result(429, None, 0.01, retry_after="2"))
    assert len(emitted) == 1
    assert guard.view.circuit_state == CLOSED  # a 429 is not a failure of the endpoint


async def test_resuming_after_a_pause_ramps_up_too() -> None:
    guard, _ = make_guard(concurrency=8)
    now = time.time()
    guard.apply(guard.view.record("admin", "paused", "maintenance", now, "cli"))
    with pytest.raises(EndpointBlocked, match="paused: maintenance"):
        await guard.acquire()
    guard.apply(guard.view.record("admin", "active", "resumed", now, "cli"))
    assert guard.limit() == 1
    await attempt(guard, 200)
    assert guard.limit() == 2
