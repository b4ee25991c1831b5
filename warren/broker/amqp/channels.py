"""Closing a channel so that it stays closed, whatever state its connection is in.

A robust connection (aio-pika) keeps every channel opened on it and restores each one, with its consumers,
when it reconnects. A channel is only forgotten when its owner closes it. While the link is down the channel
already reports ``is_closed``, and code that closes only open channels skips it: the connection comes back
with the channel too, and with it a consumer nobody reads (one that can hold messages unacked for good, or
stay a queue's single active consumer) or one more idle channel per outage. So: always close, and bound the
wait, since a link that is down never answers; the bound (or a cancellation) ends the wait, never the close,
since a close cut in half closed the whole connection (broker/amqp/close_once.py). A close that lands while
the connection is restoring the channel does not stick (aio-pika reopens it regardless): the connection closes
such channels again once it is back.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiormq.abc
import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage, AbstractQueue

from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS, closing
from warren.broker.amqp.direct_consumer import consume_in_one_task
from warren.broker.amqp.uninterrupted import uninterrupted
from warren.core.deadlines import within
from warren.core.errors import TopologyError

__all__ = ["CLOSE_TIMEOUT", "SETTLE_PAUSE", "close_channel", "consume_on", "queue_on", "raw_channel"]

CLOSE_TIMEOUT = 5.0  # seconds a close may take before it is given up on (the channel is forgotten anyway)

# How long to wait between the last acks on a channel and its close. A quorum queue can apply a closed channel's
# return of its unacked messages before acks that channel sent just before closing: those messages come back
# although acked (an interrupted `warren dlq replay` left the copies of its last acks in the DLQ too, in 2 to 6
# runs of 12 on RabbitMQ 3.10.8; with 0.1 s between the acks and the close, in none of 12; 0.5 s, none of 12).
# The close handshake does not wait for it: channel.close-ok came 1-2 ms after the acks. The cause is in the
# channel's quorum-queue client (rabbit_fifo_client): it keeps at most 32 commands (each ack frame is one) in
# flight to the queue, holds back the rest until the queue applies earlier ones, and sends nothing more once the
# channel closes. So acks go in few frames (multiple acks, warren/broker/amqp/ack_batcher.py), and this pause gives what
# is held back time to go; a broker slower than the pause can still return acked messages (duplicates).
SETTLE_PAUSE = 0.25


async def close_channel(channel: AbstractChannel | None, timeout: float = CLOSE_TIMEOUT) -> None:
    """Close ``channel`` even when it already reports closed; never raises for a lost link."""
    if channel is None:
        return
    closing(channel)  # a reconnect under way may still restore it: it is closed again then (broker/amqp/connection.py)
    with contextlib.suppress(*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError, RuntimeError, TimeoutError):
        # The close itself is never cut (broker/amqp/uninterrupted.py): the time limit, or this task's
        # cancellation, ends the wait for it only.
        await within(uninterrupted(channel.close(), grace=0), timeout)


@contextlib.asynccontextmanager
async def raw_channel(connection: AbstractConnection, refused: str) -> AsyncIterator[aiormq.abc.AbstractChannel]:
    """A channel of its own, its aiormq side, closed after; a channel error raised as TopologyError(``refused``:
    why). For commands whose 404 or 406 closes the channel they are sent on."""
    channel = await connection.channel()
    try:
        yield await channel.get_underlay_channel()
    except aiormq.exceptions.AMQPChannelError as exc:
        raise TopologyError(f"{refused}: {exc}") from exc
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)


async def queue_on(channel: AbstractChannel, queue_name: str, prefetch: int) -> AbstractQueue:
    """Give ``channel`` a per-consumer prefetch of ``prefetch`` (quorum queues refuse global QoS) and get the
    existing queue ``queue_name`` on it, each step never cut (broker/amqp/uninterrupted.py). The channel is left
    as it is if either fails: its owner closes it (``consume_on`` does)."""
    await uninterrupted(channel.set_qos(prefetch_count=prefetch))
    return await uninterrupted(channel.get_queue(queue_name, ensure=True))


async def consume_on(
    channel: AbstractChannel,
    queue_name: str,
    prefetch: int,
    callback: Callable[[AbstractIncomingMessage], Awaitable[Any]],
    tag: str,
) -> AbstractQueue:
    """``queue_on``, then consume the queue with ``callback`` under consumer tag ``tag`` (chosen by the caller,
    so that the first deliveries can be told by it before the consume's answer is back), each step never cut.
    If any of them fails (or is cancelled) the channel is closed before the error goes on: never left open
    beside the next try's."""
    try:
        queue = await queue_on(channel, queue_name, prefetch)
        await consume_in_one_task(queue, callback, tag)
    except BaseException:
        await close_channel(channel)
        raise
    return queue
