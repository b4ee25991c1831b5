"""Demotion of an ordered endpoint: its partitions moved live onto the ordered lanes, each key's order kept.

A dedicated ordered endpoint E owns a consistent-hash exchange over its partitions (single active consumer)
and a DLQ; its retries are in place, so nothing of it waits in the delay chain. On the ordered lanes its events
come through the routers. The events already in its partitions must reach E before any event the routers copy
for it, key by key. Two queues of E make that hold (classic, durable, as park queues are; ordered_parks.py):

- ``{prefix}.lane.park.<E>.moved``: what the partitions held, moved in partition order (a key is in one
  partition, so each key's events stay in order), then an end marker (``warren-move-end``);
- ``{prefix}.lane.park.<E>``, its park queue: while it exists the ordered lanes' consumers move every copy of E
  into it, in each key's order, instead of delivering it; and a park queue is drained only once the moved queue
  is gone, which its drainer deletes only when everything before the marker is delivered.

In this order:

1. Both queues are declared (the park queue before any router copies anything for E).
2. E is announced as an ordered lane endpoint, waiting for every router (route_fence.py): the routers copy E's
   events to the ordered lanes, from where they go into its park queue; the workers stop consuming its
   partitions (what they hold unsettled goes back to each partition's head, in order).
3. Its exchange is deleted: its events reach it only through the routers from then on. One published between 2
   and 3 reaches it both ways: a duplicate (after its first delivery from the moved queue), dropped by the
   receiver by ``webhook-id``.
4. Once a partition has no consumer left (within the grace period and a slack), what it holds is moved into the
   moved queue, each message confirmed before it is acked; then the end marker; its dead letters move to its
   lane's DLQ, naming it; its partitions and DLQ are deleted.

A crash of the mover (the admin API) between 2 and 4 leaves the moved queue without its end marker: nothing is
lost (the partitions keep what was not moved, the park queue what the routers copied) and nothing of E is
delivered meanwhile; applying the move again (the same update) finishes it. Order per key: whatever was in the
partitions is delivered before any router copy, each in its key's order. Duplicates: the events published
between 2 and 3, and those a killed worker had delivered but not acked.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractConnection, AbstractIncomingMessage

from warren.broker import wire
from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.probe import QueueProbe
from warren.broker.amqp.uninterrupted import uninterrupted
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.live_layout import Layout
from warren.broker.live_remove import delete_exchange, retire
from warren.broker.route_fence import announce_to_routers, routers_running
from warren.core.errors import LiveApplyError
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

__all__ = ["demote_ordered", "hand_over"]

MOVE_SLACK = 5.0  # seconds past the grace period a partition may keep a consumer (a worker still stopping)
POLL = 0.05
MOVE_PREFETCH = 64
PARK_ARGUMENTS: dict[str, Any] = {"x-queue-type": "classic"}  # as ordered_parks.py declares park queues


async def demote_ordered(
    connection: AbstractConnection, settings: WarrenConfig, endpoint: Endpoint, record: EndpointRecord, before: Layout
) -> tuple[int, int]:
    """Move dedicated ordered endpoint ``endpoint`` onto the ordered lanes (see above): (messages, dead letters)
    moved. Raises LiveApplyError when a partition keeps a consumer past the wait (apply again to finish)."""
    prefix, name = settings.broker.prefix, endpoint.name
    if settings.lanes.ordered_count == 0:
        raise LiveApplyError(f"endpoint {name!r} is ordered: moving it onto lanes needs [lanes] ordered_count > 0")
    moved, park = names.ordered_moved_queue(prefix, name), names.ordered_park_queue(prefix, name)
    channel = await connection.channel()
    try:
        for queue in (moved, park):
            await channel.declare_queue(queue, durable=True, arguments=PARK_ARGUMENTS)
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)
    deadline = await hand_over(connection, settings, record, MOVE_SLACK, strict=True)
    partitions = sorted(before.consumed)
    queued = 0
    for partition in partitions:
        await _unconsumed(connection, partition, name, deadline)
        queued += await _move(connection, partition, moved, name)
    await _mark_end(connection, moved, name)
    dlq = names.dlq(prefix, name)
    lane_dlq = names.lane_dlq(prefix, names.lane_of(name, settings.lanes.count))
    letters = await _move(connection, dlq, lane_dlq, name) if before.dlq is not None else 0
    await retire(connection, settings, name, [*partitions, dlq], force=False)
    return queued, letters


async def hand_over(
    connection: AbstractConnection, settings: WarrenConfig, record: EndpointRecord, slack: float, *, strict: bool
) -> float:
    """Announce the endpoint as a lane endpoint, then delete its exchange: its events reach it only through the
    routers from then on. Returns until when its old queues may keep a consumer.

    A router answers once its worker serves the endpoint on the lanes, after it stopped serving it on its queues
    (within the grace period): the wait covers both. ``strict``: a router that has not answered by then refuses
    the move before the delete (LiveApplyError; its queues still take every event, nothing is lost, and applying
    again finishes it), since an event published after the delete would miss the endpoint on that router."""
    wait = settings.lanes.apply_wait + settings.delivery.grace_period
    heard = await announce_to_routers(connection, settings.broker.prefix, record, wait)
    if strict and not heard.complete and heard.answered < await routers_running(connection, settings.broker.prefix):
        # (a router that went meanwhile, killed say, is not waited for: its events go back to the others)
        raise LiveApplyError(
            f"endpoint {record.endpoint!r}: {heard.answered} of {heard.routers} routers confirmed its move onto the "
            f"lanes within {wait:g}s; its own queues keep taking its events meanwhile: apply it again to finish"
        )
    await delete_exchange(connection, names.endpoint_exchange(settings.broker.prefix, record.endpoint))
    return time.monotonic() + settings.delivery.grace_period + slack


async def _unconsumed(connection: AbstractConnection, queue: str, name: str, deadline: float) -> None:
    """Wait until ``queue`` has no consumer: a worker still delivering from it would hand back its unsettled
    messages behind the ones already moved."""
    probe = QueueProbe(connection)
    try:
        while True:
            depth = await probe.depth(queue)
            if depth is None or not depth.consumers:
                return
            if time.monotonic() >= deadline:
                raise LiveApplyError(
                    f"endpoint {name!r}: {queue} is still consumed ({depth.consumers}); the move onto the ordered "
                    "lanes is under way (its events wait, none lost): apply the same change again to finish it"
                )
            await asyncio.sleep(POLL)
    finally:
        await probe.close()


async def _move(connection: AbstractConnection, source: str, destination: str, endpoint: str) -> int:
    """Move every message of ``source`` into ``destination`` in queue order, naming ``endpoint``, each confirmed
    before it is acked. Consumed (a quorum queue with single active consumer refuses ``basic.get``), one message
    at a time in delivery order; a failure closes the channel, which returns the rest to the head in order."""
    publisher = await ConfirmChannel(connection).open()
    channel = await connection.channel()
    probe = QueueProbe(connection)
    arrived: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
    moved = 0
    try:
        if not ((depth := await probe.depth(source)) and depth.ready):
            return 0  # nothing to move (the usual case of a DLQ)
        await channel.set_qos(prefetch_count=MOVE_PREFETCH)
        queue = await channel.get_queue(source, ensure=False)
        tag = await queue.consume(arrived.put)
        while True:
            try:
                message = await asyncio.wait_for(arrived.get(), POLL * 4)
            except TimeoutError:
                depth = await probe.depth(source)
                if depth is None or (not depth.ready and arrived.empty()):
                    await uninterrupted(queue.cancel(tag))
                    break
                continue
            headers = {**wire.untouched_headers(message), wire.H_ENDPOINT: endpoint}
            what = f"{message.message_id} from {source} to {destination}"
            await publisher.publish("", wire.onward(message, headers), destination, what=what)
            await message.ack()
            moved += 1
        while not arrived.empty():  # delivered just before the cancel: moved too, in order
            message = arrived.get_nowait()
            headers = {**wire.untouched_headers(message), wire.H_ENDPOINT: endpoint}
            await publisher.publish("", wire.onward(message, headers), destination, what=message.message_id or "")
            await message.ack()
            moved += 1
        return moved
    finally:
        await probe.close()
        with contextlib.suppress(Exception):
            await close_channel(channel)
        await publisher.close()


async def _mark_end(connection: AbstractConnection, moved: str, endpoint: str) -> None:
    """The moved queue's last message: its drainer deletes it once everything before is delivered."""
    publisher = await ConfirmChannel(connection).open()
    try:
        marker = Message(
            b"",
            headers={wire.H_MOVE_END: "1", wire.H_ENDPOINT: endpoint},
            message_id=f"move-end-{endpoint}",
            delivery_mode=DeliveryMode.PERSISTENT,
        )
        await publisher.publish("", marker, moved, what=f"the end of {moved}")
    finally:
        await publisher.close()
