"""``warren status`` data against a real broker: exact counts, the delay chain, dead letters, states, rates."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import aio_pika
import pytest

from tests.consumers.conftest import endpoint_config, publish, receiver
from tests.support.dead_letters import seed_dead_letters, wait_depth
from tests.support.processes import write_config
from tests.support.receiver import Receiver, Reply
from warren.broker.endpoint_state.admin import read_circuit_states
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.broker.status import NO_METRICS, collect_status, queue_stats, rate_of
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.delays import delay_routing_key
from warren.topology.planner import plan_topology

__all__ = ["endpoint_config", "publish", "receiver"]

pytestmark = pytest.mark.timeout(120)


def test_rate_from_samples_and_fallbacks() -> None:
    samples = [{"sample": 160, "timestamp": 60_000}, {"sample": 40, "timestamp": 0}]
    assert rate_of({"samples": samples, "avg_rate": 99.0}) == 2.0
    assert rate_of({"samples": samples[:1], "avg_rate": 1.5}) == 1.5
    assert rate_of({"rate": 0.5}) == 0.5
    assert rate_of(None) is None and rate_of({}) is None


def test_a_broker_without_metrics_collection_is_said_so_not_shown_as_zero() -> None:
    # Given the overview and queue rows of a RabbitMQ 4.x broker with management_metrics_collection off
    bare = [{"name": "w.ep.a.q"}, {"name": "w.ep.a.dlq"}]
    # Then no row is used (unacked counts and rates stay unknown) and the reason says what is missing
    assert queue_stats({"disable_stats": True}, bare) == ({}, NO_METRICS)
    assert "unacknowledged counts and rates are not known" in NO_METRICS
    # While a broker that collects them has its rows used as they are, samples not arrived yet included
    rows = [{"name": "w.ep.a.q", "messages_unacknowledged": 3}, {"name": "w.ep.a.dlq"}]
    assert queue_stats({"disable_stats": False}, rows) == ({"w.ep.a.q": rows[0], "w.ep.a.dlq": rows[1]}, None)


async def park_in_delay_chain(config: WarrenConfig, destination: str, seconds: float) -> None:
    """Publish one message into the delay chain as a retry waiting ``seconds`` (it stays in one level queue)."""
    levels = plan_topology(config).delay_levels
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(names.delay_exchange(config.broker.prefix, levels - 1))
        message = aio_pika.Message(b"{}", message_id="parked-retry")
        await exchange.publish(message, routing_key=delay_routing_key(seconds, levels, destination))
    finally:
        await connection.close()


async def status_cli(config: WarrenConfig, directory: Path) -> dict[str, Any]:
    path = write_config(directory, config)
    clean = {k: v for k, v in os.environ.items() if not k.upper().startswith("WARREN_")}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "warren", "status", "--json", "--config", str(path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=clean,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()
    document: dict[str, Any] = json.loads(out)
    return document


async def test_status_counts_match_the_broker(
    endpoint_config: Any, publish: Any, receiver: Receiver, management: ManagementClient, tmp_path: Path
) -> None:
    # Given an unordered and an ordered endpoint, no worker, 7 events for each, 3 dead letters for the first
    # and one retry waiting 60 s in the delay chain
    config = await endpoint_config(
        [{"name": "shop", "events": ["order.*"]}, {"name": "books", "ordering": "key", "partitions": 3}],
        retry={"base": "100ms", "cap": "2m"},  # a delay chain long enough to hold a retry for 60 s
    )
    prefix = config.broker.prefix
    await publish(config, [Event(type="order.paid", data={"i": i}, key=f"k{i}") for i in range(7)])
    await seed_dead_letters(config, "shop", [Event(type="order.paid", data={}) for _ in range(3)])
    await park_in_delay_chain(config, names.work_queue(prefix, "shop"), 60)
    assert await wait_depth(config, names.dlq(prefix, "shop"), 3) == 3
    # When the status is taken, through the API and through the command line
    connection = await aio_pika.connect(config.broker.url)
    try:
        states = await read_circuit_states(connection, config)
        status = await collect_status(config, connection, management, None, states)
    finally:
        await connection.close()
    document = await status_cli(config, tmp_path)
    # Then the counts are the broker's: 7 ready per endpoint, 3 dead, 1 retry waiting, no consumer
    shop, books = status.endpoints
    assert (shop.ready, shop.consumers, shop.dlq.ready) == (7, 0, 3)
    assert (books.ready, books.consumers, books.dlq.ready, len(books.queues)) == (7, 0, 0, 3)
    assert status.retries_waiting == 1
    assert shop.circuit == "active" and books.circuit == "active"
    assert status.management_error is None
    cli = {e["name"]: e for e in document["endpoints"]}
    assert cli["shop"]["totals"]["ready"] == 7 and cli["shop"]["totals"]["dead"] == 3
    assert cli["books"]["totals"]["ready"] == 7 and document["retries_waiting"] == 1
    assert [q["name"] for q in cli["books"]["queues"]] == [names.partition_queue(prefix, "books", i) for i in range(3)]
    # And the management API, once its sampled figures catch up, agrees queue by queue
    expected = {q.name: q.ready for e in status.endpoints for q in (*e.queues, e.dlq)}
    deadline = time.monotonic() + 15
    while True:
        sampled = {q["name"]: q.get("messages_ready") for q in await management.queues() if q["name"] in expected}
        if sampled == expected or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert sampled == expected


async def test_status_sees_consumers_and_unacked_while_a_worker_delivers(
    endpoint_config: Any, publish: Any, receiver: Receiver, management: ManagementClient
) -> None:
    # Given a worker holding 4 deliveries of a slow endpoint (the receiver answers only when released)
    release = asyncio.Event()

    async def slow(r: Receiver, request: Any, body: bytes) -> Reply:
        await release.wait()
        return Reply(200)

    receiver.behaviour = slow
    config = await endpoint_config([{"name": "slow", "concurrency": 4}])
    await publish(config, [Event(type="x.y", data={"i": i}) for i in range(10)])
    async with Worker(config):
        await receiver.wait_for(lambda r: r.in_flight == 4, 10)
        connection = await aio_pika.connect(config.broker.url)
        try:
            # When the status is taken while they are held (unacked is sampled: wait for the sample)
            deadline = time.monotonic() + 15
            while True:
                status = await collect_status(config, connection, management)
                [queue] = status.endpoints[0].queues
                if queue.unacked == 4 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
        finally:
            await connection.close()
            release.set()
    # Then it shows the consumer, the 6 ready and the 4 unacked
    assert (queue.consumers, queue.ready, queue.unacked) == (1, 6, 4)
    assert status.endpoints[0].circuit == "n/a"  # no states passed in


async def test_a_retry_the_dead_letter_worker_holds_is_counted_held(
    endpoint_config: Any, management: ManagementClient
) -> None:
    # Given a retry coming back after 1 ms to a work queue that is gone (its endpoint removed meanwhile): the
    # chain's last hop routes it nowhere, and the level's at-least-once dead-letter worker keeps it and sends it
    # again every dead_letter_worker_publisher_confirm_timeout (180 s by default), neither ready nor unacked
    config = await endpoint_config([{"name": "kept"}])
    gone = names.work_queue(config.broker.prefix, "gone")
    await park_in_delay_chain(config, gone, 0.001)
    connection = await aio_pika.connect(config.broker.url)
    try:
        # When the status is taken (the held count is a management sample: waited for)
        deadline = time.monotonic() + 30
        while True:
            status = await collect_status(config, connection, management)
            if status.retries_held or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
    finally:
        await connection.close()
    # Then it is counted held, at the level that holds it, not waiting and not lost
    assert (status.retries_held, status.retries_waiting) == (1, 0)
    [level] = [d for d in status.delay if d.queue.held]
    assert (level.level, level.queue.ready, level.queue.held) == (0, 0, 1)
    assert status.to_json()["retries_held"] == 1
