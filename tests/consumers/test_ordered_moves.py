"""Moving a live ordered endpoint between homes (warren/broker/live_demote_ordered.py): from its partitions onto
the ordered lanes mid-stream, every event delivered and each key's first deliveries in order; back refused."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aio_pika
import aiormq.exceptions
import pytest

from tests.consumers.test_ordered_lanes import all_delivered, keyed, violations_at
from tests.support.ordered_moves import ledger, serving_ledger
from tests.support.processes import running_workers, write_config
from tests.support.receiver import Receiver
from warren.broker.events import Event
from warren.broker.live_apply import apply_endpoint
from warren.consumers.ordered_lanes import OrderedLaneRunner
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(150)


def later(keys: int, start: int, per_key: int) -> list[Event]:
    """The events published after the move: each key's sequence goes on from ``start``."""
    return [
        Event(type="x.y", data={}, key=f"k{k}", sequence=s) for s in range(start, start + per_key) for k in range(keys)
    ]


def duplicates(receiver: Receiver) -> int:
    """Deliveries answered 2xx beyond each event's first."""
    ok = [r.event_id for r in receiver.received if 200 <= r.status < 300]
    return len(ok) - len(set(ok))


async def backlog(config: WarrenConfig, receiver: Receiver, publish: Any, per_key: int = 12) -> list[Event]:
    """``per_key`` events on each of 8 keys published, and the endpoint's first few delivered: most still on their
    way."""
    before = keyed([f"k{i}" for i in range(8)], per_key)
    await publish(config, before)
    await receiver.wait_for(lambda r: len(r.ok_ids("/hook/ledger")) >= 5, 30)
    assert len(receiver.ok_ids("/hook/ledger")) < len(before) - 16  # most of them still on their way
    return before


async def exists(config: WarrenConfig, queue: str) -> bool:
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        await channel.declare_queue(queue, passive=True)
        return True
    except aiormq.exceptions.ChannelNotFoundEntity:
        return False
    finally:
        await connection.close()


async def test_an_ordered_endpoint_moved_onto_the_ordered_lanes_mid_stream_keeps_every_event_and_each_key_in_order(
    failing_once: WarrenConfig, receiver: Receiver, publish: Any
) -> None:
    # Given a dedicated ordered endpoint whose every event fails once (503, then 200), so keys retry in place
    config, prefix = failing_once, failing_once.broker.prefix
    async with serving_ledger(config, receiver, "dedicated") as worker:
        # When it is moved onto the ordered lanes while its partitions hold most of them, and more are published
        before = await backlog(config, receiver, publish)
        await apply_endpoint(config, ledger(receiver, "lane"))
        assert isinstance(worker.runners.get("ledger"), OrderedLaneRunner)
        after = later(8, 12, 6)
        await publish(config, after)
        # Then every event, from before the move and after it, is delivered, each key's first deliveries in order
        await receiver.wait_for(all_delivered([*before, *after], ["ledger"]), 60)
        assert violations_at(receiver, ["ledger"]) == []
        print(f"duplicates: {duplicates(receiver)} of {len(before) + len(after)} events")
        # and it owns no queue of its own any more; the moved queue and the park queue go once delivered
        for index in range(2):
            assert not await exists(config, names.partition_queue(prefix, "ledger", index))
        moved, park = names.ordered_moved_queue(prefix, "ledger"), names.ordered_park_queue(prefix, "ledger")
        for queue in (moved, park):
            deadline = asyncio.get_running_loop().time() + 30
            while await exists(config, queue):
                assert asyncio.get_running_loop().time() < deadline, f"{queue} was never deleted"
                await asyncio.sleep(0.5)


async def test_a_worker_killed_during_the_move_loses_nothing_and_breaks_no_key_order(
    failing_once: WarrenConfig, receiver: Receiver, publish: Any, tmp_path: Path
) -> None:
    # Given two worker processes serving a dedicated ordered endpoint whose every event fails once
    config = failing_once
    async with running_workers(write_config(tmp_path, config), 2) as workers:
        await apply_endpoint(config, ledger(receiver, "dedicated"))
        before = keyed([f"k{i}" for i in range(8)], 12)
        await publish(config, before)
        await receiver.wait_for(lambda r: len(r.ok_ids("/hook/ledger")) >= 5, 30)
        assert len(receiver.ok_ids("/hook/ledger")) < len(before) - 16  # most of them still in its partitions
        # When it is moved onto the ordered lanes and one worker is killed (SIGKILL) during the move
        moving = asyncio.create_task(apply_endpoint(config, ledger(receiver, "lane")))
        await asyncio.sleep(0.3)
        workers[0].kill()
        await moving
        after = later(8, 12, 6)
        await publish(config, after)
        # Then every event is delivered by the survivor, each key's first deliveries in order
        await receiver.wait_for(all_delivered([*before, *after], ["ledger"]), 90)
        assert violations_at(receiver, ["ledger"]) == []
    print(f"duplicates: {duplicates(receiver)} of {len(before) + len(after)} events")
