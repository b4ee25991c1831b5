"""Dead letters made for real by a worker, then listed, replayed (shovel and client-side), interrupted, purged."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import aio_pika
import aiormq
import pytest

from tests.support.dead_letters import drain, peek_ids, seed_dead_letters, wait_depth
from tests.support.health import message_count, wait_until
from tests.support.receiver import Receiver, Reply, always
from warren.broker import wire
from warren.broker.dlq import Selection, browse, move_selected, purge_dlq, replay_by_shovel, select
from warren.broker.dlq.move import DEFAULT_WINDOW, REPLAY_ACK_BATCH, REPLAY_ACK_DELAY
from warren.broker.dlq.shovel import shovel_definition, shovel_name
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)

FAST_RETRY = {"base": "5ms", "cap": "10ms", "max_attempts": 2}
# The circuit breaker would open on a wall of 500s and park the events instead of exhausting them.
DOWN = {"name": "down", "circuit": {"enabled": False}}


async def exhaust(endpoint_config: Any, receiver: Receiver, publish: Any, events: list[Event]) -> WarrenConfig:
    """Run a worker against a receiver answering 500 until every event is in the DLQ (2 attempts each)."""
    receiver.behaviour = always(500)
    config: WarrenConfig = await endpoint_config([DOWN], retry=FAST_RETRY)
    async with Worker(config):
        await publish(config, events)
        assert await wait_depth(config, names.dlq(config.broker.prefix, "down"), len(events), 20) == len(events)
    return config


def events_of_two_types(count: int) -> list[Event]:
    return [Event(type="order.paid" if i % 5 else "order.refunded", data={"i": i}, key=f"k{i}") for i in range(count)]


async def test_exhausted_events_listed_with_filters_and_nothing_moves(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given 50 events exhausted on a failing endpoint (2 attempts each)
    events = events_of_two_types(50)
    config = await exhaust(endpoint_config, receiver, publish, events)
    dlq = names.dlq(config.broker.prefix, "down")
    before = await peek_ids(config, dlq)
    # When the DLQ is listed, filtered several ways
    connection = await aio_pika.connect(config.broker.url)
    try:
        letters, depth = await browse(connection, dlq)
    finally:
        await connection.close()
    refunds = select(letters, Selection(types=("order.refunded",)))
    newest_three = select(letters, Selection(limit=3), newest_first=True)
    since_first = select(letters, Selection(since_ms=letters[10].dead_ms))
    none_yet = select(letters, Selection(until_ms=letters[0].dead_ms))
    # Then every letter tells its story, and the filters pick what they say
    assert depth == 50 and len(letters) == 50
    assert {letter.event_id for letter in letters} == {e.id for e in events}
    first = letters[0]
    assert first.attempts == 2 and first.last_status == 500 and first.endpoint == "down"
    assert first.dead_reason is not None and "max_attempts" in first.dead_reason
    assert [h["status"] for h in first.history] == [500, 500]
    assert first.first_attempt_ms is not None and first.dead_ms is not None
    assert first.first_attempt_ms <= first.dead_ms
    assert {letter.event_type for letter in refunds} == {"order.refunded"} and len(refunds) == 10
    assert [letter.position for letter in newest_three] == [49, 48, 47]
    assert len(since_first) >= 40 and none_yet == []
    # And the DLQ holds the same messages in the same order after two reads
    assert await peek_ids(config, dlq) == before == [letter.event_id for letter in letters]
    assert await wait_depth(config, dlq, 50) == 50


async def test_replay_all_through_the_shovel_after_the_fix(
    endpoint_config: Any, receiver: Receiver, publish: Any, management: Any
) -> None:
    # Given 50 events in the DLQ after two failed attempts each
    events = events_of_two_types(50)
    config = await exhaust(endpoint_config, receiver, publish, events)
    prefix = config.broker.prefix
    # And a receiver now fixed, except that it fails every event's first attempt after the fix: delivery then
    # needs a second attempt, which only a fresh retry budget allows (the old one, 2, is spent)
    failed_once: set[str] = set()

    def fixed_after_one_failure(r: Receiver, request: Any, body: bytes) -> Reply:
        event_id = request.headers["webhook-id"]
        if event_id not in failed_once:
            failed_once.add(event_id)
            return Reply(503)
        return Reply(200)

    receiver.behaviour = fixed_after_one_failure
    progress: list[tuple[int, int]] = []
    # When the whole DLQ is replayed through the shovel, with a worker running
    async with Worker(config):
        connection = await aio_pika.connect(config.broker.url)
        try:
            report = await replay_by_shovel(
                connection, management, prefix, "down", timeout=30, on_progress=lambda m, t: progress.append((m, t))
            )
        finally:
            await connection.close()
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 50, 20)
    # Then all 50 were moved and delivered, the DLQ is empty and the shovel is gone
    assert report.moved == 50 and not report.resumed
    assert receiver.ok_ids() == {e.id for e in events}
    assert await wait_depth(config, names.dlq(prefix, "down"), 0) == 0
    assert report.name and await management.shovel_status(report.name) is None
    assert await management.request("GET", f"parameters/shovel/{management.vhost}", allow_404=True) in ([], None)
    assert progress and progress[-1] == (50, 50)


async def test_replay_a_filtered_subset_client_side(endpoint_config: Any, receiver: Receiver, publish: Any) -> None:
    # Given 50 dead letters, 10 of them refunds
    events = events_of_two_types(50)
    config = await exhaust(endpoint_config, receiver, publish, events)
    prefix = config.broker.prefix
    dlq = names.dlq(prefix, "down")
    rest_before = [i for i in await peek_ids(config, dlq) if i not in {e.id for e in events if "refund" in e.type}]
    receiver.behaviour = always(200)
    # When only the refunds are replayed (client-side, confirmed), with a worker running
    async with Worker(config):
        connection = await aio_pika.connect(config.broker.url)
        try:
            report = await move_selected(connection, prefix, "down", Selection(types=("order.refunded",)))
        finally:
            await connection.close()
        await receiver.wait_for(lambda r: len(r.ok_ids()) >= 10, 10)
    # Then exactly those 10 were delivered, once each, and the other 40 wait in the DLQ in their order: the
    # worker has stopped (what it held finished or went back), and its queue is empty, so nothing else was moved
    refunds = {e.id for e in events if e.type == "order.refunded"}
    assert report.moved == 10 and {letter.event_id for letter in report.chosen} == refunds
    assert sorted(r.event_id for r in receiver.received if r.status == 200) == sorted(refunds)
    assert await message_count(config, names.work_queue(prefix, "down")) == 0
    assert await peek_ids(config, dlq) == rest_before


async def test_a_replayed_copy_is_marked_and_keeps_its_story(endpoint_config: Any) -> None:
    # Given one dead letter on an endpoint with no worker running
    config = await endpoint_config([DOWN], retry=FAST_RETRY)
    event = Event(type="order.paid", data={}, key="acct-7")
    await seed_dead_letters(config, "down", [event])
    # When it is replayed client-side
    connection = await aio_pika.connect(config.broker.url)
    try:
        await move_selected(connection, config.broker.prefix, "down", Selection(ids=frozenset({event.id})))
    finally:
        await connection.close()
    [copy] = await drain(config, names.work_queue(config.broker.prefix, "down"))
    # Then the copy carries the replay marker, its key and history, and no broker bookkeeping of its DLQ days
    # (a quorum queue adds its own x-delivery-count on every delivery: 0 means none was carried over)
    headers = copy.headers or {}
    assert copy.message_id == event.id and copy.type == "order.paid"
    assert isinstance(headers[wire.H_REPLAYED], int)
    assert headers[wire.H_KEY] == "acct-7" and wire.H_HISTORY in headers
    assert not {"x-death", wire.H_SHOVELLED} & set(headers)
    assert headers.get("x-delivery-count", 0) == 0


@pytest.mark.parametrize("window", [DEFAULT_WINDOW, 1], ids=["window", "one-confirm-at-a-time"])
async def test_a_replay_acks_its_dlq_copies_in_a_few_multiple_acks(
    endpoint_config: Any, monkeypatch: pytest.MonkeyPatch, window: int
) -> None:
    # Given 500 dead letters. A quorum queue's channel sends at most 32 commands to the queue at a time and drops
    # what it held back when it closes: acked one by one, the last copies of a replay could come back although
    # acked (31 of an interrupted replay's did, on a loaded machine). Each ack frame is one command. A window of
    # one publish makes the confirms trickle in one at a time, as a loaded machine does (2 ms ack batches then
    # held about two letters each: 254 frames).
    config = await endpoint_config([DOWN], retry=FAST_RETRY)
    prefix = config.broker.prefix
    events = [Event(type="order.paid", data={"i": i}) for i in range(500)]
    await seed_dead_letters(config, "down", events)
    frames: list[tuple[int, bool]] = []
    real_ack = aiormq.Channel.basic_ack

    async def counted(self: aiormq.Channel, delivery_tag: int, multiple: bool = False, **kw: Any) -> Any:
        frames.append((delivery_tag, multiple))
        return await real_ack(self, delivery_tag, multiple=multiple, **kw)

    monkeypatch.setattr(aiormq.Channel, "basic_ack", counted)
    # When all of them are replayed client-side
    connection = await aio_pika.connect(config.broker.url)
    try:
        started = time.monotonic()
        report = await move_selected(connection, prefix, "down", Selection(types=("#",)), window=window)
        elapsed = time.monotonic() - started
    finally:
        await connection.close()
    # Then every one moved, with far fewer ack frames than letters (most of them multiple acks), none left behind:
    # at most one batch per REPLAY_ACK_DELAY however slowly the confirms come, one per REPLAY_ACK_BATCH letters
    # however fast, plus the closing flush
    assert report.moved == 500
    assert len(frames) <= elapsed / REPLAY_ACK_DELAY + 500 / REPLAY_ACK_BATCH + 5, (elapsed, frames)
    assert sum(multiple for _, multiple in frames) >= len(frames) // 2, frames
    if window == DEFAULT_WINDOW:
        assert len(frames) <= 250, frames
    assert await wait_depth(config, names.dlq(prefix, "down"), 0) == 0


async def test_an_interrupted_client_side_replay_loses_nothing(endpoint_config: Any) -> None:
    # Given 300 dead letters and no worker (replayed copies wait in the work queue, where they can be counted)
    config = await endpoint_config([DOWN], retry=FAST_RETRY)
    prefix = config.broker.prefix
    dlq = names.dlq(prefix, "down")
    events = [Event(type="order.paid", data={"i": i}) for i in range(300)]
    await seed_dead_letters(config, "down", events)
    # When a filtered replay is cancelled once 100 messages moved, then run again to the end
    connection = await aio_pika.connect(config.broker.url)
    try:
        moved = 0
        task: asyncio.Task[Any]

        def count(_: Any) -> None:
            nonlocal moved
            moved += 1
            if moved == 100:
                task.cancel()

        everything = Selection(types=("#",))
        task = asyncio.create_task(move_selected(connection, prefix, "down", everything, window=8, on_moved=count))
        with pytest.raises(asyncio.CancelledError):
            await task
        # (the publishes already sent when it was cancelled finish first: a few past 100 moved)
        assert 100 <= moved <= 150
        # The messages the cancelled pass held come back to the DLQ a moment after its channel closed
        assert await wait_depth(config, dlq, 300 - moved) == 300 - moved
        second = await move_selected(connection, prefix, "down", everything)
    finally:
        await connection.close()
    copies = [m.message_id for m in await drain(config, names.work_queue(prefix, "down"))]
    # Then every event is back for delivery exactly once, and the DLQ is empty
    assert second.moved == 300 - moved
    assert sorted(copies) == sorted(e.id for e in events)
    assert await wait_depth(config, dlq, 0) == 0


@pytest.mark.timeout(120)
async def test_an_interrupted_shovel_replay_is_found_and_finished(endpoint_config: Any, management: Any) -> None:
    # Given 2,000 dead letters and the replay shovel an interrupted run left at work: the product's definition
    # with one message in flight at a time, so that it is still moving when the runs below look (at full
    # prefetch a busy machine's shovel finished before the second run looked, and the resume went untested)
    config = await endpoint_config([DOWN], retry=FAST_RETRY)
    prefix = config.broker.prefix
    events = [Event(type="order.paid", data={"i": i}) for i in range(2000)]
    await seed_dead_letters(config, "down", events)
    left = shovel_name(prefix, "down")
    slow = {"src-prefetch-count": 1}
    dlq, exchange = names.dlq(prefix, "down"), names.endpoint_exchange(prefix, "down")
    await management.put_shovel(left, shovel_definition(management.vhost, dlq, exchange) | slow)
    connection = await aio_pika.connect(config.broker.url)
    try:
        # and a replay command, which finds it, cancelled as soon as it looked
        looked: list[tuple[int, int]] = []
        task = asyncio.create_task(
            replay_by_shovel(connection, management, prefix, "down", on_progress=lambda m, t: looked.append((m, t)))
        )
        await wait_until(lambda: bool(looked), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # When the replay is run again
        report = await replay_by_shovel(connection, management, prefix, "down", timeout=60)
    finally:
        await connection.close()
    copies = [m.message_id for m in await drain(config, names.work_queue(prefix, "down"))]
    # Then the cancelled run left the shovel at work, the second run found it and watched it to its end,
    # every letter is back exactly once, and no shovel is left
    assert looked and looked[-1][0] < looked[-1][1]
    assert (report.resumed, report.name, report.remaining) == (True, left, 0)
    assert sorted(copies) == sorted(e.id for e in events)
    assert await management.shovel_status(left) is None


async def test_purge_reports_the_count(endpoint_config: Any) -> None:
    config = await endpoint_config([DOWN], retry=FAST_RETRY)
    await seed_dead_letters(config, "down", [Event(type="a.b", data={}) for _ in range(17)])
    connection = await aio_pika.connect(config.broker.url)
    try:
        purged = await purge_dlq(connection, config.broker.prefix, "down")
        again = await purge_dlq(connection, config.broker.prefix, "down")
    finally:
        await connection.close()
    assert (purged, again) == (17, 0)


async def test_shovel_replay_of_an_ordered_endpoint_rehashes_into_each_keys_partition(
    endpoint_config: Any, publish: Any, management: Any
) -> None:
    # Given an ordered endpoint with 4 partitions, no worker, and where fresh events of 12 keys land
    config = await endpoint_config([{"name": "ledger", "ordering": "key", "partitions": 4}], retry=FAST_RETRY)
    prefix = config.broker.prefix
    keys = [f"acct{i}" for i in range(12)]
    fresh = [Event(type="x.y", data={}, key=k) for k in keys]
    await publish(config, fresh)
    home = await partitions_by_key(config, prefix, key_of_message)
    # When dead letters of the same keys are replayed through the shovel
    dead = [Event(type="x.y", data={"n": n}, key=k) for n in range(3) for k in keys]
    await seed_dead_letters(config, "ledger", dead)
    connection = await aio_pika.connect(config.broker.url)
    try:
        report = await replay_by_shovel(connection, management, prefix, "ledger", timeout=30)
    finally:
        await connection.close()
    replayed = await partitions_by_key(config, prefix, key_of_message, multi=True)
    # Then each replayed message sits in the partition its key hashes to, like a fresh event of that key
    assert report.moved == 36
    assert len(set(home.values())) > 1  # the keys spread over several partitions
    assert set(replayed) == set(keys)
    assert all(replayed[k] == {home[k]} for k in keys)


def key_of_message(message: Any) -> str:
    return str((message.headers or {})[wire.H_KEY])


async def partitions_by_key(
    config: WarrenConfig, prefix: str, key_of: Callable[[Any], str], multi: bool = False
) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for index in range(4):
        for message in await drain(config, names.partition_queue(prefix, "ledger", index), quiet=0.1):
            if multi:
                found.setdefault(key_of(message), set()).add(index)
            else:
                found[key_of(message)] = index
    return found
