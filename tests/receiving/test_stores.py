"""Choosing and opening a store: URLs, placeholders, and failures that say what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from warren.receiving.errors import StoreError
from warren.receiving.stores import open_store
from warren.receiving.stores.postgres import PostgresStore
from warren.receiving.stores.sqlite import SqliteStore, sqlite_path


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///inbox.db", "inbox.db"),
        ("sqlite:////var/lib/w/inbox.db", "/var/lib/w/inbox.db"),
        ("sqlite:///:memory:", ":memory:"),
    ],
)
def test_sqlite_urls(url: str, path: str) -> None:
    assert sqlite_path(url) == path
    store = open_store(url)
    assert isinstance(store, SqliteStore) and store.path == path


def test_bad_urls() -> None:
    with pytest.raises(StoreError):
        sqlite_path("sqlite://")
    with pytest.raises(StoreError, match="unknown store URL scheme"):
        open_store("redis://127.0.0.1")
    with pytest.raises(StoreError, match="schema"):
        PostgresStore("postgresql://x/y", schema="Robert'); DROP TABLE")


def test_postgres_urls_choose_postgres() -> None:
    store = open_store("postgresql://postgres@127.0.0.1/test", postgres_schema="inbox")
    assert isinstance(store, PostgresStore) and store.schema == "inbox"


async def test_dollar_placeholders_work_on_sqlite(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    await store.open()
    async with store.transaction() as tx:
        await tx.execute("CREATE TABLE t (a TEXT, b INTEGER)")
        await tx.execute("INSERT INTO t VALUES ($1, $2)", "x", 2)
        assert await tx.fetch("SELECT b, a FROM t WHERE a = $1 AND b = $2", "x", 2) == [(2, "x")]
    await store.close()


async def test_a_store_used_before_open_says_so() -> None:
    with pytest.raises(StoreError, match="not open"):
        await SqliteStore(":memory:").seen("s", "e", 0)


async def test_an_unreachable_postgres_is_a_store_error() -> None:
    store = PostgresStore("postgresql://postgres@127.0.0.1:1/test")
    with pytest.raises(StoreError, match="cannot connect"):
        await store.open()


async def test_an_unwritable_sqlite_path_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreError, match="cannot open"):
        await SqliteStore(blocker / "inbox.db").open()
