"""A process that dies in the middle of an idempotency transaction, after the effect and before the commit.

``python -m tests.support.crash_child STORE_URL SCHEMA EVENT_ID`` exits with status 17 from inside the
effect (``os._exit``: no cleanup, no rollback sent, exactly like a killed process).
"""

from __future__ import annotations

import asyncio
import os
import sys

from tests.support.effects import effects_table
from warren.receiving.idempotency import IdempotentConsumer
from warren.receiving.stores import open_store
from warren.receiving.stores.base import Transaction

CRASH_STATUS = 17


async def main(url: str, schema: str, event_id: str) -> None:
    store = open_store(url, postgres_schema=schema)
    await store.open()
    consumer = IdempotentConsumer(store, "shop")

    async def effect(tx: Transaction) -> None:
        await tx.execute(f"INSERT INTO {effects_table(store)} (event_id, note) VALUES ($1, 'crashed')", event_id)
        os._exit(CRASH_STATUS)

    await consumer.process(event_id, effect, key="k", sequence=1)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
