"""The PostgreSQL a test run uses: $WARREN_TEST_POSTGRES_DSN, else the local default; a schema per test."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest

POSTGRES_ENV = "WARREN_TEST_POSTGRES_DSN"
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_dsn() -> str:
    return os.environ.get(POSTGRES_ENV, DEFAULT_DSN)


def fresh_schema_name() -> str:
    return f"warren_test_{uuid.uuid4().hex[:12]}"


async def postgres_or_skip() -> str:
    """The DSN, once a connection to it worked; else skip the test (fail it on CI)."""
    dsn = postgres_dsn()
    try:
        connection = await asyncpg.connect(dsn, timeout=5)
    except (OSError, asyncpg.PostgresError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"no PostgreSQL at {dsn}: {exc}")
        pytest.skip(f"no PostgreSQL at {dsn}: {exc}")
    await connection.close()
    return dsn


@asynccontextmanager
async def schema_of_its_own(dsn: str) -> AsyncIterator[str]:
    """A fresh schema, created now and dropped (with all it holds) at the end; yields its name."""
    schema = fresh_schema_name()
    admin = await asyncpg.connect(dsn, timeout=5)
    await admin.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield schema
    finally:
        await admin.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await admin.close()


def in_search_path(dsn: str, schema: str) -> str:
    """The DSN with ``schema`` first in the search_path (asyncpg reads the parameter as a server setting)."""
    return dsn + ("&" if "?" in dsn else "?") + f"search_path={schema}"


@asynccontextmanager
async def empty_database_url(kind: str, tmp_path: Path, name: str) -> AsyncIterator[str]:
    """The URL of an empty database of ``kind``: a SQLite file ``name`` in ``tmp_path``, or a PostgreSQL schema
    of its own reached through the search_path (skipped when there is no PostgreSQL)."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / name}"
        return
    dsn = await postgres_or_skip()
    async with schema_of_its_own(dsn) as schema:
        yield in_search_path(dsn, schema)
