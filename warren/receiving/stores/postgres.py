"""The production store: PostgreSQL through an asyncpg pool, safe for many consumers on many hosts.

Concurrency comes from the database, not from locks in the process:

- the id is claimed with ``INSERT ... ON CONFLICT`` first thing in the transaction; a second transaction
  claiming the same id blocks on the uncommitted row, then finds it committed (a duplicate) or rolled
  back (its turn to apply);
- the key's sequence row is created if missing and read ``FOR UPDATE``, so deliveries of one key are
  serialised and an older sequence arriving late is seen as stale.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import asyncpg

from warren.receiving.errors import StoreError
from warren.receiving.stores.base import SEEN_TABLE, SEQUENCES_TABLE

__all__ = ["PostgresStore", "PostgresTransaction"]

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


def _table_statements(seen: str, sequences: str) -> tuple[str, ...]:
    return (
        f"""CREATE TABLE IF NOT EXISTS {seen} (
            scope TEXT NOT NULL,
            event_id TEXT NOT NULL,
            outcome TEXT NOT NULL,
            seen_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (scope, event_id)
        )""",
        f"CREATE INDEX IF NOT EXISTS {SEEN_TABLE}_expiry ON {seen} (expires_at)",
        f"""CREATE TABLE IF NOT EXISTS {sequences} (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            last_seq BIGINT,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (scope, key)
        )""",
    )


class PostgresTransaction:
    """An open transaction on a connection taken from the pool."""

    def __init__(self, connection: asyncpg.Connection, seen: str, sequences: str) -> None:
        self._connection = connection
        self._seen = seen
        self._sequences = sequences

    @property
    def kind(self) -> Literal["postgresql"]:
        return "postgresql"

    @property
    def connection(self) -> asyncpg.Connection:
        return self._connection

    async def execute(self, sql: str, *args: Any) -> None:
        await self._connection.execute(sql, *args)

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return [tuple(record) for record in await self._connection.fetch(sql, *args)]

    async def mark_seen(self, scope: str, event_id: str, now: float, expires_at: float) -> bool:
        # An expired row that the purge has not reached yet is taken over, not treated as seen.
        claimed = await self._connection.fetchval(
            f"""INSERT INTO {self._seen} AS s (scope, event_id, outcome, seen_at, expires_at)
                VALUES ($1, $2, 'applied', $3, $4)
                ON CONFLICT (scope, event_id) DO UPDATE
                  SET outcome = 'applied', seen_at = EXCLUDED.seen_at, expires_at = EXCLUDED.expires_at
                  WHERE s.expires_at <= EXCLUDED.seen_at
                RETURNING true""",
            scope,
            event_id,
            now,
            expires_at,
        )
        return bool(claimed)

    async def mark_stale(self, scope: str, event_id: str) -> None:
        await self._connection.execute(
            f"UPDATE {self._seen} SET outcome = 'stale' WHERE scope = $1 AND event_id = $2", scope, event_id
        )

    async def lock_last_seq(self, scope: str, key: str) -> int | None:
        # Create the row if needed so that there is something to lock even for a key's first event.
        await self._connection.execute(
            f"""INSERT INTO {self._sequences} (scope, key, last_seq, updated_at) VALUES ($1, $2, NULL, 0)
                ON CONFLICT (scope, key) DO NOTHING""",
            scope,
            key,
        )
        value = await self._connection.fetchval(
            f"SELECT last_seq FROM {self._sequences} WHERE scope = $1 AND key = $2 FOR UPDATE", scope, key
        )
        return None if value is None else int(value)

    async def set_last_seq(self, scope: str, key: str, sequence: int, now: float) -> None:
        await self._connection.execute(
            f"""INSERT INTO {self._sequences} (scope, key, last_seq, updated_at) VALUES ($1, $2, $3, $4)
                ON CONFLICT (scope, key) DO UPDATE
                  SET last_seq = EXCLUDED.last_seq, updated_at = EXCLUDED.updated_at""",
            scope,
            key,
            sequence,
            now,
        )


class PostgresStore:
    """``PostgresStore("postgresql://user@host/db", schema="inbox")``; tables are created in ``schema``."""

    def __init__(self, dsn: str, *, schema: str = "public", min_size: int = 1, max_size: int = 10) -> None:
        if not _IDENTIFIER.fullmatch(schema):
            raise StoreError(f"{schema!r} is not a plain lowercase schema name")
        self.dsn = dsn
        self.schema = schema
        self._seen = f'"{schema}".{SEEN_TABLE}'
        self._sequences = f'"{schema}".{SEQUENCES_TABLE}'
        self._min_size = min_size
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None

    @property
    def kind(self) -> Literal["postgresql"]:
        return "postgresql"

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            pool = await asyncpg.create_pool(self.dsn, min_size=self._min_size, max_size=self._max_size)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(f"cannot connect to the PostgreSQL store: {exc}") from exc
        try:
            async with pool.acquire() as connection, connection.transaction():
                # Two processes starting together may race to create the tables; serialise them.
                await connection.execute("SELECT pg_advisory_xact_lock(hashtext('warren-inbox-schema'))")
                # Only when missing: CREATE SCHEMA needs a privilege on the database even with IF NOT EXISTS.
                if not await connection.fetchval("SELECT true FROM pg_namespace WHERE nspname = $1", self.schema):
                    await connection.execute(f'CREATE SCHEMA "{self.schema}"')
                for statement in _table_statements(self._seen, self._sequences):
                    await connection.execute(statement)
        except asyncpg.PostgresError as exc:
            await pool.close()
            raise StoreError(f"cannot create the inbox tables in schema {self.schema!r}: {exc}") from exc
        self._pool = pool

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def _p(self) -> asyncpg.Pool:
        if self._pool is None:
            raise StoreError("the store is not open (call open() first)")
        return self._pool

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PostgresTransaction]:
        async with self._p().acquire() as connection, connection.transaction():
            yield PostgresTransaction(connection, self._seen, self._sequences)

    async def seen(self, scope: str, event_id: str, now: float) -> bool:
        found = await self._p().fetchval(
            f"SELECT true FROM {self._seen} WHERE scope = $1 AND event_id = $2 AND expires_at > $3",
            scope,
            event_id,
            now,
        )
        return bool(found)

    async def outcome(self, scope: str, event_id: str) -> str | None:
        value = await self._p().fetchval(
            f"SELECT outcome FROM {self._seen} WHERE scope = $1 AND event_id = $2", scope, event_id
        )
        return None if value is None else str(value)

    async def last_seq(self, scope: str, key: str) -> int | None:
        value = await self._p().fetchval(
            f"SELECT last_seq FROM {self._sequences} WHERE scope = $1 AND key = $2", scope, key
        )
        return None if value is None else int(value)

    async def purge_expired(self, now: float, limit: int) -> int:
        # SKIP LOCKED: rows a live transaction is taking over are left for the next round, never waited on.
        status = await self._p().execute(
            f"""DELETE FROM {self._seen} AS s USING (
                  SELECT scope, event_id FROM {self._seen} WHERE expires_at <= $1
                  ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS old
                WHERE s.scope = old.scope AND s.event_id = old.event_id""",
            now,
            limit,
        )
        return int(str(status).rsplit(" ", 1)[-1])
