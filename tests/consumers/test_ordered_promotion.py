"""Promoting a live ordered lane endpoint to partitions of its own (warren/broker/ordered_promotion.py): events
flowing on several keys before, during and after the move, every one delivered and each key's first deliveries in
order; refused while it is held, nothing lost, and finished by applying it again."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from aio_pika import connect

from tests.consumers.test_ordered_lanes import all_delivered, keyed, violations_at
from tests.consumers.test_ordered_moves import backlog, duplicates, exists, later
from tests.support.health import wait_until
from tests.support.ordered_moves import ledger, moves_config, serving_ledger
from tests.support.receiver import Receiver, Reply
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.broker.publisher import Publisher
from warren.consumers.ordered_lanes import OrderedLaneRunner
from warren.core.errors import LiveApplyError
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(150)

KEYS = 8
PER_KEY = 30  # each key's backlog on the lane side: 30 events that fail once each, 6 s at least


async def stream(
    config: WarrenConfig, start: int, published: list[Event], stop: asyncio.Event, every: float = 0.02
) -> None:
    """Publish one event per key, sequence ``start`` on, every ``every`` seconds until ``stop``: traffic during the
    move."""
    connection = await connect(config.broker.url)
    try:
        publisher = await Publisher.open(connection, config.broker.prefix)
        sequence = start
        while not stop.is_set():
            batch = later(KEYS, sequence, 1)
            report = await publisher.publish_many(batch)
            assert not report.failed, report.failed
            published.extend(batch)
            sequence += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), every)
    finally:
        await connection.close()


# True: what the admin API says for a move from a lane; None: a direct call that does not say (an ordered endpoint
# is drained all the same: its partitions declared afresh, or its record still on a lane)
PROMOTING = pytest.mark.parametrize("promoting", [True, None], ids=["said", "not-said"])


@PROMOTING
async def test_an_ordered_lane_endpoint_promoted_mid_stream_keeps_every_event_and_each_key_in_order(
    failing_once: WarrenConfig, receiver: Receiver, publish: Any, promoting: bool | None
) -> None:
    # Given an ordered lane endpoint whose every event fails once (503, then 200), so its lanes hold a backlog
    config = failing_once
    async with serving_ledger(config, receiver, "lane") as worker:
        before = await backlog(config, receiver, publish, per_key=PER_KEY)
        # When it is promoted to partitions of its own while events keep coming on every key
        during: list[Event] = []
        stop = asyncio.Event()
        streaming = asyncio.create_task(stream(config, PER_KEY, during, stop))
        try:
            await asyncio.sleep(0.1)  # the stream has begun before the move (it is paced, not awaited for)
            await apply_endpoint(config, ledger(receiver, "dedicated"), promoting=promoting)
            # (every copy on the lane side was delivered before it was announced dedicated)
            assert receiver.ok_ids("/hook/ledger") >= {e.id for e in before}
            await wait_until(lambda: not isinstance(worker.runners.get("ledger"), OrderedLaneRunner), 10, "moved")
            await asyncio.sleep(0.3)
        finally:
            stop.set()
            await streaming
        assert during, "events were published during the move"
        # Then every event, from before, during and after the move, is delivered, each key's first deliveries in order
        await receiver.wait_for(all_delivered([*before, *during], ["ledger"]), 90)
        assert violations_at(receiver, ["ledger"]) == []
        print(f"duplicates: {duplicates(receiver)} of {len(before) + len(during)} events")
        # and it is served from its partitions, with no park queue left
        assert await exists(config, names.partition_queue(config.broker.prefix, "ledger", 0))
        assert not await exists(config, names.ordered_park_queue(config.broker.prefix, "ledger"))


@PROMOTING
async def test_a_held_ordered_lane_endpoint_is_not_promoted_until_it_delivers_and_loses_nothing(
    make_config: Any, receiver: Receiver, publish: Any, promoting: bool | None
) -> None:
    # Given an ordered lane endpoint whose receiver answers 503 to everything for now (its keys retry in place)
    failing = {"on": True}
    receiver.behaviour = lambda r, request, body: Reply(503) if failing["on"] else Reply(200)
    config = await moves_config(make_config, promote_wait="2s")
    async with serving_ledger(config, receiver, "lane"):
        before = keyed([f"k{i}" for i in range(KEYS)], 4)
        await publish(config, before)
        await receiver.wait_for(lambda r: len(r.received) >= KEYS, 30)
        # When it is promoted while no copy of it can be delivered: refused, the move under way
        with pytest.raises(LiveApplyError, match="under way"):
            await apply_endpoint(config, ledger(receiver, "dedicated"), promoting=promoting)
        meanwhile = later(KEYS, 4, 3)
        await publish(config, meanwhile)  # waiting in its partitions, routed to no lane
        # Then once it answers again and the same change is applied again, everything arrives, each key in order
        failing["on"] = False
        patient = config.model_copy(update={"lanes": config.lanes.model_copy(update={"promote_wait": 30.0})})
        await apply_endpoint(patient, ledger(receiver, "dedicated"), promoting=promoting)
        assert receiver.ok_ids("/hook/ledger") >= {e.id for e in before}  # its partitions there: drained all the same
        await receiver.wait_for(all_delivered([*before, *meanwhile], ["ledger"]), 60)
        assert violations_at(receiver, ["ledger"]) == []
