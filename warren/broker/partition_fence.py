"""A promotion's fence through the route partitions: every event published before the endpoint's bindings is routed
before any router hears that the endpoint is dedicated.

A lane endpoint promoted to queues of its own (``apply_endpoint`` with ``home = "dedicated"``) gets its exchange,
bindings and queues first: from then on every event published reaches its own queue. An event published *before*
and still waiting in a route partition ``{prefix}.route.p<i>`` must still get its lane copy (which follows the
endpoint into its exchange: warren/consumers/lanes.py); a router that already knows the endpoint as dedicated
would route it to nobody. So, after the bindings and before the announcement, the apply publishes a fence into
each partition (default exchange, confirmed and mandatory, marked ``warren-route-fence``, ``reply_to`` an
exclusive queue of the caller's) and waits up to ``[lanes] promote_wait`` for the router of each partition to
answer that everything ahead of the fence is routed (warren/consumers/route_fences.py). Only with every
partition's answer is the promotion announced; without (no router running, one stuck, an ordered event retried
in place) the caller undoes the promotion and refuses it (warren/broker/live_apply.py).

No fence is needed when the routing stage holds nothing and nobody consumes it: every partition empty with no
consumer (an event published from here on is published after the bindings). None can be confirmed while an
earlier release's single routing queue ``{prefix}.route`` holds events or has a consumer: what it holds is moved
into the partitions behind any fence (warren/consumers/route_migration.py), so the promotion is refused then.
A fence the caller gave up on stays in its partition until a router takes it, answers a queue that is gone, and
acks it: harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm import publish_confirmed
from warren.broker.amqp.probe import QueueDepth, QueueProbe
from warren.topology import names
from warren.topology.headers import H_FENCE_QUEUE, H_FENCE_UNTIL, H_ROUTE_FENCE

__all__ = ["FENCED", "FenceOutcome", "fence_answer", "fence_needed", "fence_queues", "fence_routing_stage"]

FENCED = b"fenced"  # the body of a router's answer; its correlation id is the fence's, its message id the partition


def fence_answer(fence: str, partition: str) -> Message:
    """What a router answers once everything of ``partition`` ahead of fence ``fence`` is routed."""
    return Message(FENCED, correlation_id=fence, message_id=f"{fence}:{partition}")


@dataclass(frozen=True)
class FenceOutcome:
    """The partitions fenced, and those whose router answered within the wait (all of them when none was needed)."""

    partitions: tuple[str, ...]
    answered: frozenset[str]
    needed: bool = True

    @property
    def complete(self) -> bool:
        return self.answered >= set(self.partitions)

    @property
    def missing(self) -> list[str]:
        return [p for p in self.partitions if p not in self.answered]


def fence_needed(depths: Mapping[str, QueueDepth | None]) -> bool:
    """Whether the routing stage may hold an event published before now: some partition has messages waiting or a
    consumer (whose unacked deliveries a passive declare does not count). A missing partition holds nothing."""
    return any(d is not None and (d.ready or d.consumers) for d in depths.values())


async def fence_routing_stage(
    connection: AbstractConnection, prefix: str, partitions: int, wait: float
) -> FenceOutcome:
    """Fence every route partition and wait up to ``wait`` seconds for each one's answer (module docstring)."""
    queues = tuple(names.route_partition(prefix, i) for i in range(partitions))
    old = names.route_queue(prefix)  # an earlier release's single routing queue, moved into the partitions
    probe = QueueProbe(connection)
    try:
        depths = {q: await probe.depth(q) for q in (*queues, old)}
    finally:
        await probe.close()
    if fence_needed({old: depths.pop(old)}):
        # Its events reach the partitions behind any fence (warren/consumers/route_migration.py): not confirmable.
        return FenceOutcome((old,), frozenset())
    if not fence_needed(depths):
        return FenceOutcome(queues, frozenset(queues), needed=False)
    present = tuple(q for q in queues if depths[q] is not None)
    return FenceOutcome(present, await fence_queues(connection, present, wait))


async def fence_queues(
    connection: AbstractConnection,
    queues: Sequence[str],
    wait: float,
    header: str = H_ROUTE_FENCE,
    extra: Mapping[str, Any] | None = None,
) -> frozenset[str]:
    """Publish a fence (``header``: its id; ``warren-fence-queue``: the queue; ``warren-fence-until``: when this
    call stops waiting; ``extra``) into each of ``queues``, confirmed, and wait up to ``wait`` seconds for their
    answers: the queues answered."""
    fence = uuid.uuid4().hex
    until = int((time.time() + wait) * 1000)  # when this call stops listening: a fence past it is passed on for nobody
    answered: set[str] = set()
    everyone = asyncio.Event()
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    try:

        async def on_answer(message: AbstractIncomingMessage) -> None:
            if message.body == FENCED and message.correlation_id == fence:
                answered.add((message.message_id or "").removeprefix(f"{fence}:"))
                if answered >= set(queues):
                    everyone.set()

        replies = await channel.declare_queue(exclusive=True, auto_delete=True, arguments={"x-queue-type": "classic"})
        await replies.consume(on_answer, no_ack=True)
        for queue in queues:
            message = Message(
                b"",
                headers={header: fence, H_FENCE_QUEUE: queue, H_FENCE_UNTIL: until, **(extra or {})},
                # One id per queue: a publish's return is matched to it by id (aiormq), and the ordered lanes'
                # consumers pass their fences on side by side on one channel (warren/consumers/lane_fences.py).
                message_id=f"fence-{fence}-{queue}",
                reply_to=replies.name,
                delivery_mode=DeliveryMode.PERSISTENT,
            )
            await publish_confirmed(channel.default_exchange, message, queue, what=f"a fence into {queue}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(everyone.wait(), wait)
        return frozenset(answered & set(queues))
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)
