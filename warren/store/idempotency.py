"""The ingest API's Idempotency-Keys in SQL: one SQLite file for one host, PostgreSQL for several processes.

A claim is one transaction: insert the key if it is new, else read its row locked (``FOR UPDATE`` on PostgreSQL;
on SQLite the transaction began with ``BEGIN IMMEDIATE`` and holds the file's write lock), so two requests
given the same key at the same instant are serialised and exactly one of them claims it. The table is made by
the ``idempotency`` line of migrations when the store opens.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import Column, Float, Index, Integer, LargeBinary, MetaData, Table, Text, delete, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from warren.core.errors import WarrenError
from warren.store.engine import INGEST_KEYS, migrate, open_engine
from warren.store.idempotency_keys import TABLE, Claim, Decision, Row, decide

__all__ = ["SqlIdempotencyStore", "idempotency_keys"]

idempotency_keys = Table(
    TABLE,
    MetaData(),
    Column("key", Text, primary_key=True),
    Column("fingerprint", Text, nullable=False),
    Column("state", Text, nullable=False),
    Column("status", Integer),
    Column("body", LargeBinary),
    Column("claimed_at", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Index(f"{TABLE}_expiry", "expires_at"),
)
_ROW = (
    idempotency_keys.c.fingerprint,
    idempotency_keys.c.state,
    idempotency_keys.c.status,
    idempotency_keys.c.body,
    idempotency_keys.c.claimed_at,
    idempotency_keys.c.expires_at,
)


class SqlIdempotencyStore:
    """``SqlIdempotencyStore("sqlite:///keys.db")`` or ``("postgresql://...")``; open() migrates the table."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._engine: AsyncEngine | None = None
        # SQLite: one transaction at a time from this process (others queue on the file's lock).
        self._lock: asyncio.Lock | None = None

    async def open(self) -> None:
        engine = open_engine(self.url, serialised=True, dsn_as_is=True)
        try:
            await migrate(engine, INGEST_KEYS)
        except BaseException:
            await engine.dispose()
            raise
        self._lock = asyncio.Lock() if engine.dialect.name == "sqlite" else None
        self._engine = engine

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
            self._engine = None

    @contextlib.asynccontextmanager
    async def _begin(self) -> AsyncIterator[AsyncConnection]:
        if self._engine is None:
            raise WarrenError("the idempotency store is not open")
        async with contextlib.AsyncExitStack() as stack:
            if self._lock is not None:
                await stack.enter_async_context(self._lock)
            yield await stack.enter_async_context(self._engine.begin())

    def _insert(self, connection: AsyncConnection) -> Any:
        dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
        return dialect.insert(idempotency_keys)

    async def claim(self, key: str, print_: str, now: float, retention: float, stale_before: float) -> Claim:
        held: dict[str, Any] = {"fingerprint": print_, "state": "busy", "status": None, "body": None}
        held |= {"claimed_at": now, "expires_at": now + retention}
        async with self._begin() as connection:
            inserted = await connection.execute(
                self._insert(connection).values(key=key, **held).on_conflict_do_nothing(index_elements=["key"])
            )
            if inserted.rowcount == 1:
                return Claim(Decision.CLAIM)
            found = (
                await connection.execute(select(*_ROW).where(idempotency_keys.c.key == key).with_for_update())
            ).first()
            claim = decide(Row(*found) if found else None, print_, now, stale_before)
            if claim.decision is Decision.CLAIM:
                await connection.execute(update(idempotency_keys).where(idempotency_keys.c.key == key).values(held))
            return claim

    async def complete(self, key: str, status: int, body: bytes) -> None:
        async with self._begin() as connection:
            await connection.execute(
                update(idempotency_keys)
                .where(idempotency_keys.c.key == key)
                .values(state="done", status=status, body=body)
            )

    async def release(self, key: str) -> None:
        async with self._begin() as connection:
            await connection.execute(
                update(idempotency_keys)
                .where(idempotency_keys.c.key == key, idempotency_keys.c.state == "busy")
                .values(state="open")
            )

    async def purge(self, now: float) -> int:
        async with self._begin() as connection:
            result = await connection.execute(delete(idempotency_keys).where(idempotency_keys.c.expires_at <= now))
            return int(result.rowcount)
