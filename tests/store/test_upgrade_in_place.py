"""A database made by the release before the one SQL layer upgrades in place, its rows still read.

The fixtures are the exact CREATE TABLE statements the earlier raw modules ran (the ingest API's
``idempotency/{sqlite,postgres}.py``, the receiving toolkit's ``stores/{sqlite,postgres}.py``), with rows in them.
The new code opens the database, which runs the Alembic lines on it (adopting the tables, recording the
revision), and must then replay the recorded Idempotency-Key and see the processed message as a duplicate.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from tests.support.postgres import in_search_path, postgres_or_skip, schema_of_its_own
from warren.receiving import IdempotentConsumer, Outcome
from warren.receiving.stores.postgres import PostgresStore
from warren.receiving.stores.sqlite import SqliteStore
from warren.store.engine import INGEST_KEYS, RECEIVING, current_revision, head_revision, open_engine
from warren.store.idempotency import SqlIdempotencyStore
from warren.store.idempotency_keys import Decision, fingerprint

pytestmark = pytest.mark.timeout(60)

# The release before: warren/api/ingest/idempotency/sqlite.py and warren/receiving/stores/sqlite.py.
OLD_SQLITE = (
    """CREATE TABLE IF NOT EXISTS warren_api_idempotency (
        key TEXT PRIMARY KEY,
        fingerprint TEXT NOT NULL,
        state TEXT NOT NULL,
        status INTEGER,
        body BLOB,
        claimed_at REAL NOT NULL,
        expires_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS warren_api_idempotency_expiry ON warren_api_idempotency (expires_at)",
    """CREATE TABLE IF NOT EXISTS warren_inbox_seen (
        scope TEXT NOT NULL,
        event_id TEXT NOT NULL,
        outcome TEXT NOT NULL,
        seen_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        PRIMARY KEY (scope, event_id)
    )""",
    "CREATE INDEX IF NOT EXISTS warren_inbox_seen_expiry ON warren_inbox_seen (expires_at)",
    """CREATE TABLE IF NOT EXISTS warren_inbox_sequences (
        scope TEXT NOT NULL,
        key TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        updated_at REAL NOT NULL,
        PRIMARY KEY (scope, key)
    )""",
)

# The release before: warren/api/ingest/idempotency/postgres.py (in the search_path's schema) and
# warren/receiving/stores/postgres.py (in the store's schema; {seen} and {sequences} are schema-qualified).
OLD_POSTGRES_KEYS = (
    """CREATE TABLE IF NOT EXISTS warren_api_idempotency (
                    key TEXT PRIMARY KEY,
                    fingerprint TEXT NOT NULL,
                    state TEXT NOT NULL,
                    status INTEGER,
                    body BYTEA,
                    claimed_at DOUBLE PRECISION NOT NULL,
                    expires_at DOUBLE PRECISION NOT NULL
                )""",
    "CREATE INDEX IF NOT EXISTS warren_api_idempotency_expiry ON warren_api_idempotency (expires_at)",
)
OLD_POSTGRES_INBOX = (
    """CREATE TABLE IF NOT EXISTS {seen} (
            scope TEXT NOT NULL,
            event_id TEXT NOT NULL,
            outcome TEXT NOT NULL,
            seen_at DOUBLE PRECISION NOT NULL,
            expires_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (scope, event_id)
        )""",
    "CREATE INDEX IF NOT EXISTS warren_inbox_seen_expiry ON {seen} (expires_at)",
    """CREATE TABLE IF NOT EXISTS {sequences} (
            scope TEXT NOT NULL,
            key TEXT NOT NULL,
            last_seq BIGINT,
            updated_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (scope, key)
        )""",
)

NOW = time.time()
PRINT = fingerprint("POST", "/v1/events", b'{"type": "order.created"}')
ANSWER = b'{"accepted": 1}'
KEY_ROW = ("key-1", PRINT, "done", 202, ANSWER, NOW - 60, NOW + 3600)
SEEN_ROW = ("partner", "evt-1", "applied", NOW - 60, NOW + 3600)
SEQUENCE_ROW = ("partner", "order-7", 5, NOW - 60)


