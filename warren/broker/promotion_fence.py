"""A move from a lane to queues of its own, fenced through the routing stage or undone: shared by live apply
(warren/broker/live_apply.py, the admin API's promotion) and ``warren setup`` (warren/broker/applier.py, a file
endpoint whose ``home`` changed from ``"lane"`` to ``"dedicated"``).

The endpoints' exchanges, bindings and queues are declared first; then every route partition is fenced
(warren/broker/partition_fence.py), so that each event published before the bindings is routed by a router that
still knows the endpoints as lane endpoints (their lane copies follow them into their exchanges). Without every
partition's answer within ``[lanes] promote_wait`` the objects just declared are deleted again and
RoutingUnconfirmed raised: the endpoints stay on their lanes, nothing of theirs is lost.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from aio_pika.abc import AbstractConnection

from warren.broker.amqp.channels import raw_channel
from warren.broker.partition_fence import fence_routing_stage
from warren.core.errors import RoutingUnconfirmed
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.planner import consumed_queues

__all__ = ["fenced_or_undone", "undeclare"]


async def fenced_or_undone(
    connection: AbstractConnection,
    settings: WarrenConfig,
    endpoints: Sequence[Endpoint],
    *,
    again: str = "apply it again",
) -> None:
    """Fence the routing stage for ``endpoints`` (declared just now); else delete what was declared for them and
    raise RoutingUnconfirmed (``again``: what the message tells the caller to do once workers route)."""
    prefix, lanes = settings.broker.prefix, settings.lanes
    try:
        outcome = await fence_routing_stage(connection, prefix, lanes.route_partitions, lanes.promote_wait)
    except BaseException:  # not even fenced (the link lost, the call cancelled): undone as far as it can be
        with contextlib.suppress(Exception):
            for endpoint in endpoints:
                await undeclare(connection, prefix, endpoint)
        raise
    if outcome.complete:
        return
    for endpoint in endpoints:
        await undeclare(connection, prefix, endpoint)
    which = ("endpoint " if len(endpoints) == 1 else "endpoints ") + ", ".join(repr(e.name) for e in endpoints)
    raise RoutingUnconfirmed(
        f"{which} not promoted, still on its lane: the routing stage did not confirm within "
        f"{lanes.promote_wait:g} s ([lanes] promote_wait) that the events it held for it were routed (not confirmed: "
        f"{', '.join(outcome.missing)}; no worker routing, one busy or retrying, or an earlier release's routing "
        f"queue still holding events); {again} once workers are routing (`warren status`: the routing stage "
        "keeping up)",
        outcome.missing,
    )


async def undeclare(connection: AbstractConnection, prefix: str, endpoint: Endpoint) -> None:
    """Delete the exchange and queues an apply declared for ``endpoint`` (they did not exist before it)."""
    async with raw_channel(connection, f"RabbitMQ refused to undo the promotion of endpoint {endpoint.name!r}") as raw:
        await raw.exchange_delete(names.endpoint_exchange(prefix, endpoint.name))  # no event reaches them from now
        for queue in [*consumed_queues(prefix, endpoint), names.dlq(prefix, endpoint.name)]:
            await raw.queue_delete(queue)
