"""The ingest idempotency store in one SQLite file (one host; several processes serialise on the file lock)."""

from __future__ import annotations

import asyncio
import sqlite3

import aiosqlite

from warren.api.ingest.idempotency.base import TABLE, Claim, Decision, Row, decide

__all__ = ["SqliteIdempotencyStore"]

_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {TABLE} (
        key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        state TEXT NOT NULL,
        status INTEGER,
        body BLOB,
        claimed_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
    f"CREATE INDEX IF NOT EXISTS {TABLE}_expiry ON {TABLE} (expires_at)",
)
_COLUMNS = "fingerprint, state, status, body, claimed_at, expires_at"


class SqliteIdempotencyStore:
    def __init__(self, path: str) -> None:
        self.path = path
        self._connection: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()  # one transaction at a time on the one connection

    async def open(self) -> None:
        self._connection = await aiosqlite.connect(self.path, isolation_level=None)
        await self._connection.execute("PRAGMA busy_timeout = 10000")
        await self._connection.execute("PRAGMA journal_mode = WAL")
        for statement in _SCHEMA:
            await self._connection.execute(statement)

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    def _conn(self) -> aiosqlite.Connection:
        if self._connection is None:
            raise sqlite3.ProgrammingError("the idempotency store is not open")
        return self._connection

    async def claim(self, key: str, print_: str, now: float, retention: float, stale_before: float) -> Claim:
        conn = self._conn()
        async with self._lock:
            await conn.execute("BEGIN IMMEDIATE")
            try:
                async with conn.execute(f"SELECT {_COLUMNS} FROM {TABLE} WHERE key = ?", (key,)) as cursor:
                    found = await cursor.fetchone()
                claim = decide(Row(*found) if found else None, print_, now, stale_before)
                if claim.decision is Decision.CLAIM:
                    await conn.execute(
                        f"INSERT OR REPLACE INTO {TABLE} (key, {_COLUMNS}) VALUES (?, ?, 'busy', NULL, NULL, ?, ?)",
                        (key, print_, now, now + retention),
                    )
                await conn.execute("COMMIT")
            except BaseException:
                await conn.execute("ROLLBACK")
                raise
        return claim

    async def complete(self, key: str, status: int, body: bytes) -> None:
        async with self._lock:
            await self._conn().execute(
                f"UPDATE {TABLE} SET state = 'done', status = ?, body = ? WHERE key = ?", (status, body, key)
            )

    async def release(self, key: str) -> None:
        async with self._lock:
            await self._conn().execute(f"UPDATE {TABLE} SET state = 'open' WHERE key = ? AND state = 'busy'", (key,))

    async def purge(self, now: float) -> int:
        async with self._lock:
            cursor = await self._conn().execute(f"DELETE FROM {TABLE} WHERE expires_at <= ?", (now,))
            return cursor.rowcount
