"""What an idempotency store offers: transactions that carry both the bookkeeping and the user's effect.

Two tables, whatever the database (``warren/store/dedup.py`` describes them; the ``receiving`` line of Alembic
migrations makes them): ``warren_inbox_seen`` (ids already handled) and ``warren_inbox_sequences`` (the highest
sequence applied per ordering key). ``scope`` is the inbound source's name, so two providers with overlapping
ids never collide.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol

from warren.store.dedup import SEEN_TABLE, SEQUENCES_TABLE

__all__ = ["SEEN_TABLE", "SEQUENCES_TABLE", "Store", "StoreTransaction", "Transaction"]


class Transaction(Protocol):
    """The open transaction a handler's effect runs in: what it writes commits with the event's record.

    ``execute`` and ``fetch`` take ``$1, $2, ...`` placeholders on every store; ``connection`` is the
    connection for anything else: SQLAlchemy's ``AsyncConnection`` (the SQLite store, or a transaction joined
    to the user's own with ``IdempotentConsumer.process(..., within=...)``) or ``asyncpg.Connection`` (the
    PostgreSQL store). Never commit or roll back through it: the consumer does that.
    """

    @property
    def kind(self) -> Literal["sqlite", "postgresql"]: ...

    @property
    def connection(self) -> Any: ...

    async def execute(self, sql: str, *args: Any) -> None: ...

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]: ...


class StoreTransaction(Transaction, Protocol):
    """A Transaction plus the idempotency bookkeeping the consumer does inside it."""

    async def mark_seen(self, scope: str, event_id: str, now: float, expires_at: float) -> bool:
        """Record the id as handled; False when it already was (and has not expired).

        This is ``seen(id)`` and ``mark_seen(id)`` in one statement: a concurrent transaction claiming the
        same id waits for this one to end, then sees the id, so two deliveries can never both go on.
        """
        ...

    async def mark_stale(self, scope: str, event_id: str) -> None:
        """Change the record of an id just claimed to say it was discarded as stale."""
        ...

    async def lock_last_seq(self, scope: str, key: str) -> int | None:
        """The key's last applied sequence (None if none yet), locked until the transaction ends."""
        ...

    async def set_last_seq(self, scope: str, key: str, sequence: int, now: float) -> None: ...


class Store(Protocol):
    """An idempotency store: ``async with store.transaction() as tx`` commits on exit, rolls back on error."""

    @property
    def kind(self) -> Literal["sqlite", "postgresql"]: ...

    async def open(self) -> None:
        """Connect and create the tables if they are missing (safe to run on every start)."""
        ...

    async def close(self) -> None: ...

    def transaction(self) -> AbstractAsyncContextManager[StoreTransaction]: ...

    async def seen(self, scope: str, event_id: str, now: float) -> bool:
        """Whether the id is recorded and not expired (a read outside any transaction, for inspection)."""
        ...

    async def outcome(self, scope: str, event_id: str) -> str | None:
        """How a recorded id was handled (``applied`` or ``stale``), or None when it is not recorded."""
        ...

    async def last_seq(self, scope: str, key: str) -> int | None: ...

    async def purge_expired(self, now: float, limit: int) -> int:
        """Delete at most ``limit`` expired ids, found through the expiry index; return how many went."""
        ...
