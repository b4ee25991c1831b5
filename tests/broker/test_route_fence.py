"""A live lane endpoint's create returns once every running router has it: an event published next reaches it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import pytest
from aio_pika.abc import AbstractIncomingMessage

from tests.broker.test_lanes_live import endpoint, publish
from tests.conftest import TEST_SECRET
from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.amqp.connection import connect_once
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.broker.route_fence import announce_to_routers
from warren.consumers.worker import Worker
from warren.store.keys import sealer_from
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(60)


async def test_an_event_published_right_after_a_lane_create_reaches_the_new_endpoint_through_every_router(
    make_config: Callable[..., WarrenConfig],
) -> None:
    async with Receiver() as receiver:
        # Given two workers, each routing, and no wait between the creates and the publishes below
        config = make_config([], lanes={"count": 2})
        await declare(config)
        async with Worker(config) as one, Worker(config) as two:
            for round_ in range(3):
                name = f"fresh{round_}"
                # When a lane endpoint is created, and events are published the moment the create returns
                await apply_endpoint(config, endpoint(receiver, name, home="lane"))
                assert all(w.lanes is not None and name in w.lanes.index for w in (one, two)), "create returned early"
                events = [Event(type="order.paid", data={"n": i}) for i in range(10)]
                await publish(config, events)
                # Then both routers already had it: every event reaches it (none acked as wanted by nobody)
                await receiver.wait_for(lambda r, n=name, e=events: r.ok_ids(f"/hook/{n}") == {x.id for x in e}, 10)


async def _hold(message: AbstractIncomingMessage) -> None:
    """A consumer that takes events and does nothing with them (they go back when its channel closes)."""


async def test_a_router_that_never_answers_costs_the_create_its_wait_and_a_warning_only(
    make_config: Callable[..., WarrenConfig], caplog: pytest.LogCaptureFixture
) -> None:
    async with Receiver() as receiver:
        # Given a consumer on the routers' roster that is no worker (it never answers an announcement)
        config = make_config([], lanes={"count": 1, "apply_wait": "300ms"})
        await declare(config)
        connection = await connect_once(config.broker.url)
        try:
            channel = await connection.channel()
            roster = names.route_roster(config.broker.prefix)
            silent = await channel.declare_queue(
                roster, durable=True, auto_delete=True, arguments={"x-queue-type": "classic"}
            )
            await silent.consume(_hold)
            record = EndpointRecord.applying(
                endpoint(receiver, "waited", home="lane"), "test", sealer_from(config.store.keys)
            )
            # When the endpoint is announced
            started = time.monotonic()
            with caplog.at_level(logging.WARNING, logger="warren.live"):
                heard = await announce_to_routers(connection, config.broker.prefix, record, config.lanes.apply_wait)
            took = time.monotonic() - started
        finally:
            await connection.close()
        # Then the announcement waited its 300 ms for the one router, and said so, without failing
        assert (heard.routers, heard.answered, heard.complete) == (1, 0, False)
        assert 0.25 <= took < 5.0, took
        assert "0 of 1 routers confirmed it" in caplog.text
        assert TEST_SECRET not in caplog.text


async def test_with_no_router_running_the_create_does_not_wait(make_config: Callable[..., WarrenConfig]) -> None:
    async with Receiver() as receiver:
        config = make_config([], lanes={"count": 1, "apply_wait": "10s"})
        await declare(config)
        started = time.monotonic()
        await apply_endpoint(config, endpoint(receiver, "early", home="lane"))
        # Nobody routes yet: events wait in the routing queue, and a worker reads the endpoint before routing them
        assert time.monotonic() - started < 5.0


async def test_the_create_waits_for_a_router_still_busy_with_an_earlier_change(
    make_config: Callable[..., WarrenConfig],
) -> None:
    async with Receiver() as receiver:
        # Given two routing workers, one of them busy applying another change (its live lock held)
        config = make_config([], lanes={"count": 2, "apply_wait": "10s"})
        await declare(config)
        async with Worker(config) as busy, Worker(config):
            assert busy.live is not None and busy.lanes is not None
            await busy.live._lock.acquire()
            # When a lane endpoint is created
            create = asyncio.create_task(apply_endpoint(config, endpoint(receiver, "patient", home="lane")))
            # Then the create does not return while that router cannot have it in its index
            done, _ = await asyncio.wait({create}, timeout=0.5)
            assert not done and "patient" not in busy.lanes.index
            # and returns once it has it
            busy.live._lock.release()
            await asyncio.wait_for(create, 5)
            assert "patient" in busy.lanes.index
