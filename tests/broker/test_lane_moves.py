"""Moving a live endpoint between homes: a lane endpoint promoted to queues of its own loses nothing on the way."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from aiohttp import web

from tests.broker.test_lanes_live import endpoint, publish
from tests.support.health import wait_until
from tests.support.receiver import Receiver, Reply
from tests.support.topology import declare
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.broker.management import ManagementClient
from warren.consumers.lanes import LaneRunner
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(90)


async def test_a_lane_endpoint_promoted_live_keeps_every_copy_its_lane_and_retries_held(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    failing = {"now": True}

    def answer(_: Receiver, __: web.Request, ___: bytes) -> Reply:
        return Reply(503 if failing["now"] else 200)

    async with Receiver(answer) as receiver:
        # Given a lane endpoint that fails, so its events are in its lane and in the delay chain, retrying
        config = make_config([], lanes={"count": 1}, retry={"base": "50ms", "cap": "200ms", "max_attempts": 1000})
        await declare(config)
        async with Worker(config) as worker:
            await apply_endpoint(config, endpoint(receiver, "rising", home="lane", circuit={"enabled": False}))
            await wait_until(lambda: isinstance(worker.runners.get("rising"), LaneRunner), 10, "served on its lane")
            before = [Event(type="order.paid", data={"n": i}) for i in range(30)]
            await publish(config, before)
            await receiver.wait_for(lambda r: len({x.event_id for x in r.received}) >= 10, 15)
            # When it is promoted to queues of its own while they retry, and recovers
            await apply_endpoint(config, endpoint(receiver, "rising", home="dedicated", circuit={"enabled": False}))
            await wait_until(lambda: not isinstance(worker.runners.get("rising"), LaneRunner), 10, "re-served")
            after = [Event(type="order.paid", data={"n": i}) for i in range(30, 40)]
            await publish(config, after)
            failing["now"] = False
            # Then every event, from before the move and after it, is delivered: the lane's copies followed it
            wanted = {e.id for e in [*before, *after]}
            await receiver.wait_for(lambda r: r.ok_ids("/hook/rising") >= wanted, 30)
            # and the router no longer routes to it: its lane is empty, and nothing was discarded
            assert "rising" not in worker.lanes.index  # type: ignore[union-attr]
            lane = await management.queue(names.lane_queue(prefix, 0))
            assert lane is not None and lane.get("messages", 0) == 0
            assert await management.queue(names.work_queue(prefix, "rising")) is not None
