"""Promotion of an ordered lane endpoint: from the ordered lanes to partitions of its own, each key's order kept.

An ordered lane endpoint E (``ordering = "key"``, ``home = "lane"``) gets its events through the routers, as copies
in the ordered lanes ``{prefix}.lane.o<i>`` (and in its park queue ``{prefix}.lane.park.<E>`` while it is held or
parked). Once promoted, its events come from its own partitions. Every copy of a key already on its way through
the lane side must be delivered before any event of that key from the partitions. ``apply_endpoint``
(warren/broker/live_apply.py) does it in this order:

1. E's exchange, bindings, partitions and DLQ are declared: from then on every event published reaches its
   partitions, which nobody consumes yet (no worker serves E as dedicated).
2. The routing stage is fenced (warren/broker/partition_fence.py): every event published before the bindings has
   its lane copy confirmed.
3. E is announced as the ordered lane endpoint it was, its routing *closed* (the record's ``"routing": "closed"``),
   waiting for every router: each router routes nothing more to E (warren/consumers/lane_index.py), while its
   lane consumers and park drainer still deliver its copies. An event published after 1 and copied before 3 goes
   both ways: a duplicate, delivered first from the lanes, then again from the partitions.
4. Every ordered lane is fenced (a ``warren-lane-fence`` naming E, warren/consumers/lane_fences.py): the lane's
   consumer passes it on once everything before it in the lane is settled, into E's park queue (behind the copies
   of E the lane parked there) or, with no park queue, answers it; the park queue's drainer answers it once
   everything before it is delivered. With every lane's answer, no copy of E is left undelivered on the lane side.
5. E is announced as dedicated: the workers consume its partitions from here. Its park queue, emptied by the
   fences, is deleted; a copy that entered it after its lane's fence (a router's copy in flight as it closed, or
   a letter replayed from its lane's DLQ) is moved into E's exchange first, confirmed, then acked: delivered from
   its partitions like any copy of a dedicated endpoint the lanes still hold (``late_copies``).

``warren setup`` promotes an ordered *file* endpoint the same way (warren/broker/setup_promotion.py): its records
(``EndpointRecord.file_routing``) close its routing at step 3 and are honoured by workers whose file still has it
on a lane; no record announces it as dedicated at step 5 (workers learn that from the new file).

Failure loses nothing. A fence of step 2 not confirmed: the promotion is undone as an unordered one is
(RoutingUnconfirmed). A router not hearing step 3, or a lane not answering step 4 within ``[lanes] promote_wait``
(no worker running, E held: paused, its circuit open): LiveApplyError. E then stays served from the lanes for what
they hold, routed to no more, its new events waiting in its partitions; applying the same change again takes the
promotion up where it stopped (the admin API keeps the stored endpoint on its lane until it succeeds). It is not
undone: an event published once a router had closed is in E's partitions only, and deleting them would lose it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Mapping

import aiormq.exceptions
from aio_pika.abc import AbstractConnection

from warren.broker.amqp.channels import close_channel, raw_channel
from warren.broker.amqp.probe import QueueDepth, QueueProbe
from warren.broker.amqp.queue_delete import delete_if_empty
from warren.broker.endpoint_records import EndpointRecord, next_version
from warren.broker.live_demote import move_all
from warren.broker.live_layout import announce
from warren.broker.partition_fence import fence_needed, fence_queues
from warren.broker.route_fence import announce_to_routers, routers_running
from warren.core.errors import LiveApplyError, TopologyError
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.headers import H_ENDPOINT, H_LANE_FENCE

__all__ = ["APPLY_AGAIN", "lanes_to_fence", "late_copies", "promote_ordered"]

log = logging.getLogger("warren.live_apply")

LOCK_WAIT = 0.2  # seconds between two tries of a park queue's drain lock
LATE_WAIT = 5.0  # seconds past the grace period that late copies in a promoted endpoint's park queue are waited for


def lanes_to_fence(lanes: Mapping[str, QueueDepth | None], park: QueueDepth | None) -> tuple[str, ...]:
    """The ordered lanes to fence: every one that exists, unless none of them may hold a copy (each empty and
    unconsumed) and the endpoint has no park queue: then none."""
    if park is None and not fence_needed(lanes):
        return ()
    return tuple(queue for queue, depth in lanes.items() if depth is not None)


APPLY_AGAIN = "apply the same change again to finish it"


def _under_way(name: str, why: str, again: str) -> LiveApplyError:
    return LiveApplyError(
        f"endpoint {name!r}: its promotion to partitions of its own is under way: {why}. Nothing is lost: what the "
        f"lanes hold for it is still delivered from them, its new events wait in its partitions; {again} (once "
        "workers run and the endpoint is not held: paused or its circuit open)"
    )


async def promote_ordered(
    connection: AbstractConnection,
    settings: WarrenConfig,
    closing: EndpointRecord,
    record: EndpointRecord | None,
    *,
    again: str = APPLY_AGAIN,
) -> None:
    """Steps 3-5 above, for an endpoint whose partitions and bindings exist and whose routing stage is fenced:
    ``closing`` announces it as the lane endpoint it was with its routing closed, ``record`` as dedicated (None:
    a file endpoint, which no record announces). ``again``: what the refusal tells the caller to do."""
    prefix, name, lanes = settings.broker.prefix, closing.endpoint, settings.lanes
    wait = lanes.apply_wait + settings.delivery.grace_period
    heard = await announce_to_routers(connection, prefix, closing, wait)
    if not heard.complete and heard.answered < await routers_running(connection, prefix):
        raise _under_way(name, f"{heard.answered} of {heard.routers} routers confirmed within {wait:g} s", again)
    queues = [names.ordered_lane_queue(prefix, i) for i in range(lanes.ordered_count)]
    park = names.ordered_park_queue(prefix, name)
    probe = QueueProbe(connection)
    try:
        depths = {queue: await probe.depth(queue) for queue in queues}
        fenced = lanes_to_fence(depths, await probe.depth(park))
    finally:
        await probe.close()
    if fenced:
        answered = await fence_queues(connection, fenced, lanes.promote_wait, H_LANE_FENCE, {H_ENDPOINT: name})
        missing = [queue for queue in fenced if queue not in answered]
        if missing:
            raise _under_way(
                name,
                f"the ordered lanes did not confirm within {lanes.promote_wait:g} s ([lanes] promote_wait) that "
                f"its copies were delivered (not confirmed: {', '.join(missing)}; a lane whose fence could not be "
                "passed on says why in its worker's log)",
                again,
            )
    if record is not None:
        await announce(connection, prefix, dataclasses.replace(record, version=next_version()))  # after ``closing``
    await late_copies(connection, settings, name)


async def late_copies(connection: AbstractConnection, settings: WarrenConfig, name: str) -> int:
    """Delete promoted endpoint ``name``'s park queue, if it has one; what it still holds (copies that entered it
    after its lane's fence) first moved into the endpoint's exchange, each confirmed before it is acked. Done
    holding the queue's drain lock (as a drainer does, warren/consumers/ordered_parks.py: no copy is unacked in a
    worker when it goes), waited for at most the grace period and ``LATE_WAIT`` (a drainer gives the lock up once
    the endpoint is no ordered lane endpoint). How many were moved; a queue that could not be emptied in time is
    kept (logged), and the next apply of the endpoint moves what it holds."""
    park = names.ordered_park_queue(settings.broker.prefix, name)
    deadline = time.monotonic() + settings.delivery.grace_period + LATE_WAIT
    exchange = names.endpoint_exchange(settings.broker.prefix, name)
    moved = 0
    while True:
        lock, held = await connection.channel(), False
        try:
            await lock.declare_queue(f"{park}.drain", exclusive=True, auto_delete=True)
            held = True
            moved += await move_all(connection, park, "", name, deadline, exchange=exchange)
            if await delete_if_empty(connection, park):
                break
            why = "it holds messages (a copy came meanwhile)"
        except aiormq.exceptions.ChannelNotFoundEntity:
            break  # no park queue: nothing came late
        except (aiormq.exceptions.AMQPChannelError, TopologyError) as exc:  # its lock held by a drainer, or refused
            why = str(exc)
        finally:
            with contextlib.suppress(Exception):
                await close_channel(lock)
            if held:  # exclusive: it would live as long as the connection (the admin API's, for its lifetime)
                with contextlib.suppress(Exception):
                    async with raw_channel(connection, "") as raw:
                        await raw.queue_delete(f"{park}.drain")
        if time.monotonic() >= deadline:
            log.warning(
                "park queue %s kept after the promotion: %s; the next apply of its endpoint moves it", park, why
            )
            break
        await asyncio.sleep(LOCK_WAIT)
    if moved:
        log.info("endpoint %s promoted: %d late copies moved from %s into its exchange", name, moved, park)
    return moved
