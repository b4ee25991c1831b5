"""The ordered promotion's edges (warren/broker/ordered_promotion.py): a copy left in the park queue after the
fences, and a worker killed (SIGKILL) while the promotion waits for them. (An apply that does not say it promotes:
tests/consumers/test_ordered_promotion.py, "not-said".)"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage

from tests.consumers.test_ordered_lanes import all_delivered, violations_at
from tests.consumers.test_ordered_moves import backlog, duplicates, exists
from tests.consumers.test_ordered_promotion import PER_KEY, stream
from tests.support.ordered_moves import LANES, ledger
from tests.support.processes import running_workers, write_config
from tests.support.receiver import Receiver, Reply
from warren.broker import ordered_promotion
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.broker.ordered_promotion import late_copies
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(150)


async def test_a_copy_left_in_the_park_queue_after_the_fences_is_delivered_through_the_partitions(
    failing_once: WarrenConfig, receiver: Receiver, publish: Any
) -> None:
    # Given a promoted ordered endpoint (no worker yet) whose park queue still holds a copy that came after the
    # fences: the only copy of its event (a letter replayed from its lane's DLQ during the move is one)
    config = failing_once
    receiver.behaviour = lambda r, request, body: Reply(200)
    prefix = config.broker.prefix
    await apply_endpoint(config, ledger(receiver, "dedicated"), promoting=False)
    event = Event(type="x.y", data={}, key="k0", sequence=0)
    await publish(config, [event])
    park = names.ordered_park_queue(prefix, "ledger")
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        await channel.declare_queue(park, durable=True, arguments={"x-queue-type": "classic"})
        arrived: asyncio.Queue[AbstractIncomingMessage] = asyncio.Queue()
        for index in range(2):  # consumed, not got: a partition (single active consumer) refuses basic.get
            await (await channel.get_queue(names.partition_queue(prefix, "ledger", index))).consume(arrived.put)
        taken = await asyncio.wait_for(arrived.get(), 10)
        copy = aio_pika.Message(
            taken.body, headers=dict(taken.headers or {}), message_id=taken.message_id, content_type=taken.content_type
        )
        await channel.default_exchange.publish(copy, routing_key=park)
        await taken.ack()
        await channel.close()
        # and a drainer holding the park queue's drain lock for a second
        holder = await aio_pika.connect(config.broker.url)
        lock = await holder.channel()
        await lock.declare_queue(f"{park}.drain", exclusive=True, auto_delete=True)
        asyncio.get_running_loop().call_later(1.0, lambda: asyncio.ensure_future(holder.close()))
        # When the promotion's last step deals with the park queue
        moved = await late_copies(connection, config, "ledger")
    finally:
        await connection.close()
    # Then the copy was moved into the endpoint's exchange, the park queue and its lock deleted
    assert moved == 1
    assert not await exists(config, park)
    assert not await exists(config, f"{park}.drain")
    # and a worker delivers it from the partitions: nothing dropped, nothing left behind
    async with Worker(config):
        await receiver.wait_for(lambda r: event.id in r.ok_ids("/hook/ledger"), 30)


async def test_a_worker_killed_while_the_promotion_waits_for_its_fences_loses_nothing_and_breaks_no_key_order(
    failing_once: WarrenConfig, receiver: Receiver, publish: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given two worker processes serving an ordered lane endpoint whose every event fails once, a backlog in its lanes
    config = failing_once
    fencing = asyncio.Event()
    real = ordered_promotion.fence_queues

    async def fences(*args: Any, **kwargs: Any) -> Any:
        fencing.set()  # the lanes' fences are published: the promotion waits for their answers from here
        return await real(*args, **kwargs)

    monkeypatch.setattr(ordered_promotion, "fence_queues", fences)
    async with running_workers(write_config(tmp_path, config), 2) as workers:
        await apply_endpoint(config, ledger(receiver, "lane"))
        before = await backlog(config, receiver, publish, per_key=PER_KEY)
        during: list[Event] = []
        stop = asyncio.Event()
        # one event per key every 0.25 s: no faster than a key that fails once per event (0.2 s in place) is
        # delivered, so what is published while the promotion waits (longer on a loaded machine) cannot outgrow
        # the survivor's pace (at 20 ms a 10 s promotion left 100 s of deliveries behind it)
        streaming = asyncio.create_task(stream(config, PER_KEY, during, stop, every=0.25))
        try:
            # When it is promoted and one worker is killed (SIGKILL, by PID) while the promotion waits for its fences
            promoting = asyncio.create_task(apply_endpoint(config, ledger(receiver, "dedicated"), promoting=True))
            await asyncio.wait_for(fencing.wait(), 60)
            assert workers[0].process is not None
            os.kill(workers[0].process.pid, signal.SIGKILL)
            await asyncio.wait_for(promoting, 90)  # the survivor answers the fences the killed worker held
            await asyncio.sleep(0.3)
        finally:
            stop.set()
            await asyncio.gather(streaming, return_exceptions=True)
        # Then every event is delivered by the survivor, each key's first deliveries in order
        await receiver.wait_for(all_delivered([*before, *during], ["ledger"]), 90)
    assert violations_at(receiver, ["ledger"]) == []
    # and the duplicates are bounded: the events published before the routers closed, once more each, and what
    # the killed worker held unsettled (its prefetch windows: 2 ordered lanes, 2 lanes, 2 route partitions, a park)
    window = LANES["prefetch"] * 2 + LANES["prefetch"] * 2 + LANES["route_prefetch"] * 2 + LANES["prefetch"]
    found = duplicates(receiver)
    print(f"duplicates: {found} of {len(before) + len(during)} events")
    assert found <= len(during) + window
