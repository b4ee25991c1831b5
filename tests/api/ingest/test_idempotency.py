"""The ingest API with an idempotency store (real SQLite, real PostgreSQL): one publish per key and body,
422 ``idempotency_conflict`` for the same key with another body, keys forgotten after the retention."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aio_pika
import orjson
import pytest

from tests.api.ingest.conftest import ApiServer, work_queue
from tests.support.postgres import empty_database_url
from warren.api.ingest.idempotent import REPLAYED_HEADER
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)

Start = Callable[..., Awaitable[ApiServer]]


@pytest.fixture(params=["sqlite", "postgresql"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A fresh store of each kind: a SQLite file, or a PostgreSQL schema of its own."""
    async with empty_database_url(request.param, tmp_path, "keys.sqlite3") as url:
        yield url


async def _published(config: WarrenConfig) -> list[dict[str, Any]]:
    """Every event in the endpoint's queue (taken off it)."""
    connection = await aio_pika.connect(config.broker.url)
    try:
        queue = await (await connection.channel()).get_queue(work_queue(config))
        await asyncio.sleep(0.2)  # confirms are in, but let the queue settle before reading it empty
        bodies = []
        while (message := await queue.get(no_ack=True, fail=False)) is not None:
            bodies.append(orjson.loads(message.body))
        return bodies
    finally:
        await connection.close()


def _post(api: ApiServer, path: str, body: dict[str, Any], key: str) -> Awaitable[Any]:
    return api.post(path, body, headers={"Idempotency-Key": key})


async def test_the_same_key_and_body_is_published_once_and_answered_alike(
    api_config: Callable[..., WarrenConfig], start_api: Start, store_url: str
) -> None:
    # Given the API with an idempotency store
    api = await start_api(api_config(api={"idempotency_store": store_url}))
    event = {"type": "order.created", "data": {"n": 1}}
    # When one request is sent three times with one key
    replies = [await _post(api, "/v1/events", event, "order-1") for _ in range(3)]
    # Then every answer is the first one (the later ones say they are replays), and one event was published
    assert [(r.status, r.body) for r in replies] == [(202, {"id": "order-1"})] * 3
    assert REPLAYED_HEADER not in replies[0].headers and replies[2].headers[REPLAYED_HEADER] == "true"
    assert [e["id"] for e in await _published(api.config)] == ["order-1"]


@pytest.mark.parametrize(
    ("path", "first", "second"),
    [
        ("/v1/events", {"type": "order.created", "data": {"n": 1}}, {"type": "order.created", "data": {"n": 2}}),
        ("/v1/events", {"type": "order.created", "data": 1}, {"type": "order.paid", "data": 1}),
        (
            "/v1/events/batch",
            {"events": [{"type": "order.created", "data": 1}]},
            {"events": [{"type": "order.created", "data": 1}, {"type": "order.paid", "data": 2}]},
        ),
    ],
    ids=["other-data", "other-type", "batch"],
)
async def test_the_same_key_with_another_body_is_422_and_nothing_more_is_published(
    api_config: Callable[..., WarrenConfig],
    start_api: Start,
    store_url: str,
    path: str,
    first: dict[str, Any],
    second: dict[str, Any],
) -> None:
    api = await start_api(api_config(api={"idempotency_store": store_url}))
    # Given a request accepted with a key
    assert (await _post(api, path, first, "k-1")).status == 202
    # When another body comes with the same key
    reply = await _post(api, path, second, "k-1")
    # Then it is refused as a conflict, and only the first request's events are in the queue
    assert reply.status == 422 and reply.error == "idempotency_conflict", reply.body
    published = await _published(api.config)
    expected = first.get("events", [first])
    assert [(e["type"], e["data"]) for e in published] == [(x["type"], x["data"]) for x in expected]


async def test_a_key_is_forgotten_after_the_retention(
    api_config: Callable[..., WarrenConfig], start_api: Start, store_url: str
) -> None:
    # Given a store that keeps keys for 300 ms, and a request accepted with a key
    config = api_config(api={"idempotency_store": store_url, "idempotency_retention": "300ms"})
    api = await start_api(config)
    assert (await _post(api, "/v1/events", {"type": "order.created", "data": 1}, "k-2")).status == 202
    # When the same key comes with another body after the retention
    await asyncio.sleep(0.4)
    reply = await _post(api, "/v1/events", {"type": "order.created", "data": 2}, "k-2")
    # Then it is a new request: accepted and published
    assert reply.status == 202 and REPLAYED_HEADER not in reply.headers
    assert [e["data"] for e in await _published(api.config)] == [1, 2]


async def test_concurrent_requests_with_one_key_publish_once(
    api_config: Callable[..., WarrenConfig], start_api: Start, store_url: str
) -> None:
    # Given the API with a store; When the same request is sent 5 times at once with one key
    api = await start_api(api_config(api={"idempotency_store": store_url}))
    event = {"type": "order.created", "data": {"n": 1}}
    replies = await asyncio.gather(*(_post(api, "/v1/events", event, "k-3") for _ in range(5)))
    # Then each one is the stored 202 or "in progress, retry" (409), and exactly one event was published
    assert {r.status for r in replies} <= {202, 409} and 202 in {r.status for r in replies}
    assert all(r.error == "idempotency_in_progress" for r in replies if r.status == 409)
    assert len(await _published(api.config)) == 1


async def test_without_a_store_a_retry_is_published_again(
    api_config: Callable[..., WarrenConfig], start_api: Start
) -> None:
    # The documented behaviour without a store: each copy is published; receivers deduplicate on webhook-id
    api = await start_api(api_config())
    for data in (1, 2):
        assert (await _post(api, "/v1/events", {"type": "order.created", "data": data}, "k-4")).status == 202
    assert [(e["id"], e["data"]) for e in await _published(api.config)] == [("k-4", 1), ("k-4", 2)]
