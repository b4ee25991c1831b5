"""The attempt log through the admin API, on each store: records workers publish reach the writer inside
``warren api`` and come back by event (in order) and by endpoint (filtered, a page at a time)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.api.admin.conftest import AdminServer
from tests.api.ingest.conftest import TOKEN, ApiServer
from tests.support.attempts import T0, attempt, delivered, publish
from tests.support.health import wait_until
from warren.api.attempt_writer import WRITER
from warren.store.attempt_records import AttemptEntry, encode_batch
from warren.store.attempts import AttemptLog
from warren.topology.config import StoreSettings, WarrenConfig

Start = Callable[..., Awaitable[AdminServer]]

pytestmark = pytest.mark.timeout(40)


async def published(admin: AdminServer, batches: list[list[AttemptEntry]]) -> None:
    """Publish the batches as workers do, and wait until the API's writer stored them."""
    writer = admin.api.app[WRITER]
    before = writer.stats.messages
    await publish(admin.config, [encode_batch(batch) for batch in batches])
    await wait_until(lambda: writer.stats.messages == before + len(batches), 15, "the batches stored")


def ids(body: dict[str, Any]) -> list[str]:
    return [a["id"] for a in body["data"]]


def rfc3339(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).isoformat().replace("+00:00", "Z")


async def test_an_events_attempts_come_in_order_across_endpoints(start_admin: Start) -> None:
    # Given an event retried twice at billing and delivered at once to audit, recorded by two workers in
    # batches that arrive out of order, beside another event's attempt
    admin = await start_admin()
    first = attempt(endpoint="billing", attempt=1, at=T0, worker="w1:1")
    audit = delivered(endpoint="audit", attempt=1, at=T0 + 0.004, tenant=None, worker="w2:2")
    second = attempt(endpoint="billing", attempt=2, at=T0 + 0.9, status=None, error="timed out", worker="w2:2")
    third = delivered(endpoint="billing", attempt=3, at=T0 + 2.5, worker="w1:1")
    other = attempt(event_id="evt_other", at=T0 + 1)
    await published(admin, [[third, other], [second], [first, audit]])
    # When its attempts are read
    reply = await admin.call("GET", "/v1/events/evt_1/attempts")
    # Then every attempt is there once, in time order, with what each one did
    assert reply.status == 200, reply.body
    assert reply.body["event_id"] == "evt_1"
    assert ids(reply.body) == [first.id, audit.id, second.id, third.id]
    shown = reply.body["data"][2]
    assert shown == {
        "id": second.id,
        "event_id": "evt_1",
        "tenant": "acme",
        "endpoint": "billing",
        "attempt": 2,
        "at": rfc3339(T0 + 0.9)[:-4] + "Z",  # milliseconds
        "status": None,
        "duration_ms": 12.5,
        "outcome": "retry",
        "failed": True,
        "error": "timed out",
        "next_delay_s": 0.8,
        "worker": "w2:2",
        "response": None,  # it timed out: no answer
        "response_headers": None,
    }
    assert [a["failed"] for a in reply.body["data"]] == [True, False, True, False]
    # And an event without attempts has an empty list; producer tokens are refused
    none = await admin.call("GET", "/v1/events/evt_none/attempts")
    assert (none.status, none.body["data"]) == (200, [])
    refused = await admin.call("GET", "/v1/events/evt_1/attempts", token=TOKEN)
    assert refused.status == 401


async def test_an_endpoints_attempts_filter_by_status_and_time_and_page_newest_first(start_admin: Start) -> None:
    # Given 9 attempts at billing, one a second, every third one delivered, and one at another endpoint
    admin = await start_admin()
    made = [(delivered if i % 3 == 2 else attempt)(event_id=f"evt_{i}", at=T0 + i) for i in range(9)]
    await published(admin, [made[:5], made[5:], [attempt(endpoint="audit", at=T0 + 4)]])
    newest_first = [e.id for e in reversed(made)]

    async def pages(query: str) -> list[list[str]]:
        found, cursor = [], None
        while True:
            suffix = f"&cursor={cursor}" if cursor else ""
            reply = await admin.call("GET", f"/v1/endpoints/billing/attempts?{query}{suffix}")
            assert reply.status == 200, reply.body
            found.append(ids(reply.body))
            if (cursor := reply.body["next_cursor"]) is None:
                return found

    # When listing four at a time, then the failed ones, then a window (epoch seconds, then RFC 3339)
    assert await pages("limit=4") == [newest_first[:4], newest_first[4:8], newest_first[8:]]
    failed = [e.id for e in reversed(made) if e.failed]
    assert await pages("status=failed&limit=5") == [failed[:5], failed[5:]]
    assert await pages(f"since={T0 + 3:.0f}&until={T0 + 6:.0f}") == [[made[5].id, made[4].id, made[3].id]]
    window = f"since={rfc3339(T0 + 7)}&until={rfc3339(T0 + 100)}&status=all"
    assert await pages(window) == [[made[8].id, made[7].id]]
    # And an endpoint with no attempts (or unknown to the store) has an empty page, not a 404
    nobody = await admin.call("GET", "/v1/endpoints/nobody/attempts")
    assert (nobody.status, nobody.body) == (200, {"data": [], "next_cursor": None})


async def test_bad_queries_are_refused_with_the_field(start_admin: Start) -> None:
    admin = await start_admin()
    for query, field in (
        ("since=yesterday", "since"),
        ("until=2025-13-01T00:00:00Z", "until"),
        ("status=dead", "status"),
        ("limit=0", "limit"),
        ("cursor=bm9wZQ", "cursor"),
    ):
        reply = await admin.call("GET", f"/v1/endpoints/billing/attempts?{query}")
        assert (reply.status, reply.body["error"]) == (422, "invalid_request"), (query, reply.body)
        assert reply.body["fields"][0]["field"] == field, (query, reply.body)
    bad_id = await admin.call("GET", "/v1/events/a%20b/attempts")
    assert (bad_id.status, bad_id.body["fields"][0]["field"]) == (422, "event_id")


async def test_without_admin_tokens_the_api_still_writes_the_attempt_log(
    make_config: Callable[..., WarrenConfig], store_url: str, start_api: Callable[..., Awaitable[ApiServer]]
) -> None:
    # Given `warren api` with a store but no admin API
    config = make_config(api={"tokens": [TOKEN]}, store={"url": store_url})
    api = await start_api(config)
    writer = api.app[WRITER]
    await writer.consuming.wait()
    # When workers publish a batch
    record = delivered(event_id="evt_plain")
    await publish(config, [encode_batch([record])])
    # Then it is stored (the writer opened the store itself), and the admin routes are not there
    await wait_until(lambda: writer.stats.messages == 1, 15, "the batch stored")
    log = await AttemptLog.open(StoreSettings(url=store_url))
    try:
        assert await log.for_event("evt_plain") == [record]
    finally:
        await log.close()
    assert (await api.request("GET", "/v1/events/evt_plain/attempts")).status == 404
