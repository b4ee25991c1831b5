"""A channel closed while its robust connection is down, or being restored, stays closed when it is back.

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
from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.connection import connect
from warren.core.deadlines import within


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
            consuming, got = await _holding_consumer(connection, queue_name)
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
                assert await _consumers(check, queue_name, 0)
                fetched = await queue.get(timeout=5, fail=False)
                assert fetched is not None and fetched.body == b"x" and got == []
                await fetched.ack()
            finally:
                await connection.close()
                await check.queue_delete(queue_name)


async def _holding_consumer(
    connection: aio_pika.abc.AbstractConnection, queue_name: str
) -> tuple[aio_pika.abc.AbstractChannel, list[AbstractIncomingMessage]]:
    """A channel consuming ``queue_name`` that holds what it gets, never acking; and what it got."""
    channel = await connection.channel()
    got: list[AbstractIncomingMessage] = []

    async def hold(message: AbstractIncomingMessage) -> None:
        got.append(message)

    await (await channel.get_queue(queue_name)).consume(hold)
    return channel, got


async def _is_closed(channel: aio_pika.abc.AbstractChannel) -> bool:
    return channel.is_closed


async def _is_open(channel: aio_pika.abc.AbstractChannel) -> bool:
    return not channel.is_closed


@pytest.mark.timeout(40)
async def test_a_channel_closed_while_its_connection_restores_it_is_closed_again(
    amqp_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window is a few milliseconds wide in real life (a node killed while a worker hands a partition back):
    # the channel's reopen is held at its start here, so that the close always lands inside it.
    live = urlsplit(amqp_url).port or 5672
    queue_name = f"{prefix}.reopened"
    async with TcpProxy(live) as proxy:
        connection = await connect(_via(amqp_url, proxy.port) + "?reconnect_interval=0.2", name="test-reopened")
        async with await aio_pika.connect(amqp_url) as direct:
            # Given a consumer on a channel of Warren's robust connection
            check = await direct.channel()
            queue = await check.declare_queue(queue_name, durable=True, arguments={"x-queue-type": "quorum"})
            consuming, got = await _holding_consumer(connection, queue_name)
            restored = asyncio.Event()
            connection.reconnect_callbacks.add(lambda *_: restored.set())  # every channel restored, then this
            held = _HeldReopen(consuming, monkeypatch)
            try:
                # When the link is cut and comes back, and the channel is closed while the connection restores it
                await proxy.cut()
                await _until(lambda: _is_closed(consuming), 10)
                await proxy.restore()
                await within(held.reopening.wait(), 20)
                await close_channel(consuming, timeout=2)
                held.go.set()
                await within(restored.wait(), 20)
                # Then the connection closes it again once back: the queue has no consumer, and a message
                # published now is not taken by one
                await _assert_stays_closed(consuming, got, check, queue)
            finally:
                held.go.set()
                await connection.close()
                await check.queue_delete(queue_name)


class _HeldReopen:
    """Holds ``channel``'s reopen at its start until ``go`` is set: a close then always lands inside it."""

    def __init__(self, channel: aio_pika.abc.AbstractChannel, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reopening, self.go, self.reopened = asyncio.Event(), asyncio.Event(), asyncio.Event()
        self._reopen = channel._open  # type: ignore[attr-defined]
        monkeypatch.setattr(channel, "_open", self._held)

    async def _held(self) -> None:
        self.reopening.set()
        await self.go.wait()
        await self._reopen()  # the channel is open again here, with its consumer
        self.reopened.set()


async def _assert_stays_closed(
    consuming: aio_pika.abc.AbstractChannel,
    got: list[AbstractIncomingMessage],
    check: aio_pika.abc.AbstractChannel,
    queue: aio_pika.abc.AbstractQueue,
) -> None:
    """``consuming`` ends closed, ``queue`` has no consumer, and a message published now is not taken by one."""
    await _until(lambda: _consumers(check, queue.name, 0), 10)
    await _until(lambda: _is_closed(consuming), 5)
    await check.default_exchange.publish(aio_pika.Message(b"x"), routing_key=queue.name)
    fetched = await queue.get(timeout=5, fail=False)
    assert fetched is not None and fetched.body == b"x" and got == []
    await fetched.ack()


async def _consumers(channel: aio_pika.abc.AbstractChannel, queue_name: str, expected: int) -> bool:
    declared = await channel.declare_queue(queue_name, passive=True)
    return declared.declaration_result.consumer_count == expected


@pytest.mark.timeout(40)
async def test_a_channel_closed_while_it_is_reopened_after_a_channel_error_is_closed_again(
    amqp_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A channel error (not a lost link) makes aio-pika reopen that one channel, with no reconnect: a close that
    # lands inside that reopen does not stick either (the reopen is held at its start, as above).
    queue_name = f"{prefix}.channel-error"
    connection = await connect(amqp_url, name="test-channel-error")
    async with await aio_pika.connect(amqp_url) as direct:
        # Given a consumer on a channel of Warren's robust connection
        check = await direct.channel()
        queue = await check.declare_queue(queue_name, durable=True, arguments={"x-queue-type": "quorum"})
        consuming, got = await _holding_consumer(connection, queue_name)
        held = _HeldReopen(consuming, monkeypatch)
        try:
            # When RabbitMQ closes the channel (an ack of an unknown delivery tag: 406), and the channel is
            # closed while aio-pika reopens it
            raw = await consuming.get_underlay_channel()
            await raw.basic_ack(999_999)
            await within(held.reopening.wait(), 20)
            await close_channel(consuming, timeout=2)
            held.go.set()
            await within(held.reopened.wait(), 10)
            # Then it is closed again once reopened: the queue has no consumer, and a message published now is not
            # taken by one
            await _assert_stays_closed(consuming, got, check, queue)
        finally:
            held.go.set()
            await connection.close()
            await check.queue_delete(queue_name)
