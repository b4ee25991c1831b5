"""Idempotency stores: SQLite (embedded default) and PostgreSQL (production), chosen by URL."""

from __future__ import annotations

from urllib.parse import urlsplit

from warren.receiving.errors import StoreError
from warren.receiving.stores.base import Store, StoreTransaction, Transaction

__all__ = ["Store", "StoreTransaction", "Transaction", "open_store"]


def open_store(url: str, *, postgres_schema: str = "public", pool_size: int = 10) -> Store:
    """The store a URL names (not yet opened): ``sqlite:///PATH`` or ``postgresql://...``.

    The PostgreSQL driver is imported only when asked for, so the embedded default needs no asyncpg.
    """
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        from warren.receiving.stores.sqlite import SqliteStore

        return SqliteStore.from_url(url)
    if scheme in ("postgresql", "postgres"):
        try:
            from warren.receiving.stores.postgres import PostgresStore
        except ImportError as exc:
            raise StoreError("a postgresql:// store needs asyncpg: pip install 'warren[postgres]'") from exc
        return PostgresStore(url, schema=postgres_schema, max_size=pool_size)
    raise StoreError(f"unknown store URL scheme {scheme!r}: use sqlite:///PATH or postgresql://...")
