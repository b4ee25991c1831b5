"""A promotion's fence through a route partition, as the router that consumes the partition answers it.

A lane endpoint promoted to queues of its own (warren/broker/partition_fence.py) is announced as dedicated only
once every event published before its bindings existed has been routed, its lane copies confirmed: such an event
routed afterwards would reach neither home (no binding when it was published; no lane copy from a router that
knows the endpoint as dedicated). So the apply publishes a fence into each route partition, behind everything it
holds, marked ``warren-route-fence``; the router consuming the partition takes it in queue order, waits until
every delivery of that partition that arrived before it is settled (routed, sent round the delay chain, or
dead-lettered: acked; a partition's keys are routed side by side, so this is every earlier delivery, not the
previous one), answers ``reply_to`` with the partition's name, and acks it.

A fence is never an event: it is never routed, never counted, never dead-lettered as malformed. A partition
handed back while its fence waits (a rebalance, the worker stopping, a crash) returns the fence unacked with the
earlier deliveries, in order, and the next owner answers it the same way. A fence whose caller gave up (its reply
queue is gone) is still acked: its answer is dropped.
"""

from __future__ import annotations

import logging

from aio_pika.abc import AbstractIncomingMessage

from warren.broker import wire
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.partition_fence import fence_answer
from warren.consumers.key_lanes import PartitionLanes
from warren.core.errors import PublishError, describe

__all__ = ["answer", "answer_fence", "fence_id"]

log = logging.getLogger("warren.router")


def fence_id(message: AbstractIncomingMessage) -> str | None:
    """The fence a route partition's message is (None: an event)."""
    return wire.header_text((message.headers or {}).get(wire.H_ROUTE_FENCE))


async def answer_fence(
    message: AbstractIncomingMessage,
    fence: str,
    lanes: PartitionLanes | None,
    partition: str | None,
    publisher: ConfirmChannel,
) -> None:
    """Answer fence ``message`` of ``partition`` once every earlier delivery of it is settled, then ack it; leave it
    unacked when the partition is handed back first (it returns to the head with the rest). An ordered lane's park
    queue answers its fences so too (warren/consumers/lane_fences.py)."""
    if lanes is None or partition is None or not await lanes.settled_before(message):
        return  # its channel is going: the fence returns behind the earlier deliveries, the next owner answers it
    await answer(message, fence, partition, publisher)
    await lanes.acks.ack(message)


async def answer(message: AbstractIncomingMessage, fence: str, queue: str, publisher: ConfirmChannel) -> None:
    """Tell fence ``message``'s caller (its ``reply_to``) that everything of ``queue`` before it is settled. A caller
    that gave up (its reply queue gone) is answered to nobody; a fence that names no reply queue, only logged."""
    if not message.reply_to:
        log.warning("fence %s of %s names no reply queue; acked", fence, queue)
        return
    try:
        await publisher.publish("", fence_answer(fence, queue), message.reply_to, what=f"fence {fence} answer")
    except PublishError as exc:  # the caller gave up and its queue is gone: the answer has nobody to reach
        log.info("fence %s of %s answered to nobody (%s)", fence, queue, describe(exc))
