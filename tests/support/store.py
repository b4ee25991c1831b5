"""The endpoint store under test: a SQLite file, or a PostgreSQL database made for this test session and
dropped after it (on $WARREN_TEST_POSTGRES_DSN's server). Each test starts from empty tables."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from cryptography.fernet import Fernet
from sqlalchemy import delete

from tests.support.postgres import postgres_or_skip
from warren.store.engine import migrate, open_engine
from warren.store.tables import ApiKeyRow, AttemptRow, EndpointRow, EventTypeRow, SecretRow, TenantRow

STORE_KEY = Fernet.generate_key().decode()


def _with_database(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


class PostgresDatabase:
    """A database of this session's own on the test PostgreSQL, made on first use and dropped at the end."""

    def __init__(self) -> None:
        self.dsn: str | None = None
        self.name = f"warren_store_{uuid.uuid4().hex[:10]}"
        self.url: str | None = None

    async def get(self) -> str:
        if self.url is None:
            self.dsn = await postgres_or_skip()
            admin = await asyncpg.connect(self.dsn, timeout=5)
            try:
                await admin.execute(f'CREATE DATABASE "{self.name}"')
            finally:
                await admin.close()
            self.url = _with_database(self.dsn, self.name)
        return self.url

    async def drop(self) -> None:
        if self.url is None or self.dsn is None:
            return
        admin = await asyncpg.connect(self.dsn, timeout=5)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')
        finally:
            await admin.close()


@pytest.fixture(scope="session")
async def store_postgres() -> AsyncIterator[PostgresDatabase]:
    database = PostgresDatabase()
    yield database
    await database.drop()


async def empty_store(url: str) -> str:
    """``url`` migrated, with every table emptied."""
    engine = open_engine(url)
    try:
        await migrate(engine)
        async with engine.begin() as connection:
            for table in (AttemptRow, ApiKeyRow, EventTypeRow, SecretRow, EndpointRow, TenantRow):
                await connection.execute(delete(table))
    finally:
        await engine.dispose()
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    store_postgres: PostgresDatabase,
    monkeypatch: pytest.MonkeyPatch,
) -> str:
    """Each backend in turn, empty; ``WARREN_STORE_KEY`` is set for the test."""
    monkeypatch.setenv("WARREN_STORE_KEY", STORE_KEY)
    if request.param == "sqlite":
        return await empty_store(f"sqlite:///{tmp_path / 'warren.sqlite3'}")
    return await empty_store(await store_postgres.get())
