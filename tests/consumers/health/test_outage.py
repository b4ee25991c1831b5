"""An endpoint that goes down for a while: the circuit opens, the outage costs a bounded number of requests,
nothing is dead-lettered, and everything is delivered once it is back (ordered endpoints in order).

Real RabbitMQ, a real receiver on 127.0.0.1, the Worker in this process. The figures of the run are printed
(``pytest -s``) and reported in docs/health.md.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.health import dlq_count, operator_inbox, wait_until
from tests.support.receiver import Receiver, Reply
from warren.broker.endpoint_state.records import CLOSED, OPEN
from warren.broker.events import Event
from warren.consumers.hooks import DeliveryHooks, EndpointBlocked
from warren.consumers.worker import Worker
from warren.transport.base import SendResult

pytestmark = pytest.mark.timeout(120)

THRESHOLD = 3
COOLDOWN, FACTOR, COOLDOWN_MAX = 0.2, 2.0, 0.8
OUTAGE = 3.0
CIRCUIT = {
    "consecutive_failures": THRESHOLD,
    "failure_ratio": None,
    "cooldown": f"{COOLDOWN}s",
    "cooldown_factor": FACTOR,
    "cooldown_max": f"{COOLDOWN_MAX}s",
}


def probes_possible(outage: float) -> int:
    """Probes the cool-down schedule allows in ``outage`` seconds (one at the end of each cool-down)."""
    elapsed, probes, failed = 0.0, 0, 0
    while True:
        elapsed += min(COOLDOWN_MAX, COOLDOWN * FACTOR**failed)
        if elapsed > outage:
            return probes
        probes += 1
        failed += 1


async def test_outage_parks_everything_and_delivers_it_all_after_recovery(
    endpoint_config, receiver: Receiver, publish
) -> None:
    # Given an unordered and an ordered endpoint with a 3-failure circuit and a short cool-down, and a retry
    # budget of 4 attempts that a 3 s outage would exhaust many times over without the breaker
    down = False
    during: dict[str, list[float]] = defaultdict(list)

    def behaviour(r: Receiver, request: Any, body: bytes) -> Reply:
        endpoint = request.path.rsplit("/", 1)[-1]
        if down:
            during[endpoint].append(time.monotonic())
            return Reply(503, delay=0.02)
        return Reply(200)

    receiver.behaviour = behaviour
    config = await endpoint_config(
        [
            {"name": "plain", "events": ["plain.*"], "concurrency": 4, "circuit": CIRCUIT},
            {"name": "keyed", "events": ["keyed.*"], "ordering": "key", "partitions": 2, "circuit": CIRCUIT},
        ],
        retry={"base": "50ms", "cap": "200ms", "max_attempts": 4},
        worker={"rebalance_interval": "300ms"},
    )
    before = [Event(type="plain.x", data={"i": i}) for i in range(10)]
    before += [Event(type="keyed.x", data={}, key=f"k{i % 4}", sequence=i // 4) for i in range(8)]
    outage_events = [Event(type="plain.x", data={"i": i}) for i in range(100)]
    outage_events += [Event(type="keyed.x", data={}, key=f"k{i % 4}", sequence=2 + i // 4) for i in range(100)]
    async with operator_inbox(config) as operator, Worker(config) as worker:
        await publish(config, before)
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= len(before), 15)

        # When the receiver goes down while 200 more events arrive
        down = True
        went_down = time.monotonic()
        await publish(config, outage_events)
        opened_at: dict[str, float] = {}
        for name in ("plain", "keyed"):
            guard = worker.health.guards[name]  # type: ignore[union-attr]
            await wait_until(lambda g=guard: g.view.circuit_state != CLOSED, 10, f"{name} circuit open")
            opened_at[name] = time.monotonic()
        opened_after = max(opened_at.values()) - went_down
        # Then while it stays down (OUTAGE seconds after both circuits opened: the scenario, not a hope; counted
        # from the opening, since publishing the outage's events can take seconds on a busy machine) only probes
        # reach it
        await asyncio.sleep(max(0.0, max(opened_at.values()) + OUTAGE - time.monotonic()))
        for name in ("plain", "keyed"):
            assert worker.health.guards[name].view.circuit_state in (OPEN, "half-open")  # type: ignore[union-attr]

        # When it comes back
        down = False
        came_back = time.monotonic()
        open_for = {name: came_back - at for name, at in opened_at.items()}
        expected = {e.id for e in before + outage_events}
        await receiver.wait_for(lambda r: expected <= r.ok_ids(), 30)
        drained_in = time.monotonic() - came_back
        await operator.wait_for("endpoint.circuit_closed", "plain")
        await operator.wait_for("endpoint.circuit_closed", "keyed")

    # Then every event was delivered, nothing was dead-lettered, the ordered keys kept their order
    lost = len(expected - receiver.ok_ids())
    assert lost == 0
    assert await dlq_count(config, "plain") == 0 and await dlq_count(config, "keyed") == 0
    sequences: dict[str, list[int]] = defaultdict(list)
    for request in receiver.received:
        body = request.json
        if request.status == 200 and "key" in body:
            sequences[body["key"]].append(body["sequence"])
    assert sum(1 for s in sequences.values() for a, b in itertools.pairwise(s) if b <= a) == 0
    # And the outage cost at most: the failures that opened the circuit, what was in flight, and the probes. In
    # flight: 4 on either endpoint, plain's concurrency and keyed's 4 keys, each in its own lane (keyed's bound
    # was 2, one per partition, from before per-key lanes: a loaded round saw 11 requests against it, 3 + 3 + 5)
    possible = {name: probes_possible(seconds) for name, seconds in open_for.items()}
    bound = {name: THRESHOLD + 4 + possible[name] for name in ("plain", "keyed")}
    counts = {name: len(times) for name, times in during.items()}
    after_open = {name: sum(1 for t in times if t > opened_at[name] + 0.1) for name, times in during.items()}
    for name, count in counts.items():
        assert count <= bound[name], (name, count, bound[name])
    # And once open (past what was in flight then), only probes reached it: one at a time, at the end of each
    # cool-down, so no more than the schedule allows, and at least the first (the breaker does try again)
    for name, probes in after_open.items():
        assert 1 <= probes <= possible[name], (name, probes, possible[name])
    # And the operator heard the circuit open and close for both endpoints
    for name in ("plain", "keyed"):
        assert operator.types(name)[:1] == ["endpoint.circuit_opened"]
        assert "endpoint.circuit_closed" in operator.types(name)
    print(
        f"\noutage figures: opened after {opened_after:.2f}s; requests during the {OUTAGE:g}s outage {counts} "
        f"(bounds {bound}), of which probes {after_open} (at most {possible}); drained "
        f"{len(outage_events)} events in {drained_in:.2f}s after recovery; lost {lost}"
    )


def failing_first(n: int) -> Callable[[Receiver, Any, bytes], Reply]:
    """A receiver's behaviour: 503 for the first ``n`` requests, then 200."""
    requests = 0

    def behaviour(r: Receiver, request: Any, body: bytes) -> Reply:
        nonlocal requests
        requests += 1
        return Reply(503) if requests <= n else Reply(200)

    return behaviour


