"""The per-delivery shortcuts of issue 38 say what the long ways said: reading an envelope (the plain-text fast
path beside ``_text``), deciding a delivered attempt (no context made), an answer's verdict (made once per status
and retry set), an endpoint's usual standing (one instance). Pure."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from warren.broker.endpoint_state.records import EndpointView, Standing, standing
from warren.consumers.decision import ACK, Ack, Context, Retry, decide
from warren.consumers.delivery import MalformedMessage, parse_delivery
from warren.topology.config import RetryPolicy
from warren.transport.base import Outcome, SendResult
from warren.transport.classify import classify
from warren.transport.http import http_result

pytestmark = pytest.mark.timeout(30)

ENVELOPE = {"id": "evt_1", "type": "order.paid", "timestamp": "2026-01-01T00:00:00Z", "data": {"n": 1}}


def parse(envelope: dict[str, Any], headers: dict[str, Any] | None = None, message_id: str | None = "evt_1") -> Any:
    return parse_delivery(orjson.dumps(envelope), message_id, headers or {}, 1_000, max_payload=1 << 20)


@pytest.mark.parametrize(
    ("change", "headers", "reason"),
    [
        ({"id": ""}, {}, "envelope id is not a non-empty string"),
        ({"id": 7}, {}, "envelope id is not a non-empty string"),
        ({"id": None}, {}, "envelope id is not a non-empty string"),
        ({"id": "evt\n1"}, {}, "envelope id 'evt\\n1' holds control characters"),
        ({"type": ""}, {}, "envelope type is not a non-empty string"),
        ({"type": ["a"]}, {}, "envelope type is not a non-empty string"),
        ({"type": "a\u2028b"}, {}, "envelope type 'a\\u2028b' holds control characters"),
        ({"key": ""}, {}, "envelope key is not a non-empty string"),
        ({"key": 3}, {}, "envelope key is not a non-empty string"),
        ({"key": "k\x00"}, {}, "envelope key 'k\\x00' holds control characters"),
        ({}, {"warren-key": ""}, "header warren-key is not a non-empty string"),
        ({}, {"warren-key": b"\xff"}, "header warren-key is not UTF-8"),
        ({}, {"warren-key": b"k\n"}, "header warren-key 'k\\n' holds control characters"),
        ({}, {"warren-key": 5}, "header warren-key is not a non-empty string"),
    ],
)
def test_a_field_that_is_not_plain_text_is_refused_with_its_reason(
    change: dict[str, Any], headers: dict[str, Any], reason: str
) -> None:
    with pytest.raises(MalformedMessage) as refused:
        parse({**ENVELOPE, **change}, headers, message_id=None)
    assert str(refused.value) == reason


def test_missing_fields_are_all_named_in_order() -> None:
    with pytest.raises(MalformedMessage, match=r"^envelope lacks id, timestamp$"):
        parse({"type": "t", "data": {}})


def test_plain_fields_and_bytes_read_as_before() -> None:
    delivery = parse({**ENVELOPE, "key": "k1"}, {"warren-key": b"k1"})
    assert (delivery.event_id, delivery.event_type, delivery.published_ms) == ("evt_1", "order.paid", 1_000)
    assert delivery.envelope == {**ENVELOPE, "key": "k1"}


def test_a_delivered_attempt_is_decided_without_making_its_context() -> None:
    made: list[Context] = []

    def context() -> Context:
        made.append(Context(attempt=1, age=0.0, policy=RetryPolicy(jitter="none")))
        return made[-1]

    delivered = decide(SendResult(Outcome.DELIVERED, "HTTP 200", status=200), context)
    assert delivered is ACK and delivered == Ack() and made == []
    # A failed one makes it, and decides as with the context itself
    failed = SendResult(Outcome.RETRY, "HTTP 503", status=503)
    retried = decide(failed, context)
    assert isinstance(retried, Retry) and len(made) == 1 and retried == decide(failed, made[0])


@pytest.mark.parametrize("status", [200, 201, 204, 299, 301, 400, 404, 408, 410, 418, 422, 429, 500, 503, 599, 600, 99])
@pytest.mark.parametrize("retry_statuses", [frozenset(), frozenset({404, 422}), (418,)])
def test_an_answers_verdict_is_the_classifiers_every_time(status: int, retry_statuses: Any) -> None:
    verdict = classify(status, None, retry_statuses)
    for _ in range(2):  # made, then found
        result = http_result(status, None, 0.1, retry_statuses=retry_statuses)
        assert (result.outcome, result.reason, result.answer) == (verdict.outcome, verdict.reason, f"HTTP {status}")


def test_an_error_is_classified_as_it_comes() -> None:
    result = http_result(None, "connection failed: refused", 0.1)
    assert (result.outcome, result.reason, result.answer) == (Outcome.RETRY, "connection failed: refused", None)
    assert http_result(200, None, 0.1, retry_after="7").retry_after == 7.0


def test_an_endpoint_with_nothing_in_force_stands_to_deliver() -> None:
    view = EndpointView("shop")
    assert standing(view, 0.0) == Standing("deliver") and standing(view, 1.0) is standing(view, 2.0)
