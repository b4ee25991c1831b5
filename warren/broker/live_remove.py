"""Live removal: stop delivery to an endpoint everywhere, then delete its queues and its DLQ.

Remove announces first (workers stop consuming and hand back what they hold), deletes the endpoint's exchange (no
event reaches it any more), waits for its consumers to go, then deletes its queues and its DLQ: nothing of it is
left that could collect events, and nothing a later endpoint of the same name could inherit (a lane endpoint's
letters are taken out of its lane's shared DLQ for that). Without ``force`` it
changes nothing while they hold messages; with ``force`` what they hold is discarded, and counted (``Removal``).
Retries of the endpoint still travelling the delay chain come due under a queue name that is gone: routed nowhere,
RabbitMQ keeps each in its level queue (at-least-once dead-lettering: held by the level's dead-letter worker, tried
again every ``dead_letter_worker_publisher_confirm_timeout``; ``warren status`` counts them as held). Once the
name is reused they reach the later endpoint's queue, and its workers deliver them only if the later endpoint
serves their tenant (``Endpoint.receives_tenant``; the others are discarded).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

import aiormq.exceptions
from aio_pika.abc import AbstractConnection

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.probe import QueueDepth, QueueProbe
from warren.broker.amqp.queue_delete import delete_if_empty
from warren.broker.dlq.browse import hold_messages
from warren.broker.dlq.purge import purge_selected
from warren.broker.dlq.selection import Selection, select
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.live_layout import announce, by, one_call_connection, read_layout
from warren.core.errors import EndpointNotEmpty, LiveApplyError, TopologyError
from warren.topology import names
from warren.topology.config import WarrenConfig

__all__ = ["Removal", "delete_exchange", "remove_endpoint", "retire"]

log = logging.getLogger("warren.live_apply")

# How long remove waits, past the workers' grace period, for the endpoint's consumers to go.
CONSUMERS_GONE_SLACK = 2.0
POLL = 0.02


@dataclass(frozen=True)
class Removal:
    """What removing an endpoint discarded (only ``force`` discards): messages still queued, and dead letters."""

    queued: int = 0
    dead_letters: int = 0

    @property
    def discarded(self) -> int:
        return self.queued + self.dead_letters


async def remove_endpoint(
    settings: WarrenConfig, name: str, *, force: bool, connection: AbstractConnection | None = None
) -> Removal:
    """Stop delivery to ``name`` everywhere, then delete its queues and its DLQ.

    Without ``force``, raises EndpointNotEmpty (and changes nothing) when its queues or its DLQ hold messages;
    and, when messages came back from the workers as they stopped, raises it after stopping delivery, with every
    message still queued. With ``force``, what they hold is discarded: the Removal counts it. On ``connection``
    when given, else on a connection of its own.
    """
    async with one_call_connection(settings, connection, "warren-live-remove") as conn:
        return await _remove_on(conn, settings, name, force=force)


async def _remove_on(connection: AbstractConnection, settings: WarrenConfig, name: str, *, force: bool) -> Removal:
    prefix = settings.broker.prefix
    dlq = names.dlq(prefix, name)
    layout = await read_layout(connection, prefix, name)
    held = layout.held(dlq)
    if held and not force:
        listed = ", ".join(f"{q} ({n})" for q, n in sorted(held.items()))
        raise EndpointNotEmpty(
            f"endpoint {name!r} holds messages ({listed}): nothing removed; let it drain (replay or purge its "
            "dead letters), or remove it with force to discard them",
            held,
        )
    lane_dlq = _lane_dlq(settings, name) if not layout.exists else None
    if lane_dlq is not None and not force and (letters := await _taken(connection, lane_dlq, name, purge=False)):
        raise EndpointNotEmpty(
            f"endpoint {name!r} has {letters} dead letter(s) in its lane's DLQ ({lane_dlq}): nothing removed; "
            "replay or purge them (`warren dlq`), or remove it with force to discard them",
            {lane_dlq: letters},
        )
    park, moved = names.ordered_park_queue(prefix, name), names.ordered_moved_queue(prefix, name)
    for queue in (moved, park):
        if lane_dlq is not None and not force and (parked := await _parked(connection, queue)):
            raise EndpointNotEmpty(
                f"endpoint {name!r} has {parked} message(s) waiting in {queue} (held, or moved from its "
                "partitions): nothing removed; resume it and let them drain, or remove it with force to discard them",
                {queue: parked},
            )
    await announce(connection, prefix, EndpointRecord.removing(name, by()))
    if not layout.exists:
        if lane_dlq is None:
            return Removal()
        # An ordered lane endpoint held once may have a park queue (warren/consumers/ordered_parks.py).
        queued = sum((await retire(connection, settings, name, [moved, park], force=force)).values())
        if not force:
            return Removal()
        # A lane endpoint: its letters leave the shared DLQ with it, so a later endpoint of the name (another
        # tenant's, say) inherits none; its lane-mates' stay, in order.
        purged = await _taken(connection, lane_dlq, name, purge=True)
        if purged or queued:
            log.warning(
                "endpoint %s removed with force: %d parked message(s) and %d dead letter(s) (from %s) discarded",
                name,
                queued,
                purged,
                lane_dlq,
            )
        return Removal(queued, purged)
    await delete_exchange(connection, names.endpoint_exchange(prefix, name))
    queues = [*layout.consumed, *([dlq] if layout.dlq is not None else [])]
    discarded = await retire(connection, settings, name, queues, force=force)
    removal = Removal(sum(n for q, n in discarded.items() if q != dlq), discarded.get(dlq, 0))
    if removal.discarded:
        log.warning(
            "endpoint %s removed with force: %d queued message(s) and %d dead letter(s) discarded",
            name,
            removal.queued,
            removal.dead_letters,
        )
    return removal


async def delete_exchange(connection: AbstractConnection, exchange: str) -> None:
    """Delete ``exchange`` (the bindings into and out of it go with it), on a channel of its own."""
    channel = await connection.channel()
    try:
        await (await channel.get_underlay_channel()).exchange_delete(exchange)
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)


def _lane_dlq(settings: WarrenConfig, name: str) -> str | None:
    """The DLQ of ``name``'s lane, where a lane endpoint's letters are; None when lanes are off."""
    count = settings.lanes.count
    return names.lane_dlq(settings.broker.prefix, names.lane_of(name, count)) if count else None


async def _parked(connection: AbstractConnection, park: str) -> int:
    """Messages in park queue ``park`` (0 when there is none)."""
    probe = QueueProbe(connection)
    try:
        depth = await probe.depth(park)
    finally:
        await probe.close()
    return 0 if depth is None else depth.ready


async def _taken(connection: AbstractConnection, lane_dlq: str, name: str, *, purge: bool) -> int:
    """How many letters of ``lane_dlq`` name ``name``, deleted when ``purge``; 0 when that DLQ does not exist."""
    selection = Selection(endpoint=name)
    try:
        if purge:
            return (await purge_selected(connection, lane_dlq, selection))[0]
        async with hold_messages(connection, lane_dlq) as held:
            return len(select(held.letters(), selection))
    except TopologyError:
        return 0


async def retire(
    connection: AbstractConnection, settings: WarrenConfig, endpoint: str, queues: list[str], *, force: bool
) -> dict[str, int]:
    """Delete queues no longer consumed, once their consumers left: when empty, or with ``force`` whatever they
    hold. Returns queue -> messages discarded with it (``force`` only)."""
    probe = QueueProbe(connection)
    discarded: dict[str, int] = {}
    try:
        deadline = time.monotonic() + settings.delivery.grace_period + CONSUMERS_GONE_SLACK
        left: dict[str, int] = {}
        for queue in queues:
            depth = await _consumers_gone(probe, queue, deadline)
            if depth is None:
                continue
            if depth.consumers:
                raise LiveApplyError(
                    f"endpoint {endpoint!r}: {queue} still has {depth.consumers} consumer(s) "
                    f"{settings.delivery.grace_period + CONSUMERS_GONE_SLACK:g}s after the fleet was told; "
                    "delivery from it is not stopped (a worker of an earlier release?): run the removal again"
                )
            if force:
                discarded[queue] = await _delete(connection, queue)
            elif not await delete_if_empty(connection, queue, counted=True):  # quorum queues among them
                left[queue] = (await probe.depth(queue) or depth).ready
        if left:
            listed = ", ".join(f"{q} ({n})" for q, n in sorted(left.items()))
            raise EndpointNotEmpty(
                f"endpoint {endpoint!r}: delivery is stopped, but messages came back to {listed} as the workers "
                "stopped; they are still queued: remove it again with force to discard them",
                left,
            )
    finally:
        await probe.close()
    return {q: n for q, n in discarded.items() if n}


async def _consumers_gone(probe: QueueProbe, queue: str, deadline: float) -> QueueDepth | None:
    """The queue's depth once no consumer is left on it (or at ``deadline``); None when it does not exist."""
    depth = await probe.depth(queue)
    while depth is not None and depth.consumers and time.monotonic() < deadline:
        # Polled: the consumers are other processes', and RabbitMQ tells nobody when they cancel.
        await asyncio.sleep(POLL)
        depth = await probe.depth(queue)
    return depth


async def _delete(connection: AbstractConnection, queue: str) -> int:
    """Delete ``queue`` whatever it holds; how many messages went with it (0 when it was gone already)."""
    channel = await connection.channel()
    try:
        raw = await channel.get_underlay_channel()
        try:
            deleted = await raw.queue_delete(queue)
        except aiormq.exceptions.ChannelNotFoundEntity:
            return 0
        return int(deleted.message_count or 0)
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)