async def test_an_ordered_event_parked_by_the_circuit_keeps_the_attempts_it_spent_in_place(
    endpoint_config, receiver: Receiver, publish
) -> None:
    # Given an ordered endpoint whose circuit opens after 3 consecutive failures, and a receiver that fails the
    # first 3 requests, then answers 200
    receiver.behaviour = failing_first(THRESHOLD)
    attempts: list[tuple[int, str]] = []
    config = await endpoint_config(
        [{"name": "keyed", "events": ["keyed.*"], "ordering": "key", "partitions": 1, "circuit": CIRCUIT}],
        retry={"base": "20ms", "cap": "20ms", "max_attempts": 10},
    )
    await publish(config, [Event(type="keyed.x", data={}, key="k", sequence=0)])
    # When a worker retries it in place until its third failure opens the circuit, which parks it (that attempt
    # is not spent: the message goes back to RabbitMQ), and delivers it to the probe after the cool-down
    async with Worker(config, hooks=DeliveryHooks(observers=[lambda a: attempts.append((a.attempt, a.outcome))])):
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 1, 15)
    # Then the probe continued its count: the 2 attempts spent in place are in no header (the message never left
    # its partition) and were remembered across the hand-back, as an unordered message's headers keep its count.
    # Forgotten, the probe would be attempt 1 and each outage would grant a fresh max_attempts.
    assert attempts == [(1, "retry-in-place"), (2, "retry-in-place"), (3, "parked"), (3, "delivered")]


class _RefusesOnce:
    """A gate that refuses the ``nth`` attempt it sees, as an open circuit's or a pause's gate does."""

    def __init__(self, nth: int) -> None:
        self.nth, self.seen = nth, 0

    async def acquire(self, endpoint: str) -> None:
        self.seen += 1
        if self.seen == self.nth:
            raise EndpointBlocked("held by the test")

    def release(self, endpoint: str, result: SendResult | None) -> None:
        pass


async def test_an_ordered_event_held_by_a_gate_keeps_the_attempts_it_spent_in_place(
    endpoint_config, receiver: Receiver, publish
) -> None:
    # Given an ordered endpoint (circuit off), a receiver that fails the first request, and a gate that refuses
    # the second attempt (as the gate of a circuit opened meanwhile by another partition or worker does)
    receiver.behaviour = failing_first(1)
    attempts: list[tuple[int, str]] = []
    config = await endpoint_config(
        [{"name": "keyed", "events": ["keyed.*"], "ordering": "key", "partitions": 1, "circuit": {"enabled": False}}],
        retry={"base": "20ms", "cap": "20ms", "max_attempts": 10},
    )
    await publish(config, [Event(type="keyed.x", data={}, key="k", sequence=0)])
    hooks = DeliveryHooks(gates=[_RefusesOnce(2)], observers=[lambda a: attempts.append((a.attempt, a.outcome))])
    # When a worker delivers it: the first attempt fails in place, the second is refused (the message goes back
    # to RabbitMQ untouched), and the next delivery is attempted
    async with Worker(config, hooks=hooks):
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 1, 15)
    # Then that attempt is its 2nd: the one spent in place was remembered across the hand-back
    assert attempts == [(1, "retry-in-place"), (2, "delivered")]
