"""A received webhook as it travels on the inbound queue, and as the user's handler sees it.

The body is the request's raw bytes, untouched (a handler may verify again, or parse as it likes). The
AMQP ``message_id`` is the event id, so the queue, the logs and the idempotency store all name it alike.
The request's headers travel in one table header, minus the ones that carry secrets or only describe
the HTTP connection.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import orjson
from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractIncomingMessage

from warren.broker import wire
from warren.core.moments import within_range
from warren.receiving.identity import Identity
from warren.topology.headers import MAX_COUNTED, header_int, header_text

__all__ = ["InboundEvent", "decode_inbound", "encode_inbound", "kept_headers"]

# Never stored: credentials, and headers that describe the connection rather than the event.
_DROPPED = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "cookie",
        "connection",
        "keep-alive",
        "content-length",
        "transfer-encoding",
        "upgrade",
        "te",
        "expect",
    }
)


def kept_headers(items: Iterable[tuple[str, str]], secret_headers: Iterable[str] = ()) -> dict[str, str]:
    """The request headers worth keeping, names lowercased, repeated ones joined with ``", "``."""
    dropped = _DROPPED | {h.lower() for h in secret_headers}
    kept: dict[str, str] = {}
    for name, value in items:
        lower = name.lower()
        if lower in dropped:
            continue
        kept[lower] = f"{kept[lower]}, {value}" if lower in kept else value
    return kept


@dataclass(frozen=True)
class InboundEvent:
    """What a handler receives: the verified request, its identity, and how many attempts came before."""

    source: str
    id: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    key: str | None = None
    sequence: int | None = None
    content_type: str | None = None
    received_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    attempt: int = 0  # failed attempts before this one: 0 on the first try

    def json(self) -> Any:
        """The body parsed as JSON (raises ``orjson.JSONDecodeError`` when it is not)."""
        return orjson.loads(self.body)


def encode_inbound(
    source: str,
    identity: Identity,
    body: bytes,
    headers: Mapping[str, str],
    content_type: str | None,
    *,
    received_ms: int | None = None,
) -> Message:
    """The AMQP message ``warren receive`` publishes to the source's inbound queue."""
    received_ms = int(time.time() * 1000) if received_ms is None else received_ms
    amqp_headers: dict[str, Any] = {
        wire.H_SOURCE: source,
        wire.H_PUBLISHED: received_ms,
        wire.H_REQUEST_HEADERS: dict(headers),
    }
    if identity.key is not None:
        amqp_headers[wire.H_KEY] = identity.key
    if identity.sequence is not None:
        amqp_headers[wire.H_SEQUENCE] = identity.sequence
    return Message(
        body,
        message_id=identity.id,
        content_type=content_type,
        delivery_mode=DeliveryMode.PERSISTENT,
        timestamp=datetime.fromtimestamp(received_ms / 1000, UTC),
        app_id="warren-receive",
        headers=amqp_headers,
    )


def _text(value: Any) -> str:
    # AMQP hands over a string that is not UTF-8 as bytes: shown with U+FFFD, never a UnicodeDecodeError
    return header_text(value) or ""


def _received_at(received: object) -> datetime:
    """When ``warren receive`` took the request: its header in epoch ms, or now when it holds no such moment."""
    ms = header_int(received)
    if ms is None or not within_range(ms / 1000):
        return datetime.now(UTC)
    return datetime.fromtimestamp(ms / 1000, UTC)


def decode_inbound(message: AbstractIncomingMessage, source: str) -> InboundEvent:
    """The handler's view of a message from an inbound queue. Never raises: its headers may come from any AMQP
    client, and a message whose reading failed would stay unacknowledged on the channel."""
    headers = message.headers or {}
    raw_request = headers.get(wire.H_REQUEST_HEADERS)
    request_headers = {_text(k): _text(v) for k, v in raw_request.items()} if isinstance(raw_request, Mapping) else {}
    key = headers.get(wire.H_KEY)
    sequence = headers.get(wire.H_SEQUENCE)
    attempt = 0 if headers.get(wire.H_REPLAYED) else headers.get(wire.H_ATTEMPT, 0)
    return InboundEvent(
        source=source,
        id=message.message_id or "",
        body=message.body,
        headers=MappingProxyType(request_headers),
        key=None if key is None else _text(key),
        sequence=sequence if isinstance(sequence, int) and not isinstance(sequence, bool) else None,
        content_type=message.content_type,
        received_at=_received_at(headers.get(wire.H_PUBLISHED)),
        attempt=min(MAX_COUNTED, max(0, attempt)) if isinstance(attempt, int) and not isinstance(attempt, bool) else 0,
    )
