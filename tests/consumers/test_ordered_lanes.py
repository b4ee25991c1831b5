"""Ordered lane endpoints (``ordering = "key"``, ``home = "lane"``) end to end: real RabbitMQ, real HTTP receiver,
two routers sharing the route partitions (docs/architecture.md, "Ordered lanes").

Order is judged as the receiver sees it: no request for an event of a key may reach an endpoint before every
earlier event of that key has been answered 2xx there (duplicates of an earlier event are allowed).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import aio_pika
import orjson
import pytest

from tests.conftest import TEST_SECRET
from tests.support.cli import warren
from tests.support.dead_letters import wait_depth
from tests.support.processes import running_workers, write_config
from tests.support.receiver import Receiver, Reply, always
from tests.support.topology import declare
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

pytestmark = pytest.mark.timeout(180)

ORDERED = ["ledger-0", "ledger-1"]
LANES = {"count": 2, "ordered_count": 3, "route_partitions": 4, "prefetch": 16, "route_prefetch": 16}
FAST = {"rebalance_interval": "500ms"}


def ordered_endpoint(receiver: Receiver, name: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "url": f"{receiver.url}/{name}",
        "events": ["x.*"],
        "home": "lane",
        "ordering": "key",
        **fields,
    }


def keyed(keys: list[str], per_key: int) -> list[Event]:
    """``per_key`` events for each key, interleaved as a busy producer would publish them."""
    return [Event(type="x.y", data={}, key=k, sequence=s) for s in range(per_key) for k in keys]


def violations(receiver: Receiver) -> list[str]:
    """Requests that reached an endpoint before an earlier event of their key had been answered 2xx there."""
    done: dict[tuple[str, str], set[int]] = defaultdict(set)
    found = []
    for request in sorted(receiver.received, key=lambda r: r.at):
        body = orjson.loads(request.body)
        key, sequence = (request.path, body["key"]), body["sequence"]
        missing = [s for s in range(sequence) if s not in done[key]]
        if missing:
            found.append(f"{key}#{sequence} before {missing[:3]}")
        if 200 <= request.status < 300:
            done[key].add(sequence)
    return found


def all_delivered(events: list[Event], endpoints: list[str]) -> Any:
    want = {e.id for e in events}
    return lambda r: all(r.ok_ids(f"/hook/{name}") >= want for name in endpoints)


async def deployment(make_config: Any, receiver: Receiver, **fields: Any) -> WarrenConfig:
    config: WarrenConfig = make_config(
        [ordered_endpoint(receiver, n, **fields) for n in ORDERED]
        + [{"name": "tail", "url": f"{receiver.url}/tail", "events": ["x.*"], "home": "lane"}],
        lanes=LANES,
        worker=FAST,
        retry={"base": "50ms", "cap": "200ms", "jitter": "none", "max_attempts": 1000},
    )
    await declare(config)
    return config


async def test_two_workers_share_the_route_partitions_and_every_key_arrives_in_order(
    make_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given two ordered lane endpoints and an unordered one, served by two worker processes that share the route
    # partitions and the ordered lanes, and a receiver answering after 0-20 ms
    receiver.behaviour = lambda r, request, body: Reply(200, delay=(hash(body) % 20) / 1000)
    config = await deployment(make_config, receiver)
    events = keyed([f"k{i}" for i in range(20)], 15)
    async with running_workers(write_config(tmp_path, config), 2):
        assert await routers(config) == 2  # both route (each claims its share of the partitions)
        # When 300 keyed events are published
        await publish(config, events)
        # Then every endpoint gets every event, each key in order at the ordered ones
        await receiver.wait_for(all_delivered(events, [*ORDERED, "tail"]), 90)
    assert violations_at(receiver, ORDERED) == []
    for name in ORDERED:
        got = Counter(r.event_id for r in receiver.received if r.path == f"/hook/{name}" and r.status == 200)
        assert set(got) == {e.id for e in events}


async def routers(config: WarrenConfig) -> int:
    connection = await aio_pika.connect(config.broker.url)
    async with connection:
        channel = await connection.channel()
        roster = await channel.declare_queue(names.route_roster(config.broker.prefix), passive=True)
        return roster.declaration_result.consumer_count or 0


def violations_at(receiver: Receiver, endpoints: list[str]) -> list[str]:
    paths = {f"/hook/{name}" for name in endpoints}
    return [v for v in violations(receiver) if any(p in v for p in paths)]


async def test_a_failing_then_recovering_ordered_lane_endpoint_keeps_each_key_in_order(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given an ordered lane endpoint whose receiver answers 503 to key "bad" for a while, and a lane-mate
    failing = {"on": True}

    def reply(r: Receiver, request: Any, body: bytes) -> Reply:
        bad = failing["on"] and orjson.loads(body)["key"] == "bad" and request.path == "/hook/ledger-0"
        return Reply(503) if bad else Reply(200)

    receiver.behaviour = reply
    config = await deployment(make_config, receiver, circuit={"enabled": False})
    events = keyed(["bad", "g1", "g2", "g3"], 5)
    async with Worker(config):
        await publish(config, events)
        # When the other keys are delivered while "bad" fails (retried in place, holding only its key)
        good = {e.id for e in events if e.key != "bad"}
        await receiver.wait_for(lambda r: r.ok_ids("/hook/ledger-0") >= good, 30)
        bad_seen = {orjson.loads(r.body)["sequence"] for r in receiver.received
                    if r.path == "/hook/ledger-0" and orjson.loads(r.body)["key"] == "bad"}  # fmt: skip
        assert bad_seen == {0}
        failing["on"] = False
        # Then once it recovers, every event arrives, each key in order, nothing dead-lettered
        await receiver.wait_for(all_delivered(events, ORDERED), 30)
        dlq = names.lane_dlq(config.broker.prefix, names.lane_of("ledger-0", 2))
        assert await wait_depth(config, dlq, 0) == 0
    assert violations_at(receiver, ORDERED) == []


async def test_a_worker_killed_mid_run_loses_nothing_and_breaks_no_key_order(
    make_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given two worker processes serving the ordered lane endpoints, answered after 5 ms
    receiver.behaviour = always(200, delay=0.005)
    config = await deployment(make_config, receiver)
    events = keyed([f"k{i}" for i in range(30)], 10)
    async with running_workers(write_config(tmp_path, config), 2) as workers:
        # When 300 events are published and one worker is killed (SIGKILL) mid-run
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.received) >= 200, 60)
        workers[0].kill()
        # Then the other delivers every event to every endpoint
        await receiver.wait_for(all_delivered(events, [*ORDERED, "tail"]), 120)
    # with no key out of order at the ordered endpoints (a duplicate of an earlier event is allowed)
    assert violations_at(receiver, ORDERED) == []


async def test_an_earlier_releases_single_routing_queue_is_moved_into_the_partitions(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a deployment upgraded from the single routing queue: {prefix}.route still bound # on the events
    # exchange and holding events, which the route partitions never saw
    receiver.behaviour = always(200)
    config = await deployment(make_config, receiver)
    prefix = config.broker.prefix
    old = names.route_queue(prefix)
    connection = await aio_pika.connect(config.broker.url)
    async with connection:
        channel = await connection.channel()
        queue = await channel.declare_queue(
            old, durable=True, arguments={"x-queue-type": "quorum", "x-delivery-limit": 2**31 - 1}
        )
        await queue.bind(names.events_exchange(prefix), "#")
        hashed = await channel.get_exchange(names.route_exchange(prefix))
        await hashed.unbind(names.events_exchange(prefix), "#")
        events = keyed(["a", "b", "c"], 10)
        await publish(config, events)
        assert await wait_depth(config, old, len(events)) == len(events)
        await declare(config)  # `warren setup` of the new release: the partitions fed again
        # When a worker of this release starts
        async with Worker(config) as worker:
            # Then every event the old queue held reaches every endpoint, each key in order, and the old queue is
            # emptied and unbound (new events reach the partitions only)
            await receiver.wait_for(all_delivered(events, [*ORDERED, "tail"]), 30)
            assert await wait_depth(config, old, 0) == 0
            more = keyed(["a"], 3)
            await publish(config, more)
            await receiver.wait_for(all_delivered(more, ORDERED), 30)
            assert worker.lanes is not None and worker.lanes.router.migration.moved == len(events)
            assert await wait_depth(config, old, 0) == 0
    assert violations_at(receiver, ORDERED) == []
    got = Counter(r.event_id for r in receiver.received if r.path == "/hook/tail")
    assert set(got.values()) == {1}


async def test_an_ordered_lane_endpoints_dead_letters_are_listed_and_replayed_by_the_dlq_tools(
    make_config: Any, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given an ordered lane endpoint that answers 400 to key "bad" (a dead letter at once), beside its lane-mates
    refusing = {"on": True}

    def reply(r: Receiver, request: Any, body: bytes) -> Reply:
        bad = refusing["on"] and orjson.loads(body)["key"] == "bad" and request.path == "/hook/ledger-0"
        return Reply(400) if bad else Reply(200)

    receiver.behaviour = reply
    config = await deployment(make_config, receiver)
    path = str(write_config(tmp_path, config))
    events = keyed(["bad", "good"], 3)
    bad = [e.id for e in events if e.key == "bad"]
    dlq = names.lane_dlq(config.broker.prefix, names.lane_of("ledger-0", 2))
    async with Worker(config):
        await publish(config, events)
        # When its letters are in its lane's DLQ (its key moved on past each: a dead letter does not hold the key)
        assert await wait_depth(config, dlq, 3) == 3
        await receiver.wait_for(all_delivered([e for e in events if e.key == "good"], ORDERED), 20)
        # Then `warren dlq list` shows them, in order, and replay sends them back to be delivered
        listed = await warren("dlq", "list", "ledger-0", "--config", path, "--json")
        assert listed.code == 0, listed.err
        assert [letter["event_id"] for letter in json.loads(listed.out)] == bad
        refusing["on"] = False
        replayed = await warren("dlq", "replay", "ledger-0", "--config", path)
        assert replayed.code == 0, replayed.err
        await receiver.wait_for(lambda r: r.ok_ids("/hook/ledger-0") >= set(bad), 20)
        assert await wait_depth(config, dlq, 0) == 0
    # each once (the lane consumer forwards each into the key's ordered lane; replay promises no order, as for a
    # dedicated ordered endpoint)
    again = [orjson.loads(r.body)["sequence"] for r in receiver.received
             if r.path == "/hook/ledger-0" and r.status == 200 and orjson.loads(r.body)["key"] == "bad"]  # fmt: skip
    assert sorted(again) == [0, 1, 2]


async def test_an_ordered_lane_endpoint_created_live_is_served_in_order_and_its_circuit_holds_it_in_place(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a worker, and an ordered lane endpoint created live whose receiver fails every request for a while,
    # with a circuit that opens after 3 failures and probes again after 300 ms
    failing = {"on": True}
    receiver.behaviour = lambda r, request, body: (
        Reply(503) if failing["on"] and request.path == "/hook/live-ledger" else Reply(200)
    )
    config = await deployment(make_config, receiver)
    live = Endpoint.model_validate(
        {
            **ordered_endpoint(receiver, "live-ledger"),
            "secret": TEST_SECRET,
            "circuit": {"consecutive_failures": 3, "cooldown": "300ms", "min_requests": 1000},
        }
    )
    async with Worker(config) as worker:
        await apply_endpoint(config, live)  # returns once the router has it (the route fence)
        assert worker.lanes is not None and "live-ledger" in worker.lanes.index
        events = keyed(["a", "b", "c"], 6)
        # When events are published while it fails (its circuit opens: the copies wait in their FIFOs)
        await publish(config, events)
        await receiver.wait_for(lambda r: sum(1 for x in r.received if x.path == "/hook/live-ledger") >= 4, 20)
        failing["on"] = False
        # Then once it recovers every event arrives, each key in order, none dead-lettered
        await receiver.wait_for(all_delivered(events, ["live-ledger"]), 40)
    assert violations_at(receiver, ["live-ledger"]) == []


async def test_an_unordered_lane_endpoints_open_circuit_is_probed_and_closes(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given an unordered lane endpoint whose receiver fails for a while, its circuit opening after 3 failures
    failing = {"on": True}
    receiver.behaviour = lambda r, request, body: Reply(503) if failing["on"] else Reply(200)
    config: WarrenConfig = make_config(
        [
            {
                "name": "tail",
                "url": f"{receiver.url}/tail",
                "events": ["x.*"],
                "home": "lane",
                "circuit": {"consecutive_failures": 3, "cooldown": "300ms", "min_requests": 1000},
            }
        ],
        lanes=LANES,
        retry={"base": "50ms", "cap": "200ms", "jitter": "none", "max_attempts": 1000},
    )
    await declare(config)
    events = keyed(["a"], 5)
    async with Worker(config):
        await publish(config, events)
        await receiver.wait_for(lambda r: len(r.received) >= 3, 20)
        failing["on"] = False
        # Then a worker probes it once the cool-down has passed, and every event arrives
        await receiver.wait_for(all_delivered(events, ["tail"]), 40)
