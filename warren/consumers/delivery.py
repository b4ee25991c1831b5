"""Reading a message as the worker sees it (a ``Delivery``), and the headers it carries onward: pure, no I/O."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import orjson

from warren.broker import wire
from warren.core.errors import WarrenError
from warren.core.redact import redact_urls
from warren.core.strict_json import DUPLICATE_KEY, duplicate_key
from warren.topology.headers import MAX_COUNTED, header_history, header_int
from warren.tracing.carry import TRACEPARENT, carried
from warren.transport.base import HISTORY_LIMIT, Delivery

__all__ = [
    "HISTORY_LIMIT",
    "Delivery",
    "MalformedMessage",
    "dead_headers",
    "delivery_count",
    "history_record",
    "is_replayed",
    "parse_delivery",
    "retry_headers",
]

ERROR_TEXT_LIMIT = 300
# The response excerpt (delivery.response_body_limit, 2 KiB by default) is capped again for the header: a
# larger limit must not make the dead letter's headers too large to publish (RabbitMQ's frame size).
RESPONSE_HEADER_LIMIT = 4096


class MalformedMessage(WarrenError, ValueError):
    """The message cannot be delivered as it is (not a Warren envelope); it goes to the DLQ with this reason."""


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _text(name: str, value: object, *, required: bool = True) -> str | None:
    """A text field of the message, refused as malformed when it is empty or holds control characters."""
    if value is None and not required:
        return None
    if isinstance(value, bytes):
        try:
            value = value.decode()
        except UnicodeDecodeError:
            raise MalformedMessage(f"{name} is not UTF-8") from None
    if not isinstance(value, str) or not value:
        raise MalformedMessage(f"{name} is not a non-empty string")
    if wire.CONTROL_CHARACTERS.search(value):
        raise MalformedMessage(f"{name} {value!r} holds control characters")
    return value


ENVELOPE_FIELDS = ("id", "type", "timestamp", "data")
_control = wire.CONTROL_CHARACTERS.search


def _plain(value: object) -> bool:
    """Whether ``value`` is a non-empty ``str`` without control characters: what ``_text`` passes as it is."""
    return type(value) is str and value != "" and _control(value) is None


def delivery_count(headers: Mapping[str, Any], redelivered: bool | None) -> int:
    """How many times RabbitMQ has returned this message to its queue (``x-delivery-count``; 0 when absent).

    Quorum queues count every return: a nack with requeue, a closed channel or connection (checked on 3.10.8,
    which sends 0 on the first delivery, and 4.0.5, which sends no header then). On a first delivery
    (``redelivered`` false) the header is not the queue's: a DLQ replay by shovel forwards the count the DLQ
    copy had (every `dlq list` returns the letters it holds), and 4.0.5 delivers a carried header as it is, where
    it would count against ``delivery.max_handbacks`` hand-backs that never happened.
    """
    if not redelivered:
        return 0
    return max(0, header_int(headers.get(wire.H_DELIVERY_COUNT)) or 0)


def is_replayed(headers: Mapping[str, Any]) -> bool:
    """Whether an operator sent this message back from its DLQ: it then starts a fresh attempt budget.

    A client-side replay sets ``warren-replayed``. A shovel replay (``warren dlq replay`` without filters)
    cannot: RabbitMQ 3.10's shovel refuses ``headers`` in ``dest-publish-properties`` ("Unrecognised terms"),
    but with ``dest-add-forward-headers`` it adds ``x-shovelled``. A shovelled message that also carries
    ``warren-dead-reason`` came out of a DLQ, so it counts as replayed. Both markers are dropped from the
    headers of the next attempt (see ``_carry``), so the reset happens once per replay.
    """
    if headers.get(wire.H_REPLAYED):
        return True
    return bool(headers.get(wire.H_SHOVELLED)) and wire.H_DEAD_REASON in headers


def parse_delivery(
    body: bytes, message_id: str | None, headers: Mapping[str, Any], now_ms: int, *, max_payload: int
) -> Delivery:
    """Validate a message and read its bookkeeping; raise MalformedMessage when it cannot be delivered."""
    if len(body) > max_payload:
        raise MalformedMessage(f"body is {len(body)} bytes, over delivery.max_payload ({max_payload})")
    try:
        envelope = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise MalformedMessage(f"body is not JSON: {exc}") from None
    if not isinstance(envelope, dict):
        raise MalformedMessage("body is not a JSON object (expected the envelope {id, type, timestamp, data})")
    duplicate = duplicate_key(body, envelope)
    if duplicate is not None:
        # The body goes out as is: a receiver keeping the first copy would see another event than we did.
        raise MalformedMessage("body has a " + DUPLICATE_KEY.format(duplicate))
    if not ("id" in envelope and "type" in envelope and "timestamp" in envelope and "data" in envelope):
        missing = [k for k in ENVELOPE_FIELDS if k not in envelope]
        raise MalformedMessage(f"envelope lacks {', '.join(missing)}")
    # The usual fields are plain text: checked here at once; anything else (bytes, empty, control characters,
    # not text) goes through _text, which reads bytes or says what is wrong.
    event_id, event_type = envelope["id"], envelope["type"]
    if not _plain(event_id):
        event_id = _text("envelope id", event_id)
    if not _plain(event_type):
        event_type = _text("envelope type", event_type)
    if (key := envelope.get("key")) is not None and not _plain(key):
        _text("envelope key", key, required=False)
    if (key := headers.get(wire.H_KEY)) is not None and not _plain(key):
        _text(f"header {wire.H_KEY}", key, required=False)
    assert event_id is not None and event_type is not None
    if message_id and message_id != event_id:
        raise MalformedMessage(f"message_id {message_id!r} differs from the envelope id {event_id!r}")
    replayed = is_replayed(headers)
    return Delivery(
        event_id=event_id,
        event_type=event_type,
        body=body,
        attempts_made=0 if replayed else min(MAX_COUNTED, max(0, header_int(headers.get(wire.H_ATTEMPT)) or 0)),
        # A replay starts a fresh budget, so its age counts from the replay, not from the first publish.
        published_ms=now_ms if replayed else _or(header_int(headers.get(wire.H_PUBLISHED)), now_ms),
        first_attempt_ms=None if replayed else (header_int(headers.get(wire.H_FIRST_ATTEMPT)) or None),
        history=header_history(headers.get(wire.H_HISTORY)),
        tenant=_tenant(headers.get(wire.H_TENANT), envelope.get("tenant")),
        trace=carried(headers) if TRACEPARENT in headers else None,
        envelope=envelope,
    )


def _tenant(header: object, field: object) -> str | None:
    """The event's tenant, from its header (set by the publisher) or else its envelope; never a reason to refuse
    the message (the tenant only labels its attempt records)."""
    for value in (header, field):
        if isinstance(value, bytes):
            value = value.decode(errors="replace")
        if isinstance(value, str) and value:
            return value
    return None


def history_record(at_ms: int, status: int, error: str | None, duration: float) -> dict[str, Any]:
    record: dict[str, Any] = {"at": at_ms, "status": status, "ms": round(duration * 1000)}
    if error:
        record["error"] = error[:ERROR_TEXT_LIMIT]
    return record


def _carry(headers: Mapping[str, Any]) -> dict[str, Any]:
    # RabbitMQ's x-death must go: a message re-entering the same TTL cycle with it is dropped as a cycle.
    # The replay marker goes too: the budget it reset is now being spent again. And the delivery count: it
    # belongs to the copy in the queue, and RabbitMQ 4.0.5 keeps a carried one on the next first delivery
    # (checked), where it would count against delivery.max_handbacks.
    drop = {*wire.RABBITMQ_DEATH_HEADERS, wire.H_REPLAYED, wire.H_SHOVELLED, wire.H_DELIVERY_COUNT}
    return {k: v for k, v in headers.items() if k not in drop}


def retry_headers(
    headers: Mapping[str, Any],
    delivery: Delivery,
    *,
    attempt_ms: int,
    status: int,
    error: str | None,
    duration: float,
    published_ms: int | None = None,
) -> dict[str, Any]:
    """Headers of the next attempt's message: the counter, the first/last attempt, the bounded history."""
    out = _carry(headers)
    history = [*delivery.history, history_record(attempt_ms, status, error, duration)][-HISTORY_LIMIT:]
    out[wire.H_ATTEMPT] = delivery.attempts_made + 1
    out[wire.H_FIRST_ATTEMPT] = delivery.first_attempt_ms or attempt_ms
    out[wire.H_LAST_ATTEMPT] = attempt_ms
    out[wire.H_LAST_STATUS] = status
    out[wire.H_LAST_ERROR] = (error or "")[:ERROR_TEXT_LIMIT]
    out[wire.H_HISTORY] = orjson.dumps(history).decode()
    out[wire.H_PUBLISHED] = published_ms if published_ms is not None else delivery.published_ms
    return out


def dead_headers(
    headers: Mapping[str, Any],
    delivery: Delivery | None,
    *,
    endpoint: str,
    reason: str,
    attempt_ms: int | None = None,
    status: int = 0,
    error: str | None = None,
    duration: float = 0.0,
    response: str = "",
    dead_ms: int | None = None,
) -> dict[str, Any]:
    """Headers of a dead letter: everything ``dlq show`` needs to tell why, without a database.

    ``response`` is the excerpt of the last attempt's response body the worker read (none without a response).
    """
    now_ms = dead_ms if dead_ms is not None else int(time.time() * 1000)
    if delivery is not None and attempt_ms is not None:
        out = retry_headers(headers, delivery, attempt_ms=attempt_ms, status=status, error=error, duration=duration)
    else:
        out = _carry(headers)
    out[wire.H_ENDPOINT] = endpoint
    out[wire.H_DEAD_REASON] = reason[:ERROR_TEXT_LIMIT]
    out[wire.H_DEAD_AT] = now_ms
    if response:
        # Redacted before it is cut, so a URL's credentials cannot survive by being cut short of their "@".
        out[wire.H_LAST_RESPONSE] = redact_urls(response)[:RESPONSE_HEADER_LIMIT]
    return out
