"""The routing stage's failures, bounded: what an event carries round, to whom it still owes copies, and when
it gives up. Pure: no I/O (warren/consumers/lane_router.py does the moving).

An event whose copies could not all be stored is not handed back to ``{prefix}.route`` (a nack with requeue
counts against the quorum queue's delivery limit, and loops without bound): it is published again, confirmed,
through the delay chain back to the routing queue, then acked, with Warren's own count of its routing
attempts in ``warren-route-attempt``. After ``[lanes] route_attempts`` attempts it goes to
``{prefix}.route.dlq`` instead, with the reason.

Only the copies still owed go round again (``warren-route-owed``), so a failure in one lane does not resend
every other lane endpoint's copy on each attempt. One exception: when RabbitMQ *returned* a copy (its lane is
missing), every copy of that attempt is owed again. The copies of one event share its ``message_id`` (the
``webhook-id``), and aiormq matches a return to a publish by that id: it may report a return on another copy,
or, once that copy's answer is in, not at all. So a return says only that some copy of the event failed.
The names are written even when every copy failed: an endpoint owed a copy and promoted to queues of its own
before the event comes round (its bindings did not exist when it was published) is still owed it, and the
router finds it by that name (``LaneRouter.elsewhere``); only more than ``OWED_MAX`` names owe every subscriber.

Since the delay chain's routing key replaces the one the event was published with, the event's type and
tenant travel in ``warren-route-type`` and ``warren-route-tenant``; they are read only from an event that did
not come straight from the events or tenants exchange.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from warren.topology import headers as h
from warren.topology import names

__all__ = [
    "OWED_MAX",
    "ROUTE_DELAY_CAP",
    "ROUTE_HEADERS",
    "RouteState",
    "copy_headers",
    "owed_after",
    "route_dead_headers",
    "route_delay",
    "route_moved_headers",
    "route_retry_headers",
    "route_state",
    "route_state_in",
]

ROUTE_DELAY_CAP = 60.0  # seconds: the longest wait between two routing attempts
OWED_MAX = 1000  # names written in warren-route-owed at most; more (a header is bounded by frame_max): all owed
ROUTE_HEADERS = (h.H_ROUTE_ATTEMPT, h.H_ROUTE_OWED, h.H_ROUTE_TYPE, h.H_ROUTE_TENANT)
_NOT_COPIED = frozenset((*ROUTE_HEADERS, h.H_DEAD_REASON, h.H_DEAD_AT, *h.RABBITMQ_DEATH_HEADERS))


@dataclass(frozen=True)
class RouteState:
    """What the router knows of an event before it routes it."""

    tenant: str | None
    event_type: str
    attempts: int  # routing attempts already made (0: this is the first)
    owed: frozenset[str] | None  # the lane endpoints still owed a copy; None: every subscriber


def route_state(
    headers: Mapping[str, Any], exchange: str | None, routing_key: str | None, *, events: str, tenants: str
) -> RouteState:
    """The event's tenant, type, attempts and debts: from the exchange and key it was published with, or (when it
    came back through the delay chain, or was moved back from the route DLQ) from the router's headers."""
    key = routing_key or ""
    if exchange == tenants:
        tenant, _, event_type = key.partition(".")
        return RouteState(tenant, event_type, 0, None)
    if exchange == events or h.header_text(headers.get(h.H_ROUTE_TYPE)) is None:
        return RouteState(None, key, 0, None)
    attempts = h.header_int(headers.get(h.H_ROUTE_ATTEMPT)) or 0
    owed_text = h.header_text(headers.get(h.H_ROUTE_OWED))
    owed = None if owed_text is None else frozenset(n for n in owed_text.split(",") if n)
    return RouteState(
        h.header_text(headers.get(h.H_ROUTE_TENANT)) or None,
        h.header_text(headers.get(h.H_ROUTE_TYPE)) or "",
        max(0, min(attempts, h.MAX_COUNTED)),
        owed,
    )


def route_state_in(
    prefix: str, headers: Mapping[str, Any], exchange: str | None, routing_key: str | None
) -> RouteState:
    """``route_state`` of an event delivered from ``exchange`` with ``routing_key`` in deployment ``prefix``."""
    return route_state(
        headers, exchange, routing_key, events=names.events_exchange(prefix), tenants=names.tenants_exchange(prefix)
    )


def route_delay(attempts: int, first: float) -> float:
    """Seconds before routing attempt ``attempts + 1``: ``first``, doubling, at most ``ROUTE_DELAY_CAP``."""
    return min(first * float(2 ** min(max(attempts - 1, 0), 16)), ROUTE_DELAY_CAP)


def owed_after(
    targets: Collection[str], failed: Collection[str], *, returned: bool, previous: frozenset[str] | None
) -> frozenset[str] | None:
    """Who is still owed after an attempt to ``targets`` in which ``failed`` copies failed (``returned``: one of
    them was returned, so which ones is not known: every target). None: every subscriber, as for a new event."""
    owed = frozenset(targets if returned else failed)
    if len(owed) > OWED_MAX:
        return None  # more duplicates, never a loss
    return owed


def copy_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """An event's headers as its copies carry them into the lanes: without the router's or RabbitMQ's bookkeeping
    (nor a route DLQ's reason, on an event moved back from there)."""
    return {k: v for k, v in headers.items() if k not in _NOT_COPIED}


def route_retry_headers(headers: Mapping[str, Any], state: RouteState, owed: frozenset[str] | None) -> dict[str, Any]:
    """The headers of an event sent round again: one more attempt counted, what it is and whom it still owes."""
    out = {k: v for k, v in headers.items() if k not in ROUTE_HEADERS and k not in h.RABBITMQ_DEATH_HEADERS}
    out[h.H_ROUTE_ATTEMPT] = min(state.attempts + 1, h.MAX_COUNTED)
    out[h.H_ROUTE_TYPE] = state.event_type
    if state.tenant is not None:
        out[h.H_ROUTE_TENANT] = state.tenant
    if owed is not None:
        out[h.H_ROUTE_OWED] = ",".join(sorted(owed))
    return out


def route_dead_headers(
    headers: Mapping[str, Any], state: RouteState, owed: frozenset[str] | None, reason: str, dead_ms: int
) -> dict[str, Any]:
    """The headers of an event given up on: as if sent round again (so that moved back, it routes), and why."""
    out = route_retry_headers(headers, state, owed)
    out[h.H_DEAD_REASON] = reason
    out[h.H_DEAD_AT] = dead_ms
    return out


def route_moved_headers(headers: Mapping[str, Any], state: RouteState) -> dict[str, Any]:
    """The headers of an event moved from an earlier release's routing queue: what it is and whom it owes, its
    attempts unchanged (it comes to the router from another exchange than the one it was published to)."""
    out = route_retry_headers(headers, state, state.owed)
    out[h.H_ROUTE_ATTEMPT] = state.attempts
    return out
