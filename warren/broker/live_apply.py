"""Live apply: one endpoint's RabbitMQ objects declared or removed at runtime, and the fleet told at once.

The admin API calls these two functions after it changed its store; nothing here reads a database. Workers learn
the change through RabbitMQ (``consumers/live_endpoints.py``): a record on ``<prefix>.endpoints``, which every
worker hears and the endpoints stream remembers (latest record per endpoint wins, warren/broker/endpoint_records.py).

Apply declares the planner's objects for the one endpoint (warren/topology/planner.py ``endpoint_plan``), idempotently,
drops the subscription bindings the new configuration no longer has (events or tenant changed), and only then
announces: a worker that hears of the endpoint finds its queues there. A change of ordering or partitions is
refused while the queues it would drop hold messages (as ``warren setup`` refuses a differing exchange). The
record's signing secrets are sealed with the store's keys (``[store] keys``): apply needs them, and refuses without.

Remove (``live_remove``) stops delivery everywhere, then deletes the endpoint's queues and its DLQ; it is
re-exported here, beside apply, for the admin side.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging

from aio_pika.abc import AbstractConnection

from warren.broker.amqp.channels import close_channel, raw_channel
from warren.broker.amqp.probe import QueueProbe
from warren.broker.applier import declare_plan
from warren.broker.capacity import problems_adding
from warren.broker.dlq.relocate import relocate_letters
from warren.broker.endpoint_records import APPLY, EndpointRecord
from warren.broker.live_demote import demote
from warren.broker.live_layout import announce, by, one_call_connection, own_queues, read_layout
from warren.broker.live_remove import Removal, remove_endpoint, retire
from warren.broker.live_set import latest_records
from warren.broker.management import ManagementClient
from warren.broker.ordered_promotion import promote_ordered
from warren.broker.promotion_fence import fenced_or_undone
from warren.broker.route_fence import announce_to_routers
from warren.core.errors import EndpointNotEmpty, LiveApplyError, RoutingUnconfirmed, TopologyError
from warren.store.keys import StoreKeyError, sealer_from
from warren.topology import names
from warren.topology.addresses import url_host_problem
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.delays import level_count
from warren.topology.plan import Plan
from warren.topology.planner import consumed_queues, delay_levels, endpoint_plan, subscription_bindings

__all__ = [
    "EndpointConfig",
    "EndpointNotEmpty",
    "LiveApplyError",
    "Removal",
    "RoutingUnconfirmed",
    "Settings",
    "apply_endpoint",
    "remove_endpoint",
]

log = logging.getLogger("warren.live_apply")

# The names the admin side uses for the configuration types.
Settings = WarrenConfig
EndpointConfig = Endpoint


def _check_address(settings: WarrenConfig, endpoint: Endpoint) -> None:
    # As the configuration refuses it at load for the file's endpoints (the worker checks again as it connects).
    if not settings.delivery.allow_private_networks and (problem := url_host_problem(endpoint.url)):
        raise LiveApplyError(f"endpoint {endpoint.name!r}: url refused: {problem}")


def _check_delays(settings: WarrenConfig, endpoint: Endpoint) -> None:
    needed = level_count(endpoint.retry_policy(settings.retry).longest_delay)
    have = delay_levels(settings)
    if needed > have:
        raise LiveApplyError(
            f"endpoint {endpoint.name!r}: its retry policy waits up to "
            f"{endpoint.retry_policy(settings.retry).longest_delay:g}s, longer than the delay chain set up for "
            f"this deployment reaches ({have} levels); lower its retry cap/schedule, or raise [retry] cap in the "
            "configuration and run `warren setup`"
        )


async def _checked_subscriptions(settings: WarrenConfig, endpoint: Endpoint, plan: Plan) -> list[tuple[str, str]]:
    """(source, key) of bindings feeding the endpoint's exchange that its configuration no longer has (to remove).

    Raises LiveApplyError first when a node could not hold the plan's new quorum queues (warren/broker/capacity.py:
    past its file-handle cache a 3.10 node accepts no connection on any vhost).
    """
    prefix = settings.broker.prefix
    wanted = {(b.source, b.routing_key) for b in subscription_bindings(prefix, endpoint)}
    sources = {names.events_exchange(prefix), names.tenants_exchange(prefix)}
    quorum = [q.name for q in plan.queues if q.arguments.get("x-queue-type") == "quorum"]
    async with ManagementClient.from_settings(settings.broker) as api:
        problems = await problems_adding(api, quorum)
        if problems:
            raise LiveApplyError(f"endpoint {endpoint.name!r} not applied, nothing declared: " + "; ".join(problems))
        found = await api.bindings_to_exchange(names.endpoint_exchange(prefix, endpoint.name))
    return sorted(
        {
            (b["source"], b.get("routing_key", ""))
            for b in found
            if b.get("source") in sources and (b["source"], b.get("routing_key", "")) not in wanted
        }
    )


async def apply_endpoint(
    settings: Settings,
    endpoint: EndpointConfig,
    *,
    connection: AbstractConnection | None = None,
    promoting: bool | None = None,
) -> None:
    """Declare ``endpoint``'s exchange, bindings and queues (idempotent), then announce it to every worker.

    On ``connection`` when given (``warren api`` keeps one for its lifetime, warren/broker/admin/link.py), else on a
    connection of its own.

    ``promoting``: whether the endpoint was a lane endpoint until now (False: new, or dedicated already; None: not
    known, taken as maybe). Declaring its own queues then fences the routing stage before it is announced
    (warren/broker/partition_fence.py): RoutingUnconfirmed when the routers did not confirm in time, the promotion
    undone. An ordered endpoint that may be promoted (True; or None, when this apply declares its partitions
    afresh) also has its ordered lanes emptied of its copies before its partitions are consumed
    (warren/broker/ordered_promotion.py): LiveApplyError when that cannot finish in time, the promotion left under
    way (nothing lost; applying it again finishes it). An ordered endpoint never moves to its partitions without.

    Raises EndpointNotEmpty when the change moves ordering or partitions of queues that hold messages,
    LiveApplyError when it cannot be applied otherwise, TopologyError when the broker refuses an object (or
    ``warren setup`` never ran), BrokerUnavailable or ManagementError when RabbitMQ cannot be reached.
    """
    _check_address(settings, endpoint)
    _check_delays(settings, endpoint)
    try:
        sealer = sealer_from(settings.store.keys)
    except StoreKeyError as exc:
        raise LiveApplyError(f"endpoint {endpoint.name!r}: secrets not sealed for the workers: {exc}") from None
    record = EndpointRecord.applying(endpoint, by(), sealer)
    if endpoint.home == "lane":
        async with one_call_connection(settings, connection, "warren-live-apply") as conn:
            await _apply_lane_endpoint(conn, settings, endpoint, record)
        return
    # The management API's answer and the AMQP connection are awaited together: apply latency is the sum of
    # round trips, and these two need nothing of each other.
    plan = endpoint_plan(settings, endpoint)
    closing = None
    if endpoint.ordering == "key" and settings.lanes.count and settings.lanes.ordered_count and promoting is not False:
        # An ordered lane endpoint until now (or maybe): announced as such, routed to no more, while its lanes empty.
        lane = EndpointRecord.applying(endpoint.model_copy(update={"home": "lane"}), by(), sealer)
        closing = dataclasses.replace(lane, routing_closed=True)
    stale_reading = asyncio.ensure_future(_checked_subscriptions(settings, endpoint, plan))
    try:
        async with one_call_connection(settings, connection, "warren-live-apply") as conn:
            await _apply_on(conn, settings, endpoint, plan, record, stale_reading, promoting, closing)
    finally:
        if not stale_reading.done():
            stale_reading.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await stale_reading


async def _apply_lane_endpoint(
    connection: AbstractConnection, settings: WarrenConfig, endpoint: Endpoint, record: EndpointRecord
) -> None:
    """A lane endpoint owns nothing on the broker: only announced (the workers' routing stage and lanes serve it).

    Refused when lanes are off. An endpoint that still has queues of its own is demoted onto its lane
    (warren/broker/live_demote.py): its messages and dead letters move with it.
    """
    if settings.lanes.count == 0:
        raise LiveApplyError(f"endpoint {endpoint.name!r}: home = 'lane' needs [lanes] count > 0 (and `warren setup`)")
    if await own_queues(connection, settings.broker.prefix, endpoint.name):
        # It has queues of its own: a demotion, nothing it holds lost (warren/broker/live_demote.py).
        before = await read_layout(connection, settings.broker.prefix, endpoint.name)
        await demote(connection, settings, endpoint, record, before)
        return
    # Returns once every running router has it in its index (warren/broker/route_fence.py), so that an event
    # published after the create reaches it, as a dedicated endpoint's bindings make sure for it.
    await announce_to_routers(connection, settings.broker.prefix, record, settings.lanes.apply_wait)


async def _apply_on(
    connection: AbstractConnection,
    settings: WarrenConfig,
    endpoint: Endpoint,
    plan: Plan,
    record: EndpointRecord,
    stale_reading: asyncio.Future[list[tuple[str, str]]],
    promoting: bool | None = None,
    closing: EndpointRecord | None = None,
) -> None:
    prefix = settings.broker.prefix
    if endpoint.ordering == "key" and settings.lanes.count and await _moving_onto_lanes(connection, prefix, endpoint):
        raise LiveApplyError(
            f"endpoint {endpoint.name!r}: its move onto the ordered lanes is unfinished "
            f"({names.ordered_moved_queue(prefix, endpoint.name)} exists); apply it with home 'lane' to finish it"
        )
    before, stale = await asyncio.gather(read_layout(connection, prefix, endpoint.name), stale_reading)
    if (
        closing is not None
        and promoting is None
        and before.exists
        and not await _on_lanes(connection, prefix, endpoint)
    ):
        closing = None  # not said, its partitions there and its record dedicated: nothing of it in the lanes
    wanted = set(consumed_queues(prefix, endpoint))
    dropped = {q: n for q, n in before.consumed.items() if q not in wanted}
    if dropped:
        await _relayout(connection, settings, endpoint, dropped)
    await declare_plan(connection, plan)
    if stale:
        await _unbind(connection, names.endpoint_exchange(prefix, endpoint.name), stale)
    if settings.lanes.count and not before.exists and promoting is not False:
        # Maybe a lane endpoint until now: what the routing stage holds for it is routed before it hears otherwise.
        await fenced_or_undone(connection, settings, [endpoint])
    # An ordered lane endpoint's promotion (ordered_promotion.py): its lanes emptied before its partitions are used.
    ordered_promotion = closing is not None
    if closing is not None:
        await promote_ordered(connection, settings, closing, record)
    else:
        await announce(connection, prefix, record)
    if settings.lanes.count and (not before.exists or ordered_promotion):
        # New here, or promoted from a lane: letters naming it in its lane's DLQ follow it into its own DLQ.
        lane = names.lane_of(endpoint.name, settings.lanes.count)
        with contextlib.suppress(TopologyError):  # no lanes declared yet: no letters to follow
            await relocate_letters(
                connection, names.lane_dlq(prefix, lane), names.dlq(prefix, endpoint.name), endpoint.name
            )
    if dropped:
        try:
            await retire(connection, settings, endpoint.name, list(dropped), force=False)
        except EndpointNotEmpty as exc:
            # Applied: only messages handed back by workers as they switched are left in an old queue.
            log.warning("endpoint %s applied; old queues kept, not empty: %s", endpoint.name, exc.queues)


async def _on_lanes(connection: AbstractConnection, prefix: str, endpoint: Endpoint) -> bool:
    """Whether the record in force of ``endpoint`` still has it on a lane (its promotion under way, or not begun);
    read for an apply that did not say whether it promotes (reading the stream is a cost the admin API avoids)."""
    record = (await latest_records(connection, prefix)).get(endpoint.name)
    return (
        record is not None
        and record.action == APPLY
        and (record.routing_closed or (record.config or {}).get("home") == "lane")
    )


async def _moving_onto_lanes(connection: AbstractConnection, prefix: str, endpoint: Endpoint) -> bool:
    """Whether an ordered endpoint's demotion left its moved queue (warren/broker/live_demote_ordered.py)."""
    probe = QueueProbe(connection)
    try:
        return await probe.depth(names.ordered_moved_queue(prefix, endpoint.name)) is not None
    finally:
        await probe.close()


async def _relayout(
    connection: AbstractConnection, settings: WarrenConfig, endpoint: Endpoint, dropped: dict[str, int]
) -> None:
    """The endpoint's queues change (ordering or partitions): refused while a queue to drop holds messages."""
    prefix = settings.broker.prefix
    busy = {q: n for q, n in dropped.items() if n}
    if busy:
        held = ", ".join(f"{q} ({n})" for q, n in sorted(busy.items()))
        raise EndpointNotEmpty(
            f"endpoint {endpoint.name!r}: changing its ordering or partitions would drop queues that hold messages "
            f"({held}); let them drain (pause producers or the endpoint's events) and apply again",
            busy,
        )
    exchange = names.endpoint_exchange(prefix, endpoint.name)
    async with raw_channel(connection, f"RabbitMQ refused to re-lay endpoint {endpoint.name!r}") as raw:
        # A new exchange type cannot be declared over the old one; the consistent-hash exchange of a new
        # partition count keeps its type, and unbinding the dropped partitions is enough.
        partitions_only = endpoint.ordering == "key" and all(q.rsplit(".", 1)[-1].startswith("p") for q in dropped)
        if partitions_only:
            for queue in dropped:
                await raw.queue_unbind(queue, exchange, "1")
        else:
            await raw.exchange_delete(exchange)


async def _unbind(connection: AbstractConnection, exchange: str, stale: list[tuple[str, str]]) -> None:
    channel = await connection.channel()
    try:
        raw = await channel.get_underlay_channel()
        for source, key in stale:
            await raw.exchange_unbind(destination=exchange, source=source, routing_key=key)
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)
