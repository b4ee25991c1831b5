"""The two newer lines of migrations: each builds exactly its tables (no autogenerate diff against the SQLAlchemy
tables the code queries), migrating again changes nothing, and a database holds only the lines it asked for."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData, inspect

from tests.support.postgres import empty_database_url
from warren.store.dedup import dedup_tables, migrate_dedup
from warren.store.engine import INGEST_KEYS, RECEIVING, Line, current_revision, head_revision, migrate, open_engine
from warren.store.idempotency import idempotency_keys

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["sqlite", "postgresql"])
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """An empty database: a SQLite file, or a PostgreSQL schema of its own reached through the search_path."""
    async with empty_database_url(request.param, tmp_path, "lines.sqlite3") as url:
        yield url


@pytest.mark.parametrize(
    ("line", "metadata", "tables"),
    [
        (INGEST_KEYS, idempotency_keys.metadata, {"warren_api_idempotency"}),
        (RECEIVING, dedup_tables(None)[0].metadata, {"warren_inbox_seen", "warren_inbox_sequences"}),
    ],
)
async def test_a_line_builds_exactly_its_tables(url: str, line: Line, metadata: MetaData, tables: set[str]) -> None:
    engine = open_engine(url, dsn_as_is=True)
    try:
        # Given an empty database, When one line migrates (twice)
        if line is RECEIVING:
            async with engine.begin() as connection:
                first = await migrate_dedup(connection)
                second = await migrate_dedup(connection)
        else:
            first, second = await migrate(engine, line), await migrate(engine, line)
        # Then the first run went to the head, the second did nothing
        assert first == (None, head_revision(line)) and second == (head_revision(line), head_revision(line))
        assert await current_revision(engine, line) == head_revision(line)
        async with engine.connect() as connection:
            found = await connection.run_sync(lambda sync: set(inspect(sync).get_table_names()))
            diff = await connection.run_sync(
                lambda sync: compare_metadata(
                    MigrationContext.configure(sync, opts={"version_table": line.version_table}), metadata
                )
            )
        # And the database holds its tables and its version table, nothing of another line, and no diff
        assert found == tables | {line.version_table}
        assert diff == []
    finally:
        await engine.dispose()
