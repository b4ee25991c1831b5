"""The receiving toolkit's processed messages in SQL (SQLAlchemy): the dedup write, inside any transaction.

Two tables (made by the ``receiving`` line of migrations, ``store/engine.py``; in ``schema`` on PostgreSQL):

- ``warren_inbox_seen (scope, event_id) -> outcome, seen_at, expires_at``: ids already handled, kept until
  ``expires_at``; an index on ``expires_at`` lets the purge find old rows without scanning the table.
- ``warren_inbox_sequences (scope, key) -> last_seq``: the highest sequence applied per ordering key.

``SqlTransaction`` runs the bookkeeping on an open ``AsyncConnection``: the store's own, or the user's, so that
the dedup write commits with the user's effect in the user's transaction. ``SqlDedupStore`` is the store over an
engine. The PostgreSQL store of the toolkit keeps a plain asyncpg path (``store/dedup_asyncpg.py``) because
this one costs more than 10% there (bench/README.md, "The receiving dedup store").
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import lru_cache
from typing import Any, Literal

from sqlalchemy import BigInteger, Column, Float, Index, MetaData, Table, Text, delete, select, text, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from warren.store.engine import RECEIVING, migrate_line

__all__ = [
    "SEEN_TABLE",
    "SEQUENCES_TABLE",
    "SqlDedupStore",
    "SqlTransaction",
    "dedup_tables",
    "joined",
    "migrate_dedup",
]

SEEN_TABLE = "warren_inbox_seen"
SEQUENCES_TABLE = "warren_inbox_sequences"
_PLACEHOLDER = re.compile(r"\$(\d+)")


@lru_cache(maxsize=64)
def dedup_tables(schema: str | None = None) -> tuple[Table, Table]:
    """The two tables, in ``schema`` (None: the connection's default)."""
    metadata = MetaData(schema=schema)
    seen = Table(
        SEEN_TABLE,
        metadata,
        Column("scope", Text, primary_key=True),
        Column("event_id", Text, primary_key=True),
        Column("outcome", Text, nullable=False),
        Column("seen_at", Float, nullable=False),
        Column("expires_at", Float, nullable=False),
        Index(f"{SEEN_TABLE}_expiry", "expires_at"),
    )
    sequences = Table(
        SEQUENCES_TABLE,
        metadata,
        Column("scope", Text, primary_key=True),
        Column("key", Text, primary_key=True),
        Column("last_seq", BigInteger),
        Column("updated_at", Float, nullable=False),
    )
    return seen, sequences


async def migrate_dedup(connection: AsyncConnection, schema: str | None = None) -> tuple[str | None, str | None]:
    """Bring the two tables to the latest revision (the caller commits); before, after.

    On PostgreSQL, processes starting together are serialised on an advisory lock, and ``schema`` is created
    when missing (only then: CREATE SCHEMA needs a privilege on the database even with IF NOT EXISTS).
    """
    if connection.dialect.name == "postgresql":
        await connection.execute(text("SELECT pg_advisory_xact_lock(hashtext('warren-inbox-schema'))"))
        if schema is not None:
            found = await connection.scalar(text("SELECT true FROM pg_namespace WHERE nspname = :s"), {"s": schema})
            if not found:
                await connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    return await connection.run_sync(migrate_line, RECEIVING, schema)


class SqlTransaction:
    """The toolkit's ``StoreTransaction`` on an open SQLAlchemy ``AsyncConnection`` (never committed here)."""

    def __init__(self, connection: AsyncConnection, schema: str | None = None) -> None:
        self._connection = connection
        self._seen, self._sequences = dedup_tables(schema)
        self._dialect: Any = postgresql if connection.dialect.name == "postgresql" else sqlite

    @property
    def kind(self) -> Literal["sqlite", "postgresql"]:
        return "postgresql" if self._dialect is postgresql else "sqlite"

    @property
    def connection(self) -> AsyncConnection:
        return self._connection

    def _sql(self, sql: str) -> str:
        # $1 -> ?1 on SQLite (its numbered parameters): handlers write one dialect of placeholders for both.
        return sql if self._dialect is postgresql else _PLACEHOLDER.sub(r"?\1", sql)

    async def execute(self, sql: str, *args: Any) -> None:
        await self._connection.exec_driver_sql(self._sql(sql), args)

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        result = await self._connection.exec_driver_sql(self._sql(sql), args)
        return [tuple(row) for row in result.all()] if result.returns_rows else []

    async def mark_seen(self, scope: str, event_id: str, now: float, expires_at: float) -> bool:
        seen = self._seen
        insert = self._dialect.insert(seen).values(
            scope=scope, event_id=event_id, outcome="applied", seen_at=now, expires_at=expires_at
        )
        # An expired row that the purge has not reached yet is taken over, not treated as seen.
        claim = insert.on_conflict_do_update(
            index_elements=[seen.c.scope, seen.c.event_id],
            set_={"outcome": "applied", "seen_at": insert.excluded.seen_at, "expires_at": insert.excluded.expires_at},
            where=seen.c.expires_at <= insert.excluded.seen_at,
        )
        return (await self._connection.execute(claim)).rowcount == 1

    async def mark_stale(self, scope: str, event_id: str) -> None:
        seen = self._seen
        await self._connection.execute(
            update(seen).where(seen.c.scope == scope, seen.c.event_id == event_id).values(outcome="stale")
        )

    async def lock_last_seq(self, scope: str, key: str) -> int | None:
        sequences = self._sequences
        if self._dialect is postgresql:
            # Create the row if needed so that there is something to lock even for a key's first event. (SQLite:
            # the transaction began IMMEDIATE and holds the database's write lock, so a plain read is stable.)
            await self._connection.execute(
                self._dialect.insert(sequences)
                .values(scope=scope, key=key, last_seq=None, updated_at=0)
                .on_conflict_do_nothing(index_elements=[sequences.c.scope, sequences.c.key])
            )
        value = await self._connection.scalar(
            select(sequences.c.last_seq).where(sequences.c.scope == scope, sequences.c.key == key).with_for_update()
        )
        return None if value is None else int(value)

    async def set_last_seq(self, scope: str, key: str, sequence: int, now: float) -> None:
        sequences = self._sequences
        insert = self._dialect.insert(sequences).values(scope=scope, key=key, last_seq=sequence, updated_at=now)
        await self._connection.execute(
            insert.on_conflict_do_update(
                index_elements=[sequences.c.scope, sequences.c.key],
                set_={"last_seq": insert.excluded.last_seq, "updated_at": insert.excluded.updated_at},
            )
        )


@asynccontextmanager
async def joined(within: AsyncConnection | AsyncSession, schema: str | None = None) -> AsyncIterator[SqlTransaction]:
    """The bookkeeping inside the user's own transaction: the user commits or rolls back, never this."""
    connection = await within.connection() if isinstance(within, AsyncSession) else within
    yield SqlTransaction(connection, schema)


class SqlDedupStore:
    """The toolkit's ``Store`` over a SQLAlchemy engine (the tables in ``schema`` on PostgreSQL)."""

    def __init__(self, engine: AsyncEngine, schema: str | None = None) -> None:
        self.engine = engine
        self.schema = schema
        self._seen, self._sequences = dedup_tables(schema)

    @property
    def kind(self) -> Literal["sqlite", "postgresql"]:
        return "postgresql" if self.engine.dialect.name == "postgresql" else "sqlite"

    async def open(self) -> None:
        async with self.engine.begin() as connection:
            await migrate_dedup(connection, self.schema)

    async def close(self) -> None:
        await self.engine.dispose()

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqlTransaction]:
        async with self.engine.begin() as connection:
            yield SqlTransaction(connection, self.schema)

    async def _one(self, statement: Any) -> Any:
        async with self.engine.connect() as connection:
            return await connection.scalar(statement)

    async def seen(self, scope: str, event_id: str, now: float) -> bool:
        seen = self._seen
        found = select(1).where(seen.c.scope == scope, seen.c.event_id == event_id, seen.c.expires_at > now)
        return await self._one(found) is not None

    async def outcome(self, scope: str, event_id: str) -> str | None:
        seen = self._seen
        value = await self._one(select(seen.c.outcome).where(seen.c.scope == scope, seen.c.event_id == event_id))
        return None if value is None else str(value)

    async def last_seq(self, scope: str, key: str) -> int | None:
        sequences = self._sequences
        value = await self._one(select(sequences.c.last_seq).where(sequences.c.scope == scope, sequences.c.key == key))
        return None if value is None else int(value)

    async def purge_expired(self, now: float, limit: int) -> int:
        seen = self._seen
        # SKIP LOCKED (PostgreSQL): rows a live transaction is taking over are left for the next round.
        oldest = (
            select(seen.c.scope, seen.c.event_id)
            .where(seen.c.expires_at <= now)
            .order_by(seen.c.expires_at)
            .limit(limit)
            .with_for_update(skip_locked=True)
        )
        async with self.engine.begin() as connection:
            result = await connection.execute(delete(seen).where(tuple_(seen.c.scope, seen.c.event_id).in_(oldest)))
        return int(result.rowcount)