async def _proves_rows_read(keys_url: str, inbox: SqliteStore | PostgresStore) -> None:
    keys = SqlIdempotencyStore(keys_url)
    await keys.open()
    try:
        claim = await keys.claim("key-1", PRINT, NOW, 3600, NOW - 30)
        assert (claim.decision, claim.status, claim.body) == (Decision.REPLAY, 202, ANSWER)
        assert (await keys.claim("key-1", "another body", NOW, 3600, NOW - 30)).decision is Decision.CONFLICT
    finally:
        await keys.close()
    await inbox.open()
    try:
        consumer = IdempotentConsumer(inbox, "partner", clock=lambda: NOW)
        ran: list[str] = []
        assert await consumer.process("evt-1", lambda tx: ran.append("evt-1")) is Outcome.DUPLICATE
        stale = await consumer.process("evt-2", lambda tx: ran.append("evt-2"), key="order-7", sequence=4)
        assert stale is Outcome.STALE
        applied = await consumer.process("evt-3", lambda tx: ran.append("evt-3"), key="order-7", sequence=6)
        assert applied is Outcome.APPLIED and ran == ["evt-3"]
        assert await inbox.last_seq("partner", "order-7") == 6
    finally:
        await inbox.close()


async def test_a_sqlite_database_of_the_release_before_upgrades_in_place(tmp_path: Path) -> None:
    # Given a file with the earlier release's tables and rows
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as old:
        for statement in OLD_SQLITE:
            old.execute(statement)
        old.execute("INSERT INTO warren_api_idempotency VALUES (?, ?, ?, ?, ?, ?, ?)", KEY_ROW)
        old.execute("INSERT INTO warren_inbox_seen VALUES (?, ?, ?, ?, ?)", SEEN_ROW)
        old.execute("INSERT INTO warren_inbox_sequences VALUES (?, ?, ?, ?)", SEQUENCE_ROW)
    old.close()
    # When the new code opens it, Then the rows read as before
    await _proves_rows_read(f"sqlite:///{path}", SqliteStore(path))
    # And both lines are recorded at their head, each in its own version table
    engine = open_engine(f"sqlite:///{path}")
    try:
        assert await current_revision(engine, INGEST_KEYS) == head_revision(INGEST_KEYS) == "i0001"
        assert await current_revision(engine, RECEIVING) == head_revision(RECEIVING) == "r0001"
    finally:
        await engine.dispose()


@pytest.fixture
async def schema() -> AsyncIterator[tuple[str, str]]:
    dsn = await postgres_or_skip()
    async with schema_of_its_own(dsn) as name:
        yield dsn, name


async def test_a_postgres_database_of_the_release_before_upgrades_in_place(schema: tuple[str, str]) -> None:
    dsn, name = schema
    keys_url = in_search_path(dsn, name)
    seen, sequences = f'"{name}".warren_inbox_seen', f'"{name}".warren_inbox_sequences'
    # Given the earlier release's tables and rows (the keys through the search_path, the inbox in its schema)
    old = await asyncpg.connect(keys_url, timeout=5)
    try:
        for statement in OLD_POSTGRES_KEYS:
            await old.execute(statement)
        for statement in OLD_POSTGRES_INBOX:
            await old.execute(statement.format(seen=seen, sequences=sequences))
        await old.execute("INSERT INTO warren_api_idempotency VALUES ($1, $2, $3, $4, $5, $6, $7)", *KEY_ROW)
        await old.execute(f"INSERT INTO {seen} VALUES ($1, $2, $3, $4, $5)", *SEEN_ROW)
        await old.execute(f"INSERT INTO {sequences} VALUES ($1, $2, $3, $4)", *SEQUENCE_ROW)
    finally:
        await old.close()
    # When the new code opens it, Then the rows read as before
    await _proves_rows_read(keys_url, PostgresStore(dsn, schema=name, max_size=4))
    # And each line is recorded in its own version table, in the schema of its tables
    check = await asyncpg.connect(dsn, timeout=5)
    try:
        assert await check.fetchval(f'SELECT version_num FROM "{name}".warren_api_idempotency_version') == "i0001"
        assert await check.fetchval(f'SELECT version_num FROM "{name}".warren_inbox_version') == "r0001"
    finally:
        await check.close()
