"""A real process killed between the effect and the commit: the database keeps neither, redelivery applies once."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.support.crash_child import CRASH_STATUS
from tests.support.effects import create_effects_table, effect_rows, effects_table
from warren.receiving.idempotency import IdempotentConsumer, Outcome
from warren.receiving.stores.base import Store, Transaction
from warren.receiving.stores.postgres import PostgresStore
from warren.receiving.stores.sqlite import SqliteStore

ROOT = Path(__file__).resolve().parents[2]


def _url(store: Store) -> tuple[str, str]:
    if isinstance(store, SqliteStore):
        return f"sqlite:///{store.path}", "public"
    assert isinstance(store, PostgresStore)
    return store.dsn, store.schema


async def test_a_process_killed_inside_the_transaction_leaves_nothing(store: Store) -> None:
    # Given the effects table
    await create_effects_table(store)
    url, schema = _url(store)
    # When a separate process applies the effect and dies before committing
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.support.crash_child", url, schema, "evt_killed", cwd=ROOT
    )
    assert await asyncio.wait_for(child.wait(), 30) == CRASH_STATUS
    # Then neither the effect nor the record of the event survived
    assert await effect_rows(store) == []
    assert await store.outcome("shop", "evt_killed") is None
    # And the redelivery applies the effect exactly once
    consumer = IdempotentConsumer(store, "shop")

    async def effect(tx: Transaction) -> None:
        await tx.execute(
            f"INSERT INTO {effects_table(store)} (event_id, note) VALUES ($1, 'redelivered')", "evt_killed"
        )

    assert await consumer.process("evt_killed", effect, key="k", sequence=1) is Outcome.APPLIED
    assert await consumer.process("evt_killed", effect, key="k", sequence=1) is Outcome.DUPLICATE
    assert await effect_rows(store) == [("evt_killed", "redelivered")]
