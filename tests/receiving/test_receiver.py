"""``warren receive``'s app against the real RabbitMQ: every verifier, every status, what lands in the queue."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import aio_pika
import orjson
import pytest
from aio_pika.abc import AbstractIncomingMessage, AbstractRobustConnection
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from tests.support.declare import declare_plan
from tests.support.deep_json import BEYOND_ORJSON, nested, with_duplicate
from warren.broker import wire
from warren.receiving.receiver import build_receiver_app
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.topology.planner import plan_topology
from warren.topology.secrets import SigningSecrets, WebhookSecret
from warren.transport.signing import signature_header

WH_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SOURCES: list[dict[str, Any]] = [
    {
        "name": "warren",
        "verifier": "standard-webhooks",
        "secret": WH_SECRET,
        "key_field": "key",
        "sequence_field": "sequence",
    },
    {
        "name": "github",
        "verifier": "hmac-sha256",
        "secret": "gh-secret-0123456789",
        "header": "X-Hub-Signature-256",
        "signature_prefix": "sha256=",
        "id_header": "X-GitHub-Delivery",
    },
    {
        "name": "shopify",
        "verifier": "hmac-sha256",
        "secret": "shop-secret-0123456789",
        "header": "X-Shopify-Hmac-Sha256",
        "encoding": "base64",
        "id_header": "X-Shopify-Webhook-Id",
        "max_body": 2048,
    },
    {
        "name": "telegram",
        "verifier": "token",
        "secret": "tg-token-0123456789ab",
        "header": "X-Telegram-Bot-Api-Secret-Token",
        "id_field": "update_id",
        "path": "/telegram/webhook",
    },
    {"name": "open", "verifier": "none", "id_field": "id"},
]

Client = TestClient[web.Request, web.Application]


@pytest.fixture
async def connection(amqp_url: str) -> AsyncIterator[AbstractRobustConnection]:
    conn = await aio_pika.connect_robust(amqp_url)
    yield conn
    await conn.close()


@pytest.fixture
def config(make_config: Callable[..., WarrenConfig]) -> WarrenConfig:
    handler = "tests.support.inbox_handlers:record"
    return make_config(inbound=[{**s, "handler": handler} for s in SOURCES], receiver={"publish_timeout": "2s"})


@pytest.fixture
async def client(config: WarrenConfig, connection: AbstractRobustConnection) -> AsyncIterator[Client]:
    await declare_plan(connection, plan_topology(config))
    async with TestClient(TestServer(build_receiver_app(config, connection=connection), host="127.0.0.1")) as c:
        yield c


async def take(connection: AbstractRobustConnection, queue_name: str) -> AbstractIncomingMessage | None:
    async with connection.channel() as channel:
        queue = await channel.get_queue(queue_name)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            message = await queue.get(fail=False, no_ack=True)
            if message is not None:
                return message
        return None


def sw_headers(body: bytes, msg_id: str = "msg_1", ts: int | None = None) -> dict[str, str]:
    ts = int(time.time()) if ts is None else ts
    secrets = SigningSecrets((WebhookSecret(WH_SECRET),))
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": signature_header(secrets, msg_id, ts, body),
        "Content-Type": "application/json",
    }


def hmac_of(secret: str, body: bytes) -> bytes:
    return hmac.new(secret.encode(), body, hashlib.sha256).digest()


async def test_a_standard_webhook_is_queued_with_its_id_key_sequence_and_headers(
    client: Client, connection: AbstractRobustConnection, config: WarrenConfig
) -> None:
    # Given a Warren-signed event with a key and a sequence
    body = orjson.dumps({"id": "msg_1", "type": "order.paid", "key": "o-1", "sequence": 4, "data": {}})
    # When it is POSTed
    response = await client.post("/in/warren", data=body, headers={**sw_headers(body), "Authorization": "Bearer x"})
    # Then the answer is 202 with the id, and the queue holds the raw body with the id as message_id
    assert response.status == 202
    assert await response.json() == {"id": "msg_1", "status": "accepted"}
    message = await take(connection, names.inbound_queue(config.broker.prefix, "warren"))
    assert message is not None
    assert message.body == body
    assert message.message_id == "msg_1"
    assert message.content_type == "application/json"
    headers = message.headers
    assert headers[wire.H_SOURCE] == "warren"
    assert headers[wire.H_KEY] == "o-1"
    assert headers[wire.H_SEQUENCE] == 4
    request_headers = headers[wire.H_REQUEST_HEADERS]
    assert isinstance(request_headers, dict)
    assert request_headers["webhook-id"] == "msg_1"
    assert "authorization" not in request_headers


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({}, "missing_headers"),
        ({"webhook-id": "msg_1", "webhook-timestamp": "1", "webhook-signature": "v1,AAAA"}, "timestamp_too_old"),
        ({"webhook-id": "msg_1", "webhook-timestamp": "now", "webhook-signature": "v1,AAAA"}, "no_matching_signature"),
    ],
)
async def test_standard_webhooks_rejections(client: Client, headers: dict[str, str], reason: str) -> None:
    # "now" is the time the request is sent, not the time the parameters were collected: a suite that runs for
    # longer than the tolerance (5 min) made a collection-time stamp "too old" by the time this test ran.
    if headers.get("webhook-timestamp") == "now":
        headers = {**headers, "webhook-timestamp": str(int(time.time()))}
    response = await client.post("/in/warren", data=b"{}", headers=headers)
    assert response.status == 401
    assert (await response.json())["reason"] == reason


async def test_github_shape(client: Client, connection: AbstractRobustConnection, config: WarrenConfig) -> None:
    body = b'{"action": "opened"}'
    good = {"X-Hub-Signature-256": "sha256=" + hmac_of("gh-secret-0123456789", body).hex(), "X-GitHub-Delivery": "gh-1"}
    assert (await client.post("/in/github", data=body, headers=good)).status == 202
    message = await take(connection, names.inbound_queue(config.broker.prefix, "github"))
    assert message is not None and message.message_id == "gh-1"
    bad = {**good, "X-Hub-Signature-256": "sha256=" + hmac_of("guess", body).hex()}
    response = await client.post("/in/github", data=body, headers=bad)
    assert (response.status, (await response.json())["reason"]) == (401, "no_matching_signature")
    no_id = {"X-Hub-Signature-256": good["X-Hub-Signature-256"]}
    response = await client.post("/in/github", data=body, headers=no_id)
    assert response.status == 400
    assert "X-GitHub-Delivery" in (await response.json())["message"]


async def test_shopify_shape_and_its_body_limit(client: Client) -> None:
    body = b'{"id": 820982911946154508}'
    good = {
        "X-Shopify-Hmac-Sha256": base64.b64encode(hmac_of("shop-secret-0123456789", body)).decode(),
        "X-Shopify-Webhook-Id": "s1",
    }
    assert (await client.post("/in/shopify", data=body, headers=good)).status == 202
    response = await client.post("/in/shopify", data=body, headers={**good, "X-Shopify-Hmac-Sha256": "%%%"})
    assert (response.status, (await response.json())["reason"]) == (401, "malformed_signature")
    big = b"x" * 4096
    response = await client.post("/in/shopify", data=big, headers=good)
    assert response.status == 413


async def test_telegram_shape_never_stores_the_token(
    client: Client, connection: AbstractRobustConnection, config: WarrenConfig
) -> None:
    body = b'{"update_id": 10000, "message": {"text": "hi"}}'
    response = await client.post(
        "/telegram/webhook", data=body, headers={"X-Telegram-Bot-Api-Secret-Token": "tg-token-0123456789ab"}
    )
    assert response.status == 202
    message = await take(connection, names.inbound_queue(config.broker.prefix, "telegram"))
    assert message is not None and message.message_id == "10000"
    assert "x-telegram-bot-api-secret-token" not in message.headers[wire.H_REQUEST_HEADERS]  # type: ignore[operator]
    for headers, reason in (({}, "missing_token"), ({"X-Telegram-Bot-Api-Secret-Token": "guess"}, "invalid_token")):
        response = await client.post("/telegram/webhook", data=body, headers=headers)
        assert (response.status, (await response.json())["reason"]) == (401, reason)


async def test_an_unsigned_source_declared_as_none(client: Client) -> None:
    assert (await client.post("/in/open", data=b'{"id": "o1"}')).status == 202
    response = await client.post("/in/open", data=b"not json")
    assert response.status == 400
    assert (await response.json())["error"] == "bad_request"


async def test_unknown_paths_are_404_and_health_endpoints_answer(client: Client) -> None:
    assert (await client.post("/in/nobody", data=b"{}")).status == 404
    assert (await client.get("/healthz")).status == 200
    assert (await client.get("/readyz")).status == 200


async def test_a_missing_inbound_queue_is_503_not_a_silent_202(
    make_config: Callable[..., WarrenConfig], connection: AbstractRobustConnection
) -> None:
    # Given a receiver whose topology was never declared
    config = make_config(inbound=[{"name": "open", "verifier": "none", "id_field": "id", "handler": "m:f"}])
    async with TestClient(TestServer(build_receiver_app(config, connection=connection), host="127.0.0.1")) as client:
        # When an event arrives, Then it is refused with 503 and Retry-After, so that the provider resends it
        response = await client.post("/in/open", data=b'{"id": "o1"}')
        assert response.status == 503
        assert response.headers["Retry-After"] == str(config.receiver.retry_after)


async def test_a_lost_broker_connection_is_503(config: WarrenConfig, amqp_url: str) -> None:
    # Given a receiver whose connection to RabbitMQ is gone
    conn = await aio_pika.connect_robust(amqp_url)
    await declare_plan(conn, plan_topology(config))
    async with TestClient(TestServer(build_receiver_app(config, connection=conn), host="127.0.0.1")) as client:
        await conn.close()
        # When a valid event arrives, Then it is not acknowledged: 503, and readiness says so too
        response = await client.post("/in/open", data=b'{"id": "o2"}')
        assert response.status == 503
        assert "Retry-After" in response.headers
        assert (await client.get("/readyz")).status == 503


@pytest.mark.parametrize(
    ("body", "status", "says"),
    [
        pytest.param(BEYOND_ORJSON, 400, "the body is not JSON", id="200000-levels"),
        pytest.param(
            with_duplicate(b'{"id": "in-1000", "x": ' + nested(1000) + b"}", "id"),
            400,
            "the body has a duplicate key 'id'",
            id="1000-levels-duplicate-key",  # orjson reads it; the standard library raised RecursionError: a 500
        ),
        pytest.param(b'{"id": "in-300", "x": ' + nested(300) + b"}", 202, None, id="300-levels"),  # was TypeError
    ],
)
async def test_a_deeply_nested_body_is_a_400_or_accepted_never_a_500(
    client: Client, connection: AbstractRobustConnection, config: WarrenConfig, body: bytes, status: int, says: str
) -> None:
    # Given a source that reads the event id from the body, and a body nested deeper than some parser reads
    response = await client.post("/in/open", data=body)
    # Then a body no parser here reads whole, or one whose id is ambiguous, is a 400 saying why; a good one is queued
    assert response.status == status, await response.text()
    if says is not None:
        assert says in (await response.json())["message"]
    else:
        message = await take(connection, names.inbound_queue(config.broker.prefix, "open"))
        assert message is not None and message.body == body


async def test_a_sequence_no_amqp_header_holds_is_a_400(client: Client) -> None:
    # Given a signed event whose sequence orjson reads (up to 2^64 - 1) but an AMQP header cannot hold
    body = b'{"id": "msg_big", "type": "order.paid", "key": "o-1", "sequence": 18446744073709551615, "data": {}}'
    # When it is POSTed, Then it is refused saying why (publishing it raised TypeError: a 500)
    response = await client.post("/in/warren", data=body, headers=sw_headers(body, "msg_big"))
    assert response.status == 400, await response.text()
    assert "sequence" in (await response.json())["message"]
