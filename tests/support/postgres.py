"""The PostgreSQL a test run uses: $WARREN_TEST_POSTGRES_DSN, else the local default; a schema per test."""

from __future__ import annotations

import os
import uuid

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
