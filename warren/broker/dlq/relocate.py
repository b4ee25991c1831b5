"""Dead letters moved from one DLQ to another as they are: an endpoint's letters following it between homes.

A lane endpoint promoted to queues of its own takes its letters out of its lane's shared DLQ into its own DLQ,
so that ``warren dlq`` and recover find them where they now look. Each is published (confirmed) before its
copy in the lane's DLQ is acked, as every move here does (move.py); nothing is added to it, so it is the same
letter, not a replay. The lane-mates' letters return to the lane's DLQ, in order.
"""

from __future__ import annotations

from aio_pika.abc import AbstractConnection, AbstractIncomingMessage

from warren.broker import wire
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.dlq.letters import DeadLetter
from warren.broker.dlq.purge import take_selected
from warren.broker.dlq.selection import Selection

__all__ = ["relocate_letters"]


async def relocate_letters(connection: AbstractConnection, source: str, destination: str, endpoint: str) -> int:
    """Move the letters of ``source`` naming ``endpoint`` into queue ``destination``; return how many moved."""
    publisher = await ConfirmChannel(connection).open()

    async def copy(letter: DeadLetter, message: AbstractIncomingMessage) -> None:
        what = f"letter {letter.event_id} to {destination}"
        await publisher.publish("", wire.onward(message, dict(message.headers or {})), destination, what=what)

    try:
        moved, _ = await take_selected(connection, source, Selection(endpoint=endpoint), before_ack=copy)
        return moved
    finally:
        await publisher.close()
