"""Declare a configuration's topology for a test, and a running Worker around it."""

from __future__ import annotations

import aio_pika

from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology


async def declare(config: WarrenConfig) -> None:
    """Declare every object of the plan through AMQP (what ``warren setup`` does, minus drift reporting)."""
    plan = plan_topology(config)
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        raw = await channel.get_underlay_channel()
        for exchange in plan.exchanges:
            await channel.declare_exchange(
                exchange.name, exchange.type, durable=True, arguments=dict(exchange.arguments)
            )
        for queue in plan.queues:
            await channel.declare_queue(queue.name, durable=True, arguments=dict(queue.arguments))
        for binding in plan.bindings:
            if binding.destination_type == "queue":
                await raw.queue_bind(
                    binding.destination, binding.source, binding.routing_key, arguments=dict(binding.arguments)
                )
            else:
                await raw.exchange_bind(
                    binding.destination, binding.source, binding.routing_key, arguments=dict(binding.arguments)
                )
    finally:
        await connection.close()
