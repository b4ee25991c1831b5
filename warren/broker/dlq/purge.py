"""Emptying a DLQ for good: the only DLQ operation that loses messages, so the CLI asks first."""

from __future__ import annotations

from aio_pika.abc import AbstractConnection

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.probe import existing_queue
from warren.topology import names

__all__ = ["purge_dlq"]


async def purge_dlq(connection: AbstractConnection, prefix: str, endpoint: str) -> int:
    """Delete every ready message of the endpoint's DLQ; return how many RabbitMQ deleted.

    Messages held unacknowledged at that moment (someone listing the DLQ) are not purged: they return after.
    """
    name = names.dlq(prefix, endpoint)
    channel = await connection.channel()
    try:
        queue = await existing_queue(channel, name)
        result = await queue.purge()
        return int(result.message_count or 0)
    finally:
        await close_channel(channel)
