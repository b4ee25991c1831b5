"""The ingest API against a real RabbitMQ: every status code of POST /v1/events, and what lands in the queue."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest

from tests.api.ingest.conftest import OTHER_TOKEN, ApiServer, work_queue
from warren.broker import wire
from warren.broker.publisher import TENANT_EVENTS_UNROUTED
from warren.topology.config import WarrenConfig

Start = Callable[..., Awaitable[ApiServer]]


async def test_event_lands_in_the_endpoint_queue_with_its_id_type_and_body(api: ApiServer, queue_reader: Any) -> None:
    # Given an endpoint subscribed to order.*
    # When a producer posts an order.created event with a key and a sequence
    reply = await api.post("/v1/events", {"type": "order.created", "data": {"n": 1}, "key": "cust-1", "sequence": 4})
    # Then the answer is 202 with the id, and the message is already in the endpoint's queue
    assert reply.status == 202, reply.body
    event_id = reply.body["id"]
    assert event_id.startswith("msg_")
    [message] = await queue_reader(work_queue(api.config), 1)
    assert message.routing_key == "order.created"
    assert message.message_id == event_id
    assert message.content_type == "application/json"
    assert message.headers[wire.H_KEY] == "cust-1"
    assert message.headers[wire.H_SEQUENCE] == 4
    body = orjson.loads(message.body)
    assert body["id"] == event_id and body["type"] == "order.created" and body["data"] == {"n": 1}
    assert body["key"] == "cust-1" and body["sequence"] == 4


async def test_idempotency_key_becomes_the_event_id_on_every_retry(api: ApiServer, queue_reader: Any) -> None:
    # Given a producer that posts the same event twice with one Idempotency-Key (a retry)
    event = {"type": "order.paid", "data": {"total": 10}}
    first = await api.post("/v1/events", event, headers={"Idempotency-Key": "order-77-paid"})
    second = await api.post("/v1/events", event, headers={"Idempotency-Key": "order-77-paid"})
    # Then both answers carry the key as id, and both copies flow with that message_id (no dedup at ingest)
    assert (first.status, second.status) == (202, 202)
    assert first.body["id"] == second.body["id"] == "order-77-paid"
    messages = await queue_reader(work_queue(api.config), 2)
    assert [m.message_id for m in messages] == ["order-77-paid", "order-77-paid"]


async def test_an_id_in_the_body_wins_over_the_idempotency_key(api: ApiServer) -> None:
    reply = await api.post(
        "/v1/events", {"type": "order.paid", "data": 1, "id": "evt_own"}, headers={"Idempotency-Key": "k1"}
    )
    assert reply.status == 202 and reply.body["id"] == "evt_own"


async def test_second_configured_token_is_accepted(api: ApiServer) -> None:
    reply = await api.post("/v1/events", {"type": "order.created", "data": None}, token=OTHER_TOKEN)
    assert reply.status == 202


@pytest.mark.parametrize(
    ("token", "headers"),
    [
        (None, {}),
        ("wrong-token-0123456789abcdef", {}),
        (None, {"Authorization": "Basic dXNlcjpwYXNz"}),
    ],
    ids=["missing", "wrong", "not-bearer"],
)
async def test_401_without_a_valid_bearer_token(api: ApiServer, token: str | None, headers: dict[str, str]) -> None:
    reply = await api.post("/v1/events", {"type": "order.created", "data": {}}, token=token, headers=headers)
    assert reply.status == 401
    assert reply.error == "unauthorized"
    assert reply.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/v1/events", b'{"type": "order.created", "data": {}, "type": "order.paid"}', "type"),
        ("/v1/events", b'{"type": "order.created", "data": {"a": 1, "a": 2}}', "a"),
        ("/v1/events/batch", b'{"events": [{"type": "order.paid", "data": 1, "data": 2}]}', "data"),
        ("/v1/events/batch", b'{"events": [], "events": [{"type": "order.paid", "data": 1}]}', "events"),
    ],
)
async def test_400_for_a_duplicate_key(api: ApiServer, path: str, body: bytes, key: str) -> None:
    # Given JSON that a proxy and Warren could read differently (last one wins here, the first one elsewhere)
    reply = await api.post(path, data=body, headers={"Content-Type": "application/json"})
    # Then it is refused as malformed (before anything is published), naming the key
    assert reply.status == 400 and reply.error == "malformed_json", reply.body
    assert f"duplicate key {key!r}" in reply.body["message"]


async def test_400_for_malformed_json(api: ApiServer) -> None:
    reply = await api.post(
        "/v1/events", data=b'{"type": "order.created", "data": ', headers={"Content-Type": "application/json"}
    )
    assert reply.status == 400 and reply.error == "malformed_json"


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "application/json; charset=latin-1", None]
)
async def test_415_for_a_body_that_is_not_json(api: ApiServer, content_type: str | None) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    reply = await api.post("/v1/events", data=b'{"type": "order.created", "data": 1}', headers=headers)
    assert reply.status == 415 and reply.error == "unsupported_media_type"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"data": {}}, "type"),
        ({"type": "order.created"}, "data"),
        ({"type": "order.*", "data": 1}, "type"),
        ({"type": "order.created", "data": 1, "sequence": -1}, "sequence"),
        ({"type": "order.created", "data": 1, "sequence": "3"}, "sequence"),
        ({"type": "order.created", "data": 1, "id": "has space"}, "id"),
        ({"type": "order.created", "data": 1, "key": "é" * 101}, "key"),
        ({"type": "order.created", "data": 1, "sequense": 3}, "sequense"),
        (["not", "an", "object"], "(body)"),
        ({"type": "order.created", "data": 1, "tenant": "Acme.Corp"}, "tenant"),
    ],
    ids=[
        "no-type",
        "no-data",
        "wildcard-type",
        "negative-seq",
        "string-seq",
        "bad-id",
        "key-bytes",
        "typo",
        "array",
        "bad-tenant",
    ],
)
async def test_422_names_the_field(api: ApiServer, body: Any, field: str) -> None:
    reply = await api.post("/v1/events", body)
    assert reply.status == 422, reply.body
    assert reply.error == "invalid_event"
    assert field in [f["field"] for f in reply.body["fields"]]
    assert reply.body["message"].startswith(field)


async def test_422_for_an_idempotency_key_that_cannot_be_an_id(api: ApiServer) -> None:
    reply = await api.post("/v1/events", {"type": "order.created", "data": 1}, headers={"Idempotency-Key": "a b"})
    assert reply.status == 422
    assert reply.body["fields"][0]["field"] == "Idempotency-Key"


async def test_409_when_no_endpoint_subscribes_to_the_type(api: ApiServer, queue_reader: Any) -> None:
    # Given an endpoint subscribed to order.* only
    # When an invoice.sent event arrives
    reply = await api.post("/v1/events", {"type": "invoice.sent", "data": {}})
    # Then RabbitMQ returned it, and the producer is told it was not stored
    assert reply.status == 409 and reply.error == "unroutable"
    assert "invoice.sent" in reply.body["message"]
    # And the API keeps working afterwards (the returned message did not break the channel)
    assert (await api.post("/v1/events", {"type": "order.created", "data": {}})).status == 202


async def test_202_for_a_tenant_nobody_serves_counted_not_refused(api: ApiServer) -> None:
    # Given no endpoint for tenant "newcomer" (the configured one has no tenant and no all_tenants)
    before = TENANT_EVENTS_UNROUTED.labels("newcomer")._value.get()
    # When an event for it arrives
    reply = await api.post("/v1/events", {"type": "order.created", "data": {}, "tenant": "newcomer"})
    # Then it is accepted and counted: a tenant without endpoints yet is normal, not the producer's mistake
    assert reply.status == 202, reply.body
    assert TENANT_EVENTS_UNROUTED.labels("newcomer")._value.get() == before + 1


async def test_413_for_a_declared_length_over_max_body_before_reading_it(
    api_config: Callable[..., WarrenConfig], start_api: Start
) -> None:
    api = await start_api(api_config(api={"max_body": 2048}))
    big = orjson.dumps({"type": "order.created", "data": "x" * 5000})
    reply = await api.post("/v1/events", data=big, headers={"Content-Type": "application/json"})
    assert reply.status == 413 and reply.error == "payload_too_large"
    assert "api.max_body" in reply.body["message"]


CHUNKS = 200


async def test_413_for_a_chunked_body_as_soon_as_it_passes_max_body(
    api_config: Callable[..., WarrenConfig], start_api: Start
) -> None:
    # Given a body sent chunked, without Content-Length, far larger than the limit
    api = await start_api(api_config(api={"max_body": 2048}))
    sent = 0

    async def chunks() -> Any:
        nonlocal sent
        yield b'{"type": "order.created", "data": "'
        for _ in range(CHUNKS):
            sent += 1
            yield b"x" * 65536
        yield b'"}'

    headers = {
        "Content-Type": "application/json",
        "Authorization": "Bearer " + api_config().api.tokens[0].get_secret_value(),
    }
    # Then it is refused with 413 as soon as the limit is passed: the server stops reading there and closes, so
    # the client never gets to send most of the body (12.5 MiB: more than the sockets' buffers can hold)
    async with api.session.post(api.url + "/v1/events", data=chunks(), headers=headers) as response:
        assert response.status == 413
        assert (await response.json())["error"] == "payload_too_large"
    assert sent < CHUNKS // 2, f"{sent} of {CHUNKS} chunks of 64 KiB were sent before the 413"


async def test_413_when_the_webhook_body_is_over_delivery_max_payload(
    api_config: Callable[..., WarrenConfig], start_api: Start
) -> None:
    api = await start_api(api_config(delivery={"max_payload": 1024}))
    reply = await api.post("/v1/events", {"type": "order.created", "data": "x" * 2000})
    assert reply.status == 413
    assert "delivery.max_payload" in reply.body["message"]


async def test_422_for_a_type_outside_allowed_event_types(
    api_config: Callable[..., WarrenConfig], start_api: Start
) -> None:
    api = await start_api(api_config(api={"allowed_event_types": ["order.#"]}))
    allowed = await api.post("/v1/events", {"type": "order.created", "data": 1})
    refused = await api.post("/v1/events", {"type": "user.created", "data": 1})
    assert allowed.status == 202
    assert refused.status == 422 and refused.error == "event_type_not_allowed"
    assert refused.body["fields"][0]["field"] == "type"


async def test_probes_and_openapi_need_no_token(api: ApiServer) -> None:
    health = await api.request("GET", "/healthz", token=None)
    ready = await api.request("GET", "/readyz", token=None)
    spec = await api.request("GET", "/openapi.json", token=None)
    assert (health.status, health.body) == (200, {"status": "ok"})
    assert (ready.status, ready.body) == (200, {"status": "ready"})
    assert spec.status == 200 and spec.body["openapi"] == "3.1.0"


async def test_readyz_is_503_when_the_events_exchange_is_missing(
    api_config: Callable[..., WarrenConfig], start_api: Start
) -> None:
    # Given an API connected to RabbitMQ whose topology was never set up
    api = await start_api(api_config(), declared=False)
    ready = await api.request("GET", "/readyz", token=None)
    assert ready.status == 503 and "does not exist" in ready.body["reason"]
    # And a publish is a 503 (not stored), after which the link still serves probes
    reply = await api.post("/v1/events", {"type": "order.created", "data": 1})
    assert reply.status == 503 and reply.headers["Retry-After"] == "7"
    assert (await api.request("GET", "/healthz", token=None)).status == 200


async def test_unknown_route_and_method_answer_json(api: ApiServer) -> None:
    missing = await api.request("GET", "/nope", token=None)
    wrong = await api.request("GET", "/v1/events")
    assert missing.status == 404 and missing.error == "not_found"
    assert wrong.status == 405 and "POST" in wrong.headers["Allow"]


async def test_expect_100_continue_is_refused_before_the_body_is_sent(
    api_config: Callable[..., WarrenConfig], start_api: Start
) -> None:
    # Given a client that asks before sending a body larger than the limit
    api = await start_api(api_config(api={"max_body": 2048}))
    token = api_config().api.tokens[0].get_secret_value()
    big = orjson.dumps({"type": "order.created", "data": "x" * 5000})
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    # Then the server answers 413 instead of 100 Continue; a wrong token gets 401 the same way
    async with api.session.post(api.url + "/v1/events", data=big, headers=headers, expect100=True) as response:
        assert response.status == 413
    headers["Authorization"] = "Bearer nope-nope-nope-nope"
    async with api.session.post(api.url + "/v1/events", data=big, headers=headers, expect100=True) as response:
        assert response.status == 401
    # And a small body with Expect still goes through
    headers["Authorization"] = f"Bearer {token}"
    small = orjson.dumps({"type": "order.created", "data": 1})
    async with api.session.post(api.url + "/v1/events", data=small, headers=headers, expect100=True) as response:
        assert response.status == 202
