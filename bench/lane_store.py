"""100,000 lane endpoints in the store and the endpoints stream: a worker's start, and routing among them.

Workers learn live endpoints from ``{prefix}.endpoints.log``, never from the store (docs/architecture.md, "Live
apply"), so both are filled as live apply fills them, in bulk: the store's rows (endpoint, tenant, sealed
secret; SQLite and PostgreSQL), and one sealed apply record per endpoint on the endpoints exchange. Each
endpoint is a lane endpoint of a tenant of its own, subscribed to ``scale.*``. Then:

- ``warren worker`` (its router included) is started: seconds to "worker consuming" (after it has read the
  stream, opened every record's secrets and served every endpoint), its RSS and CPU seconds then;
- one tenant's events are published and the delivered rate at a local receiver measured; the same with a
  deployment of ``--baseline`` endpoints (default 10), in the same sitting, for the ratio;
- ``SubscriptionIndex.subscribers`` for one tenant's event, per call, with all of them and with the baseline.

Everything of the prefixes is deleted at the end; a PostgreSQL database of the run's own is dropped.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import asyncpg
from sqlalchemy import insert

from bench.lane_support import (
    SECRET,
    STORE_KEY,
    FirstArrivals,
    cleanup,
    cpu_s,
    free_port,
    lane_config,
    rss_mib,
    run_warren,
    stop,
    wait_for_line,
    warren,
)
from tests.support.processes import write_config
from warren.broker.amqp.connection import connect
from warren.broker.endpoint_records import EndpointRecord
from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.consumers.lane_index import SubscriptionIndex
from warren.store.engine import migrate, open_engine
from warren.store.keys import sealer_from
from warren.store.tables import EndpointRow, SecretRow, TenantRow
from warren.topology import names
from warren.topology.config import Endpoint

BATCH = 1000


def endpoints(count: int, url: str) -> list[Endpoint]:
    return [
        Endpoint(name=f"e{i}", tenant=f"t{i}", url=f"{url}/e{i}", events=["scale.*"], secret=SECRET, home="lane")
        for i in range(count)
    ]


async def fill_store(url: str, items: list[Endpoint]) -> float:
    """The store's rows for ``items``, as the admin API writes them, in batches; seconds taken."""
    sealer = sealer_from([STORE_KEY])
    engine = open_engine(url)
    started = time.monotonic()
    try:
        await migrate(engine)
        now = time.time()
        for first in range(0, len(items), BATCH):
            batch = items[first : first + BATCH]
            async with engine.begin() as connection:
                await connection.execute(insert(TenantRow), [{"name": e.tenant, "created_at": now} for e in batch])
                await connection.execute(
                    insert(EndpointRow),
                    [
                        {
                            "name": e.name, "tenant": e.tenant, "url": e.url, "events": list(e.events),
                            "options": {"home": "lane"}, "managed_by": "api", "created_at": now, "updated_at": now,
                            "version": 1,
                        }
                        for e in batch
                    ],
                )  # fmt: skip
                await connection.execute(
                    insert(SecretRow),
                    [{"endpoint": e.name, "sealed": sealer.seal(SECRET), "created_at": now} for e in batch],
                )
    finally:
        await engine.dispose()
    return time.monotonic() - started


async def fill_stream(amqp: str, prefix: str, items: list[Endpoint]) -> float:
    """One sealed apply record per endpoint on the endpoints exchange (its stream keeps them); seconds taken."""
    sealer = sealer_from([STORE_KEY])
    started = time.monotonic()
    connection = await aio_pika.connect(amqp)
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(names.endpoints_exchange(prefix), ensure=False)
        for first in range(0, len(items), BATCH):
            records = [EndpointRecord.applying(e, "bench", sealer) for e in items[first : first + BATCH]]
            await asyncio.gather(*(exchange.publish(r.to_message(), routing_key="") for r in records))
    finally:
        await connection.close()
    return time.monotonic() - started


async def route_rate(config: Any, tenant: str, receiver: FirstArrivals, events: int) -> float:
    """Deliveries/s of ``events`` events of one tenant, publish start to the last delivery."""
    before = receiver.count
    connection = await connect(config.broker.urls, name="bench-lane-store")
    try:
        publisher = await Publisher.open(connection, config.broker.prefix)
        started = time.monotonic()
        await publisher.publish_many(Event(type="scale.event", tenant=tenant, data={"n": i}) for i in range(events))
        deadline = started + 120
        while receiver.count - before < events and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        return (receiver.count - before) / (time.monotonic() - started)
    finally:
        await connection.close()


async def one_deployment(count: int, events: int, runs: int, receiver: FirstArrivals) -> list[dict[str, Any]]:
    """``count`` endpoints in the stream (filled once); ``runs`` times: a worker started over them, its figures,
    one tenant's route rate, the worker stopped."""
    prefix = f"ls{uuid.uuid4().hex[:8]}"
    workdir = Path(tempfile.mkdtemp(prefix="warren-lane-store-"))
    config = lane_config(prefix, f"sqlite:///{workdir / 'unused.sqlite3'}", free_port(), 16)
    path = write_config(workdir, config)
    results: list[dict[str, Any]] = []
    try:
        await run_warren("setup", "--config", str(path), log=workdir / "setup.log")
        filled = await fill_stream(config.broker.url, prefix, endpoints(count, receiver.url))
        for run in range(runs):
            out: dict[str, Any] = {"stream_fill_s": filled}
            results.append(out)
            log = workdir / f"worker-{run}.log"
            worker = await warren("worker", "--config", str(path), log=log)
            try:
                out["worker_start_s"] = await wait_for_line(worker, log, b"worker consuming", 600)
                out["worker_rss_mib"] = rss_mib(worker.pid)
                out["worker_cpu_s"] = cpu_s(worker.pid)
                tenant = f"t{count // 2}"
                await route_rate(config, tenant, receiver, 50)  # warm: the first delivery opens the HTTP connection
                out["route_rate"] = await route_rate(config, tenant, receiver, events)
                out["worker_rss_after_mib"] = rss_mib(worker.pid)
            except Exception as exc:  # a run that fails says why; the next one runs
                out["failed"] = f"{type(exc).__name__}: {exc}"[:400]
            finally:
                await stop(worker)
    finally:
        cleaned = await cleanup(prefix)
        for out in results:
            out["cleanup"], out["logs"] = cleaned, str(workdir)
    return results


def index_micro(count: int, calls: int = 20000) -> float:
    """Microseconds per ``subscribers`` call for one tenant's event among ``count`` endpoints."""
    index = SubscriptionIndex(endpoints(count, "http://127.0.0.1:9"))
    tenant = f"t{count // 2}"
    started = time.perf_counter()
    for _ in range(calls):
        index.subscribers(tenant, "scale.event")
    return (time.perf_counter() - started) / calls * 1e6


async def with_database(dsn: str) -> tuple[str, str]:
    """A database of the run's own on ``dsn``'s server: (its URL, its name)."""
    name = f"warren_scale_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(dsn, timeout=10)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment)), name


async def drop_database(dsn: str, name: str) -> None:
    admin = await asyncpg.connect(dsn, timeout=10)
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
