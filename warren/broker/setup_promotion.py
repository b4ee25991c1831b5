"""``warren setup`` moving file endpoints from a lane to queues of their own, as live apply moves live ones.

A dedicated endpoint whose exchange this run created, with lanes on, may have been a lane endpoint until now (the
file's ``home`` changed; setup cannot tell a moved endpoint from a new one). The routing stage is fenced for it
(warren/broker/promotion_fence.py; not confirmed: its queues undone, RoutingUnconfirmed), and its lane's dead
letters follow it into its own DLQ.

An ordered one also goes through the ordered promotion (warren/broker/ordered_promotion.py, the live path's own
steps): its routing closed by a record (``EndpointRecord.file_routing``) that the workers still running the old
file honour, every ordered lane and its park queue fenced, its late copies moved into its exchange. Setup returns
only then, so that workers started with the new file consume its partitions after every copy of its keys on the
lane side was delivered. Not confirmed in time: LiveApplyError. The move is undone when that loses nothing (its
routing opened again, every router confirming, and its partitions then empty: its queues deleted, as a refused
routing fence undoes them); else it is left under way (an event published once a router had closed is in its
partitions only, and deleting them would lose it), its record closed, so that every run of setup after it takes
the promotion up again until it succeeds. The closing record also keeps an old-file worker
restarted meanwhile from routing to the endpoint again; a file that puts the endpoint back on a lane opens it
(a record with its routing open).
"""

from __future__ import annotations

import contextlib

from aio_pika.abc import AbstractConnection

from warren.broker.amqp.probe import QueueProbe
from warren.broker.dlq.relocate import relocate_letters
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.live_layout import by
from warren.broker.live_set import latest_records
from warren.broker.ordered_promotion import promote_ordered
from warren.broker.promotion_fence import fenced_or_undone, undeclare
from warren.broker.route_fence import announce_to_routers
from warren.core.errors import LiveApplyError, TopologyError
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.planner import consumed_queues

__all__ = ["fence_file_moves"]

AGAIN = "run `warren setup` again"


async def fence_file_moves(connection: AbstractConnection, config: WarrenConfig, created: set[str]) -> None:
    """The file's moves off a lane, after setup declared the plan (``created``: the exchanges it created)."""
    prefix, lanes = config.broker.prefix, config.lanes
    if not lanes.count:
        return
    moving = {e.name for e in config.dedicated_endpoints if names.endpoint_exchange(prefix, e.name) in created}
    ordered = [e for e in config.endpoints if e.ordering == "key"] if lanes.ordered_count else []
    records = await latest_records(connection, prefix) if ordered else {}
    closed = {name for name, record in records.items() if record.routing_closed}
    if moving:
        endpoints = [e for e in config.dedicated_endpoints if e.name in moving]
        await fenced_or_undone(connection, config, endpoints, again=AGAIN)
    for endpoint in ordered:
        if endpoint.home == "dedicated" and (endpoint.name in moving or endpoint.name in closed):
            closing = EndpointRecord.file_routing(endpoint.name, by(), closed=True)
            try:
                await promote_ordered(connection, config, closing, None, again=AGAIN)
            except LiveApplyError as exc:
                if await _undone(connection, config, endpoint):
                    raise LiveApplyError(
                        f"endpoint {endpoint.name!r} not promoted, still on its lane (nothing had reached its "
                        f"partitions: they were undone, its routing opened again); {AGAIN}. What did not confirm: {exc}"
                    ) from None
                raise
        elif endpoint.home == "lane" and endpoint.name in closed:
            opening = EndpointRecord.file_routing(endpoint.name, by(), closed=False)
            await announce_to_routers(connection, prefix, opening, lanes.apply_wait)
    for name in sorted(moving):
        lane = names.lane_dlq(prefix, names.lane_of(name, lanes.count))
        with contextlib.suppress(TopologyError):  # no lanes declared: no letters to follow
            await relocate_letters(connection, lane, names.dlq(prefix, name), name)


async def _undone(connection: AbstractConnection, config: WarrenConfig, endpoint: Endpoint) -> bool:
    """Undo a refused ordered move when that loses nothing: while its partitions hold nothing, its routing opened
    again (every router confirming) and, its partitions still empty, its exchange and queues deleted (an event
    published after the routers opened has its lane copy). False when a partition holds an event (one published
    once its routing was closed is there only): the move stays under way, its routing closed. An event published
    in the moment between the two looks, before the routers opened, is the one case left: the routing is closed
    again and the move stays under way, but a lane copy made while it was open may come before it."""
    prefix = config.broker.prefix
    if await _reached(connection, prefix, endpoint):
        return False
    opening = EndpointRecord.file_routing(endpoint.name, by(), closed=False)
    heard = await announce_to_routers(connection, prefix, opening, config.lanes.apply_wait)
    if heard.complete and not await _reached(connection, prefix, endpoint):
        await undeclare(connection, prefix, endpoint)
        return True
    closing = EndpointRecord.file_routing(endpoint.name, by(), closed=True)
    await announce_to_routers(connection, prefix, closing, config.lanes.apply_wait)  # as it was: under way
    return False


async def _reached(connection: AbstractConnection, prefix: str, endpoint: Endpoint) -> bool:
    """Whether an event is in the endpoint's partitions (nobody consumes them yet)."""
    probe = QueueProbe(connection)
    try:
        depths = [await probe.depth(queue) for queue in consumed_queues(prefix, endpoint)]
    finally:
        await probe.close()
    return any(depth is not None and depth.ready for depth in depths)
