"""Lane endpoints end to end: real RabbitMQ, real HTTP receivers on 127.0.0.1, the routing stage and the lanes
in a worker (docs/architecture.md, "Lanes")."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from standardwebhooks import Webhook

from tests.conftest import TEST_SECRET
from tests.support.dead_letters import drain, wait_depth
from tests.support.health import wait_until
from tests.support.processes import WorkerProcess, write_config
from tests.support.receiver import Receiver, Reply
from warren.broker import wire
from warren.broker.endpoint_state.admin import change_admin
from warren.broker.events import Event, encode_event
from warren.broker.live_apply import apply_endpoint
from warren.consumers import lanes
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.worker import Worker
from warren.core.errors import WarrenError
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

pytestmark = pytest.mark.timeout(90)

LANES = 4


def on_lane(lane: int, count: int, stem: str = "ep") -> list[str]:
    """``count`` endpoint names that hash to ``lane`` (of LANES)."""
    found, n = [], 0
    while len(found) < count:
        if names.lane_of(f"{stem}-{n}", LANES) == lane:
            found.append(f"{stem}-{n}")
        n += 1
    return found


def lane_endpoint(receiver: Receiver, name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "url": f"{receiver.url}/{name}", "events": ["order.*"], "home": "lane", **fields}


async def test_events_reach_lane_endpoints_signed_exactly_as_dedicated_ones(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given 20 lane endpoints on 4 lanes and one dedicated endpoint, all subscribed to order events
    lane_names = [f"tail-{i}" for i in range(20)]
    assert len({names.lane_of(n, LANES) for n in lane_names}) == LANES  # every lane has some
    config = await endpoint_config(
        [{"name": "dedicated", "events": ["order.*"]}] + [lane_endpoint(receiver, n) for n in lane_names],
        lanes={"count": LANES},
    )
    events = [Event(type="order.paid", data={"n": i}, key=f"k{i}", sequence=i) for i in range(50)]
    async with Worker(config):
        # When 50 events are published (and one nobody subscribes to, which the router drops)
        await publish(config, [*events, Event(type="user.created", data={})])
        await receiver.wait_for(lambda r: len(r.received) >= 21 * 50, 30)
        await asyncio.sleep(0.3)  # nothing more arrives
    # Then every endpoint got every event once, signed verifiably, with the dedicated endpoint's exact bytes
    assert len(receiver.received) == 21 * 50
    verifier = Webhook(TEST_SECRET)
    dedicated = {r.event_id: r for r in receiver.received if r.path == "/hook/dedicated"}
    for request in receiver.received:
        verifier.verify(request.body.decode(), request.headers)
        assert request.body == dedicated[request.event_id].body
        assert request.headers["content-type"] == "application/json"
    for name in lane_names:
        assert receiver.ok_ids(f"/hook/{name}") == {e.id for e in events}


def by_path(replies: dict[str, Callable[[str], Reply]]) -> Any:
    """A receiver behaviour: the reply of the endpoint named by the request's last path word (200 otherwise)."""

    def reply(_: Receiver, request: Any, __: bytes) -> Reply:
        name = request.path.rsplit("/", 1)[-1]
        pick = replies.get(name)
        return pick(request.headers.get("webhook-id", "")) if pick else Reply(200)

    return reply


