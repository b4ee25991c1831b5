"""POST /v1/events/batch against a real RabbitMQ: validation all-or-nothing, publishing per event (202/207/409)."""

from __future__ import annotations

import io
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest

from tests.api.ingest.conftest import ApiServer, work_queue
from tests.support.health import message_count
from warren.api.ingest import body as body_module
from warren.api.ingest.schemas import BatchIn
from warren.topology.config import WarrenConfig

Start = Callable[..., Awaitable[ApiServer]]


@pytest.fixture
async def api(api_config: Callable[..., WarrenConfig], start_api: Start) -> ApiServer:
    return await start_api(api_config(api={"max_batch": 5}))


def order(n: int, **extra: Any) -> dict[str, Any]:
    return {"type": "order.created", "data": {"n": n}, **extra}


async def test_all_stored_is_202_with_ids_in_request_order(api: ApiServer, queue_reader: Any) -> None:
    # Given a batch of three events and an Idempotency-Key
    reply = await api.post(
        "/v1/events/batch", {"events": [order(0), order(1, id="own-id"), order(2)]}, headers={"Idempotency-Key": "b1"}
    )
    # Then every event is stored under <key>.<index>, or its own id
    assert reply.status == 202, reply.body
    assert reply.body == {"ids": ["b1.0", "own-id", "b1.2"], "failed": []}
    messages = await queue_reader(work_queue(api.config), 3)
    assert sorted(m.message_id for m in messages if m.message_id) == ["b1.0", "b1.2", "own-id"]
    assert {orjson.loads(m.body)["data"]["n"] for m in messages} == {0, 1, 2}


async def test_retrying_a_batch_with_its_key_repeats_the_same_ids(api: ApiServer) -> None:
    body = {"events": [order(0), order(1)]}
    first = await api.post("/v1/events/batch", body, headers={"Idempotency-Key": "retry-me"})
    second = await api.post("/v1/events/batch", body, headers={"Idempotency-Key": "retry-me"})
    assert first.body["ids"] == second.body["ids"] == ["retry-me.0", "retry-me.1"]


async def test_some_unroutable_is_207_naming_what_was_and_was_not_stored(api: ApiServer, queue_reader: Any) -> None:
    # Given a batch where the middle event has a type no endpoint subscribes to
    events = [order(0, id="e0"), {"type": "invoice.sent", "data": {}, "id": "e1"}, order(2, id="e2")]
    reply = await api.post("/v1/events/batch", {"events": events})
    # Then the two routable events are stored and the third is reported, by index and id
    assert reply.status == 207, reply.body
    assert reply.body["ids"] == ["e0", "e2"]
    assert [(f["index"], f["id"], f["error"]) for f in reply.body["failed"]] == [(1, "e1", "unroutable")]
    assert "Retry-After" not in reply.headers  # retrying an unroutable event would not help
    messages = await queue_reader(work_queue(api.config), 2)
    assert sorted(m.message_id or "" for m in messages) == ["e0", "e2"]


async def test_none_routable_is_409_with_every_failure(api: ApiServer) -> None:
    reply = await api.post("/v1/events/batch", {"events": [{"type": "a.b", "data": 1}, {"type": "c.d", "data": 2}]})
    assert reply.status == 409 and reply.error == "unroutable"
    assert [f["index"] for f in reply.body["failed"]] == [0, 1]


async def test_one_invalid_event_refuses_the_whole_batch(api: ApiServer) -> None:
    # Given a batch whose second event has no type
    reply = await api.post("/v1/events/batch", {"events": [order(0), {"data": 1}]})
    # Then it is a 422 naming events[1].type, and nothing was published
    assert reply.status == 422
    assert reply.body["fields"][0]["field"] == "events[1].type"
    assert await message_count(api.config, work_queue(api.config)) == 0  # exact: a passive declare


async def test_more_than_max_batch_is_422_on_events(api: ApiServer) -> None:
    reply = await api.post("/v1/events/batch", {"events": [order(i) for i in range(6)]})
    assert reply.status == 422 and reply.body["fields"][0]["field"] == "events"
    assert "at most 5" in reply.body["message"]


async def test_a_huge_batch_of_tiny_events_is_refused_before_it_is_parsed(
    api_config: Callable[..., WarrenConfig], start_api: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the API with its default limits (500 events, 4 MiB), and a watch on the full parse
    api = await start_api(api_config())
    parsed: list[int] = []
    real = BatchIn.model_validate_json
    monkeypatch.setattr(BatchIn, "model_validate_json", lambda raw, **kw: parsed.append(len(raw)) or real(raw, **kw))
    monkeypatch.setattr(body_module, "duplicate_key", lambda *a: parsed.append(-1))
    body = b'{"events": [' + b",".join([b'{"type":"a","data":1}'] * 190_000) + b"]}"
    assert len(body) < api.config.api.max_body
    # When 190,000 tiny events (4 MiB) are posted at once
    started = time.perf_counter()
    # (a stream: aiohttp warns that a large bytes body blocks the loop while it is copied)
    stream = io.BytesIO(body)
    reply = await api.post("/v1/events/batch", data=stream, headers={"Content-Type": "application/json"})
    elapsed = time.perf_counter() - started
    # Then the answer is the usual 422 on events, and neither the full parse nor the duplicate check ran
    assert reply.status == 422 and reply.body["fields"][0]["field"] == "events", reply.body
    assert "at most 500" in reply.body["message"]
    assert parsed == []
    assert elapsed < 2.0  # loose: the refusal reads the body and counts 501 events (about 20 ms here)


async def test_empty_batch_is_422(api: ApiServer) -> None:
    reply = await api.post("/v1/events/batch", {"events": []})
    assert reply.status == 422 and reply.body["fields"][0]["field"] == "events"


async def test_one_oversized_event_refuses_the_whole_batch(
    api_config: Callable[..., WarrenConfig], start_api: Start
) -> None:
    api = await start_api(api_config(delivery={"max_payload": 1024}))
    reply = await api.post("/v1/events/batch", {"events": [order(0), {"type": "order.created", "data": "x" * 2000}]})
    assert reply.status == 413 and reply.body["message"].startswith("events[1]")
    assert await message_count(api.config, work_queue(api.config)) == 0  # exact: a passive declare


async def test_batch_key_too_long_for_the_indexes_is_422(api: ApiServer) -> None:
    # max_batch 5: the key must leave room for ".4"
    reply = await api.post("/v1/events/batch", {"events": [order(0)]}, headers={"Idempotency-Key": "k" * 199})
    assert reply.status == 422 and reply.body["fields"][0]["field"] == "Idempotency-Key"
