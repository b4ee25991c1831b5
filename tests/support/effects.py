"""A table that test effects write to inside the idempotency transaction, on either store."""

from __future__ import annotations

from warren.receiving.stores.base import Store
from warren.receiving.stores.postgres import PostgresStore

__all__ = ["create_effects_table", "effect_rows", "effects_table"]


def effects_table(store: Store) -> str:
    """The table the tests' effects write to: in the test's own schema on PostgreSQL."""
    return f'"{store.schema}".effects' if isinstance(store, PostgresStore) else "effects"


async def create_effects_table(store: Store) -> None:
    async with store.transaction() as tx:
        await tx.execute(f"CREATE TABLE IF NOT EXISTS {effects_table(store)} (event_id TEXT NOT NULL, note TEXT)")


async def effect_rows(store: Store) -> list[tuple[str, str | None]]:
    async with store.transaction() as tx:
        rows = await tx.fetch(f"SELECT event_id, note FROM {effects_table(store)} ORDER BY event_id, note")
    return [(str(r[0]), r[1]) for r in rows]
