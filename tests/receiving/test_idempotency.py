"""The idempotent consumer on both stores: duplicates, stale sequences, crashes before the commit, retention.

Every test here runs twice, on SQLite and on the real PostgreSQL (a schema of its own per test).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tests.support.effects import create_effects_table, effect_rows, effects_table
from warren.receiving.idempotency import IdempotentConsumer, Outcome
from warren.receiving.stores.base import Store, StoreTransaction, Transaction


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def writes(store: Store, event_id: str, note: str = "") -> Any:
    """An effect that inserts one row through the transaction it is given."""

    async def effect(tx: Transaction) -> None:
        await tx.execute(f"INSERT INTO {effects_table(store)} (event_id, note) VALUES ($1, $2)", event_id, note)

    return effect


async def test_a_duplicate_id_applies_once(store: Store) -> None:
    # Given an effect table and a consumer
    await create_effects_table(store)
    consumer = IdempotentConsumer(store, "shop")
    # When the same event is delivered ten times
    outcomes = [await consumer.process("evt_1", writes(store, "evt_1")) for _ in range(10)]
    # Then the effect ran once and the other nine were acknowledged as duplicates
    assert outcomes == [Outcome.APPLIED] + [Outcome.DUPLICATE] * 9
    assert await effect_rows(store) == [("evt_1", "")]
    assert await store.outcome("shop", "evt_1") == "applied"


async def test_ids_are_scoped_per_source(store: Store) -> None:
    await create_effects_table(store)
    a, b = IdempotentConsumer(store, "a"), IdempotentConsumer(store, "b")
    assert await a.process("same", writes(store, "same", "a")) is Outcome.APPLIED
    assert await b.process("same", writes(store, "same", "b")) is Outcome.APPLIED
    assert len(await effect_rows(store)) == 2


async def test_out_of_order_sequences_are_stale_and_recorded(store: Store) -> None:
    await create_effects_table(store)
    consumer = IdempotentConsumer(store, "shop")
    # Given version 2 of order o-1 applied
    assert await consumer.process("v2", writes(store, "v2"), key="o-1", sequence=2) is Outcome.APPLIED
    # When version 1 arrives late, and another event claims version 2 again
    assert await consumer.process("v1", writes(store, "v1"), key="o-1", sequence=1) is Outcome.STALE
    assert await consumer.process("v2bis", writes(store, "v2bis"), key="o-1", sequence=2) is Outcome.STALE
    # Then neither ran, both are recorded as stale (a resend is a duplicate), and newer versions still apply
    assert await store.outcome("shop", "v1") == "stale"
    assert await consumer.process("v1", writes(store, "v1"), key="o-1", sequence=1) is Outcome.DUPLICATE
    assert await consumer.process("v3", writes(store, "v3"), key="o-1", sequence=3) is Outcome.APPLIED
    # And other keys have sequences of their own
    assert await consumer.process("p1", writes(store, "p1"), key="o-2", sequence=1) is Outcome.APPLIED
    assert [r[0] for r in await effect_rows(store)] == ["p1", "v2", "v3"]
    assert await store.last_seq("shop", "o-1") == 3


async def test_a_crash_after_the_effect_rolls_it_back_and_the_redelivery_applies_once(store: Store) -> None:
    await create_effects_table(store)
    consumer = IdempotentConsumer(store, "shop")

    # Given an effect that writes its row, then the process fails before the commit
    async def crashes(tx: Transaction) -> None:
        await writes(store, "evt_c", "first try")(tx)
        raise RuntimeError("crash between the effect and the commit")

    # When it is delivered, Then the error propagates and nothing is left: neither the row nor the record
    with pytest.raises(RuntimeError, match="crash between"):
        await consumer.process("evt_c", crashes, key="k", sequence=1)
    assert await effect_rows(store) == []
    assert await store.outcome("shop", "evt_c") is None
    assert await store.last_seq("shop", "k") is None
    # When it is redelivered (twice), Then the effect is applied exactly once
    assert await consumer.process("evt_c", writes(store, "evt_c", "redelivery"), key="k", sequence=1) is Outcome.APPLIED
    assert await consumer.process("evt_c", writes(store, "evt_c", "again"), key="k", sequence=1) is Outcome.DUPLICATE
    assert await effect_rows(store) == [("evt_c", "redelivery")]


class FailingBookkeeping:
    """A store whose transactions fail while recording the sequence, i.e. after the effect already ran."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[StoreTransaction]:
        async with self.inner.transaction() as tx:

            async def fail(*_: Any) -> None:
                raise ConnectionResetError("lost the database while recording the sequence")

            tx.set_last_seq = fail  # type: ignore[method-assign, assignment]
            yield tx


