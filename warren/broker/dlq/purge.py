"""Emptying a DLQ for good: the only DLQ operation that loses messages, so the CLI asks first.

``take_selected`` is its letter-by-letter form, which a move of chosen letters (relocate.py) shares: each
chosen letter is acked only after what comes before its ack (a confirmed copy) succeeded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aio_pika.abc import AbstractConnection, AbstractIncomingMessage

from warren.broker.amqp.ack_batcher import AckBatcher
from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.probe import existing_queue
from warren.broker.dlq.browse import MAX_SCAN, hold_messages
from warren.broker.dlq.letters import DeadLetter
from warren.broker.dlq.selection import Selection, select
from warren.topology import names

__all__ = ["purge_dlq", "purge_selected", "take_selected"]


async def purge_dlq(connection: AbstractConnection, prefix: str, endpoint: str) -> int:
    """Delete every ready message of the endpoint's DLQ; return how many RabbitMQ deleted.

    Messages held unacknowledged at that moment (someone listing the DLQ) are not purged: they return after.
    """
    name = names.route_dlq(prefix) if endpoint == names.ROUTE_STAGE else names.dlq(prefix, endpoint)
    channel = await connection.channel()
    try:
        queue = await existing_queue(channel, name)
        result = await queue.purge()
        return int(result.message_count or 0)
    finally:
        await close_channel(channel)


async def purge_selected(
    connection: AbstractConnection, queue: str, selection: Selection, *, scan: int = MAX_SCAN
) -> tuple[int, int]:
    """Delete the letters of ``queue`` that ``selection`` picks (a shared lane's DLQ: one endpoint's letters);
    the rest return, in order. Returns (deleted, depth when it began)."""
    return await take_selected(connection, queue, selection, scan=scan)


async def take_selected(
    connection: AbstractConnection,
    queue: str,
    selection: Selection,
    *,
    before_ack: Callable[[DeadLetter, AbstractIncomingMessage], Awaitable[None]] | None = None,
    scan: int = MAX_SCAN,
) -> tuple[int, int]:
    """Take the letters of ``queue`` that ``selection`` picks out of it, each after ``before_ack`` (a move's
    confirmed copy) when given; the rest return, in order. Returns (taken, depth when it began)."""
    async with hold_messages(connection, queue, scan=scan) as held:
        chosen = select(held.letters(), selection)
        # Batched acks, closed before the block hands the rest back (broker/dlq/move.py says why).
        acks = AckBatcher()
        for message in held.messages:
            acks.track(message)
        try:
            for letter in chosen:
                message = held.messages[letter.position]
                if before_ack is not None:
                    await before_ack(letter, message)
                await acks.ack(message)
        finally:
            await acks.close()
        return len(chosen), held.depth
