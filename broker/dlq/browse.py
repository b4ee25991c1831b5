"""Reading a DLQ without taking anything out of it.

The messages are consumed *without* acknowledging them on a channel of their own, then the channel is
closed: RabbitMQ puts every one of them back. On RabbitMQ 3.10.8 a quorum queue gets them back in their
original order when they were delivered to a consumer (``basic.consume``); fetched one by one with
``basic.get`` they come back shuffled, so ``basic.get`` is not used here.

A quorum queue counts each return as a delivery attempt (``x-delivery-count``), which is why Warren's DLQs
carry no ``x-delivery-limit`` (3.10 sets none by default): with a limit, reading the DLQ often enough would
drop its messages. ``delivery_limit`` finds one set by a policy so the commands can refuse to read.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiormq.exceptions
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage

from warren.broker.confirm import existing_queue
from warren.broker.connection import CONNECTION_EXCEPTIONS
from warren.broker.dlq.letters import DeadLetter, dead_letter_from
from warren.broker.management import ManagementClient

__all__ = ["MAX_SCAN", "Held", "browse", "delivery_limit", "hold_messages"]

# basic.qos prefetch_count is a 16-bit field: the most messages one channel can hold unacknowledged.
MAX_SCAN = 65_535
QUIET = 1.0  # seconds without a new message after which a pass ends early (someone else took messages)


@dataclass
class Held:
    """Messages delivered and not acknowledged, head of the queue first; they return when the channel closes."""

    depth: int  # messages ready in the queue when the pass began
    messages: list[AbstractIncomingMessage] = field(default_factory=list)

    def letters(self) -> list[DeadLetter]:
        return [dead_letter_from(i, m.body, m.headers or {}, m.message_id, m.type) for i, m in enumerate(self.messages)]


@contextlib.asynccontextmanager
async def hold_messages(
    connection: AbstractConnection, queue_name: str, *, scan: int = MAX_SCAN
) -> AsyncIterator[Held]:
    """Hold up to ``scan`` messages of a queue unacknowledged for the block; the rest stay in the queue.

    Whatever the block does not ack returns to the queue when it ends, however it ends (an exception, a
    cancellation, or the process dying: RabbitMQ returns a dead channel's messages too).
    """
    scan = max(1, min(scan, MAX_SCAN))
    channel = await connection.channel()
    try:
        queue = await existing_queue(channel, queue_name)
        held = Held(int(queue.declaration_result.message_count or 0))
        want = min(held.depth, scan)
        if want:
            await channel.set_qos(prefetch_count=want)
            arrived = asyncio.Event()

            async def on_message(message: AbstractIncomingMessage) -> None:
                held.messages.append(message)
                arrived.set()

            await queue.consume(on_message)
            while len(held.messages) < want:
                arrived.clear()
                try:
                    await asyncio.wait_for(arrived.wait(), QUIET)
                except TimeoutError:
                    break
            # Delivery tags grow in delivery order: the queue's order, whatever order the callbacks ran in.
            held.messages.sort(key=lambda m: m.delivery_tag or 0)
        yield held
    finally:
        if not channel.is_closed:
            with contextlib.suppress(*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError):
                await channel.close()


async def browse(
    connection: AbstractConnection, queue_name: str, *, scan: int = MAX_SCAN
) -> tuple[list[DeadLetter], int]:
    """Every message of the queue (up to ``scan``) as dead letters, and the queue's depth; nothing removed."""
    async with hold_messages(connection, queue_name, scan=scan) as held:
        return held.letters(), held.depth


def _limit(definition: dict[str, Any]) -> int | None:
    for key in ("x-delivery-limit", "delivery-limit"):
        value = definition.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


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
    """The delivery limit that applies to a queue (its argument, a policy or an operator policy), if any.

    Policies are matched here rather than read from the queue's ``effective_policy_definition``, which the
    management API refreshes only every few seconds.
    """
    info: dict[str, Any] | None = await api.queue(queue_name)
    if info is None:
        return None
    vhost = quote(api.vhost, safe="")
    limits = [_limit(info.get("arguments") or {}), _limit(info.get("effective_policy_definition") or {})]
    for kind in ("policies", "operator-policies"):
        policies = await api.request("GET", f"{kind}/{vhost}", allow_404=True) or []
        winner = _winning_policy(policies, queue_name)
        limits.append(_limit(winner.get("definition") or {}) if winner else None)
    found = [limit for limit in limits if limit is not None]
    return min(found) if found else None
