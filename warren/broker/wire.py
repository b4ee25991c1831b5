"""The wire format: what a Warren message on RabbitMQ carries, in its body and its headers.

The body is the Standard Webhooks envelope exactly as it will be POSTed (``{"id", "type", "timestamp",
"data"}`` plus ``"key"`` and ``"sequence"`` when set), serialised once by the publisher so that the worker
signs and sends the same bytes without re-encoding them. The AMQP ``message_id`` is the event id and the
``type`` property the event type; Warren's own bookkeeping travels in ``warren-*`` headers, whose names
are defined once in ``topology/headers.py`` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractIncomingMessage

from warren.topology import headers as _headers
from warren.topology.headers import *  # noqa: F403 (re-exported: the names are defined once, there)

__all__ = ["onward", "untouched_headers"]
__all__ += _headers.__all__


def _writable(value: Any) -> Any:
    if isinstance(value, bytes):
        return bytearray(value)
    if isinstance(value, Mapping):
        return {name: _writable(item) for name, item in value.items()}
    if isinstance(value, list):
        return [_writable(item) for item in value]
    return value


def onward(message: AbstractIncomingMessage, headers: Mapping[str, Any]) -> Message:
    """The same message with new headers, persistent: what a retry, a dead letter or a replay republishes.

    The body is kept byte for byte (it is what gets signed), and so are the properties that identify it, and
    every header value: one that pamqp read as bytes (a string that is not UTF-8, which any AMQP client may
    send) goes out as a byte array, since pamqp cannot write bytes (TypeError: every move of such a message
    failed, and it was handed back again and again).
    """
    return Message(
        message.body,
        headers={name: _writable(value) for name, value in headers.items()},
        message_id=message.message_id,
        type=message.type,
        content_type=message.content_type or "application/json",
        timestamp=message.timestamp,
        app_id=message.app_id,
        correlation_id=message.correlation_id,
        delivery_mode=DeliveryMode.PERSISTENT,
    )


def untouched_headers(message: AbstractIncomingMessage) -> dict[str, Any]:
    """The message's headers as Warren wrote them, for a move that must not change it (a park, a move between
    homes): without RabbitMQ's dead-letter bookkeeping, which would make the delay chain drop it as a cycle."""
    return {k: v for k, v in (message.headers or {}).items() if k not in _headers.RABBITMQ_DEATH_HEADERS}
