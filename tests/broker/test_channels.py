"""A channel closed while its robust connection is down stays closed when the connection comes back.

The link runs through a TcpProxy; cutting it is RabbitMQ going away. A consumer on a channel that was only
closed "if open" came back with the connection and held the queue's message unacked (checked: with
``if not channel.is_closed: await channel.close()`` this test fails with the message held by a zombie).
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage

from tests.support.tcp_proxy import TcpProxy
from warren.broker.channels import close_channel


def _via(amqp_url: str, port: int) -> str:
    parts = urlsplit(amqp_url)
    return urlunsplit((parts.scheme, f"{parts.netloc.rpartition('@')[0]}@127.0.0.1:{port}", parts.path, "", ""))


async def _until(check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


@pytest.mark.timeout(40)
async def test_a_channel_closed_while_the_link_is_down_is_not_restored(amqp_url: str, prefix: str) -> None:
    live = urlsplit(amqp_url).port or 5672
    queue_name = f"{prefix}.zombie"
    async with TcpProxy(live) as proxy:
        connection = await aio_pika.connect_robust(_via(amqp_url, proxy.port), reconnect_interval=0.2)
        async with await aio_pika.connect(amqp_url) as direct:
            # Given a consumer on a channel of a robust connection, and a second channel that stays
            check = await direct.channel()
            queue = await check.declare_queue(queue_name, durable=True, arguments={"x-queue-type": "quorum"})
            consuming = await connection.channel()
            got: list[AbstractIncomingMessage] = []

            async def hold(message: AbstractIncomingMessage) -> None:
                got.append(message)  # never acked: a consumer that holds what it gets

            await (await consuming.get_queue(queue_name)).consume(hold)
            keeper = await connection.channel()
            try:
                # When the link is cut, the consuming channel is closed while it is down, and the link returns
                await proxy.cut()
                await _until(lambda: _is_closed(consuming), 10)
                started = time.monotonic()
                await close_channel(consuming, timeout=2)
                assert time.monotonic() - started < 3, "a close on a dead link is bounded"
                await proxy.restore()
                await _until(lambda: _is_open(keeper), 20)
                # Then a message published now is not taken by a restored consumer: the queue has none
                await check.default_exchange.publish(aio_pika.Message(b"x"), routing_key=queue_name)
                declared = await check.declare_queue(queue_name, passive=True)
                assert declared.declaration_result.consumer_count == 0
                fetched = await queue.get(timeout=5, fail=False)
                assert fetched is not None and fetched.body == b"x" and got == []
                await fetched.ack()
            finally:
                await connection.close()
                await check.queue_delete(queue_name)


async def _is_closed(channel: aio_pika.abc.AbstractChannel) -> bool:
    return channel.is_closed


async def _is_open(channel: aio_pika.abc.AbstractChannel) -> bool:
    return not channel.is_closed
