"""The worker's /metrics, /healthz and /readyz, scraped over real HTTP while it delivers."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.dead_letters import wait_depth
from tests.support.health import wait_until
from tests.support.receiver import Receiver, Reply
from warren.broker.events import Event
from warren.consumers.metrics import WorkerMetrics
from warren.consumers.metrics_server import MetricsServer
from warren.consumers.worker import Worker
from warren.topology import names

pytestmark = pytest.mark.timeout(120)


async def scrape(port: int, host: str = "127.0.0.1") -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of /metrics, parsed by Prometheus' own text parser: (name, labels) -> value."""
    async with aiohttp.ClientSession() as session, session.get(f"http://{host}:{port}/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def status_of(port: int, path: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as response:
        return response.status


async def test_counters_move_by_what_the_worker_did(endpoint_config: Any, receiver: Receiver, publish: Any) -> None:
    # Given 20 events, 5 of which fail their first attempt with 503, and 2 more that the endpoint rejects (400)
    flaky = {f"flaky-{i}" for i in range(5)}
    rejected = {f"rejected-{i}" for i in range(2)}
    seen: set[str] = set()

    def behaviour(r: Receiver, request: Any, body: bytes) -> Reply:
        event_id = request.headers["webhook-id"]
        if event_id in rejected:
            return Reply(400)
        if event_id in flaky and event_id not in seen:
            seen.add(event_id)
            return Reply(503)
        return Reply(200)

    receiver.behaviour = behaviour
    config = await endpoint_config(
        [{"name": "shop"}], retry={"base": "10ms", "cap": "20ms"}, worker={"metrics_port": 0}
    )
    ids = [*sorted(flaky), *sorted(rejected), *(f"ok-{i}" for i in range(13))]
    async with Worker(config) as worker:
        assert worker.metrics_server is not None
        port = worker.metrics_server.port
        before = await scrape(port)
        # When they are published and delivered
        await publish(config, [Event(type="x.y", data={}, id=i) for i in ids])
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 18, 15)
        assert await wait_depth(config, names.dlq(config.broker.prefix, "shop"), 2) == 2
        # (the receiver answers before the worker settles: the last settlements land a moment later)
        after = await scrape(port)
        deadline = time.monotonic() + 5
        while (
            value(after, "warren_settlements_total", endpoint="shop", how="acked") < 18
            or value(after, "warren_publish_confirms_total", endpoint="shop", target="dead") < 2
            or value(after, "warren_in_flight", endpoint="shop") > 0
        ) and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            after = await scrape(port)
        health, ready = await status_of(port, "/healthz"), await status_of(port, "/readyz")
    # Then each counter moved by exactly what happened
    assert value(before, "warren_delivery_attempts_total", endpoint="shop", outcome="delivered") == 0
    delta = {
        outcome: value(after, "warren_delivery_attempts_total", endpoint="shop", outcome=outcome)
        - value(before, "warren_delivery_attempts_total", endpoint="shop", outcome=outcome)
        for outcome in ("delivered", "retry", "dead", "exhausted")
    }
    assert delta == {"delivered": 18, "retry": 5, "dead": 2, "exhausted": 0}
    assert value(after, "warren_settlements_total", endpoint="shop", how="acked") == 18
    assert value(after, "warren_settlements_total", endpoint="shop", how="retry-scheduled") == 5
    assert value(after, "warren_retries_scheduled_total", endpoint="shop", where="delay-chain") == 5
    assert value(after, "warren_dead_lettered_total", endpoint="shop") == 2
    assert value(after, "warren_publish_confirms_total", endpoint="shop", target="delay") == 5
    assert value(after, "warren_publish_confirms_total", endpoint="shop", target="dead") == 2
    # 25 attempts: 20 first attempts and 5 second ones
    assert value(after, "warren_delivery_attempt_number_count", endpoint="shop") == 25
    assert value(after, "warren_delivery_attempt_number_sum", endpoint="shop") == 20 * 1 + 5 * 2
    assert value(after, "warren_delivery_attempt_number_bucket", endpoint="shop", le="1.0") == 20
    assert value(after, "warren_request_duration_seconds_count", endpoint="shop") == 25
    assert value(after, "warren_delivery_age_seconds_count", endpoint="shop") == 18
    assert 0 < value(after, "warren_delivery_age_seconds_sum", endpoint="shop") < 18 * 5
    assert value(after, "warren_in_flight", endpoint="shop") == 0
    assert value(after, "warren_circuit_state", endpoint="shop") == 0  # closed
    assert value(after, "warren_endpoint_state", endpoint="shop", state="active") == 1
    assert value(after, "warren_worker_ready") == 1
    assert (health, ready) == (200, 200)


