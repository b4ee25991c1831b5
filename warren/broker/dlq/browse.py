"""Reading a DLQ without taking anything out of it, or changing its order.

The messages are consumed *without* acknowledging them on a channel of their own, then the channel is
closed: RabbitMQ puts every one of them back. On RabbitMQ 3.10.8 a quorum queue gets them back in their
original order when they were delivered to a consumer (``basic.consume``); fetched one by one with
``basic.get`` they come back shuffled, so ``basic.get`` is not used here.

A quorum queue keeps the messages it got back apart from the ones never delivered, and serves them
first; a message given back goes to the *end* of that returned part [3.10.8, 4.0.5]. After one listing
the whole DLQ is in the returned part, so holding only its first N and giving them back would put them
behind the rest: the head of the queue moves to its tail. A pass therefore holds at least the whole
returned part (every message RabbitMQ marks ``redelivered``) before it gives anything back, however few
messages the caller asked for: a held prefix that reaches the first never-delivered message, or the end
of the queue, comes back exactly in place. The caller still sees only the first ``scan``.

A quorum queue counts each return as a delivery (``x-delivery-count``) and drops a message past its
delivery limit: RabbitMQ 4.x sets 20 when the queue names none, so twenty-one listings on 4.0.5 emptied a
DLQ. Every pass here returns each message exactly once, so reading is safe exactly when the budget cannot
run out: Warren's DLQs declare the largest limit there is (2^31-1, warren/topology/planner.py), which a listing a
second would spend in 68 years, and a message enters the DLQ with a count of 0 (a new publish, or the
backstop's at-least-once dead-lettering). ``delivery_limit`` reads the limit the broker really applies, so
the commands can refuse a queue with a lower one (a 4.x DLQ from before ``warren setup`` gave it Warren's).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiormq.exceptions
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage

from warren.broker.amqp.channels import SETTLE_PAUSE, close_channel
from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS
from warren.broker.amqp.limits import MAX_PREFETCH
from warren.broker.amqp.probe import QueueProbe, counts, existing_queue
from warren.broker.amqp.uninterrupted import uninterrupted
from warren.broker.dlq.letters import DeadLetter, dead_letter_from
from warren.broker.management import ManagementClient
from warren.core.deadlines import within

__all__ = ["DEFAULT_LIMIT_4X", "MAX_SCAN", "Held", "browse", "delivery_limit", "hold_messages", "holds_enough"]

MAX_SCAN = MAX_PREFETCH  # a read holds every message it reads unacknowledged, on one channel
QUIET = 1.0  # seconds without a new message after which a pass asks the queue whether any are still ready
PATIENCE = 30.0  # seconds a pass waits in all for ready messages that are slow to arrive (a busy broker)
ARRIVAL_SETTLE = 0.05  # seconds for the callbacks of deliveries read with a declare-ok to run
RETURN_PATIENCE = 2.0  # seconds a pass waits, after closing its channel, for what it gave back to be ready
RETURN_POLL = 0.005  # seconds between two looks at the queue meanwhile
_LEADING_DIGITS = re.compile(r"[0-9]{1,9}")


@dataclass
class Held:
    """Messages delivered and not acknowledged, head of the queue first; they return when the channel closes."""

    depth: int  # messages ready in the queue when the pass began
    messages: list[AbstractIncomingMessage] = field(default_factory=list)  # the first ``scan``: the caller's
    behind: list[AbstractIncomingMessage] = field(default_factory=list)  # held only so the order survives

    def letters(self) -> list[DeadLetter]:
        return [dead_letter_from(i, m.body, m.headers or {}, m.message_id, m.type) for i, m in enumerate(self.messages)]


def holds_enough(delivered: int, reached_new: bool, want: int, everything: int) -> bool:
    """Whether giving back the ``delivered`` messages leaves the queue's order as it was.

    True once ``want`` arrived and the pass reached past the part RabbitMQ serves first (the messages it
    got back before, all ``redelivered``): a never-delivered message arrived (``reached_new``), or the
    whole queue did (``everything``).
    """
    return delivered >= want and (reached_new or delivered >= everything)


@contextlib.asynccontextmanager
async def hold_messages(
    connection: AbstractConnection, queue_name: str, *, scan: int = MAX_SCAN
) -> AsyncIterator[Held]:
    """Hold up to ``scan`` messages of a queue unacknowledged for the block; the rest stay in the queue.

    Whatever the block does not ack returns to the queue when it ends, however it ends (an exception, a
    cancellation, or the process dying: RabbitMQ returns a dead channel's messages too), in its place.
    More than ``scan`` may be held for that (``Held.behind``, see the module's docstring); the block sees
    the first ``scan`` only.
    """
    scan = max(1, min(scan, MAX_SCAN))
    channel = await connection.channel()
    delivered: list[AbstractIncomingMessage] = []
    try:
        queue = await existing_queue(channel, queue_name)
        held = Held(int(queue.declaration_result.message_count or 0))
        everything = min(held.depth, MAX_SCAN)
        want = min(held.depth, scan)
        if want:
            reached_new = False
            # One consumer whose prefetch covers every message it may have to hold: the broker returns a
            # consumer's messages in delivery order, which two consumers on one channel would not promise.
            await channel.set_qos(prefetch_count=everything)
            arrived = asyncio.Event()

            async def on_message(message: AbstractIncomingMessage) -> None:
                nonlocal reached_new
                delivered.append(message)
                reached_new = reached_new or not message.redelivered
                arrived.set()

            tag = await queue.consume(on_message)
            deadline = asyncio.get_running_loop().time() + PATIENCE
            while not holds_enough(len(delivered), reached_new, want, everything):
                arrived.clear()
                try:
                    await within(arrived.wait(), QUIET)
                except TimeoutError:
                    # A pause is not the end: on a busy broker deliveries can stall for seconds. The pass ends
                    # early only when nothing is ready any more (someone else took messages), or at PATIENCE.
                    # The raw channel: a robust one answers a repeated passive declare from its cache, with the
                    # first count, so a pass whose messages another consumer took waited PATIENCE.
                    declared = await counts(await channel.get_underlay_channel(), queue_name)
                    # Nor is nothing ready the end while this pass is the queue's only consumer: what is neither
                    # ready nor here is on its way here (a loaded broker hands messages over before it sends
                    # them; a process that stalled longer than QUIET has not read them yet). Only another
                    # consumer can have taken them. Deliveries read with the declare-ok run their callbacks next.
                    await asyncio.sleep(ARRIVAL_SETTLE)
                    if arrived.is_set():
                        continue
                    taken_elsewhere = not declared.ready and declared.consumers > 1
                    if taken_elsewhere or asyncio.get_running_loop().time() > deadline:
                        break
            # No more deliveries, so none arrive while the block acks; those already sent are held too.
            with contextlib.suppress(*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError):
                await uninterrupted(queue.cancel(tag))
            # Delivery tags grow in delivery order: the queue's order, whatever order the callbacks ran in.
            delivered.sort(key=lambda m: m.delivery_tag or 0)
            held.messages, held.behind = delivered[:want], delivered[want:]
        yield held
    finally:
        if any(message.processed for message in delivered):  # the block acked some: let them apply first
            await asyncio.sleep(SETTLE_PAUSE)
        # Even while the link is down: a restored channel would hold the DLQ's messages unacked for good.
        await close_channel(channel)
    # Reached when the block ended normally: the pass is over once what it gave back is ready again.
    await _until_given_back(connection, queue_name, sum(not message.processed for message in delivered))


async def _until_given_back(connection: AbstractConnection, queue_name: str, returned: int) -> None:
    """Wait (up to RETURN_PATIENCE) until the queue counts at least ``returned`` messages ready.

    The close-ok of a channel does not mean its unacked messages are ready again: a quorum queue applies the
    return a few milliseconds later [3.10.8, 4.0.5], and a pass that began in between counted none of them and
    read nothing (the admin API's recover called twice in a row recovered nothing the second time). Messages
    that arrive meanwhile only end the wait sooner; ones another consumer takes end it at RETURN_PATIENCE.
    """
    if not returned:
        return
    deadline = asyncio.get_running_loop().time() + RETURN_PATIENCE
    # QueueProbe asks the broker each time: a robust channel answers a repeated passive declare from its cache.
    probe = QueueProbe(connection)
    with contextlib.suppress(*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError):
        try:
            while asyncio.get_running_loop().time() < deadline:
                depth = await probe.depth(queue_name)
                if depth is None or depth.ready >= returned:
                    return
                await asyncio.sleep(RETURN_POLL)
        finally:
            await probe.close()


async def browse(
    connection: AbstractConnection, queue_name: str, *, scan: int = MAX_SCAN
) -> tuple[list[DeadLetter], int]:
    """Every message of the queue (up to ``scan``) as dead letters, and the queue's depth; nothing removed."""
    async with hold_messages(connection, queue_name, scan=scan) as held:
        return held.letters(), held.depth


# RabbitMQ 4.0 gives a quorum queue that names no limit this one; 3.x gives none.
DEFAULT_LIMIT_4X = 20


def _limit(definition: dict[str, Any], version: tuple[int, ...]) -> int | None:
    for key in ("x-delivery-limit", "delivery-limit"):
        value = definition.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            if value < 0:  # "unlimited" on 4.x; on 3.10 a message goes at its first return [3.10.8]
                return None if version >= (4,) else 0
            return value
    return None


def _version(text: object) -> tuple[int, ...]:
    """``(major, minor)`` of the management API's ``rabbitmq_version``: each part's leading ASCII digits (isdigit()
    took "²", which int() refuses)."""
    parts = str(text or "0").split(".")[:2]
    return tuple(int(match[0]) if (match := _LEADING_DIGITS.match(part)) else 0 for part in parts)


def _reported(info: dict[str, Any]) -> int | None:
    """The limit RabbitMQ 4.x reports for a queue (``delivery_limit``: a number or "unlimited"), if it does."""
    value = info.get("delivery_limit")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _winning_policy(policies: list[dict[str, Any]], queue_name: str) -> dict[str, Any] | None:
    """The policy RabbitMQ applies to a queue: the matching one of highest priority."""
    matching = []
    for policy in policies:
        if policy.get("apply-to", "all") not in ("all", "queues", "classic_queues", "quorum_queues"):
            continue
        try:
            if re.search(str(policy.get("pattern", "")), queue_name):
                matching.append(policy)
        except re.error:
            continue
    return max(matching, key=lambda p: p.get("priority", 0), default=None)


async def delivery_limit(api: ManagementClient, queue_name: str) -> int | None:
    """The delivery limit RabbitMQ applies to a queue, or None when there is none.

    The lowest of what 4.x reports for the queue, its argument, its policy and operator policy (RabbitMQ
    applies the lowest of argument and policies [3.10.8, 4.0.5]); with none of them, 4.x's default of 20.
    Policies are matched here as well as read from the queue's ``effective_policy_definition`` and 4.x's
    ``delivery_limit``, which the management API refreshes only every few seconds.
    """
    info: dict[str, Any] | None = await api.queue(queue_name)
    if info is None:
        return None
    version = _version((await api.overview()).get("rabbitmq_version"))
    limits = [
        _reported(info),
        _limit(info.get("arguments") or {}, version),
        _limit(info.get("effective_policy_definition") or {}, version),
    ]
    for kind in ("policies", "operator-policies"):
        winner = _winning_policy(await api.policies(kind), queue_name)
        limits.append(_limit(winner.get("definition") or {}, version) if winner else None)
    found = [limit for limit in limits if limit is not None]
    if found:
        return min(found)
    unlimited = info.get("delivery_limit") == "unlimited" or _has_negative(info, version)
    return DEFAULT_LIMIT_4X if version >= (4,) and not unlimited else None


def _has_negative(info: dict[str, Any], version: tuple[int, ...]) -> bool:
    """A 4.x queue told "unlimited" by a negative argument, which ``_limit`` reads as no limit."""
    value = (info.get("arguments") or {}).get("x-delivery-limit")
    return version >= (4,) and isinstance(value, int) and value < 0
