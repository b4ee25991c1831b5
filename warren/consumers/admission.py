"""Whether an endpoint takes an event at all: its tenant, and its payload filter (warren/core/filters.py).

A lane endpoint's filter is applied by the routing stage (``wanted``, one call in lane_router.py): an event it
filters out gets no copy in its lane. A dedicated endpoint's events reach its queue by RabbitMQ's bindings, which
cannot look into a body, so its runner asks ``refused`` before the POST: an event of another tenant is discarded,
one its filter does not pass is acked without a POST. Every runner asks, a lane endpoint's too, as it checks the
tenant: so the filter also holds for what reaches a queue by another way (a dedicated endpoint's queue moved onto
its lane, a dead letter replayed after the filter changed), reading the envelope the runner parsed when it read
the message (``Delivery.envelope``): the body is not parsed again. A filtered-out event is counted as the
endpoint's settlement ``filtered`` (``warren_filtered_total{endpoint}``), logged at debug level, and never
retried or dead-lettered. A body that is
not an envelope with ``data`` is let through, to be dead-lettered as malformed where it is delivered, as it is
without a filter.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from aio_pika.abc import AbstractIncomingMessage

from warren.consumers.delivery import Delivery
from warren.consumers.hooks import Settlement
from warren.consumers.settling import Settler
from warren.core.filters import MISSING, event_data
from warren.topology.config import Endpoint

__all__ = ["FILTERED", "refused", "wanted"]

log = logging.getLogger("warren.worker")

FILTERED: Settlement = "filtered"


def wanted(targets: list[Endpoint], body: bytes, settled: Callable[[str, Settlement], None]) -> list[Endpoint]:
    """The routing stage's ``targets`` whose filters the event passes; the others are told to ``settled``.

    The body is parsed once per event, and only when one of the targets has a filter."""
    if not any(e.filter is not None for e in targets):
        return targets
    data = event_data(body)
    if data is MISSING:
        return targets
    kept = []
    for endpoint in targets:
        if endpoint.filter is None or endpoint.filter.matches(data):
            kept.append(endpoint)
        else:
            settled(endpoint.name, FILTERED)
    return kept


async def refused(endpoint: Endpoint, settler: Settler, message: AbstractIncomingMessage, delivery: Delivery) -> bool:
    """Settle a message ``endpoint`` does not take, before any attempt: True if it was.

    An event of a tenant it does not serve (``Endpoint.receives_tenant``) is discarded: routing never puts one in
    its queues, but a retry of an earlier endpoint of the same name (deleted, the name reused by another tenant)
    can, as it comes due under the queue's name; it reaches neither this endpoint's URL nor its DLQ. An event its
    filter does not pass is acked as ``filtered``.
    """
    if not endpoint.receives_tenant(delivery.tenant):
        await settler.discard(
            message,
            f"an event of tenant {delivery.tenant!r}, which endpoint {endpoint.name} does not serve (a retry "
            "of an earlier, deleted endpoint of this name?)",
        )
        return True
    if endpoint.filter is None:
        return False
    # The envelope parse_delivery read (it has ``data``); the body is parsed again only for a Delivery without it.
    data = delivery.envelope["data"] if delivery.envelope is not None else event_data(delivery.body)
    if data is MISSING or endpoint.filter.matches(data):
        return False
    log.debug("event %s filtered out", delivery.event_id, extra={"endpoint": endpoint.name})
    await settler.ack(message, FILTERED)
    return True
