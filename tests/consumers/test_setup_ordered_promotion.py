"""``warren setup`` moving an ORDERED file endpoint from the ordered lanes to partitions of its own
(warren/broker/setup_promotion.py): the live promotion's own steps, so that each key's order holds across the move
and the workers' restart with the new file; refused, saying why, while its copies cannot be delivered."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.consumers.test_ordered_lanes import all_delivered, violations_at
from tests.consumers.test_ordered_moves import backlog, duplicates, exists
from tests.consumers.test_ordered_promotion import KEYS, PER_KEY, stream
from tests.support.health import wait_until
from tests.support.ordered_moves import RETRY, first_fails
from tests.support.receiver import Receiver, Reply
from warren.broker.applier import apply_setup
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.events import Event
from warren.consumers.live_endpoints import LiveEndpoints
from warren.consumers.worker import Worker
from warren.core.errors import LiveApplyError
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig

pytestmark = pytest.mark.timeout(150)

LANES = {"count": 2, "ordered_count": 2, "route_partitions": 2, "prefetch": 8, "route_prefetch": 8}


def configs(make_config: Any, receiver: Receiver, **lanes: Any) -> tuple[WarrenConfig, WarrenConfig]:
    """The file before (``ledger`` ordered, on the ordered lanes) and after (on partitions of its own)."""
    ledger = {
        "name": "ledger",
        "url": f"{receiver.url}/ledger",
        "events": ["x.*"],
        "ordering": "key",
        "partitions": 2,
        "circuit": {"enabled": False},
    }
    on_lane, dedicated = (
        make_config(
            [{**ledger, "home": home}],
            lanes={**LANES, **lanes},
            retry=RETRY,
            worker={"rebalance_interval": "500ms"},
            delivery={"grace_period": "1s"},
        )
        for home in ("lane", "dedicated")
    )
    return on_lane, dedicated


async def failing_for_now(make_config: Any, receiver: Receiver) -> tuple[dict[str, bool], WarrenConfig, WarrenConfig]:
    """The files before and after (a 2 s ``promote_wait``), set up, with a receiver answering 503 while ``on``."""
    failing = {"on": True}
    receiver.behaviour = lambda r, request, body: Reply(503) if failing["on"] else Reply(200)
    on_lane, dedicated = configs(make_config, receiver, promote_wait="2s")
    await apply_setup(on_lane, check_capacity=False)
    return failing, on_lane, dedicated


async def first_attempts(config: WarrenConfig, receiver: Receiver, publish: Any) -> list[Event]:
    """3 events on each key published, and each key's first attempt made (refused): its keys retry in place."""
    events = [Event(type="x.y", data={}, key=f"k{i}", sequence=s) for s in range(3) for i in range(KEYS)]
    await publish(config, events)
    await receiver.wait_for(lambda r: len(r.received) >= KEYS, 30)
    return events


