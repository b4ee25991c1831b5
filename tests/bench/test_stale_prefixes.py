"""The benchmark's sweep: a run that stopped mid-way leaves queues; the next run deletes them, and only them."""

from __future__ import annotations

import asyncio
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
    # Given three benchmark prefixes with a queue and an exchange each: one whose run died, one whose run holds on,
    # and one whose run starts while the sweep takes its second look
    stopped, running, starting = (f"bench{uuid.uuid4().hex[:6]}" for _ in range(3))
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        for prefix in (stopped, running, starting):
            await channel.declare_queue(f"{prefix}.work.q", durable=True)
            await channel.declare_exchange(f"{prefix}.events", aio_pika.ExchangeType.TOPIC, durable=True)
        async with held_alive(amqp_url, running):
            # When the next sitting sweeps the vhost
            sweeping = asyncio.create_task(sweep(rabbit_server.management_url, vhost, settle=2.0))
            await asyncio.sleep(0.5)
            async with held_alive(amqp_url, starting):
                swept = await sweeping
                # Then the stopped run's queue and exchange are gone, the live runs' are there
                queues = {q["name"] for q in await management.queues()}
                exchanges = {e["name"] for e in await management.exchanges()}
            assert swept == sorted(set(swept) - {running, starting}) and stopped in swept
            assert f"{stopped}.work.q" not in queues and f"{stopped}.events" not in exchanges
            for live in (running, starting):
                assert {f"{live}.work.q", f"{live}-alive"} <= queues and f"{live}.events" in exchanges
        # And once those runs end (their connections closed), their markers go with them and the next sweep takes
        # the rest
        assert {running, starting} <= set(await sweep(rabbit_server.management_url, vhost, settle=0.1))
        left = {q["name"] for q in await management.queues()}
        assert not left & {f"{p}{s}" for p in (running, starting) for s in (".work.q", "-alive")}
    finally:
        await connection.close()
