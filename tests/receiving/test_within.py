"""The dedup write inside the application's own SQLAlchemy transaction (``process(..., within=...)``).

The application commits its writes and the event's record together, or rolls both back; on the real SQLite
file and the real PostgreSQL, through an ``AsyncConnection`` and through an ``AsyncSession``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from tests.support.postgres import fresh_schema_name, postgres_or_skip
from warren.receiving import IdempotentConsumer, Outcome
from warren.receiving.stores.base import Store, Transaction
from warren.receiving.stores.postgres import PostgresStore
from warren.receiving.stores.sqlite import SqliteStore
from warren.store.engine import open_engine

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", "postgresql"])
async def app(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[Store, AsyncEngine, str]]:
    """The toolkit's store, the application's own engine on the same database, and its table's name."""
    if request.param == "sqlite":
        path = tmp_path / "app.sqlite3"
        store: Store = SqliteStore(path)
        engine = open_engine(f"sqlite:///{path}", serialised=True)
        table = "orders"
    else:
        dsn = await postgres_or_skip()
        schema = fresh_schema_name()
        store = PostgresStore(dsn, schema=schema, max_size=2)
        engine = open_engine(dsn, dsn_as_is=True)
        table = f'"{schema}".orders'
    await store.open()  # migrates the toolkit's tables
    async with engine.begin() as connection:
        await connection.execute(text(f"CREATE TABLE {table} (event_id TEXT PRIMARY KEY)"))
    try:
        yield store, engine, table
    finally:
        await store.close()
        if request.param == "postgresql":
            async with engine.begin() as connection:
                await connection.execute(text(f'DROP SCHEMA "{store.schema}" CASCADE'))  # type: ignore[attr-defined]
        await engine.dispose()


def _insert(table: str, event_id: str):  # type: ignore[no-untyped-def]
    async def effect(tx: Transaction) -> None:
        await tx.execute(f"INSERT INTO {table} (event_id) VALUES ($1)", event_id)

    return effect


async def test_the_record_commits_with_the_applications_connection(app: tuple[Store, AsyncEngine, str]) -> None:
    store, engine, table = app
    consumer = IdempotentConsumer(store, "shop")
    # Given the application's transaction, When the event is processed inside it and committed
    async with engine.begin() as connection:
        assert await consumer.process("e1", _insert(table, "e1"), within=connection) is Outcome.APPLIED
    # Then the effect and the record are both there: a redelivery is a duplicate
    assert await store.seen("shop", "e1", 0)
    async with engine.begin() as connection:
        assert await consumer.process("e1", _insert(table, "e1"), within=connection) is Outcome.DUPLICATE
        assert (await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one() == 1


async def test_a_rolled_back_session_leaves_the_event_unseen(app: tuple[Store, AsyncEngine, str]) -> None:
    store, engine, table = app
    consumer = IdempotentConsumer(store, "shop")
    # Given a session whose transaction the application rolls back after processing
    async with AsyncSession(engine) as session:
        assert await consumer.process("e2", _insert(table, "e2"), within=session) is Outcome.APPLIED
        await session.rollback()
    # Then neither the effect nor the record stayed, and the redelivery applies it
    assert not await store.seen("shop", "e2", 0)
    async with AsyncSession(engine) as session:
        assert await consumer.process("e2", _insert(table, "e2"), within=session) is Outcome.APPLIED
        await session.commit()
    assert await store.seen("shop", "e2", 0)
    async with engine.connect() as connection:
        assert (await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one() == 1


async def test_sequences_hold_inside_the_applications_transaction(app: tuple[Store, AsyncEngine, str]) -> None:
    store, engine, table = app
    consumer = IdempotentConsumer(store, "shop")
    async with engine.begin() as connection:
        first = await consumer.process("e3", _insert(table, "e3"), key="k", sequence=2, within=connection)
        older = await consumer.process("e4", _insert(table, "e4"), key="k", sequence=1, within=connection)
    assert (first, older) == (Outcome.APPLIED, Outcome.STALE)
    assert await store.last_seq("shop", "k") == 2
    assert await store.outcome("shop", "e4") == "stale"