async def test_setup_moving_an_ordered_file_endpoint_mid_stream_keeps_every_event_and_each_key_in_order(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given an ordered file endpoint on the ordered lanes whose every event fails once, its lanes holding a backlog
    receiver.behaviour = first_fails()
    on_lane, dedicated = configs(make_config, receiver)
    await apply_setup(on_lane, check_capacity=False)
    during: list[Event] = []
    stop = asyncio.Event()
    streaming: asyncio.Task[None] | None = None
    try:
        async with Worker(on_lane):
            before = await backlog(on_lane, receiver, publish, per_key=PER_KEY)
            # When events keep coming on every key while `warren setup` applies the file that moves it
            streaming = asyncio.create_task(stream(on_lane, PER_KEY, during, stop))
            await asyncio.sleep(0.1)
            report = await asyncio.wait_for(apply_setup(dedicated, check_capacity=False), 60)
            assert report.applied
            # setup returned only once every copy on the lane side was delivered
            assert receiver.ok_ids("/hook/ledger") >= {e.id for e in before}
        # and the workers are restarted with the new file, events still coming
        async with Worker(dedicated):
            await asyncio.sleep(0.5)
            stop.set()
            await streaming
            assert during, "events were published during the move"
            # Then every event is delivered, each key's first deliveries in order
            await receiver.wait_for(all_delivered([*before, *during], ["ledger"]), 90)
    finally:
        stop.set()
        if streaming is not None:
            await asyncio.gather(streaming, return_exceptions=True)
    assert violations_at(receiver, ["ledger"]) == []
    print(f"duplicates: {duplicates(receiver)} of {len(before) + len(during)} events")
    # and it is served from its partitions, with no park queue left
    prefix = on_lane.broker.prefix
    assert await exists(on_lane, names.partition_queue(prefix, "ledger", 0))
    assert not await exists(on_lane, names.ordered_park_queue(prefix, "ledger"))


async def test_setup_refuses_an_ordered_move_its_lanes_do_not_confirm_and_finishes_it_when_run_again(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given an ordered file endpoint on the ordered lanes whose receiver answers 503 for now (its keys retry in place)
    failing, on_lane, dedicated = await failing_for_now(make_config, receiver)
    during: list[Event] = []
    stop = asyncio.Event()
    async with Worker(on_lane):
        before = await first_attempts(on_lane, receiver, publish)
        # When setup applies the file that moves it while events keep coming: refused, saying why and what to do
        streaming = asyncio.create_task(stream(on_lane, 3, during, stop))
        try:
            with pytest.raises(LiveApplyError, match="under way") as refused:
                await apply_setup(dedicated, check_capacity=False)
        finally:
            stop.set()
            await streaming
        assert "run `warren setup` again" in str(refused.value)
        # and left under way, not undone: the events published once its routing closed are in its partitions only
        assert await exists(on_lane, names.partition_queue(on_lane.broker.prefix, "ledger", 0))
        # Then once it answers again, setup run again finishes the move, and nothing is lost, each key in order
        failing["on"] = False
        await receiver.wait_for(all_delivered(before, ["ledger"]), 30)
        assert (await asyncio.wait_for(apply_setup(dedicated, check_capacity=False), 60)).applied
    async with Worker(dedicated) as worker:
        await wait_until(lambda: "ledger" in worker.runners, 10, "served on its partitions")
        await receiver.wait_for(all_delivered([*before, *during], ["ledger"]), 60)
    assert violations_at(receiver, ["ledger"]) == []


async def test_setup_undoes_an_unconfirmed_ordered_move_when_nothing_reached_its_partitions(
    make_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given an ordered file endpoint on the ordered lanes whose receiver answers 503 for now, nothing published after
    failing, on_lane, dedicated = await failing_for_now(make_config, receiver)
    prefix = on_lane.broker.prefix
    async with Worker(on_lane):
        before = await first_attempts(on_lane, receiver, publish)
        # When setup applies the file that moves it and its lanes do not confirm in time
        with pytest.raises(LiveApplyError, match="not promoted, still on its lane") as refused:
            await apply_setup(dedicated, check_capacity=False)
        # Then the move is undone: its partitions and exchange deleted, its routing open again
        assert "they were undone" in str(refused.value) and "run `warren setup` again" in str(refused.value)
        assert not await exists(on_lane, names.partition_queue(prefix, "ledger", 0))
        after = [Event(type="x.y", data={}, key=f"k{i}", sequence=s) for s in range(3, 5) for i in range(KEYS)]
        await publish(on_lane, after)
        # and everything, what came after included, is delivered from the lanes once it answers, each key in order
        failing["on"] = False
        await receiver.wait_for(all_delivered([*before, *after], ["ledger"]), 60)
    assert violations_at(receiver, ["ledger"]) == []


def test_a_worker_honours_a_file_endpoints_record_for_its_routing_alone_the_newest_winning() -> None:
    closed: list[tuple[str, bool]] = []

    async def serve(_: Endpoint) -> None:
        raise AssertionError("a file endpoint is never served from a record")

    async def unserve(_: str) -> None:
        raise AssertionError("a file endpoint is never unserved by a record")

    live = LiveEndpoints(
        "amqp://unused",
        "p",
        serve=serve,
        unserve=unserve,
        file_managed=["ledger"],
        close_routing=lambda *a: closed.append(a),
    )
    # Given setup's records for the file endpoint: closed, then open again
    closing = EndpointRecord.file_routing("ledger", "setup", closed=True)
    opening = EndpointRecord.file_routing("ledger", "setup", closed=False)
    # When the worker learns them, the older one last (a stream read after the broadcast)
    learnt = [live._learn(closing), live._learn(opening), live._learn(closing)]
    # Then its routing follows the newest, nothing is served or known as a live endpoint, nothing to sync
    assert learnt == [False, False, False]
    assert closed == [("ledger", True), ("ledger", False)]
    assert live.known == {}