async def test_readyz_is_503_until_ready_and_healthz_always_200() -> None:
    # Given a metrics server whose worker is not connected (yet)
    ready = False
    server = MetricsServer(WorkerMetrics(["a"]), lambda: ready, "127.0.0.1", 0)
    await server.start()
    try:
        # Then /readyz says 503 while /healthz says 200, and /readyz turns 200 once the worker is ready
        assert await status_of(server.port, "/healthz") == 200
        assert await status_of(server.port, "/readyz") == 503
        ready = True
        assert await status_of(server.port, "/readyz") == 200
        samples = await scrape(server.port)
        assert value(samples, "warren_delivery_attempts_total", endpoint="a", outcome="delivered") == 0
    finally:
        await server.close()


async def test_a_port_in_use_is_a_clear_error() -> None:
    first = MetricsServer(WorkerMetrics(), lambda: True, "127.0.0.1", 0)
    await first.start()
    try:
        second = MetricsServer(WorkerMetrics(), lambda: True, "127.0.0.1", first.port)
        with pytest.raises(Exception, match=f"cannot serve metrics on 127.0.0.1:{first.port}"):
            await second.start()
    finally:
        await first.close()


async def test_an_ordered_retry_in_place_the_last_attempt_age_and_metrics_host(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given an ordered endpoint whose receiver refuses each event's first attempt, a worker serving its metrics
    # on ::1 only, and 3 events published at least 1 s before the worker starts
    seen: set[str] = set()

    def first_refused(r: Receiver, request: Any, body: bytes) -> Reply:
        event_id = request.headers["webhook-id"]
        if event_id not in seen:
            seen.add(event_id)
            return Reply(503)
        return Reply(200)

    receiver.behaviour = first_refused
    config = await endpoint_config(
        [{"name": "ledger", "ordering": "key", "partitions": 1, "circuit": {"enabled": False}}],
        retry={"base": "10ms", "cap": "20ms"},
        worker={"metrics_port": 0, "metrics_host": "::1"},
    )
    published_at = time.time()
    await publish(config, [Event(type="x.y", data={}, key="k", sequence=i) for i in range(3)])
    await wait_until(lambda: time.time() >= published_at + 1.0, 5, "the events to be 1 s old")
    async with Worker(config) as worker:
        assert worker.metrics_server is not None
        port = worker.metrics_server.port
        # When they are delivered, each after one retry held in place (an ordered partition never skips ahead)
        await receiver.wait_for(lambda r: len(r.ok_ids()) == 3, 15)
        samples = await scrape(port, "[::1]")
        oldest_possible = time.time() - published_at
        # Then the metrics are served on ::1 and not on 127.0.0.1
        with pytest.raises(aiohttp.ClientConnectorError):
            await scrape(port, "127.0.0.1")
    # And each refused attempt counts as retry-in-place, and as a retry scheduled in place (none through the chain)
    assert value(samples, "warren_delivery_attempts_total", endpoint="ledger", outcome="retry-in-place") == 3
    assert value(samples, "warren_delivery_attempts_total", endpoint="ledger", outcome="retry") == 0
    assert value(samples, "warren_retries_scheduled_total", endpoint="ledger", where="in-place") == 3
    assert value(samples, "warren_retries_scheduled_total", endpoint="ledger", where="delay-chain") == 0
    # And the age of the message last attempted is its age then: at least the 1 s it waited, at most its age now
    age = value(samples, "warren_last_attempt_age_seconds", endpoint="ledger")
    assert 1.0 <= age <= oldest_possible, (age, oldest_possible)
