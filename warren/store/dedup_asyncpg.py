"""The receiving toolkit's dedup statements on plain asyncpg: the PostgreSQL store's transaction.

Kept beside the SQLAlchemy path (``store/dedup.py``) because SQLAlchemy costs more than 10% of the events/s here
(bench/dedup_store.py; bench/README.md, "The receiving dedup store"). The tables are the ones the ``receiving``
line of migrations makes; every statement the asyncpg path runs is in this module.

- the id is claimed with ``INSERT ... ON CONFLICT`` first thing in the transaction; a second transaction
  claiming the same id blocks on the uncommitted row, then finds it committed (a duplicate) or rolled
  back (its turn to apply);
- the key's sequence row is created if missing and read ``FOR UPDATE``, so deliveries of one key are
  serialised and an older sequence arriving late is seen as stale.
"""

from __future__ import annotations

from typing import Any, Literal

import asyncpg

__all__ = ["PostgresQueries", "PostgresTransaction"]


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


class PostgresQueries:
    """The store's reads and its purge outside a transaction, on the pool."""

    def __init__(self, seen: str, sequences: str) -> None:
        self._seen = seen
        self._sequences = sequences

    async def seen(self, pool: asyncpg.Pool, scope: str, event_id: str, now: float) -> bool:
        found = await pool.fetchval(
            f"SELECT true FROM {self._seen} WHERE scope = $1 AND event_id = $2 AND expires_at > $3",
            scope,
            event_id,
            now,
        )
        return bool(found)

    async def outcome(self, pool: asyncpg.Pool, scope: str, event_id: str) -> str | None:
        value = await pool.fetchval(
            f"SELECT outcome FROM {self._seen} WHERE scope = $1 AND event_id = $2", scope, event_id
        )
        return None if value is None else str(value)

    async def last_seq(self, pool: asyncpg.Pool, scope: str, key: str) -> int | None:
        value = await pool.fetchval(f"SELECT last_seq FROM {self._sequences} WHERE scope = $1 AND key = $2", scope, key)
        return None if value is None else int(value)

    async def purge_expired(self, pool: asyncpg.Pool, now: float, limit: int) -> int:
        # SKIP LOCKED: rows a live transaction is taking over are left for the next round, never waited on.
        status = await pool.execute(
            f"""DELETE FROM {self._seen} AS s USING (
                  SELECT scope, event_id FROM {self._seen} WHERE expires_at <= $1
                  ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) AS old
                WHERE s.scope = old.scope AND s.event_id = old.event_id""",
            now,
            limit,
        )
        return int(str(status).rsplit(" ", 1)[-1])
