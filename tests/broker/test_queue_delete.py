"""Deleting a queue only when it is empty (warren/broker/amqp/queue_delete.py): the one helper of live removal, the
ordered promotion's park queue and the worker's park queues, every answer of RabbitMQ read alike."""

from __future__ import annotations

import aio_pika
import aiormq.exceptions
import pytest

from warren.broker.amqp.queue_delete import delete_if_empty
from warren.core.errors import TopologyError

pytestmark = pytest.mark.timeout(30)


async def exists(connection: aio_pika.abc.AbstractConnection, queue: str) -> bool:
    channel = await connection.channel()
    try:
        await channel.declare_queue(queue, passive=True)
        return True
    except aiormq.exceptions.ChannelNotFoundEntity:
        return False
    finally:
        if not channel.is_closed:
            await channel.close()


@pytest.mark.parametrize(
    ("kind", "counted"),
    [("classic", False), ("classic", True), ("quorum", True)],
    ids=["classic-if-empty", "classic-counted", "quorum-counted"],
)
async def test_a_queue_holding_messages_is_kept_an_empty_one_deleted_a_missing_one_gone(
    amqp_url: str, prefix: str, kind: str, counted: bool
) -> None:
    async with await aio_pika.connect(amqp_url) as connection:
        # Given a queue holding one message (confirmed)
        queue = f"{prefix}.delete-{kind}-{counted}"
        channel = await connection.channel()
        declared = await channel.declare_queue(queue, durable=True, arguments={"x-queue-type": kind})
        await channel.default_exchange.publish(aio_pika.Message(b"x"), routing_key=queue)
        # When it is deleted only if empty: Then it is kept, and says so
        assert await delete_if_empty(connection, queue, counted=counted) is False
        assert await exists(connection, queue)
        # and once empty it is deleted; a queue that is not there is gone
        await declared.purge()
        assert await delete_if_empty(connection, queue, counted=counted) is True
        assert not await exists(connection, queue)
        assert await delete_if_empty(connection, queue, counted=counted) is True
        # and the caller's connection serves on (each delete had a channel of its own)
        assert not connection.is_closed and not channel.is_closed


@pytest.mark.parametrize("counted", [False, True], ids=["if-empty", "counted"])
async def test_any_other_refusal_is_a_topology_error_naming_the_queue(
    amqp_url: str, prefix: str, counted: bool
) -> None:
    async with await aio_pika.connect(amqp_url) as owner, await aio_pika.connect(amqp_url) as other:
        # Given a queue exclusive to another connection (RabbitMQ answers RESOURCE_LOCKED to anyone else)
        queue = f"{prefix}.delete-locked"
        await (await owner.channel()).declare_queue(queue, exclusive=True)
        # When it is deleted if empty: Then the refusal is a TopologyError naming the queue, not aiormq's own error
        with pytest.raises(TopologyError, match=f"RabbitMQ refused to delete {queue}"):
            await delete_if_empty(other, queue, counted=counted)
        assert await exists(owner, queue)
        assert not other.is_closed