async def test_a_failure_in_the_bookkeeping_after_the_effect_rolls_the_effect_back(store: Store) -> None:
    await create_effects_table(store)
    broken = IdempotentConsumer(FailingBookkeeping(store), "shop")  # type: ignore[arg-type]
    with pytest.raises(ConnectionResetError):
        await broken.process("evt_b", writes(store, "evt_b"), key="k", sequence=5)
    assert await effect_rows(store) == []
    consumer = IdempotentConsumer(store, "shop")
    assert await consumer.process("evt_b", writes(store, "evt_b"), key="k", sequence=5) is Outcome.APPLIED
    assert await effect_rows(store) == [("evt_b", "")]


async def test_sync_effects_work_too(store: Store) -> None:
    ran: list[str] = []
    consumer = IdempotentConsumer(store, "shop")
    assert await consumer.process("e", lambda tx: ran.append(tx.kind)) is Outcome.APPLIED
    assert ran == [store.kind]


async def test_concurrent_deliveries_of_one_id_apply_once(store: Store) -> None:
    # Given an effect slow enough for deliveries to overlap
    await create_effects_table(store)
    consumer = IdempotentConsumer(store, "shop")
    running = 0
    overlap = 0

    async def slow(tx: Transaction) -> None:
        nonlocal running, overlap
        running += 1
        overlap = max(overlap, running)
        await writes(store, "evt_race")(tx)
        await asyncio.sleep(0.05)
        running -= 1

    # When eight deliveries of the same id arrive at once
    outcomes = await asyncio.gather(*(consumer.process("evt_race", slow) for _ in range(8)))
    # Then exactly one applied, and the effect ran once
    assert sorted(outcomes) == sorted([Outcome.APPLIED] + [Outcome.DUPLICATE] * 7)
    assert await effect_rows(store) == [("evt_race", "")]
    assert overlap == 1


async def test_concurrent_out_of_order_sequences_of_one_key(store: Store) -> None:
    # Given versions 1..12 of one key delivered all at once, in a shuffled order
    await create_effects_table(store)
    consumer = IdempotentConsumer(store, "shop")
    versions = list(range(1, 13))
    random.Random(7).shuffle(versions)

    async def deliver(seq: int) -> tuple[int, Outcome]:
        return seq, await consumer.process(f"v{seq}", writes(store, f"v{seq}", str(seq)), key="o", sequence=seq)

    results = await asyncio.gather(*(deliver(s) for s in versions))
    applied = sorted(seq for seq, outcome in results if outcome is Outcome.APPLIED)
    # Then the newest version is applied, the last sequence is the newest, every effect row is an applied one,
    # and every stale version is older than some applied version
    assert 12 in applied
    assert await store.last_seq("shop", "o") == 12
    assert sorted(int(note or 0) for _, note in await effect_rows(store)) == applied
    assert all(seq < max(applied) for seq, outcome in results if outcome is Outcome.STALE)


async def test_expired_ids_are_forgotten_and_purged_in_bounded_batches(store: Store) -> None:
    # Given a retention of 100 s and a clock we move
    await create_effects_table(store)
    clock = Clock()
    consumer = IdempotentConsumer(store, "shop", retention=100, clock=clock)
    for event_id in ("old1", "old2", "old3"):
        await consumer.process(event_id, writes(store, event_id))
    clock.now += 60
    for event_id in ("new1", "new2"):
        await consumer.process(event_id, writes(store, event_id))
    # When 50 s have passed, old1 is still a duplicate
    clock.now += 30
    assert await consumer.process("old1", writes(store, "old1", "too soon")) is Outcome.DUPLICATE
    # When the old ones are past retention, a purge in batches of 2 deletes exactly those three
    clock.now += 20
    assert await store.purge_expired(clock.now, 2) == 2
    assert await consumer.purge_expired(batch=2) == 1
    assert [await store.seen("shop", e, clock.now) for e in ("old1", "old2", "old3", "new1", "new2")] == [
        False,
        False,
        False,
        True,
        True,
    ]
    # And an id past retention is new again, even before the purge reaches it
    clock.now += 100
    assert await consumer.process("new1", writes(store, "new1", "after retention")) is Outcome.APPLIED
