"""A dead letter as an operator reads it: who, what, how many attempts, why. Pure: no I/O."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import orjson

from warren.broker import wire
from warren.core.moments import iso_utc
from warren.core.redact import redact_urls
from warren.core.strict_json import unwritable
from warren.topology.headers import header_history, header_int, header_text

__all__ = ["DeadLetter", "dead_letter_from", "format_ms", "json_safe"]


@dataclass(frozen=True)
class DeadLetter:
    """One message of a DLQ, its bookkeeping read from the ``warren-*`` headers Warren wrote when it died."""

    position: int  # 0 = head of the queue (the oldest)
    event_id: str
    event_type: str
    key: str | None
    attempts: int | None
    first_attempt_ms: int | None
    last_attempt_ms: int | None
    dead_ms: int | None
    last_status: int | None
    last_error: str | None
    dead_reason: str | None
    endpoint: str | None
    history: tuple[dict[str, Any], ...]
    headers: Mapping[str, Any]
    body: bytes
    envelope: Any  # the parsed JSON body, or None when it is not JSON (a malformed message)
    last_response: str | None = None  # the start of the last response's body, when there was one

    def summary(self) -> dict[str, Any]:
        """The row of ``dlq list --json``: the table's columns, times as ms and ISO 8601."""
        return {
            "event_id": self.event_id,
            "type": self.event_type,
            "key": self.key,
            "attempts": self.attempts,
            "first_attempt_ms": self.first_attempt_ms,
            "first_attempt": format_ms(self.first_attempt_ms),
            "dead_ms": self.dead_ms,
            "dead_at": format_ms(self.dead_ms),
            "last_status": self.last_status,
            "last_error": self.last_error,
            "dead_reason": self.dead_reason,
        }

    def whole(self) -> dict[str, Any]:
        """Everything ``dlq show --json`` prints: the summary, every header, the envelope, the history."""
        body: Any = self.envelope
        if body is None:
            text = self.body.decode("utf-8", "replace")
            body = {"raw": text} if text.isprintable() else {"base64": base64.b64encode(self.body).decode()}
        return {
            **self.summary(),
            "endpoint": self.endpoint,
            "last_attempt_ms": self.last_attempt_ms,
            "last_response": self.last_response,
            "position": self.position,
            "headers": json_safe(dict(self.headers)),
            "envelope": body,
            "history": [json_safe(h) for h in self.history],
        }


def _death(headers: Mapping[str, Any]) -> tuple[str | None, int | None]:
    """Why and when RabbitMQ itself dead-lettered a message (``x-death``), for letters without Warren's headers.

    A message that reached a queue's delivery limit comes through the backstop route with only RabbitMQ's
    bookkeeping: reason ``delivery_limit`` and the queue it left. The newest death is first in ``x-death``.
    """
    deaths = headers.get("x-death")
    death = deaths[0] if isinstance(deaths, list | tuple) and deaths and isinstance(deaths[0], Mapping) else {}
    reason = header_text(headers.get("x-last-death-reason")) or header_text(death.get("reason"))
    if reason is None:
        return None, None
    queue = header_text(headers.get("x-last-death-queue")) or header_text(death.get("queue"))
    moment = death.get("time")
    at_ms = round(moment.timestamp() * 1000) if isinstance(moment, dt.datetime) else None
    where = f" in {queue}" if queue else ""
    return f"{reason}{where} (dead-lettered by RabbitMQ)", at_ms


def _redacted(value: object) -> str | None:
    # Letters written before error texts and response excerpts were redacted at the source may still quote a
    # URL's credentials.
    text = header_text(value)
    return None if text is None else redact_urls(text)


def dead_letter_from(
    position: int, body: bytes, headers: Mapping[str, Any], message_id: str | None, message_type: str | None
) -> DeadLetter:
    """Read one DLQ message. Never raises: a malformed message is listed with what can be read of it."""
    try:
        envelope = orjson.loads(body)
    except orjson.JSONDecodeError:
        envelope = None
    if envelope is not None and unwritable(body, envelope):
        envelope = None  # deeper than JSON is written back (`dlq show` raised RecursionError): shown as text
    fields = envelope if isinstance(envelope, dict) else {}
    # The envelope's key first. The hash header holds the key too, or the event id when the event has none
    # (Warren's publisher always sets it), so a header equal to the id is not shown as a key.
    event_id = message_id or header_text(fields.get("id"))
    hash_key = header_text(headers.get(wire.H_KEY))
    broker_reason, broker_dead_ms = _death(headers)
    key = header_text(fields.get("key")) or (hash_key if hash_key != event_id else None)
    return DeadLetter(
        position=position,
        event_id=message_id or header_text(fields.get("id")) or "?",
        event_type=message_type or header_text(fields.get("type")) or "?",
        key=key or None,
        attempts=header_int(headers.get(wire.H_ATTEMPT)),
        first_attempt_ms=header_int(headers.get(wire.H_FIRST_ATTEMPT)),
        last_attempt_ms=header_int(headers.get(wire.H_LAST_ATTEMPT)),
        dead_ms=header_int(headers.get(wire.H_DEAD_AT)) or broker_dead_ms,
        last_status=header_int(headers.get(wire.H_LAST_STATUS)),
        last_error=_redacted(headers.get(wire.H_LAST_ERROR)) or None,
        dead_reason=_redacted(headers.get(wire.H_DEAD_REASON)) or broker_reason,
        endpoint=header_text(headers.get(wire.H_ENDPOINT)),
        history=tuple(json_safe(i) for i in header_history(headers.get(wire.H_HISTORY))),
        headers=dict(headers),
        body=body,
        envelope=envelope,
        last_response=_redacted(headers.get(wire.H_LAST_RESPONSE)) or None,
    )


def format_ms(ms: int | None) -> str | None:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds (``2024-05-01T12:00:00.123Z``); None when absent, and
    when a header holds a number no date has (a letter is listed whatever its headers hold)."""
    return None if ms is None else iso_utc(ms / 1000)


def json_safe(value: Any) -> Any:
    """AMQP header values (bytes, Decimal, datetime, nested tables) as plain JSON values, URLs redacted."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, bytes | bytearray):  # a long string that is not UTF-8, or a byte array
        return redact_urls(value.decode("utf-8", "replace"))
    if isinstance(value, str):
        return redact_urls(value)
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value