async def test_a_failing_endpoint_is_retried_through_the_delay_chain_back_to_its_lane(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a lane endpoint that answers 500 to each event's first attempt, then 200
    seen: Counter[str] = Counter()

    def flaky(event_id: str) -> Reply:
        seen[event_id] += 1
        return Reply(500 if seen[event_id] == 1 else 200)

    receiver.behaviour = by_path({"flaky": flaky})
    config = await endpoint_config([lane_endpoint(receiver, "flaky")], lanes={"count": LANES})
    events = [Event(type="order.paid", data={"n": i}) for i in range(10)]
    async with Worker(config):
        await publish(config, events)
        await receiver.wait_for(lambda r: r.ok_ids("/hook/flaky") == {e.id for e in events}, 20)
        lane = names.lane_queue(config.broker.prefix, names.lane_of("flaky", LANES))
        assert await wait_depth(config, lane, 0) == 0
    # Then each event was attempted twice: the first failure went into the delay chain and came back to the lane
    assert all(seen[e.id] == 2 for e in events), seen


async def test_a_refused_event_lands_in_its_lanes_dlq_naming_its_endpoint_and_nothing_else(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a lane endpoint that answers 400 and two lane-mates on the same lane that answer 200
    bad, *mates = on_lane(1, 3)
    receiver.behaviour = by_path({bad: lambda _: Reply(400)})
    config = await endpoint_config([lane_endpoint(receiver, n) for n in (bad, *mates)], lanes={"count": LANES})
    events = [Event(type="order.paid", data={"n": i}) for i in range(5)]
    async with Worker(config):
        await publish(config, events)
        await receiver.wait_for(lambda r: all(r.ok_ids(f"/hook/{m}") == {e.id for e in events} for m in mates), 20)
        dlq = names.lane_dlq(config.broker.prefix, 1)
        await wait_depth(config, dlq, len(events))
    # Then the lane's DLQ holds the bad endpoint's five dead letters, each naming it, and nothing else
    letters = await drain(config, dlq)
    assert sorted(m.message_id for m in letters) == sorted(e.id for e in events)
    assert {wire.header_text((m.headers or {}).get(wire.H_ENDPOINT)) for m in letters} == {bad}
    assert all("400" in (wire.header_text((m.headers or {}).get(wire.H_LAST_STATUS)) or "") for m in letters)


async def test_an_endpoint_that_hangs_does_not_hold_back_its_lane_mates(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a lane endpoint whose receiver hangs until the test lets it answer (concurrency 2) and three
    # lane-mates, a lane prefetch of 8
    slow, *mates = on_lane(2, 4)
    release = asyncio.Event()

    async def hangs(_: Receiver, request: Any, __: bytes) -> Reply:
        if request.path.endswith(f"/{slow}"):
            await release.wait()
        return Reply(200)

    receiver.behaviour = hangs
    config = await endpoint_config(
        [lane_endpoint(receiver, slow, concurrency=2, timeout="60s"), *(lane_endpoint(receiver, m) for m in mates)],
        lanes={"count": LANES, "prefetch": 8},
    )
    slow_events = [Event(type="order.paid", data={"slow": i}) for i in range(30)]
    async with Worker(config):
        # When the slow endpoint's 30 events are ahead of its mates' in the lane (the mates get them too)
        await publish(config, slow_events)
        # Then the mates get every event while the slow one still holds its first two, not one answered (a
        # causal bound: held behind it, the mates would get nothing before its release)
        await receiver.wait_for(lambda r: all(r.ok_ids(f"/hook/{m}") == {e.id for e in slow_events} for m in mates), 45)
        assert not receiver.ok_ids(f"/hook/{slow}")
        release.set()
        await receiver.wait_for(lambda r: r.ok_ids(f"/hook/{slow}") == {e.id for e in slow_events}, 45)


@pytest.mark.timeout(120)
async def test_a_worker_killed_mid_flow_and_restarted_loses_nothing(
    make_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given lane endpoints served by a worker process whose receivers answer slowly
    lane_names = [f"tail-{i}" for i in range(8)]
    receiver.behaviour = lambda *_: Reply(200, delay=0.02)
    config = make_config([lane_endpoint(receiver, n) for n in lane_names], lanes={"count": LANES})
    from tests.support.topology import declare

    await declare(config)
    path = write_config(tmp_path, config)
    events = [Event(type="order.paid", data={"n": i}) for i in range(100)]
    doomed = await WorkerProcess(path).start()
    try:
        await doomed.wait_ready()
        await publish(config, events)
        # When it is killed (SIGKILL) once some, not all, deliveries were made
        await receiver.wait_for(lambda r: len(r.received) >= 50, 30)
        doomed.kill()
    finally:
        await doomed.cleanup()
    assert len(receiver.ok_ids()) < len(events) or len(receiver.received) < 8 * len(events)
    # Then a restarted worker delivers every event to every endpoint (duplicates allowed, nothing lost)
    restarted = await WorkerProcess(path).start()
    try:
        await restarted.wait_ready()
        want = {e.id for e in events}
        await receiver.wait_for(lambda r: all(r.ok_ids(f"/hook/{n}") == want for n in lane_names), 60)
    finally:
        await restarted.cleanup()


async def put_on_lane(config: WarrenConfig, lane: str, strays: list[tuple[Event, str]]) -> None:
    """Messages straight into a lane, each naming an endpoint, as the routing stage would put them."""
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        for event, endpoint in strays:
            message = encode_event(event)
            message.headers = {**message.headers, wire.H_ENDPOINT: endpoint}
            await channel.default_exchange.publish(message, routing_key=lane)
    finally:
        await connection.close()


async def test_a_lane_message_for_an_unknown_endpoint_or_another_tenant_is_discarded_never_delivered(
    endpoint_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a lane endpoint of tenant acme, and a worker that parks a message of an unknown endpoint twice
    monkeypatch.setattr(lanes, "UNSERVED_PARKS", 2)
    monkeypatch.setattr(lanes, "UNSERVED_PARK_DELAY", 0.2)
    config = await endpoint_config([lane_endpoint(receiver, "acme-hooks", tenant="acme")], lanes={"count": LANES})
    lane = names.lane_queue(config.broker.prefix, names.lane_of("acme-hooks", LANES))
    await put_on_lane(
        config,
        lane,
        [
            (Event(type="order.paid", data={}, tenant="acme"), "deleted-endpoint"),  # names no endpoint served
            (Event(type="order.paid", data={}, tenant="globex"), "acme-hooks"),  # another tenant's event
        ],
    )
    settled: list[tuple[str, str]] = []
    hooks = DeliveryHooks()
    hooks.settlements.append(lambda endpoint, how: settled.append((endpoint, how)))
    good = Event(type="order.paid", data={}, tenant="acme")
    async with Worker(config, hooks=hooks):
        await publish(config, [good])
        await receiver.wait_for(lambda r: good.id in r.ok_ids(), 10)
        # Then the other tenant's event is discarded at once, the unknown endpoint's after its two parks
        await wait_until(lambda: ("deleted-endpoint", "discarded") in settled, 10, "the unknown one discarded")
        assert ("acme-hooks", "discarded") in settled
        assert settled.count(("deleted-endpoint", "parked")) == 2
        assert await wait_depth(config, lane, 0) == 0
    # and neither was POSTed nor dead-lettered
    assert [r.event_id for r in receiver.received] == [good.id]
    assert await wait_depth(config, names.lane_dlq(config.broker.prefix, names.lane_of("acme-hooks", LANES)), 0) == 0


async def test_a_lane_message_for_an_endpoint_not_served_here_yet_waits_for_it(
    endpoint_config: Any, receiver: Receiver
) -> None:
    # Given a worker with lanes and no endpoint, and a message on a lane for an endpoint another worker knows
    config = await endpoint_config([], lanes={"count": LANES})
    lane = names.lane_queue(config.broker.prefix, names.lane_of("soon", LANES))
    early = Event(type="order.paid", data={})
    async with Worker(config):
        await put_on_lane(config, lane, [(early, "soon")])
        await asyncio.sleep(0.5)
        # When this worker hears of the endpoint a moment later
        await apply_endpoint(
            config, Endpoint.model_validate({**lane_endpoint(receiver, "soon"), "secret": TEST_SECRET})
        )
        # Then the message is delivered, not discarded
        await receiver.wait_for(lambda r: early.id in r.ok_ids("/hook/soon"), 15)


def test_a_worker_given_a_list_of_endpoints_serves_no_lane_endpoint(make_config: Any) -> None:
    # A worker for some endpoints alone would route the shared routing queue's events to those alone
    config = make_config(
        [
            {"name": "acme", "url": "http://127.0.0.1:9/in", "events": ["#"]},
            {"name": "tail", "url": "http://127.0.0.1:9/in", "events": ["#"], "home": "lane"},
        ],
        lanes={"count": 2},
    )
    with pytest.raises(WarrenError, match=r"lane endpoint\(s\) tail are served by workers without --endpoints"):
        Worker(config, ["tail"])
    assert Worker(config, ["acme"]).lanes is None
    assert Worker(config).lanes is not None


async def test_a_live_lane_endpoint_reconfigured_while_events_flow_misses_none(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a live lane endpoint served by a worker
    config = await endpoint_config([], lanes={"count": LANES})
    first = Endpoint.model_validate({**lane_endpoint(receiver, "moving"), "secret": TEST_SECRET})
    second = first.model_copy(update={"url": f"{receiver.url}/moved"})
    async with Worker(config) as worker:
        await apply_endpoint(config, first)
        await wait_until(lambda: worker.lanes is not None and "moving" in worker.lanes.index, 10, "served")
        # When it is reconfigured (a new URL) while events are published before, during and after
        events = [Event(type="order.paid", data={"n": i}) for i in range(60)]
        reapplied = asyncio.create_task(apply_endpoint(config, second))
        for start in range(0, len(events), 10):
            await publish(config, events[start : start + 10])
            await asyncio.sleep(0.05)
        await reapplied
        # Then every event is delivered, at the old URL or the new one
        await receiver.wait_for(lambda r: {e.id for e in events} <= r.ok_ids(), 20)
        assert receiver.ok_ids("/hook/moved")


async def test_lane_endpoints_read_at_start_get_their_runner_on_their_first_message_and_stay_paused(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given three live lane endpoints announced before any worker runs, one of them paused by an operator
    config = await endpoint_config([], lanes={"count": LANES})
    quiet, busy, paused = (
        Endpoint.model_validate({**lane_endpoint(receiver, name, events=events), "secret": TEST_SECRET})
        for name, events in (("quiet", ["user.*"]), ("busy", ["order.*"]), ("held", ["order.*"]))
    )
    for endpoint in (quiet, busy, paused):
        await apply_endpoint(config, endpoint)
    connection = await aio_pika.connect(config.broker.url)
    try:
        await change_admin(connection, config.model_copy(update={"endpoints": (paused,)}), "held", "pause")
    finally:
        await connection.close()
    async with Worker(config) as worker:
        # When a worker starts: each is routed to, none has a runner yet
        assert worker.lanes is not None and {"quiet", "busy", "held"} <= set(worker.lanes.index._endpoints)
        assert not {"quiet", "busy", "held"} & set(dict(worker.runners)) and len(worker.runners.deferred) == 3
        # And events come for two of them (the third subscribes to nothing published)
        events = [Event(type="order.paid", data={"n": i}) for i in range(20)]
        await publish(config, events)
        await receiver.wait_for(lambda r: {e.id for e in events} <= r.ok_ids("/hook/busy"), 20)
        await asyncio.sleep(1.0)
        # Then the active one got every event, on a runner built for it; the paused one none, its runner paused
        assert set(dict(worker.runners)) == {"busy", "held"} and set(worker.runners.deferred) == {"quiet"}
        assert receiver.ok_ids("/hook/held") == set()
        await wait_until(lambda: worker.runners["held"].paused_reason is not None, 5, "held paused")
    # And nothing reached the paused endpoint, whose messages wait in its lane
    assert receiver.ok_ids("/hook/held") == set()


async def test_a_lane_consumed_with_a_backlog_acks_its_first_deliveries_in_batches(
    endpoint_config: Any, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given copies waiting in a lane before any worker consumes it (as after a worker's crash): first 100 that
    # are settled at once (another tenant's events, discarded), then 200 to deliver
    name = on_lane(0, 1)[0]
    config = await endpoint_config([lane_endpoint(receiver, name, tenant="acme")], lanes={"count": LANES})
    foreign = [(Event(type="order.paid", data={"n": i}, tenant="globex"), name) for i in range(100)]
    events = [Event(type="order.paid", data={"n": i}, tenant="acme") for i in range(200)]
    await put_on_lane(config, names.lane_queue(config.broker.prefix, 0), [*foreign, *((e, name) for e in events)])
    orphans: list[str | None] = []
    original = lanes.LaneConsumer.acks_of

    def acks_of(self: lanes.LaneConsumer, message: Any) -> Any:
        found = original(self, message)
        if found is None and message.consumer_tag is not None:
            orphans.append(message.message_id)
        return found

    monkeypatch.setattr(lanes.LaneConsumer, "acks_of", acks_of)
    # When a worker starts on it
    async with Worker(config):
        await receiver.wait_for(lambda r: len(r.ok_ids(f"/hook/{name}")) == len(events), 30)
        assert await wait_depth(config, names.lane_queue(config.broker.prefix, 0), 0) == 0
    # Then every settle found its lane's ack batcher, the first ones too: none was acked on its own, leaving a
    # hole in the batcher's run of tags that would have made every later ack of its lane go alone
    assert receiver.ok_ids(f"/hook/{name}") == {e.id for e in events}
    assert orphans == []
