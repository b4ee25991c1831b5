"""Fixtures for the receiving toolkit: idempotency stores on SQLite (a temp file) and on the real PostgreSQL.

Each PostgreSQL store gets a schema of its own, created for the test and dropped after it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.support.postgres import fresh_schema_name, postgres_or_skip
from warren.receiving.stores.base import Store
from warren.receiving.stores.postgres import PostgresStore
from warren.receiving.stores.sqlite import SqliteStore


async def _drop_schema(dsn: str, schema: str) -> None:
    connection = await asyncpg.connect(dsn)
    try:
        await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await connection.close()


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = SqliteStore(tmp_path / "inbox.sqlite3")
    await store.open()
    yield store
    await store.close()


@pytest.fixture
async def pg_store() -> AsyncIterator[PostgresStore]:
    dsn = await postgres_or_skip()
    schema = fresh_schema_name()
    store = PostgresStore(dsn, schema=schema, max_size=8)
    try:
        await store.open()
        yield store
    finally:
        await store.close()
        await _drop_schema(dsn, schema)


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each test that takes ``store`` runs once per store kind."""
    if request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "inbox.sqlite3")
        await sqlite.open()
        yield sqlite
        await sqlite.close()
        return
    dsn = await postgres_or_skip()
    schema = fresh_schema_name()
    postgres = PostgresStore(dsn, schema=schema, max_size=8)
    try:
        await postgres.open()
        yield postgres
    finally:
        await postgres.close()
        await _drop_schema(dsn, schema)
