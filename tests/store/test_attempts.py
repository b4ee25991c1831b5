"""The attempt log in the store, on SQLite and PostgreSQL: idempotent inserts, the two reads, retention."""

from __future__ import annotations

import pytest

from tests.support.attempts import T0, attempt, delivered
from warren.store.attempts import AttemptLog

pytestmark = pytest.mark.timeout(30)


async def test_a_record_stored_twice_is_stored_once(attempts: AttemptLog) -> None:
    # Given a batch of three records, one of them repeated inside the batch
    first, second, third = attempt(), attempt(attempt=2, at=T0 + 1), delivered(attempt=3, at=T0 + 2)
    # When it is stored, then stored again with one new record
    assert await attempts.add_many([first, second, third, first]) == 3
    fourth = delivered(endpoint="audit", at=T0 + 3)
    assert await attempts.add_many([first, second, third, fourth]) == 1
    # Then each record is there once, as it was given
    assert await attempts.for_event("evt_1") == [first, second, third, fourth]
    assert await attempts.add_many([]) == 0


async def test_an_events_attempts_come_in_time_order_across_endpoints(attempts: AttemptLog) -> None:
    # Given attempts of two events at two endpoints, stored out of order (two in the same instant)
    a2 = attempt(endpoint="billing", attempt=2, at=T0 + 5)
    a1 = attempt(endpoint="billing", attempt=1, at=T0)
    b1 = delivered(endpoint="audit", attempt=1, at=T0)
    a3 = delivered(endpoint="billing", attempt=3, at=T0 + 9)
    other = attempt(event_id="evt_2", at=T0 + 1)
    await attempts.add_many([a3, other, a2, b1, a1])
    # Then the event's attempts are in time order, then attempt number, then endpoint; the other event apart
    assert await attempts.for_event("evt_1") == [b1, a1, a2, a3]
    assert await attempts.for_event("evt_2") == [other]
    assert await attempts.for_event("evt_none") == []


async def test_an_endpoints_attempts_page_newest_first_with_filters(attempts: AttemptLog) -> None:
    # Given 7 attempts at billing (every third delivered, two sharing an instant) and one at another endpoint
    made = [(delivered if i % 3 == 0 else attempt)(event_id=f"evt_{i}", at=T0 + (i if i != 5 else 4)) for i in range(7)]
    await attempts.add_many([*made, attempt(endpoint="audit", at=T0 + 3)])
    newest_first = sorted(made, key=lambda e: (e.at, e.id), reverse=True)
    # When paging three at a time
    pages, cursor = [], None
    while True:
        page = await attempts.for_endpoint("billing", limit=3, cursor=cursor)
        pages.append(page.entries)
        if (cursor := page.next_cursor) is None:
            break
    # Then every attempt comes once, newest first, and the last page says it is the last
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [e for p in pages for e in p] == newest_first
    # And the filters: failed only, since (inclusive) and until (exclusive)
    failed = await attempts.for_endpoint("billing", failed_only=True)
    assert failed.entries == [e for e in newest_first if e.outcome != "delivered"] and failed.next_cursor is None
    window = await attempts.for_endpoint("billing", since=T0 + 2, until=T0 + 4)
    assert [e.at for e in window.entries] == [T0 + 3, T0 + 2]
    # And a cursor it did not make is refused
    with pytest.raises(ValueError, match="not a cursor"):
        await attempts.for_endpoint("billing", cursor="bm9wZQ")


async def test_retention_purges_only_older_records_in_bounded_batches(attempts: AttemptLog) -> None:
    # Given 25 old records and 5 recent ones
    old = [attempt(event_id=f"old_{i}", at=T0 + i) for i in range(25)]
    recent = [attempt(event_id=f"new_{i}", at=T0 + 100 + i) for i in range(5)]
    await attempts.add_many(old + recent)
    # When purging before T0 + 100, ten rows per transaction
    assert await attempts.purge_older_than(T0 + 100, batch=10) == 25
    # Then only the recent ones remain, and purging again finds nothing
    remaining = await attempts.for_endpoint("billing", limit=100)
    assert sorted(e.event_id for e in remaining.entries) == sorted(e.event_id for e in recent)
    assert await attempts.purge_older_than(T0 + 100, batch=10) == 0


async def test_a_nul_character_is_stored_as_a_replacement_character(attempts: AttemptLog) -> None:
    # PostgreSQL text refuses NUL; a record is still stored, its NUL made visible
    await attempts.add_many([attempt(error="bad\x00byte")])
    [stored] = await attempts.for_event("evt_1")
    assert stored.error == "bad\ufffdbyte"
