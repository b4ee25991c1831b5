"""The embedded store: one SQLite file, for a single host, on the store home's SQLAlchemy dedup store.

One transaction at a time from this process (an asyncio lock), as SQLite writes one at a time anyway.
Transactions start with ``BEGIN IMMEDIATE``, which takes the database's write lock at once: two processes
sharing the file are serialised by SQLite (waiting up to its busy timeout) instead of failing at commit. The
tables are made by the ``receiving`` line of Alembic migrations when the store opens; a file an earlier
release made is adopted as it is.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Literal, TypeVar

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from warren.receiving.errors import StoreError
from warren.store.dedup import SqlDedupStore, SqlTransaction
from warren.store.engine import open_engine

__all__ = ["SqliteStore", "SqliteTransaction", "sqlite_path"]

T = TypeVar("T")

SqliteTransaction = SqlTransaction  # the name an earlier release gave the SQLite store's transaction


def sqlite_path(url: str) -> str:
    """``sqlite:///relative.db`` -> ``relative.db``; ``sqlite:////abs/x.db`` -> ``/abs/x.db``; ``:memory:``."""
    head = "sqlite:///"
    if not url.startswith(head) or len(url) == len(head):
        raise StoreError(f"{url!r} is not a SQLite store URL (use sqlite:///PATH, sqlite:////ABSOLUTE/PATH)")
    return url[len(head) :]


class SqliteStore:
    """``SqliteStore("inbox.sqlite3")``; ``":memory:"`` keeps everything in the process (tests)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._sql: SqlDedupStore | None = None
        self._lock = asyncio.Lock()

    @classmethod
    def from_url(cls, url: str) -> SqliteStore:
        return cls(sqlite_path(url))

    @property
    def kind(self) -> Literal["sqlite"]:
        return "sqlite"

    async def open(self) -> None:
        if self._sql is not None:
            return
        sql = SqlDedupStore(open_engine(f"sqlite:///{self.path}", serialised=True))
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            await sql.open()
        except (OSError, sqlite3.Error, SQLAlchemyError) as exc:
            await sql.close()
            raise StoreError(f"cannot open the SQLite store {self.path}: {exc}") from exc
        self._sql = sql

    async def close(self) -> None:
        if self._sql is not None:
            await self._sql.close()
            self._sql = None

    def _store(self) -> SqlDedupStore:
        if self._sql is None:
            raise StoreError("the store is not open (call open() first)")
        return self._sql

    async def _begun(self) -> AsyncConnection:
        connection = await self._store().engine.connect()
        try:
            await connection.begin()  # BEGIN IMMEDIATE (store/engine.py, serialised)
        except BaseException:
            await connection.close()
            raise
        return connection

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqlTransaction]:
        self._store()
        async with self._lock:
            try:
                connection = await self._begun()
            except (sqlite3.Error, SQLAlchemyError) as exc:
                raise StoreError(f"SQLite store {self.path}: cannot begin a transaction: {exc}") from exc
            try:
                yield SqlTransaction(connection)
            except BaseException:
                await connection.rollback()
                raise
            else:
                await connection.commit()
            finally:
                await connection.close()

    async def _locked(self, how: Awaitable[T]) -> T:
        async with self._lock:  # never beside this process's own transaction (on ":memory:", one connection)
            return await how

    async def seen(self, scope: str, event_id: str, now: float) -> bool:
        return await self._locked(self._store().seen(scope, event_id, now))

    async def outcome(self, scope: str, event_id: str) -> str | None:
        return await self._locked(self._store().outcome(scope, event_id))

    async def last_seq(self, scope: str, key: str) -> int | None:
        return await self._locked(self._store().last_seq(scope, key))

    async def purge_expired(self, now: float, limit: int) -> int:
        return await self._locked(self._store().purge_expired(now, limit))
