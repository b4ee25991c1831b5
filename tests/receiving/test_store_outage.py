"""The inbox when its PostgreSQL store is down: each event is retried through the delay chain like any
failure, dead-lettered once its policy runs out, and applied exactly once if the store comes back in time.

"Down" is a TcpProxy in front of the real PostgreSQL, cut: every connection of the store's pool is reset and
new ones are refused. The real server is never touched.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from urllib.parse import urlsplit

import aio_pika
import asyncpg
import orjson
import pytest

from tests.support.declare import declare_plan
from tests.support.effects import create_effects_table, effect_rows, effects_table
from tests.support.postgres import fresh_schema_name, postgres_or_skip
from tests.support.tcp_proxy import TcpProxy, through
from warren.broker import wire
from warren.receiving.inbox import Inbox
from warren.receiving.messages import InboundEvent
from warren.receiving.stores.base import Transaction
from warren.receiving.stores.postgres import PostgresStore
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology

pytestmark = pytest.mark.timeout(30)


def _source(name: str, **retry: object) -> dict[str, object]:
    policy = {"base": "10ms", "factor": 2, "cap": "40ms", "jitter": "none", **retry}
    return {"name": name, "verifier": "none", "id_field": "id", "handler": "tests.support.inbox_handlers:record",
            "retry": policy}  # fmt: skip


async def _publish(connection: aio_pika.abc.AbstractConnection, queue: str, source: str, event_id: str) -> None:
    async with connection.channel(publisher_confirms=True) as channel:
        body = orjson.dumps({"id": event_id})
        message = aio_pika.Message(body, message_id=event_id, headers={wire.H_SOURCE: source})
        await channel.default_exchange.publish(message, routing_key=queue)


async def _wait(condition: Callable[[], bool], inbox: Inbox, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout}s; inbox stats {dict(inbox.stats)}")
        await asyncio.sleep(0.01)


async def test_a_store_that_is_down_is_retried_then_dead_lettered(
    make_config: Callable[..., WarrenConfig], amqp_url: str
) -> None:
    dsn = await postgres_or_skip()
    target = urlsplit(dsn)
    schema = fresh_schema_name()
    # Given an inbox on a PostgreSQL store reached through a proxy: "doomed" gives up after 3 attempts,
    # "patient" after 30 (10 ms, 20 ms, then every 40 ms)
    config = make_config(inbound=[_source("doomed", max_attempts=3), _source("patient", max_attempts=30)])
    connection = await aio_pika.connect(amqp_url)
    proxy = await TcpProxy(target.port or 5432, target.hostname or "127.0.0.1").start()
    store = PostgresStore(through(dsn, proxy.port), schema=schema, min_size=1, max_size=4)
    called: list[str] = []

    async def handler(event: InboundEvent, tx: Transaction) -> None:
        called.append(event.id)
        await tx.execute(f"INSERT INTO {effects_table(store)} (event_id, note) VALUES ($1, 'applied')", event.id)

    inbox = Inbox(config, store, connection=connection, handlers={"doomed": handler, "patient": handler})
    try:
        await declare_plan(connection, plan_topology(config))
        await store.open()
        await create_effects_table(store)
        await inbox.start()
        # When PostgreSQL goes down (for the inbox) and one event arrives for each source
        await proxy.cut()
        doomed, patient = f"evt_{uuid.uuid4().hex[:12]}", f"evt_{uuid.uuid4().hex[:12]}"
        prefix = config.broker.prefix
        await _publish(connection, names.inbound_queue(prefix, "doomed"), "doomed", doomed)
        await _publish(connection, names.inbound_queue(prefix, "patient"), "patient", patient)
        # Then the doomed event is retried twice and dead-lettered with the store's error, the handler never run
        await _wait(lambda: inbox.stats["dead"] == 1 and inbox.stats["retried"] >= 4, inbox)
        async with connection.channel() as channel:
            dlq = await channel.get_queue(names.inbound_dlq(prefix, "doomed"))
            dead = await dlq.get(timeout=5)
            await dead.ack()
        assert dead.message_id == doomed and orjson.loads(dead.body) == {"id": doomed}
        assert dead.headers[wire.H_ATTEMPT] == 3
        assert "max_attempts (3)" in str(dead.headers[wire.H_DEAD_REASON])
        error = str(dead.headers[wire.H_LAST_ERROR])
        assert any(word in error for word in ("Connect", "connection", "refused")), error
        # And once PostgreSQL is back, the patient event (still being retried) is applied, exactly once
        await proxy.restore()
        await _wait(lambda: inbox.stats["applied"] == 1, inbox)
        await _wait(lambda: inbox.stats["dead"] == 1, inbox)  # counted after the DLQ copy is out and acked
        assert called == [patient]
        assert await effect_rows(store) == [(patient, "applied")]
    finally:
        await inbox.stop(grace=1)
        await proxy.cut()
        await connection.close()
        direct = await asyncpg.connect(dsn)
        try:
            await direct.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await direct.close()
