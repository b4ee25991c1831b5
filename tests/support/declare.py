"""Declare a Plan's exchanges, queues and bindings with aio-pika: a test helper, not the applier.

No drift checks, no pruning: tests start from a fresh prefix, so declaring is all they need.
"""

from __future__ import annotations

from typing import Any

from aio_pika import ExchangeType
from aio_pika.abc import AbstractConnection

from warren.topology.plan import Plan

__all__ = ["declare_plan"]


async def declare_plan(connection: AbstractConnection, plan: Plan) -> None:
    async with connection.channel() as channel:
        exchanges = {}
        for spec in plan.exchanges:
            exchanges[spec.name] = await channel.declare_exchange(
                spec.name, ExchangeType(spec.type), durable=spec.durable, arguments=dict(spec.arguments)
            )
        queues = {}
        for queue in plan.queues:
            queues[queue.name] = await channel.declare_queue(
                queue.name, durable=queue.durable, arguments=dict(queue.arguments)
            )
        for binding in plan.bindings:
            source = exchanges.get(binding.source) or await channel.get_exchange(binding.source)
            arguments: dict[str, Any] | None = dict(binding.arguments) or None
            if binding.destination_type == "queue":
                await queues[binding.destination].bind(source, binding.routing_key, arguments=arguments)
            else:
                await exchanges[binding.destination].bind(source, binding.routing_key, arguments=arguments)
