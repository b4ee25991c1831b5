"""The worker's pure policies: Retry-After, message parsing, headers carried onward, egress.

Classification has its own file: tests/transport/test_classify.py."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from warren.broker import wire
from warren.broker.dlq.letters import dead_letter_from
from warren.consumers.delivery import (
    RESPONSE_HEADER_LIMIT,
    MalformedMessage,
    dead_headers,
    parse_delivery,
    retry_headers,
)
from warren.transport.classify import parse_retry_after
from warren.transport.egress import ForbiddenAddress, check_url_literal, forbidden_reason

BODY = orjson.dumps({"id": "e1", "type": "a.b", "timestamp": "2026-01-01T00:00:00Z", "data": {}})


def test_retry_after_seconds_and_http_date() -> None:
    now = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after("Thu, 01 Jan 2026 00:00:30 GMT", now) == 30.0
    assert parse_retry_after("Wed, 31 Dec 2025 23:00:00 GMT", now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_parse_delivery_reads_bookkeeping_and_replay_resets_it() -> None:
    headers = {wire.H_ATTEMPT: 3, wire.H_PUBLISHED: 1000, wire.H_FIRST_ATTEMPT: 1100}
    delivery = parse_delivery(BODY, "e1", headers, 5000, max_payload=10_000)
    assert (delivery.attempts_made, delivery.first_attempt_ms, delivery.age(5000)) == (3, 1100, 4.0)
    replayed = parse_delivery(BODY, "e1", {**headers, wire.H_REPLAYED: True}, 5000, max_payload=10_000)
    assert (replayed.attempts_made, replayed.first_attempt_ms, replayed.age(5000)) == (0, None, 0.0)


@pytest.mark.parametrize(
    ("body", "message_id", "reason"),
    [
        (b"nope", None, "not JSON"),
        (b"[1]", None, "not a JSON object"),
        (b'{"id": "e1"}', None, "lacks"),
        (BODY, "other", "differs"),
        (BODY + b" " * 20_000, None, "max_payload"),
        (BODY[:-1] + b', "type": "other.type"}', None, "duplicate key 'type'"),
    ],
)
def test_malformed_messages(body: bytes, message_id: str | None, reason: str) -> None:
    with pytest.raises(MalformedMessage, match=reason):
        parse_delivery(body, message_id, {}, 0, max_payload=10_000)


def test_retry_headers_strip_x_death_and_bound_the_history() -> None:
    headers = {
        "x-death": [{"count": 1}],
        "x-first-death-queue": "q",
        wire.H_REPLAYED: True,
        wire.H_DELIVERY_COUNT: 7,  # RabbitMQ 4.0.5 would keep a carried count on the copy's first delivery
        "custom": "kept",
    }
    delivery = parse_delivery(
        BODY, "e1", {wire.H_HISTORY: orjson.dumps([{"at": i} for i in range(5)])}, 0, max_payload=10_000
    )
    out = retry_headers(headers, delivery, attempt_ms=7, status=503, error="HTTP 503", duration=0.01)
    assert "x-death" not in out and "x-first-death-queue" not in out and wire.H_REPLAYED not in out
    assert wire.H_DELIVERY_COUNT not in out
    assert out["custom"] == "kept" and out[wire.H_ATTEMPT] == 1 and out[wire.H_LAST_STATUS] == 503
    history = orjson.loads(out[wire.H_HISTORY])
    assert len(history) == 5 and history[-1] == {"at": 7, "status": 503, "ms": 10, "error": "HTTP 503"}
    dead = dead_headers(headers, None, endpoint="acme", reason="malformed message: x")
    assert dead[wire.H_ENDPOINT] == "acme" and dead[wire.H_DEAD_REASON].startswith("malformed")
    assert wire.H_DELIVERY_COUNT not in dead


def test_a_dead_letters_response_excerpt_never_keeps_a_urls_credentials() -> None:
    # An error page that quotes the URL it was asked for, credentials and all, near the excerpt's limit
    quoted = "https://user:hunter2@hooks.example.com/in?token=s3cret"
    response = "x" * (RESPONSE_HEADER_LIMIT - 30) + " " + quoted
    dead = dead_headers({}, None, endpoint="acme", reason="gone", response=response)
    kept = dead[wire.H_LAST_RESPONSE]
    assert "hunter2" not in kept and "s3cret" not in kept and "user" not in kept
    assert kept.startswith("x" * 100) and len(kept) <= RESPONSE_HEADER_LIMIT
    # And a letter written before that redaction is redacted when it is read
    old = dead_letter_from(0, b"{}", {wire.H_LAST_RESPONSE: quoted}, "e1", "a.b")
    assert old.last_response == "https://***@hooks.example.com/in?token=***"


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "172.16.5.5",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "224.0.0.1",
        "0.0.0.0",
        "::ffff:127.0.0.1",
        "240.0.0.1",
    ],
)
def test_forbidden_addresses(address: str) -> None:
    assert forbidden_reason(address) is not None


def test_public_addresses_and_literals() -> None:
    assert forbidden_reason("93.184.216.34") is None
    with pytest.raises(ForbiddenAddress, match="loopback"):
        check_url_literal("http://127.0.0.1:8080/x")
    check_url_literal("https://hooks.example.com/x")  # names are checked at connect time, by the resolver
