"""A robust connection comes back when a queue declared on one of its channels is gone
(warren/broker/amqp/connection.py, ``_RobustChannel``): the channel is restored without it, and its consumer
comes back once the queue is declared again."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.support.connections import close_named
from warren.broker.amqp.connection import connect, connect_once
from warren.broker.management import ManagementClient

pytestmark = pytest.mark.timeout(90)


async def _ignore(message: object) -> None:
    """A consumer that takes nothing (the queue stays empty)."""


async def test_a_robust_connection_comes_back_and_consumes_a_queue_gone_meanwhile_once_it_is_back(
    amqp_url: str, management: ManagementClient, prefix: str
) -> None:
    # Given a robust connection consuming a queue on one channel, with a second channel beside it
    name = f"warren-restore-{uuid.uuid4().hex[:8]}"
    connection = await connect(amqp_url, name=name)
    other = await connect_once(amqp_url, name=f"{name}-other")
    try:
        admin = await other.channel()
        await admin.declare_queue(f"{prefix}.gone", durable=True)
        consuming = await connection.channel()
        queue = await consuming.get_queue(f"{prefix}.gone", ensure=True)
        await queue.consume(_ignore)
        keeper = await connection.channel()
        # When the queue is deleted and RabbitMQ then closes the connection
        await admin.queue_delete(f"{prefix}.gone")
        await close_named(management, name)
        # Then the connection comes back (aio-pika alone retried it for ever: NOT_FOUND on the restore)
        deadline = asyncio.get_running_loop().time() + 30
        while True:
            await asyncio.sleep(0.2)
            if connection.connected.is_set() and not keeper.is_closed:
                try:
                    await keeper.declare_queue("", exclusive=True)
                    break
                except Exception:
                    pass
            assert asyncio.get_running_loop().time() < deadline, "the connection never came back"
        fresh = await connection.channel()
        await fresh.declare_queue("", exclusive=True)
        # and once the queue is declared again (as `warren setup` does), its consumer is back, on the same channel
        await admin.declare_queue(f"{prefix}.gone", durable=True)
        while True:
            await asyncio.sleep(0.2)
            declared = await admin.declare_queue(f"{prefix}.gone", passive=True)
            if declared.declaration_result.consumer_count == 1:
                break
            assert asyncio.get_running_loop().time() < deadline + 20, "its consumer never came back"
        assert not consuming.is_closed
    finally:
        await other.close()
        await connection.close()
