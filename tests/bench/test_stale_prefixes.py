"""The benchmark's sweep: a run that stopped mid-way leaves queues; the next run deletes them, and only them."""

from __future__ import annotations

import uuid

import aio_pika
import pytest

from bench.stale_prefixes import held_alive, stale_prefixes, sweep
from tests.support.rabbit import RabbitServer
from warren.broker.management import ManagementClient


def test_a_prefix_is_stale_without_its_alive_queue_and_without_consumers() -> None:
    rows: list[dict[str, object]] = [
        {"name": "bench0a1b2c.work.q", "consumers": 0},  # stopped mid-run
        {"name": "bench0a1b2c.retry.1", "consumers": None},  # RabbitMQ 3.10 before its first stats
        {"name": "benchd4e5f6.work.q", "consumers": 0},  # alive: its run holds the marker
        {"name": "benchd4e5f6-alive", "consumers": 0},
        {"name": "bench777777.work.q", "consumers": 1},  # a run from before the marker, delivering
        {"name": "benchg123456.events.q", "consumers": 0},  # bench/publish_process.py's
        {"name": "t1234abcd.work.q", "consumers": 0},  # a test's prefix: never the benchmark's to delete
        {"name": "bench-not-a-prefix.q", "consumers": 0},
        {"name": "benchzzzzzz", "consumers": 0},
    ]
    assert stale_prefixes(rows) == ["bench0a1b2c", "benchg123456"]


@pytest.mark.timeout(60)
async def test_the_sweep_deletes_a_stopped_runs_queues_and_exchanges_and_leaves_a_live_runs(
    rabbit_server: RabbitServer, amqp_url: str, vhost: str, management: ManagementClient
) -> None:
    # Given two benchmark prefixes with a queue and an exchange each: one whose run died, one whose run holds on
    stopped, running = (f"bench{uuid.uuid4().hex[:6]}" for _ in range(2))
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        for prefix in (stopped, running):
            await channel.declare_queue(f"{prefix}.work.q", durable=True)
            await channel.declare_exchange(f"{prefix}.events", aio_pika.ExchangeType.TOPIC, durable=True)
        async with held_alive(amqp_url, running):
            # When the next sitting sweeps the vhost
            swept = await sweep(rabbit_server.management_url, vhost)
            # Then the stopped run's queue and exchange are gone, the live run's are there
            queues = {q["name"] for q in await management.queues()}
            exchanges = {e["name"] for e in await management.exchanges()}
            assert stopped in swept and running not in swept
            assert f"{stopped}.work.q" not in queues and f"{stopped}.events" not in exchanges
            assert {f"{running}.work.q", f"{running}-alive"} <= queues and f"{running}.events" in exchanges
        # And once that run ends (its connection closed), its marker goes with it and the next sweep takes the rest
        assert running in await sweep(rabbit_server.management_url, vhost)
        assert not {q["name"] for q in await management.queues()} & {f"{running}.work.q", f"{running}-alive"}
    finally:
        await connection.close()
