"""The receiving toolkit's dedup store on PostgreSQL: SQLAlchemy's path beside the plain asyncpg one.

    .venv/bin/python bench/dedup_store.py [--runs 5] [--events 4000] [--concurrency 16] [--dsn postgresql://...]

Each event is what ``IdempotentConsumer.process`` does for a delivery: one transaction that claims the id
(``mark_seen``) and writes the handler's effect (one INSERT), committed. Systems, run in turn within each run
(the order rotating), each on a pool of 10 connections, ``--concurrency`` events at once, on the real local
PostgreSQL:

- ``asyncpg store``: ``PostgresStore`` (warren/store/dedup_asyncpg.py);
- ``sqlalchemy store``: ``SqlDedupStore`` on an engine as ``open_engine`` makes it (pool_pre_ping on);
- ``sqlalchemy, no pre-ping``: the same store on an engine without the ping on checkout;
- ``ceiling``: the same two statements on a bare asyncpg pool, no store code at all (the machine's ceiling).

Prints the medians, the runs, and each system's events/s over the asyncpg store's, run by run (the machine is
shared: ratios are taken pair by pair). A benchmark reports; it exits 0 either way.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import asyncpg
from sqlalchemy.ext.asyncio import create_async_engine

from warren.receiving import IdempotentConsumer
from warren.receiving.stores.base import Store, Transaction
from warren.receiving.stores.postgres import PostgresStore
from warren.store.dedup import SqlDedupStore
from warren.store.engine import open_engine

POOL = 10
Setup = Callable[[str, str], Awaitable[tuple[Callable[[str], Awaitable[None]], Callable[[], Awaitable[None]]]]]


async def _store_system(
    store: Store, schema: str
) -> tuple[Callable[[str], Awaitable[None]], Callable[[], Awaitable[None]]]:
    await store.open()
    consumer = IdempotentConsumer(store, "bench")

    async def effect(tx: Transaction) -> None:
        await tx.execute(f'INSERT INTO "{schema}".effects (event_id) VALUES ($1)', "x")

    async def one(event_id: str) -> None:
        await consumer.process(event_id, effect)

    return one, store.close


async def asyncpg_store(
    dsn: str, schema: str
) -> tuple[Callable[[str], Awaitable[None]], Callable[[], Awaitable[None]]]:
    return await _store_system(PostgresStore(dsn, schema=schema, min_size=POOL, max_size=POOL), schema)


async def sqlalchemy_store(
    dsn: str, schema: str
) -> tuple[Callable[[str], Awaitable[None]], Callable[[], Awaitable[None]]]:
    return await _store_system(SqlDedupStore(open_engine(dsn, dsn_as_is=True), schema), schema)


async def sqlalchemy_no_ping(
    dsn: str, schema: str
) -> tuple[Callable[[str], Awaitable[None]], Callable[[], Awaitable[None]]]:
    engine = create_async_engine(
        "postgresql+asyncpg://", async_creator=lambda: asyncpg.connect(dsn), pool_size=POOL, max_overflow=0
    )
    return await _store_system(SqlDedupStore(engine, schema), schema)


async def ceiling(dsn: str, schema: str) -> tuple[Callable[[str], Awaitable[None]], Callable[[], Awaitable[None]]]:
    pool = await asyncpg.create_pool(dsn, min_size=POOL, max_size=POOL)
    claim = (
        f'INSERT INTO "{schema}".warren_inbox_seen (scope, event_id, outcome, seen_at, expires_at) '
        "VALUES ('bench', $1, 'applied', 0, 1e12) ON CONFLICT DO NOTHING"
    )
    write = f'INSERT INTO "{schema}".effects (event_id) VALUES ($1)'

    async def one(event_id: str) -> None:
        async with pool.acquire() as connection, connection.transaction():
            await connection.execute(claim, event_id)
            await connection.execute(write, "x")

    return one, pool.close


SYSTEMS: dict[str, Setup] = {
    "asyncpg store": asyncpg_store,
    "sqlalchemy store": sqlalchemy_store,
    "sqlalchemy, no pre-ping": sqlalchemy_no_ping,
    "ceiling (bare asyncpg)": ceiling,
}


async def measure(setup: Setup, dsn: str, schema: str, events: int, concurrency: int) -> float:
    one, close = await setup(dsn, schema)
    try:
        for i in range(200):  # warm the pool and the statement caches
            await one(f"warm-{uuid.uuid4().hex}-{i}")
        ids = iter([f"{uuid.uuid4().hex}-{i}" for i in range(events)])

        async def worker() -> None:
            for event_id in ids:
                await one(event_id)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return events / (time.perf_counter() - started)
    finally:
        await close()


async def main(args: argparse.Namespace) -> None:
    schema = f"bench_dedup_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(args.dsn)
    try:
        version = await admin.fetchval("SHOW server_version")
        await PostgresStore(args.dsn, schema=schema).open()  # the tables, by the Alembic line
        await admin.execute(f'CREATE TABLE "{schema}".effects (event_id TEXT NOT NULL)')
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"# Warren dedup store · {platform.node()} · {os.cpu_count()} cores · Python {platform.python_version()}"
            f" · PostgreSQL {version} · {args.runs} runs, medians · {args.events} events, {args.concurrency} at once"
            f" · {started} UTC · load average {load}\n"
        )
        names = list(SYSTEMS)
        rates: dict[str, list[float]] = {name: [] for name in names}
        for run in range(args.runs):
            order = names[run % len(names) :] + names[: run % len(names)]
            for name in order:
                rates[name].append(await measure(SYSTEMS[name], args.dsn, schema, args.events, args.concurrency))
                await admin.execute(f'TRUNCATE "{schema}".warren_inbox_seen, "{schema}".effects')
        base = rates["asyncpg store"]
        print("| system | events/s (median) | runs | / asyncpg store (per run) | / ceiling (median) |")
        print("|---|---:|---|---:|---:|")
        for name in names:
            ratios = [mine / theirs for mine, theirs in zip(rates[name], base, strict=True)]
            to_ceiling = [m / c for m, c in zip(rates[name], rates["ceiling (bare asyncpg)"], strict=True)]
            print(
                f"| {name} | {statistics.median(rates[name]):,.0f} | {', '.join(f'{r:,.0f}' for r in rates[name])} |"
                f" {statistics.median(ratios):.2f} ({', '.join(f'{r:.2f}' for r in ratios)}) |"
                f" {statistics.median(to_ceiling):.2f} |"
            )
        print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--events", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=16)
    default_dsn = os.environ.get("WARREN_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--dsn", default=default_dsn)
    asyncio.run(main(parser.parse_args()))
