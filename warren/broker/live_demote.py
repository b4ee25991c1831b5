"""Demotion: a dedicated endpoint moved live onto a lane, nothing it holds lost on the way.

A dedicated endpoint owns an exchange (bound to the events), a work queue (bound on the delay chain's last
exchange for its retries, ``#.<queue>``) and a DLQ. On a lane it owns none of them. In this order:

1. Its retries are turned to its lane: the lane is bound on ``{prefix}.delay.due`` with the work queue's own
   key, and the work queue's binding goes. A retry comes due under the queue name it left with, up to the
   delay chain's longest delay later; the lane consumer reads the endpoint from that routing key when the
   copy names none (warren/consumers/lanes.py). The binding carries ``x-warren-until`` (epoch ms): past it no
   retry can still come due under that key, and ``warren setup`` reports it as a leftover (drift.py).
2. It is announced as a lane endpoint, and the announcement waits for every router to have it
   (route_fence.py): the workers serve it on its lane, and stop consuming its work queue.
3. Its exchange is deleted: from then on its events reach it only through the routers. An event published
   between steps 2 and 3 reaches it both ways: a duplicate, which the receiver drops by ``webhook-id``.
4. What its work queue holds moves to its lane, and its dead letters to its lane's DLQ, each naming the
   endpoint (``warren-endpoint``), confirmed before it is acked; then the two queues are deleted. Messages
   handed back by a worker still draining (past the announcement's wait) are moved too: the move goes on
   until the queue is empty with no consumer, bounded by the grace period.

An ordered endpoint (partitions) moves onto the ordered lanes its own way, each key's order kept
(warren/broker/live_demote_ordered.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

import aiormq.exceptions
from aio_pika.abc import AbstractConnection

from warren.broker import wire
from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.probe import QueueProbe
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.live_demote_ordered import demote_ordered, hand_over
from warren.broker.live_layout import Layout
from warren.broker.live_remove import retire
from warren.core.errors import LiveApplyError, TopologyError
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.planner import delay_levels

__all__ = ["Demotion", "demote", "move_all"]

MOVE_SLACK = 2.0  # seconds past the grace period the move waits for a draining worker's messages to come back
POLL = 0.05


@dataclass(frozen=True)
class Demotion:
    """What moved with a demoted endpoint: messages from its work queue to its lane, letters to the lane's DLQ."""

    queued: int = 0
    dead_letters: int = 0


async def demote(
    connection: AbstractConnection, settings: WarrenConfig, endpoint: Endpoint, record: EndpointRecord, before: Layout
) -> Demotion:
    """Move dedicated endpoint ``endpoint`` (``before``: what the broker holds of it) onto its lane (see above)."""
    prefix, name = settings.broker.prefix, endpoint.name
    work = names.work_queue(prefix, name)
    if set(before.consumed) - {work}:
        if endpoint.ordering != "key":
            raise LiveApplyError(
                f"endpoint {name!r} has partitions ({', '.join(sorted(set(before.consumed) - {work}))}): it moves "
                "onto the ordered lanes as an ordered endpoint only; change its home and its ordering one at a time"
            )
        queued, letters = await demote_ordered(connection, settings, endpoint, record, before)
        return Demotion(queued, letters)
    lane = names.lane_of(name, settings.lanes.count)
    lane_queue, lane_dlq = names.lane_queue(prefix, lane), names.lane_dlq(prefix, lane)
    due = names.delay_due_exchange(prefix)
    reach_ms = 2 ** delay_levels(settings)  # the delay chain's longest hold, in ms
    until = int(time.time() * 1000) + reach_ms + int((settings.delivery.grace_period + 60) * 1000)
    channel = await connection.channel()
    try:
        raw = await channel.get_underlay_channel()
        try:
            await raw.queue_bind(lane_queue, due, routing_key=f"#.{work}", arguments={names.UNTIL_ARGUMENT: until})
            if work in before.consumed:
                await raw.queue_unbind(work, due, routing_key=f"#.{work}")
        except aiormq.exceptions.ChannelNotFoundEntity as exc:
            raise TopologyError(f"endpoint {name!r} cannot move onto lane {lane}: {exc} (run `warren setup`)") from None
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)
    deadline = await hand_over(connection, settings, record, MOVE_SLACK, strict=False)
    queued = await move_all(connection, work, lane_queue, name, deadline) if work in before.consumed else 0
    dlq = names.dlq(prefix, name)
    letters = await move_all(connection, dlq, lane_dlq, name, deadline) if before.dlq is not None else 0
    await retire(connection, settings, name, [work, dlq], force=False)
    return Demotion(queued, letters)


async def move_all(
    connection: AbstractConnection, source: str, destination: str, endpoint: str, deadline: float, exchange: str = ""
) -> int:
    """Move every message of ``source`` into ``destination`` (a queue; or the routing key on ``exchange``), naming
    ``endpoint``, each confirmed before it is acked; until ``source`` is empty with no consumer left, or
    ``deadline``."""
    publisher = await ConfirmChannel(connection).open()
    channel = await connection.channel()
    probe = QueueProbe(connection)
    moved = 0
    try:
        queue = await channel.get_queue(source, ensure=False)
        while True:
            message = await queue.get(no_ack=False, fail=False)
            if message is not None:
                headers = {**wire.untouched_headers(message), wire.H_ENDPOINT: endpoint}
                what = f"{message.message_id} from {source} to {exchange or destination}"
                await publisher.publish(exchange, wire.onward(message, headers), destination, what=what)
                await message.ack()
                moved += 1
                continue
            depth = await probe.depth(source)
            if depth is None or (not depth.ready and not depth.consumers) or time.monotonic() >= deadline:
                return moved
            await asyncio.sleep(POLL)
    finally:
        await probe.close()
        with contextlib.suppress(Exception):
            await close_channel(channel)
        await publisher.close()
