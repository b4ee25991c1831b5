"""The idempotent consumer: at-least-once deliveries in, exactly-once effects out.

For each delivery, in ONE database transaction::

    seen(id)?                      -> DUPLICATE: acknowledge, do nothing
    sequence <= last_seq(key)?     -> STALE: record the id, discard the event
    otherwise                      -> effect(tx); mark_seen(id); set_last_seq(key, sequence): APPLIED

The effect receives the transaction and writes through it, so its writes and the id's record commit
together or not at all: a crash before the commit leaves neither, and the redelivery applies the effect
then. An effect outside the database (an e-mail, an API call) cannot be covered by the transaction; make
it idempotent on its own (pass the event id along) or record an intent row and send it afterwards.

An application that keeps its own data with SQLAlchemy passes its ``AsyncConnection`` or ``AsyncSession`` as
``within``: the bookkeeping then runs in the application's transaction, which the application commits (or rolls
back) with its own writes.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from enum import StrEnum

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from warren.receiving.stores.base import Store, StoreTransaction, Transaction
from warren.store.dedup import joined

__all__ = ["DEFAULT_RETENTION", "Effect", "IdempotentConsumer", "Outcome"]

DEFAULT_RETENTION = 7 * 86400.0  # seconds; providers stop resending after hours or a few days

Effect = Callable[[Transaction], Awaitable[None] | None]


class Outcome(StrEnum):
    APPLIED = "applied"  # the effect ran and committed
    DUPLICATE = "duplicate"  # the id was already handled: nothing ran
    STALE = "stale"  # an older sequence than the key's last: recorded and discarded, nothing ran


class IdempotentConsumer:
    """Runs effects exactly once per event id within ``scope`` (an inbound source's name)."""

    def __init__(
        self,
        store: Store,
        scope: str = "default",
        *,
        retention: float = DEFAULT_RETENTION,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.scope = scope
        self.retention = retention
        self._clock = clock

    async def process(
        self,
        event_id: str,
        effect: Effect,
        *,
        key: str | None = None,
        sequence: int | None = None,
        within: AsyncConnection | AsyncSession | None = None,
    ) -> Outcome:
        """Apply ``effect`` for ``event_id`` unless it is a duplicate or stale; return which it was.

        An exception from the effect rolls everything back and propagates: the event stays unseen, so a
        redelivery runs the effect again. With ``within`` (the caller's SQLAlchemy connection or session, in a
        transaction on the store's database) nothing is committed or rolled back here: the caller's transaction
        decides, and an exception propagates for the caller to roll back.
        """
        now = self._clock()
        opened: AbstractAsyncContextManager[StoreTransaction] = (
            self.store.transaction() if within is None else joined(within, getattr(self.store, "schema", None))
        )
        async with opened as tx:
            # Claim first: a concurrent delivery of the same id waits here until this transaction ends.
            if not await tx.mark_seen(self.scope, event_id, now, now + self.retention):
                return Outcome.DUPLICATE
            ordered = key is not None and sequence is not None
            if ordered:
                assert key is not None and sequence is not None
                last = await tx.lock_last_seq(self.scope, key)
                if last is not None and sequence <= last:
                    await tx.mark_stale(self.scope, event_id)
                    return Outcome.STALE
            result = effect(tx)
            if inspect.isawaitable(result):
                await result
            if ordered:
                assert key is not None and sequence is not None
                await tx.set_last_seq(self.scope, key, sequence, now)
        return Outcome.APPLIED

    async def purge_expired(self, *, batch: int = 1000, max_batches: int = 100) -> int:
        """Delete expired ids in bounded batches (never a full scan, never one huge delete)."""
        total = 0
        for _ in range(max_batches):
            deleted = await self.store.purge_expired(self._clock(), batch)
            total += deleted
            if deleted < batch:
                break
        return total
