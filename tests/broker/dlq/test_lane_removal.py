"""Removing a lane endpoint takes its dead letters out of the shared DLQ, so a later endpoint of its name
(another tenant's, say) inherits none of them; its lane-mates' letters stay, in order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.broker.dlq.test_lane_dlq import LANES, mates, seed
from tests.conftest import TEST_SECRET
from tests.support.dead_letters import drain
from tests.support.topology import declare
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.broker.live_remove import Removal, remove_endpoint
from warren.core.errors import EndpointNotEmpty
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

pytestmark = pytest.mark.timeout(60)


async def test_a_removed_lane_endpoint_leaves_no_dead_letter_to_a_later_endpoint_of_its_name(
    make_config: Callable[..., Any],
) -> None:
    # Given two live lane endpoints on one lane, with dead letters of both in the lane's DLQ
    config: WarrenConfig = make_config([], lanes={"count": LANES})
    await declare(config)
    gone, mate = mates(2)
    for name in (gone, mate):
        fields = {"name": name, "url": "https://example.com/in", "secret": TEST_SECRET, "events": ["#"]}
        await apply_endpoint(config, Endpoint.model_validate({**fields, "home": "lane"}))
    events = [Event(type="order.paid", data={"n": i}) for i in range(5)]
    await seed(config, [(gone, events[0]), (mate, events[1]), (gone, events[2]), (mate, events[3])])
    # When one is removed without force: refused, nothing changed
    with pytest.raises(EndpointNotEmpty, match="2 dead letter"):
        await remove_endpoint(config, gone, force=False)
    # When it is removed with force: its two letters are discarded, and counted
    assert await remove_endpoint(config, gone, force=True) == Removal(0, 2)
    # Then only the lane-mate's letters are left, in their order
    left = await drain(config, names.lane_dlq(config.broker.prefix, 0))
    assert [m.message_id for m in left] == [events[1].id, events[3].id]
