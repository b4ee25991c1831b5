"""Live lane endpoints: an apply declares nothing on the broker, only announces; workers route to them at once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from cryptography.fernet import Fernet

from tests.conftest import TEST_SECRET
from tests.support.health import wait_until
from tests.support.receiver import Receiver
from tests.support.setup_helpers import prefix_state
from tests.support.topology import declare
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.live_apply import LiveApplyError, apply_endpoint
from warren.broker.live_remove import remove_endpoint
from warren.broker.management import ManagementClient
from warren.broker.publisher import Publisher
from warren.consumers.worker import Worker
from warren.topology.config import Endpoint, WarrenConfig

pytestmark = pytest.mark.timeout(60)


def endpoint(receiver: Receiver, name: str, **fields: Any) -> Endpoint:
    return Endpoint.model_validate(
        {"name": name, "url": f"{receiver.url}/{name}", "secret": TEST_SECRET, "events": ["order.*"], **fields}
    )


async def publish(config: WarrenConfig, events: list[Event]) -> None:
    connection = await connect(config.broker.url)
    try:
        report = await (await Publisher.open(connection, config.broker.prefix)).publish_many(events)
        assert not report.failed, report.failed
    finally:
        await connection.close()


async def test_a_live_lane_endpoint_declares_nothing_and_is_served_at_once(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    async with Receiver() as receiver:
        # Given a deployment with lanes and a worker following live endpoints
        config = make_config([], lanes={"count": 4})
        await declare(config)
        async with Worker(config) as worker:
            before = await prefix_state(management, prefix)
            # When a lane endpoint is applied live
            await apply_endpoint(config, endpoint(receiver, "late", home="lane"))
            # Then the broker holds exactly what it held (the announcement is a message, not an object)
            after = await prefix_state(management, prefix)
            assert (set(after.queues), set(after.exchanges), after.bindings) == (
                set(before.queues),
                set(before.exchanges),
                before.bindings,
            )
            # and the worker routes and delivers to it once it serves it
            await _until_served(worker, "late")
            events = [Event(type="order.paid", data={"n": i}) for i in range(5)]
            await publish(config, events)
            await receiver.wait_for(lambda r: r.ok_ids("/hook/late") == {e.id for e in events}, 10)


async def _until_served(worker: Worker, name: str) -> None:
    await wait_until(lambda: worker.lanes is not None and name in worker.lanes.index, 10, f"{name} served")


async def test_a_lane_endpoint_is_refused_without_lanes_or_over_an_ordered_one(
    make_config: Callable[..., WarrenConfig],
) -> None:
    async with Receiver() as receiver:
        # Without lanes: refused, naming the setting
        plain = make_config([])
        await declare(plain)
        with pytest.raises(LiveApplyError, match=r"needs \[lanes\] count > 0"):
            await apply_endpoint(plain, endpoint(receiver, "tail", home="lane"))
        # Over an ordered endpoint, as an unordered one (its home and its ordering changed at once): refused,
        # naming its partitions (it moves onto the ordered lanes as an ordered endpoint only)
        await apply_endpoint(plain, endpoint(receiver, "busy", ordering="key", partitions=2))
        lanes = make_config([], lanes={"count": 2})
        await declare(lanes)
        with pytest.raises(LiveApplyError, match=r"has partitions .*as an ordered endpoint only; change its home"):
            await apply_endpoint(lanes, endpoint(receiver, "busy", home="lane"))


async def test_events_waiting_for_a_restarted_worker_reach_the_live_lane_endpoints_it_reads_at_start(
    make_config: Callable[..., WarrenConfig],
) -> None:
    async with Receiver() as receiver:
        # Given a live lane endpoint, and no worker running while events are published for it
        config = make_config([], lanes={"count": 2})
        await declare(config)
        async with Worker(config) as worker:
            await apply_endpoint(config, endpoint(receiver, "quiet", home="lane"))
            await _until_served(worker, "quiet")
        events = [Event(type="order.paid", data={"n": i}) for i in range(20)]
        await publish(config, events)
        # When a worker starts: it learns the endpoint from the stream before its router takes any event
        async with Worker(config):
            # Then every event that waited in the routing queue is delivered, none routed to nobody
            await receiver.wait_for(lambda r: r.ok_ids("/hook/quiet") == {e.id for e in events}, 15)


async def test_the_router_waits_while_its_live_follower_reconnects_instead_of_routing_with_a_stale_index(
    make_config: Callable[..., WarrenConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("warren.consumers.live_endpoints.RECONNECT_DELAY", 2.0)
    async with Receiver() as receiver:
        # Given a routing worker whose live follower has just lost its connection (back in 2 s)
        config = make_config([], lanes={"count": 2, "apply_wait": "100ms"})
        await declare(config)
        async with Worker(config) as worker:
            assert worker.live is not None and worker.live._connection is not None
            await worker.live._connection.close()
            assert not worker.live.current.is_set()
            # When a lane endpoint is created meanwhile (this worker cannot hear of it) and events follow at once
            await apply_endpoint(config, endpoint(receiver, "meanwhile", home="lane"))
            events = [Event(type="order.paid", data={"n": i}) for i in range(10)]
            await publish(config, events)
            assert "meanwhile" not in worker.lanes.index  # type: ignore[union-attr]
            # Then the router holds them until the follower has read the stream again, and they all arrive
            await receiver.wait_for(lambda r: r.ok_ids("/hook/meanwhile") == {e.id for e in events}, 15)
            assert worker.live.current.is_set()


async def test_a_worker_that_cannot_open_a_lane_endpoints_secrets_routes_its_events_to_the_lane_for_the_others(
    make_config: Callable[..., WarrenConfig],
) -> None:
    async with Receiver() as receiver:
        # Given two routing workers, one without the store key the endpoint's secrets are sealed with
        config = make_config([], lanes={"count": 1})
        keyless = make_config([], lanes={"count": 1}, store={"keys": [Fernet.generate_key().decode()]})
        await declare(config)
        async with Worker(config) as keyed, Worker(keyless) as other:
            await apply_endpoint(config, endpoint(receiver, "sealed", home="lane"))
            await _until_served(keyed, "sealed")
            await wait_until(lambda: other.lanes is not None and "sealed" in other.lanes.index, 10, "routed by both")
            assert "sealed" not in other.runners
            # When events are published (each router takes its share of them)
            events = [Event(type="order.paid", data={"n": i}) for i in range(30)]
            await publish(config, events)
            # Then every event reaches the endpoint: the keyless router put its copies in the lane, where the
            # keyless worker parked what it took and the keyed one delivered it; none was acked for nobody
            await receiver.wait_for(lambda r: r.ok_ids("/hook/sealed") == {e.id for e in events}, 30)
            # And once the endpoint is removed, the keyless worker stops routing to it
            await remove_endpoint(config, "sealed", force=True)
            await wait_until(lambda: "sealed" not in other.lanes.index, 10, "no longer routed")  # type: ignore[union-attr]
