"""A consumer's messages handled in the task aiormq starts for each, not in a second one (issue 38, part 3).

aio-pika's ``Queue.consume`` registers with aiormq a coroutine (``aio_pika.queue.consumer``) that aiormq runs in a
task of its own for every delivery; that coroutine makes the ``IncomingMessage`` and then starts *another* task for
the callback and waits for it (``aio_pika.tools.create_task``). Two tasks a message: each a registration in
asyncio's set of tasks, a done-callback, and a step of the loop. ``consume_directly``, called after
``queue.consume(callback, consumer_tag=tag)``, replaces that consumer's entry in aiormq's channel with one that makes
the same ``IncomingMessage`` and awaits ``callback`` in aiormq's own task. Everything else is aio-pika's as before:
the consume, its consumer tag, the robust queue's record of it; a cancellation reaches the callback the same way
(aiormq cancels its task as it closes the channel, where it cancelled the task that awaited the callback's).

Used for every consume Warren makes with a callback: an unordered endpoint's work queue (consuming.py), an
ordered endpoint's partitions, claimed partitions and park queues (``channels.consume_on``), and the shared lanes
(lanes.py). For an ordered partition the callback is its key lanes' ``dispatch``, which runs a key's lane in the
task of the delivery that found none running: that is now aiormq's task. Deliveries still start in the order they
came (aiormq starts their tasks in that order, and each runs its callback up to its first wait at its first step),
across the switch too: a delivery aio-pika's consumer took before the replacement starts its callback's task at its
task's first step, one loop step before any later delivery's task can first run (tests/broker/test_direct_consumer.py).

A consume that aio-pika makes again on its own (after a reconnect, or a queue deleted and declared again, see
cancelled_consumers.py) registers its own consumer again: the messages then go through the second task as before
until the caller consumes again. Only what the caller asks for is replaced, and only while the tag is the one
consumed: a consumer of another tag, or one already gone, is left alone.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

from aio_pika.abc import AbstractIncomingMessage, AbstractQueue
from aio_pika.message import IncomingMessage
from aiormq.abc import DeliveredMessage

from warren.broker.amqp.uninterrupted import uninterrupted

__all__ = ["consume_directly", "consume_in_one_task"]


async def _delivered(callback: Callable[[AbstractIncomingMessage], Awaitable[Any]], message: DeliveredMessage) -> None:
    await callback(IncomingMessage(message, no_ack=False))


async def consume_directly(
    queue: AbstractQueue, tag: str, callback: Callable[[AbstractIncomingMessage], Awaitable[Any]]
) -> bool:
    """Hand the messages of consumer ``tag`` on ``queue`` (consumed with ``no_ack=False``) to ``callback`` in
    aiormq's task; True when it now does (False: the consumer is gone already)."""
    channel = await queue.channel.get_underlay_channel()
    consumers: dict[str, Any] | None = getattr(channel, "consumers", None)  # aiormq's Channel: tag -> consumer
    if consumers is None or tag not in consumers:
        return False
    consumers[tag] = functools.partial(_delivered, callback)
    return True


async def consume_in_one_task(
    queue: AbstractQueue, callback: Callable[[AbstractIncomingMessage], Awaitable[Any]], tag: str
) -> None:
    """Consume ``queue`` under ``tag`` with ``callback``, each message then handled in aiormq's task
    (``consume_directly``); each step never cut (broker/amqp/uninterrupted.py). Every consume Warren makes with a
    callback goes through here."""
    await uninterrupted(queue.consume(callback, consumer_tag=tag))
    await uninterrupted(consume_directly(queue, tag, callback))
