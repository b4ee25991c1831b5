"""An ordered promotion's fence through the ordered lanes, as the lanes' consumers and park drainers pass it on.

An ordered lane endpoint E promoted to partitions of its own (warren/broker/ordered_promotion.py) must have every
copy of it already in the ordered lanes, or in its park queue, delivered before any event of the same key comes
from its partitions. Once no router copies E any more, the promotion publishes a fence into every ordered lane
``{prefix}.lane.o<i>`` (marked ``warren-lane-fence``, naming E in ``warren-endpoint`` and the lane in
``warren-fence-queue``, ``reply_to`` an exclusive queue of the caller's), and E's partitions are consumed only once
every lane has answered:

- the lane's consumer takes the fence in queue order and waits until every earlier delivery of the lane is settled
  (delivered, dead-lettered, or parked into E's park queue: acked). Then it passes the fence on into E's park queue
  (confirmed, mandatory), behind the copies of E this lane parked there, and acks it. Returned unroutable (no park
  queue): nothing of this lane's copies of E waits anywhere, and it answers itself.
- the park queue's drainer takes a fence there in queue order, waits the same way for everything before it (each
  key's copies delivered by E's runner), answers, and acks it.

A lane or park queue handed back while its fence waits (the hold limit, a hand-over, a crash) returns the fence
unacked behind the earlier deliveries, in order, and the next consumer passes it the same way. A fence is never an
event: no runner sees it. One whose caller gave up is still acked; its answer is dropped.

A fence that cannot be passed on (the park queue refuses it) is tried again every ``PASS_FAILED_WAIT``, its lane
handed back each time, until its promotion stops waiting (``warren-fence-until``, ``[lanes] promote_wait`` after
it was sent); then it is dropped, logged as an error, and the lane moves on. Its promotion, unanswered, is refused
(warren/broker/ordered_promotion.py) and nothing is lost: applied again, it fences anew.
"""

from __future__ import annotations

import asyncio
import logging
import time

from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractIncomingMessage

from warren.broker import wire
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.consumers.key_lanes import PartitionLanes
from warren.consumers.route_fences import answer, answer_fence
from warren.core.errors import PublishError, UnroutableError, describe

__all__ = ["answer_lane_fence", "lane_fence_id", "pass_lane_fence"]

log = logging.getLogger("warren.worker")

PASS_FAILED_WAIT = 1.0  # seconds before a lane whose fence could not be passed on is handed back


def lane_fence_id(message: AbstractIncomingMessage) -> str | None:
    """The ordered promotion's fence a message of an ordered lane or park queue is (None: a copy)."""
    return wire.header_text((message.headers or {}).get(wire.H_LANE_FENCE))


def _queue(message: AbstractIncomingMessage) -> str:
    return wire.header_text((message.headers or {}).get(wire.H_FENCE_QUEUE)) or ""


async def pass_lane_fence(
    message: AbstractIncomingMessage,
    fence: str,
    lanes: PartitionLanes | None,
    publisher: ConfirmChannel,
    park_queue: str,
) -> None:
    """An ordered lane's consumer: once everything of the lane before fence ``message`` is settled, pass it into
    ``park_queue`` (or answer it when there is none), then ack it; unacked when the lane is handed back first."""
    if lanes is None or not await lanes.settled_before(message):
        return
    onward = Message(
        b"",
        headers=wire.untouched_headers(message),
        message_id=message.message_id,
        reply_to=message.reply_to,
        delivery_mode=DeliveryMode.PERSISTENT,
    )
    try:
        await publisher.publish("", onward, park_queue, what=f"lane fence {fence} into {park_queue}")
    except UnroutableError:
        await answer(message, fence, _queue(message), publisher)  # no park queue: none of its copies waits in one
    except PublishError as exc:
        if _given_up(message, time.time()):
            # Its promotion stopped waiting for the answer (refused, "under way": LiveApplyError, the admin API's
            # 409): passing it on would answer nobody, and trying on would hold this lane for good.
            log.error(
                "lane fence %s of endpoint %s dropped: it could not be passed into %s (%s) before its promotion "
                "stopped waiting; the promotion was refused, apply it again once %s takes messages",
                fence, wire.header_text((message.headers or {}).get(wire.H_ENDPOINT)), park_queue, describe(exc),
                park_queue,
            )  # fmt: skip
            await lanes.acks.ack(message)
            return
        log.warning("could not pass lane fence %s into %s (%s); its lane goes back", fence, park_queue, describe(exc))
        await asyncio.sleep(PASS_FAILED_WAIT)
        lanes.hand_back()
        return
    await lanes.acks.ack(message)


def _given_up(message: AbstractIncomingMessage, now: float) -> bool:
    """Whether the promotion that sent fence ``message`` has stopped waiting for its answer (``warren-fence-until``,
    its ``[lanes] promote_wait`` on). A fence of an earlier release names no such time: its age cannot be told,
    and it is taken as given up at its first failure (its promotion is refused; applied again, it fences anew)."""
    until = wire.header_int((message.headers or {}).get(wire.H_FENCE_UNTIL))
    return until is None or now * 1000 >= until


async def answer_lane_fence(
    message: AbstractIncomingMessage, fence: str, lanes: PartitionLanes | None, publisher: ConfirmChannel
) -> None:
    """A park queue's drainer: answer fence ``message`` once everything before it is delivered, then ack it (as a
    router answers a route partition's fence)."""
    await answer_fence(message, fence, lanes, _queue(message), publisher)
