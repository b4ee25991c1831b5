"""The embedded store: one SQLite file through aiosqlite, for a single host.

One connection per store, and one transaction at a time on it (an asyncio lock), because a SQLite
connection has no separate transactions to give to concurrent tasks. Transactions start with
``BEGIN IMMEDIATE``, which takes the database's write lock at once: two processes sharing the file are
serialised by SQLite (waiting up to ``busy_timeout``) instead of failing at commit.
"""

from __future__ import annotations

import asyncio
import re
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import aiosqlite

from warren.receiving.errors import StoreError
from warren.receiving.stores.base import SEEN_TABLE, SEQUENCES_TABLE

__all__ = ["SqliteStore", "SqliteTransaction", "sqlite_path"]

_PLACEHOLDER = re.compile(r"\$(\d+)")
_BUSY_TIMEOUT_MS = 10_000

_SCHEMA = (
    f"""CREATE TABLE IF NOT EXISTS {SEEN_TABLE} (
        scope TEXT NOT NULL,
        event_id TEXT NOT NULL,
        outcome TEXT NOT NULL,
        seen_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (scope, event_id)
    )""",
    f"CREATE INDEX IF NOT EXISTS {SEEN_TABLE}_expiry ON {SEEN_TABLE} (expires_at)",
    f"""CREATE TABLE IF NOT EXISTS {SEQUENCES_TABLE} (
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (scope, key)
    )""",
)


def sqlite_path(url: str) -> str:
    """``sqlite:///relative.db`` -> ``relative.db``; ``sqlite:////abs/x.db`` -> ``/abs/x.db``; ``:memory:``."""
    head = "sqlite:///"
    if not url.startswith(head) or len(url) == len(head):
        raise StoreError(f"{url!r} is not a SQLite store URL (use sqlite:///PATH, sqlite:////ABSOLUTE/PATH)")
    return url[len(head) :]


def _sql(text: str) -> str:
    # $1 -> ?1: SQLite's numbered parameters, so handlers write one dialect of placeholders for both stores.
    return _PLACEHOLDER.sub(r"?\1", text)


class SqliteTransaction:
    """An open ``BEGIN IMMEDIATE`` transaction on the store's connection."""

    def __init__(self, connection: aiosqlite.Connection) -> None:
        self._connection = connection

    @property
    def kind(self) -> Literal["sqlite"]:
        return "sqlite"

    @property
    def connection(self) -> aiosqlite.Connection:
        return self._connection

    async def execute(self, sql: str, *args: Any) -> None:
        await self._connection.execute(_sql(sql), args)

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        async with self._connection.execute(_sql(sql), args) as cursor:
            return [tuple(row) for row in await cursor.fetchall()]

    async def mark_seen(self, scope: str, event_id: str, now: float, expires_at: float) -> bool:
        # An expired row that the purge has not reached yet is taken over, not treated as seen.
        cursor = await self._connection.execute(
            f"""INSERT INTO {SEEN_TABLE} (scope, event_id, outcome, seen_at, expires_at)
                VALUES (?, ?, 'applied', ?, ?)
                ON CONFLICT (scope, event_id) DO UPDATE
                  SET outcome = 'applied', seen_at = excluded.seen_at, expires_at = excluded.expires_at
                  WHERE {SEEN_TABLE}.expires_at <= excluded.seen_at""",
            (scope, event_id, now, expires_at),
        )
        claimed = cursor.rowcount == 1
        await cursor.close()
        return claimed

    async def mark_stale(self, scope: str, event_id: str) -> None:
        await self._connection.execute(
            f"UPDATE {SEEN_TABLE} SET outcome = 'stale' WHERE scope = ? AND event_id = ?", (scope, event_id)
        )

    async def lock_last_seq(self, scope: str, key: str) -> int | None:
        # BEGIN IMMEDIATE already holds the database's write lock: a plain read is stable until commit.
        async with self._connection.execute(
            f"SELECT last_seq FROM {SEQUENCES_TABLE} WHERE scope = ? AND key = ?", (scope, key)
        ) as cursor:
            row = await cursor.fetchone()
        return None if row is None else int(row[0])

    async def set_last_seq(self, scope: str, key: str, sequence: int, now: float) -> None:
        await self._connection.execute(
            f"""INSERT INTO {SEQUENCES_TABLE} (scope, key, last_seq, updated_at) VALUES (?, ?, ?, ?)
                ON CONFLICT (scope, key) DO UPDATE
                  SET last_seq = excluded.last_seq, updated_at = excluded.updated_at""",
            (scope, key, sequence, now),
        )


class SqliteStore:
    """``SqliteStore("inbox.sqlite3")``; ``":memory:"`` keeps everything in the process (tests)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._connection: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        return cls(sqlite_path(url))

    @property
    def kind(self) -> Literal["sqlite"]:
        return "sqlite"

    async def open(self) -> None:
        if self._connection is not None:
            return
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            # isolation_level=None: the module never opens transactions behind our back; we say BEGIN.
            connection = await aiosqlite.connect(self.path, isolation_level=None)
            await connection.execute(f"PRAGMA busy_timeout = {_BUSY_TIMEOUT_MS}")
            if self.path != ":memory:":
                await connection.execute("PRAGMA journal_mode = WAL")
            for statement in _SCHEMA:
                await connection.execute(statement)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open the SQLite store {self.path}: {exc}") from exc
        self._connection = connection

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    def _conn(self) -> aiosqlite.Connection:
        if self._connection is None:
            raise StoreError("the store is not open (call open() first)")
        return self._connection

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteTransaction]:
        connection = self._conn()
        async with self._lock:
            try:
                await connection.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"SQLite store {self.path}: cannot begin a transaction: {exc}") from exc
            try:
                yield SqliteTransaction(connection)
                await connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    await connection.execute("ROLLBACK")
                raise

    async def _one(self, sql: str, *args: Any) -> Any:
        # Under the lock, so that a read never sees another task's uncommitted writes on the shared connection.
        async with self._lock, self._conn().execute(sql, args) as cursor:
            row = await cursor.fetchone()
        return None if row is None else row[0]

    async def seen(self, scope: str, event_id: str, now: float) -> bool:
        sql = f"SELECT 1 FROM {SEEN_TABLE} WHERE scope = ? AND event_id = ? AND expires_at > ?"
        return await self._one(sql, scope, event_id, now) is not None

    async def outcome(self, scope: str, event_id: str) -> str | None:
        value = await self._one(f"SELECT outcome FROM {SEEN_TABLE} WHERE scope = ? AND event_id = ?", scope, event_id)
        return None if value is None else str(value)

    async def last_seq(self, scope: str, key: str) -> int | None:
        value = await self._one(f"SELECT last_seq FROM {SEQUENCES_TABLE} WHERE scope = ? AND key = ?", scope, key)
        return None if value is None else int(value)

    async def purge_expired(self, now: float, limit: int) -> int:
        async with self._lock:
            cursor = await self._conn().execute(
                f"""DELETE FROM {SEEN_TABLE} WHERE rowid IN (
                      SELECT rowid FROM {SEEN_TABLE} WHERE expires_at <= ? ORDER BY expires_at LIMIT ?)""",
                (now, limit),
            )
            deleted = cursor.rowcount
            await cursor.close()
        return deleted
