"""Deleting a benchmark run's topology: every queue and exchange its plan declared (the benchmarks share this)."""

from __future__ import annotations

import aio_pika

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
