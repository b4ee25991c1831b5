"""Deleting a queue only when it holds nothing: one helper for live removal, the ordered promotion's park queue and
a worker's park queues (warren/broker/live_remove.py, warren/broker/ordered_promotion.py,
warren/consumers/park_link.py).

Every answer RabbitMQ can give is read the same way in all of them: gone already (404) is gone, not empty (406,
``if-empty``) is kept, and any other refusal of the channel is a TopologyError naming the queue. A connection
error goes on as it is.
"""

from __future__ import annotations

import aiormq.exceptions
from aio_pika.abc import AbstractConnection

from warren.broker.amqp.channels import raw_channel
from warren.broker.amqp.probe import counts

__all__ = ["delete_if_empty"]


async def delete_if_empty(connection: AbstractConnection, queue: str, *, counted: bool = False) -> bool:
    """Delete ``queue`` when it holds no ready message, on a channel of its own: True when it is gone (deleted now,
    or there was none), False when it holds messages and is kept; TopologyError for any other refusal.

    By default RabbitMQ checks as it deletes (``if-empty``): a message that arrives meanwhile keeps the queue.
    Quorum queues refuse ``if-empty`` with NOT_IMPLEMENTED, which ends the whole connection, so for a queue that
    may be one, ``counted`` reads the count with a passive declare just before a plain delete, as ``warren setup
    --prune`` does: only for a queue nothing feeds any more (its bindings gone), where that window holds no new
    message.
    """
    async with raw_channel(connection, f"RabbitMQ refused to delete {queue}") as raw:
        try:
            if counted:
                if (await counts(raw, queue)).ready:
                    return False
                await raw.queue_delete(queue)
            else:
                await raw.queue_delete(queue, if_empty=True)
        except aiormq.exceptions.ChannelNotFoundEntity:
            return True
        except aiormq.exceptions.ChannelPreconditionFailed:
            return False
    return True
