"""Which route partition deliveries the router takes apart from their key's lane as they arrive (``_apart``).

Pure: the router is built without a connection, the deliveries are stand-ins (it reads their headers, exchange,
routing key and body); what the routing then does is tests/consumers/test_lane_inline.py's and the flows'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aio_pika.abc import AbstractIncomingMessage

from warren.consumers.lane_index import SubscriptionIndex
from warren.consumers.lane_router import LaneRouter
from warren.topology import names
from warren.topology.config import Endpoint
from warren.topology.headers import H_KEY, H_ROUTE_FENCE

pytestmark = pytest.mark.timeout(5)

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
P = "warren"


def endpoint(name: str, events: list[str], **fields: Any) -> Endpoint:
    return Endpoint(name=name, url="https://hooks.example/in", secret=SECRET, events=events, home="lane", **fields)


@dataclass
class Event:
    routing_key: str
    headers: dict[str, Any] = field(default_factory=lambda: {H_KEY: b"k"})
    exchange: str = names.events_exchange(P)
    body: bytes = b'{"id": "e1", "type": "t", "data": {}}'
    message_id: str = "e1"
    delivery_tag: int = 1
    consumer_tag: str | None = None


def router(*endpoints: Endpoint) -> LaneRouter:
    return LaneRouter(P, 4, 64, SubscriptionIndex(endpoints), delay_levels=8)


def apart(lane_router: LaneRouter, event: Event) -> bool:
    handling = lane_router._apart(cast(AbstractIncomingMessage, event))
    if handling is None:
        return False
    handling.close()  # not run here: only whether it was taken
    return True


def test_an_event_with_no_ordered_subscriber_is_taken_apart_and_counted() -> None:
    lane_router = router(endpoint("a", ["order.*"]), endpoint("b", ["order.paid"]))
    assert apart(lane_router, Event("order.paid"))
    assert lane_router.detached == 1


def test_an_event_with_an_ordered_subscriber_takes_its_key_turn() -> None:
    lane_router = router(endpoint("a", ["order.*"]), endpoint("o", ["order.paid"], ordering="key"))
    assert not apart(lane_router, Event("order.paid"))
    assert apart(lane_router, Event("order.made"))  # only the unordered one subscribes to this one
    assert lane_router.detached == 1


def test_a_promotion_fence_and_an_event_while_the_index_is_not_current_take_their_turn() -> None:
    lane_router = router(endpoint("a", ["order.*"]))
    assert not apart(lane_router, Event("order.paid", headers={H_KEY: b"k", H_ROUTE_FENCE: b"fence-1"}))
    lane_router.index_current.clear()
    assert not apart(lane_router, Event("order.paid"))
    assert lane_router.detached == 0
