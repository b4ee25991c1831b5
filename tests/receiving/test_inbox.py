"""Inbound end to end on the real RabbitMQ: receive -> inbound queue -> inbox -> handler, exactly once.

The receiver app serves on 127.0.0.1, the inbox consumes in the same event loop, and the store is a SQLite
file; retries travel through the real delay chain with millisecond delays.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import aio_pika
import orjson
import pytest
from aio_pika.abc import AbstractRobustConnection
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.support import inbox_handlers
from tests.support.declare import declare_plan
from tests.support.effects import create_effects_table, effect_rows
from tests.support.raw_amqp import NotUtf8
from warren.broker import wire
from warren.broker.management import ManagementClient
from warren.receiving.inbox import Inbox
from warren.receiving.receiver import build_receiver_app
from warren.receiving.stores.base import SEEN_TABLE
from warren.receiving.stores.sqlite import SqliteStore
from warren.topology import names
from warren.topology.config import ConfigError, WarrenConfig
from warren.topology.planner import plan_topology

FAST_RETRY = {"base": "50ms", "factor": 2, "cap": "1s", "jitter": "none", "max_attempts": 5}


def _source(name: str, handler: str, **extra: object) -> dict[str, object]:
    return {
        "name": name,
        "verifier": "none",
        "id_field": "id",
        "handler": f"tests.support.inbox_handlers:{handler}",
        **extra,
    }


@dataclass
class Rig:
    config: WarrenConfig
    client: TestClient[web.Request, web.Application]
    inbox: Inbox
    store: SqliteStore
    connection: AbstractRobustConnection

    async def post(self, source: str, payload: dict[str, object]) -> int:
        response = await self.client.post(f"/in/{source}", data=orjson.dumps(payload))
        return response.status

    async def wait_for(self, condition: Callable[[], bool], timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"condition not met in {timeout}s; inbox stats {dict(self.inbox.stats)}")
            await asyncio.sleep(0.01)

    def queue(self, suffix: str) -> str:
        return f"{self.config.broker.prefix}.in.{suffix}"


@pytest.fixture
async def rig(make_config: Callable[..., WarrenConfig], amqp_url: str, tmp_path: Path) -> AsyncIterator[Rig]:
    async with running_rig(make_config, amqp_url, tmp_path) as built:
        yield built


@asynccontextmanager
async def running_rig(
    make_config: Callable[..., WarrenConfig], amqp_url: str, tmp_path: Path, **inbox: object
) -> AsyncIterator[Rig]:
    """The four sources on a real broker, an inbox on SQLite consuming them, a receiver app in front."""
    config = make_config(
        inbound=[
            _source("shop", "record"),
            _source("flaky", "flaky", retry=FAST_RETRY),
            _source("broken", "broken", retry={**FAST_RETRY, "base": "10ms", "max_attempts": 3}),
            _source("refuses", "refuses"),
        ],
        inbox={"concurrency": 4, **inbox},
    )
    connection = await aio_pika.connect_robust(amqp_url)
    await declare_plan(connection, plan_topology(config))
    store = SqliteStore(tmp_path / "inbox.sqlite3")
    await store.open()
    await create_effects_table(store)
    inbox = Inbox(config, store, connection=connection)
    await inbox.start()
    app = build_receiver_app(config, connection=connection)
    async with TestClient(TestServer(app, host="127.0.0.1")) as client:
        yield Rig(config, client, inbox, store, connection)
        await inbox.stop()
    await connection.close()


def new_id() -> str:
    return f"evt_{uuid.uuid4().hex[:12]}"


async def test_the_same_event_posted_ten_times_has_one_effect(rig: Rig) -> None:
    # Given one event, When the provider POSTs it ten times
    event_id = new_id()
    statuses = [await rig.post("shop", {"id": event_id, "total": 10}) for _ in range(10)]
    # Then every POST is accepted, all ten are consumed, and the handler ran once
    assert statuses == [202] * 10
    await rig.wait_for(lambda: rig.inbox.stats["applied"] + rig.inbox.stats["duplicate"] == 10)
    assert rig.inbox.stats["applied"] == 1
    assert len(inbox_handlers.calls("record", event_id)) == 1
    assert [row[0] for row in await effect_rows(rig.store)] == [event_id]


async def test_ten_concurrent_posts_of_one_event_have_one_effect(rig: Rig) -> None:
    event_id = new_id()
    statuses = await asyncio.gather(*(rig.post("shop", {"id": event_id}) for _ in range(10)))
    assert list(statuses) == [202] * 10
    await rig.wait_for(lambda: rig.inbox.stats["applied"] + rig.inbox.stats["duplicate"] == 10)
    assert [row[0] for row in await effect_rows(rig.store)] == [event_id]


async def test_a_handler_failing_twice_is_retried_through_the_delay_chain_and_applied_once(rig: Rig) -> None:
    # Given a handler that fails on its first two attempts (after writing its effect)
    event_id = new_id()
    assert await rig.post("flaky", {"id": event_id}) == 202
    # When the inbox handles it
    await rig.wait_for(lambda: rig.inbox.stats["applied"] == 1)
    # Then it was called three times, with the attempt counted up, waiting 50 ms then 100 ms between
    calls = inbox_handlers.calls("flaky", event_id)
    assert [c.attempt for c in calls] == [0, 1, 2]
    first_wait, second_wait = calls[1].at - calls[0].at, calls[2].at - calls[1].at
    # (plus the transit through the delay chain: a few ms, over a second on a very loaded machine; a message's
    # TTL never expires early, so the lower bounds are the backoff's, and the upper ones only say "not stuck")
    assert 0.045 <= first_wait < 0.05 + 3, first_wait
    assert 0.095 <= second_wait < 0.1 + 3, second_wait
    # And only the successful attempt's effect was committed
    assert await effect_rows(rig.store) == [(event_id, "attempt 2")]
    assert rig.inbox.stats["retried"] == 2


async def test_an_exhausted_event_lands_in_the_dlq_with_its_diagnostics(rig: Rig) -> None:
    event_id = new_id()
    assert await rig.post("broken", {"id": event_id}) == 202
    await rig.wait_for(lambda: rig.inbox.stats["dead"] == 1)
    assert [c.attempt for c in inbox_handlers.calls("broken", event_id)] == [0, 1, 2]
    async with rig.connection.channel() as channel:
        dlq = await channel.get_queue(names.inbound_dlq(rig.config.broker.prefix, "broken"))
        message = await dlq.get(timeout=5)
        await message.ack()
    assert message.message_id == event_id
    assert orjson.loads(message.body) == {"id": event_id}
    headers = message.headers
    assert headers[wire.H_ATTEMPT] == 3
    assert "max_attempts" in str(headers[wire.H_DEAD_REASON])
    assert "always fails" in str(headers[wire.H_LAST_ERROR])
    assert "x-death" not in headers
    assert await effect_rows(rig.store) == []


async def test_a_non_retryable_failure_goes_to_the_dlq_at_once(rig: Rig) -> None:
    event_id = new_id()
    assert await rig.post("refuses", {"id": event_id}) == 202
    await rig.wait_for(lambda: rig.inbox.stats["dead"] == 1)
    assert len(inbox_handlers.calls("refuses", event_id)) == 1
    async with rig.connection.channel() as channel:
        dlq = await channel.get_queue(names.inbound_dlq(rig.config.broker.prefix, "refuses"))
        message = await dlq.get(timeout=5)
        await message.ack()
    assert str(message.headers[wire.H_DEAD_REASON]).startswith("non-retryable")


async def test_a_replayed_event_starts_a_fresh_attempt_budget(rig: Rig) -> None:
    # Given a message back from the DLQ (replay marks it) that had used up its attempts
    event_id = new_id()
    async with rig.connection.channel(publisher_confirms=True) as channel:
        await channel.default_exchange.publish(
            aio_pika.Message(
                orjson.dumps({"id": event_id}),
                message_id=event_id,
                headers={wire.H_ATTEMPT: 5, wire.H_REPLAYED: True, wire.H_SOURCE: "flaky"},
            ),
            routing_key=rig.queue("flaky"),
        )
    # When the inbox handles it, Then the handler sees attempts 0, 1, 2 again and the effect commits once
    await rig.wait_for(lambda: rig.inbox.stats["applied"] == 1)
    assert [c.attempt for c in inbox_handlers.calls("flaky", event_id)] == [0, 1, 2]
    assert await effect_rows(rig.store) == [(event_id, "attempt 2")]


async def test_a_message_without_an_id_is_dead_lettered_not_deduplicated_with_others(
    rig: Rig, management: ManagementClient
) -> None:
    # Given a message published to the inbound queue by hand, without a message_id (aio-pika would add one;
    # the management UI's "publish message" does not)
    await management.request(
        "POST",
        f"exchanges/{quote(management.vhost, safe='')}/amq.default/publish",
        {"properties": {}, "routing_key": rig.queue("shop"), "payload": '{"id": "x"}', "payload_encoding": "string"},
    )
    # When the inbox takes it, Then it goes to the DLQ untouched by the handler
    await rig.wait_for(lambda: rig.inbox.stats["dead"] == 1)
    async with rig.connection.channel() as channel:
        dlq = await channel.get_queue(names.inbound_dlq(rig.config.broker.prefix, "shop"))
        message = await dlq.get(timeout=5)
        await message.ack()
    assert "no message_id" in str(message.headers[wire.H_DEAD_REASON])
    assert await effect_rows(rig.store) == []


def test_an_inbox_for_an_unknown_source_is_a_config_error(make_config: Callable[..., WarrenConfig]) -> None:
    config = make_config(inbound=[_source("shop", "record")])
    with pytest.raises(ConfigError, match="no inbound source named nope"):
        Inbox(config, SqliteStore(":memory:"), sources=["nope"])


async def remembered_ids(store: SqliteStore) -> int:
    async with store.transaction() as tx:
        rows = await tx.fetch(f"SELECT count(*) FROM {SEEN_TABLE}")
    return int(rows[0][0])


async def test_the_periodic_purge_forgets_expired_ids(
    make_config: Callable[..., WarrenConfig], amqp_url: str, tmp_path: Path
) -> None:
    # Given an inbox remembering ids for 300 ms, purging every 200 ms in batches of 2
    retention, interval = 0.3, 0.2
    async with running_rig(
        make_config, amqp_url, tmp_path, retention=f"{retention}s", purge_interval=f"{interval}s", purge_batch=2
    ) as rig:
        # When 5 events are applied
        ids = [new_id() for _ in range(5)]
        for event_id in ids:
            last_posted = time.monotonic()  # the last id is recorded no sooner than this
            assert await rig.post("shop", {"id": event_id}) == 202
        await rig.wait_for(lambda: rig.inbox.stats["applied"] == 5)
        applied_at = time.monotonic()  # ... and no later than this (seen late on a loaded machine)
        # Then, without anyone asking, every id is gone once expired and one purge round later (5 ids, batches
        # of 2: one round deletes them all)
        while (left := await remembered_ids(rig.store)) and time.monotonic() - applied_at < 5:
            await asyncio.sleep(0.02)
        forgotten = time.monotonic()
        # (all 5 were recorded, and deleted by the purge: the first may go before the last is applied, when posting
        # takes longer than the retention, as on a loaded machine; counting them then read 2 of 5. A round counts
        # what it deleted once its last batch is committed, so the count may follow the empty table by a moment:
        # read at once, a round that had deleted 3 and was finishing the other 2 gave 3 of 5 under load)
        assert left == 0
        await rig.wait_for(lambda: rig.inbox.stats["purged"] == 5)
        # Not before the last id expired (counted from its earliest possible record), and within a purge round
        # and some slack of its latest.
        assert forgotten - last_posted >= retention - 0.05, forgotten - last_posted
        assert forgotten - applied_at < retention + interval + 0.5, forgotten - applied_at
        # And an event seen again after its id was forgotten is applied again (what retention trades away)
        assert await rig.post("shop", {"id": ids[0]}) == 202
        await rig.wait_for(lambda: rig.inbox.stats["applied"] == 6)


async def test_header_values_warren_never_wrote_do_not_stop_the_inbox(rig: Rig) -> None:
    # Given messages published to inbound queues by hand: request headers holding bytes that are not UTF-8 (the
    # handler's view decoded them strictly: UnicodeDecodeError), a receive time no date holds (fromtimestamp
    # raised), and an attempt count of 2^63 - 1 (one more is no AMQP header integer: the retry's publish raised
    # TypeError). Each exception escaped the inbox's callback and left the message unacknowledged for good.
    odd, spent = new_id(), new_id()
    headers = {wire.H_REQUEST_HEADERS: {"x-odd": NotUtf8(b"\xff\xfe")}, wire.H_PUBLISHED: 10**18}
    async with rig.connection.channel(publisher_confirms=True) as channel:
        for event_id, source, extra in ((odd, "shop", headers), (spent, "broken", {wire.H_ATTEMPT: 2**63 - 1})):
            message = aio_pika.Message(orjson.dumps({"id": event_id}), message_id=event_id, headers=extra)
            await channel.default_exchange.publish(message, routing_key=rig.queue(source))
    # When the inbox takes them, Then the first is applied and the second dead-lettered as exhausted
    await rig.wait_for(lambda: rig.inbox.stats["applied"] == 1 and rig.inbox.stats["dead"] == 1)
    assert await effect_rows(rig.store) == [(odd, orjson.dumps({"id": odd}).decode())]
    async with rig.connection.channel() as channel:
        dlq = await channel.get_queue(names.inbound_dlq(rig.config.broker.prefix, "broken"))
        letter = await dlq.get(timeout=5)
        await letter.ack()
    assert letter.message_id == spent and letter.headers[wire.H_ATTEMPT] == 2**31 + 1
    assert "max_attempts" in str(letter.headers[wire.H_DEAD_REASON])
