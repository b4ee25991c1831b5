"""Moving a live endpoint between homes: a lane endpoint promoted to queues of its own loses nothing on the way."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from aiohttp import web

from tests.broker.dlq.test_lane_dlq import seed
from tests.broker.test_lanes_live import endpoint, publish
from tests.support.dead_letters import drain, wait_depth
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
            letter = Event(type="order.paid", data={"dead": True})
            await seed(config, [("rising", letter), ("mate", Event(type="order.paid", data={}))])
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
            # (counted by AMQP: the management API's figures are a sample up to 5 s old)
            assert await wait_depth(config, names.lane_queue(prefix, 0), 0) == 0
            assert await management.queue(names.work_queue(prefix, "rising")) is not None
        # and its dead letter of its lane time is in its own DLQ now; its lane-mate's stayed
        assert [m.message_id for m in await drain(config, names.dlq(prefix, "rising"))] == [letter.id]
        assert [(m.headers or {}).get("warren-endpoint") for m in await drain(config, names.lane_dlq(prefix, 0))] == [
            "mate"
        ]


async def test_a_dedicated_endpoint_demoted_live_takes_its_queue_its_retries_and_its_dead_letters_to_its_lane(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    failing = {"now": True}

    def answer(_: Receiver, __: web.Request, body: bytes) -> Reply:
        if b'"doomed"' in body:
            return Reply(422)  # refused for good: dead-lettered at once
        return Reply(503 if failing["now"] else 200)

    async with Receiver(answer) as receiver:
        # Given a dedicated endpoint that fails (its events queued and retrying) and holds dead letters
        config = make_config([], lanes={"count": 2}, retry={"base": "50ms", "cap": "200ms", "max_attempts": 1000})
        await declare(config)
        quiet = {"circuit": {"enabled": False}}
        async with Worker(config) as worker:
            await apply_endpoint(config, endpoint(receiver, "sinking", **quiet))
            await wait_until(lambda: "sinking" in worker.runners, 10, "served on its own queue")
            before = [Event(type="order.paid", data={"n": i}) for i in range(30)]
            doomed = [Event(type="order.paid", data={"doomed": i}) for i in range(3)]
            await publish(config, [*doomed, *before])
            await wait_depth(config, names.dlq(prefix, "sinking"), 3)
            await receiver.wait_for(lambda r: len({x.event_id for x in r.received}) >= 13, 15)
            # When it moves onto its lane while they retry
            await apply_endpoint(config, endpoint(receiver, "sinking", home="lane", **quiet))
            assert isinstance(worker.runners.get("sinking"), LaneRunner)
            after = [Event(type="order.paid", data={"n": i}) for i in range(30, 40)]
            await publish(config, after)
            failing["now"] = False
            # Then every event, from before the move and after it, is delivered on the lane
            wanted = {e.id for e in [*before, *after]}
            await receiver.wait_for(lambda r: r.ok_ids("/hook/sinking") >= wanted, 30)
        # and it owns nothing on the broker any more: its exchange, queue and DLQ are gone
        for queue in (names.work_queue(prefix, "sinking"), names.dlq(prefix, "sinking")):
            assert await management.queue(queue) is None, queue
        # and its dead letters are its lane's DLQ's now, each naming it, none lost
        lane_dlq = names.lane_dlq(prefix, names.lane_of("sinking", 2))
        letters = await drain(config, lane_dlq)
        assert [(m.headers or {}).get("warren-endpoint") for m in letters] == ["sinking"] * 3
        assert names.endpoint_of_work_key(prefix, f"0.1.{names.work_queue(prefix, 'sinking')}") == "sinking"


async def test_events_waiting_in_the_routing_stage_when_their_lane_endpoint_is_promoted_still_reach_it(
    make_config: Callable[..., WarrenConfig],
) -> None:
    async with Receiver() as receiver:
        # Given a lane endpoint, and events for it published while no worker runs: they wait in the route partitions
        config = make_config([], lanes={"count": 1, "promote_wait": "30s"})
        await declare(config)
        await apply_endpoint(config, endpoint(receiver, "rising", home="lane"))
        events = [Event(type="order.paid", data={"n": i}) for i in range(10)]
        await publish(config, events)
        # When it is promoted to queues of its own before a router has taken them (a router starts meanwhile)
        promotion = asyncio.ensure_future(apply_endpoint(config, endpoint(receiver, "rising", home="dedicated")))
        async with Worker(config) as worker:
            await promotion
            # Then every one of them reaches it all the same, and it is served on its own queue now
            await receiver.wait_for(lambda r: r.ok_ids("/hook/rising") >= {e.id for e in events}, 15)
            await wait_until(lambda: not isinstance(worker.runners.get("rising"), LaneRunner), 10, "re-served")
