"""A benchmark run's topology: declared for the run, its prefix held alive meanwhile (bench/stale_prefixes.py), and
every queue and exchange its plan declared deleted after it (the benchmarks share this)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import aio_pika

from bench.stale_prefixes import held_alive
from warren.broker.applier import apply_setup
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology


async def teardown(config: WarrenConfig) -> None:
    plan = plan_topology(config)
    connection = await aio_pika.connect(config.broker.url)
    for queue in plan.queues:
        channel = await connection.channel()
        await channel.queue_delete(queue.name)
    for exchange in plan.exchanges:
        channel = await connection.channel()
        await channel.exchange_delete(exchange.name)
    await connection.close()


@asynccontextmanager
async def declared(config: WarrenConfig) -> AsyncIterator[None]:
    """``config``'s plan declared for the block and deleted after it. Its prefix is held alive throughout: a run
    killed mid-way leaves its queues to the next sitting's sweep, and one with no consumer is never swept while it
    lives."""
    async with held_alive(config.broker.url, config.broker.prefix):
        await apply_setup(config)
        try:
            yield
        finally:
            await teardown(config)
