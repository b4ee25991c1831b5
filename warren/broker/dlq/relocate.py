"""Dead letters moved from one DLQ to another as they are: an endpoint's letters following it between homes.

A lane endpoint promoted to queues of its own takes its letters out of its lane's shared DLQ into its own DLQ,
so that ``warren dlq`` and recover find them where they now look. Each is published (confirmed) before its
copy in the lane's DLQ is acked, as every move here does (move.py); nothing is added to it, so it is the same
letter, not a replay. The lane-mates' letters return to the lane's DLQ, in order.
"""

from __future__ import annotations

from aio_pika.abc import AbstractConnection

from warren.broker import wire
from warren.broker.amqp.ack_batcher import AckBatcher
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.dlq.browse import hold_messages
from warren.broker.dlq.selection import Selection, select

__all__ = ["relocate_letters"]


async def relocate_letters(connection: AbstractConnection, source: str, destination: str, endpoint: str) -> int:
    """Move the letters of ``source`` naming ``endpoint`` into queue ``destination``; return how many moved."""
    publisher = await ConfirmChannel(connection).open()
    try:
        async with hold_messages(connection, source) as held:
            chosen = select(held.letters(), Selection(endpoint=endpoint))
            acks = AckBatcher()
            for message in held.messages:
                acks.track(message)
            try:
                for letter in chosen:
                    message = held.messages[letter.position]
                    copy = wire.onward(message, dict(message.headers or {}))
                    await publisher.publish("", copy, destination, what=f"letter {letter.event_id} to {destination}")
                    await acks.ack(message)
            finally:
                await acks.close()
            return len(chosen)
    finally:
        await publisher.close()
