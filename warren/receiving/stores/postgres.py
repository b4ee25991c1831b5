"""The production store: PostgreSQL through an asyncpg pool, safe for many consumers on many hosts.

Concurrency comes from the database, not from locks in the process (``warren/store/dedup_asyncpg.py`` holds
the statements and says how). The tables, in ``schema``, are made by the ``receiving`` line of Alembic
migrations when the store opens (through a short-lived SQLAlchemy engine on the same URL); tables an earlier
release made are adopted as they are. A plain asyncpg path rather than SQLAlchemy's, because SQLAlchemy costs
more than 10% of the events/s here (bench/README.md, "The receiving dedup store").
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import asyncpg
from sqlalchemy.exc import SQLAlchemyError

from warren.receiving.errors import StoreError
from warren.store.dedup import SEEN_TABLE, SEQUENCES_TABLE, migrate_dedup
from warren.store.dedup_asyncpg import PostgresQueries, PostgresTransaction
from warren.store.engine import open_engine

__all__ = ["PostgresStore", "PostgresTransaction"]

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class PostgresStore:
    """``PostgresStore("postgresql://user@host/db", schema="inbox")``; tables are created in ``schema``."""

    def __init__(self, dsn: str, *, schema: str = "public", min_size: int = 1, max_size: int = 10) -> None:
        if not _IDENTIFIER.fullmatch(schema):
            raise StoreError(f"{schema!r} is not a plain lowercase schema name")
        self.dsn = dsn
        self.schema = schema
        self._seen = f'"{schema}".{SEEN_TABLE}'
        self._sequences = f'"{schema}".{SEQUENCES_TABLE}'
        self._queries = PostgresQueries(self._seen, self._sequences)
        self._min_size = min_size
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None

    @property
    def kind(self) -> Literal["postgresql"]:
        return "postgresql"

    async def _migrate(self) -> None:
        engine = open_engine(self.dsn, dsn_as_is=True)
        try:
            async with engine.begin() as connection:
                await migrate_dedup(connection, self.schema)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, SQLAlchemyError) as exc:
            raise StoreError(f"cannot create the inbox tables in schema {self.schema!r}: {exc}") from exc
        finally:
            await engine.dispose()

    async def open(self) -> None:
        if self._pool is not None:
            return
        try:
            pool = await asyncpg.create_pool(self.dsn, min_size=self._min_size, max_size=self._max_size)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StoreError(f"cannot connect to the PostgreSQL store: {exc}") from exc
        try:
            await self._migrate()
        except BaseException:
            await pool.close()
            raise
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
        return await self._queries.seen(self._p(), scope, event_id, now)

    async def outcome(self, scope: str, event_id: str) -> str | None:
        return await self._queries.outcome(self._p(), scope, event_id)

    async def last_seq(self, scope: str, key: str) -> int | None:
        return await self._queries.last_seq(self._p(), scope, key)

    async def purge_expired(self, now: float, limit: int) -> int:
        return await self._queries.purge_expired(self._p(), now, limit)
