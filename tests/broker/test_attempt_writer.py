"""The attempt-log writer against a real RabbitMQ and each store: what workers publish is stored once, malformed
batches are moved aside with their reason, a store outage loses nothing, and retention purges old records."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import orjson
import pytest

from tests.support.attempts import T0, attempt, delivered, publish
from tests.support.dead_letters import wait_depth
from tests.support.health import message_count, wait_until
from tests.support.store import store_postgres, store_url
from tests.support.tcp_proxy import TcpProxy
from tests.support.topology import declare
from warren.api.attempt_writer import REJECTED_HEADER, AttemptWriter
from warren.store.attempt_records import AttemptEntry, encode_batch
from warren.store.attempts import AttemptLog
from warren.topology import names
from warren.topology.config import StoreSettings, WarrenConfig

__all__ = ["store_postgres", "store_url"]

pytestmark = pytest.mark.timeout(45)

StartWriter = Callable[..., Awaitable[AttemptWriter]]


@pytest.fixture
async def start_writer() -> AsyncIterator[StartWriter]:
    """``await start_writer(config, url, **knobs)``: a writer on its own store log, consuming; stopped after."""
    running: list[asyncio.Task[None]] = []

    async def start(config: WarrenConfig, url: str, **knobs: object) -> AttemptWriter:
        settings = StoreSettings(url=url, attempt_retention=config.store.attempt_retention)
        knobs = {"backoff": (0.05, 0.2), **knobs}

        async def open_log() -> AttemptLog:
            return await AttemptLog.open(settings)

        writer = AttemptWriter(config, open_log, close_log=AttemptLog.close, **knobs)  # type: ignore[arg-type]
        running.append(asyncio.create_task(writer.run()))
        await asyncio.wait_for(writer.consuming.wait(), 15)
        return writer

    yield start
    for task in running:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def stored(url: str, event_ids: Sequence[str]) -> list[AttemptEntry]:
    log = await AttemptLog.open(StoreSettings(url=url))
    try:
        return [entry for event_id in event_ids for entry in await log.for_event(event_id)]
    finally:
        await log.close()


@pytest.fixture
async def config(make_config: Callable[..., WarrenConfig]) -> WarrenConfig:
    built = make_config()
    await declare(built)
    return built


async def test_published_batches_are_stored_and_acked(
    config: WarrenConfig, store_url: str, start_writer: StartWriter
) -> None:
    # Given a running writer
    writer = await start_writer(config, store_url)
    # When 40 batches of 1 to 10 records are published (events with 1 to 3 attempts, some at a second endpoint)
    batches = [
        [
            (delivered if n == size - 1 else attempt)(event_id=f"evt_{b}_{n % 3}", attempt=n // 3 + 1, at=T0 + n)
            for n in range(size)
        ]
        for b, size in enumerate([1 + i % 10 for i in range(40)])
    ]
    await publish(config, [encode_batch(batch) for batch in batches])
    # Then every record is stored once, and every message acked (none left on the queue)
    total = sum(len(b) for b in batches)
    await wait_until(lambda: writer.stats.messages == 40, 20, "40 messages stored and acked")
    assert writer.stats.stored == total and writer.stats.duplicates == 0
    event_ids = sorted({e.event_id for batch in batches for e in batch})
    assert sorted(e.id for e in await stored(store_url, event_ids)) == sorted(e.id for b in batches for e in b)
    assert await message_count(config, writer.queue) == 0


async def test_a_batch_delivered_twice_is_stored_once(
    config: WarrenConfig, store_url: str, start_writer: StartWriter
) -> None:
    # Given a batch published twice (a worker's publish retried, or the writer died between commit and ack)
    batch = [attempt(event_id="evt_twice"), delivered(event_id="evt_twice", attempt=2, at=T0 + 1)]
    body = encode_batch(batch)
    writer = await start_writer(config, store_url)
    await publish(config, [body, body])
    # Then both messages are acked and each record stored once
    await wait_until(lambda: writer.stats.messages == 2, 15, "both messages acked")
    assert (writer.stats.stored, writer.stats.duplicates) == (2, 2)
    assert await stored(store_url, ["evt_twice"]) == batch


async def test_a_malformed_batch_is_moved_to_the_rejected_queue_with_its_reason(
    config: WarrenConfig, store_url: str, start_writer: StartWriter, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a good batch between two malformed ones (not JSON; an unknown outcome)
    good = [attempt(event_id="evt_good")]
    unknown = orjson.dumps({"v": 1, "attempts": [{**orjson.loads(encode_batch(good))["attempts"][0], "outcome": "?"}]})
    writer = await start_writer(config, store_url)
    await publish(config, [b"not json at all", encode_batch(good), unknown])
    # Then the good one is stored, and the other two wait in the rejected queue, each with its reason
    await wait_until(lambda: writer.stats.messages == 3, 15, "all three messages settled")
    assert writer.stats.rejected == 2 and writer.stats.dropped == 0
    assert await stored(store_url, ["evt_good"]) == good
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        queue = await channel.get_queue(writer.rejected_queue)
        moved = [await queue.get(no_ack=True, timeout=5) for _ in range(2)]
    finally:
        await connection.close()
    assert [m.body for m in moved] == [b"not json at all", unknown]
    reasons = [str((m.headers or {})[REJECTED_HEADER]) for m in moved]
    assert "not JSON" in reasons[0] and "'outcome': unknown '?'" in reasons[1]
    # And each was logged as an error with its reason
    errors = [r.getMessage() for r in caplog.records if r.name == "warren.attempts" and r.levelname == "ERROR"]
    assert len(errors) == 2 and "not JSON" in errors[0]
    assert await message_count(config, writer.queue) == 0


async def test_without_the_rejected_queue_a_malformed_batch_is_dropped_loudly_not_held(
    config: WarrenConfig, store_url: str, start_writer: StartWriter
) -> None:
    # Given a deployment whose rejected queue was never declared (an older `warren setup`)
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel()
        await channel.queue_delete(names.attempts_rejected_queue(config.broker.prefix))
    finally:
        await connection.close()
    writer = await start_writer(config, store_url)
    # When a malformed batch comes before a good one
    await publish(config, [b"[]", encode_batch([attempt(event_id="evt_after")])])
    # Then it is dropped and counted, and the log goes on
    await wait_until(lambda: writer.stats.messages == 2, 15, "both messages settled")
    assert (writer.stats.dropped, writer.stats.rejected, writer.stats.stored) == (1, 0, 1)


def _via(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    return urlunsplit((parts.scheme, f"{netloc[0]}@{host}" if len(netloc) == 2 else host, parts.path, "", ""))


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
async def test_while_the_store_is_down_nothing_is_acked_and_nothing_is_lost(
    config: WarrenConfig, store_url: str, start_writer: StartWriter
) -> None:
    # Given a writer whose PostgreSQL is reached through a proxy the test can cut
    target = urlsplit(store_url).port or 5432
    async with TcpProxy(target) as proxy:
        writer = await start_writer(config, _via(store_url, proxy.port), prefetch=8, batch_messages=4)
        await publish(config, [encode_batch([attempt(event_id="evt_before")])])
        await wait_until(lambda: writer.stats.messages == 1, 15, "the first batch stored")
        # When the store becomes unreachable and 20 batches are published
        await proxy.cut()
        await publish(config, [encode_batch([attempt(event_id=f"evt_down_{i}")]) for i in range(20)])
        # Then the writer keeps failing to store, acks nothing, and takes no more than its prefetch window
        await wait_until(lambda: writer.stats.store_failures >= 3, 15, "three failed tries")
        assert writer.stats.messages == 1
        assert await wait_depth(config, writer.queue, 12) == 12  # 20 published, 8 in the writer's hands
        # When the store is back
        await proxy.restore()
        # Then every batch is stored and acked, and the writer goes on consuming
        await wait_until(lambda: writer.stats.messages == 21, 20, "every batch stored after the outage")
        await publish(config, [encode_batch([attempt(event_id="evt_after")])])
        await wait_until(lambda: writer.stats.messages == 22, 15, "a batch after the outage")
    ids = ["evt_before", "evt_after"] + [f"evt_down_{i}" for i in range(20)]
    assert sorted(e.event_id for e in await stored(store_url, ids)) == sorted(ids)
    assert await message_count(config, writer.queue) == 0


async def test_retention_purges_only_records_older_than_it(
    make_config: Callable[..., WarrenConfig], store_url: str, start_writer: StartWriter
) -> None:
    # Given a retention of one hour, and records of two and three hours ago beside recent ones
    config = make_config(store={"url": store_url, "attempt_retention": "1h"})
    await declare(config)
    now = time.time()
    old = [attempt(event_id="evt_old", attempt=i + 1, at=now - 3600 * (2 + i)) for i in range(2)]
    recent = [attempt(event_id="evt_recent", at=now - 60), delivered(event_id="evt_recent", attempt=2, at=now - 1)]
    log = await AttemptLog.open(StoreSettings(url=store_url))
    try:
        await log.add_many(old + recent)
    finally:
        await log.close()
    # When the writer runs, purging every 100 ms
    writer = await start_writer(config, store_url, purge_interval=0.1)
    # Then the old records go and the recent ones stay
    await wait_until(lambda: writer.stats.purged == 2, 10, "the old records purged")
    assert await stored(store_url, ["evt_old"]) == []
    assert await stored(store_url, ["evt_recent"]) == recent
    assert config.store.attempt_retention == 3600.0
