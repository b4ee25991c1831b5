"""The wire format: what a Warren message on RabbitMQ carries, in its body and its headers.

The body is the Standard Webhooks envelope exactly as it will be POSTed (``{"id", "type", "timestamp",
"data"}`` plus ``"key"`` and ``"sequence"`` when set), serialised once by the publisher so that the worker
signs and sends the same bytes without re-encoding them. The AMQP ``message_id`` is the event id and the
``type`` property the event type; Warren's own bookkeeping travels in ``warren-*`` headers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractIncomingMessage

__all__ = [
    "CONTROL_CHARACTERS",
    "H_ATTEMPT",
    "H_DEAD_AT",
    "H_DEAD_REASON",
    "H_DELIVERY_COUNT",
    "H_ENDPOINT",
    "H_FIRST_ATTEMPT",
    "H_HISTORY",
    "H_KEY",
    "H_LAST_ATTEMPT",
    "H_LAST_ERROR",
    "H_LAST_RESPONSE",
    "H_LAST_STATUS",
    "H_PUBLISHED",
    "H_REPLAYED",
    "H_REQUEST_HEADERS",
    "H_SEQUENCE",
    "H_SHOVELLED",
    "H_SOURCE",
    "NO_CONTROL_PATTERN",
    "RABBITMQ_DEATH_HEADERS",
    "onward",
]

H_KEY = "warren-key"  # ordering key (the event id when the event has none): the consistent-hash input
H_SEQUENCE = "warren-sequence"  # producer's sequence number, when given
H_PUBLISHED = "warren-published-ms"  # epoch ms when the publisher sent it: the age and latency origin
H_ATTEMPT = "warren-attempt"  # attempts already made; never derived from x-death
H_FIRST_ATTEMPT = "warren-first-attempt-ms"
H_LAST_ATTEMPT = "warren-last-attempt-ms"
H_LAST_STATUS = "warren-last-status"  # HTTP status of the last attempt, 0 when there was no response
H_LAST_ERROR = "warren-last-error"  # short text: why the last attempt failed
H_LAST_RESPONSE = "warren-last-response"  # a dead letter's last response body, as much as the worker read of it
H_ENDPOINT = "warren-endpoint"
H_DEAD_REASON = "warren-dead-reason"  # why the message was dead-lettered
H_DEAD_AT = "warren-dead-ms"
H_HISTORY = "warren-history"  # JSON list of the last few attempts, bounded
H_REPLAYED = "warren-replayed"  # set by replay: the worker starts a fresh attempt budget
H_DELIVERY_COUNT = "x-delivery-count"  # set by quorum queues: how many times the message was returned
H_SHOVELLED = "x-shovelled"  # added by a shovel with dest-add-forward-headers: marks a shovel replay [3.10.8]
H_SOURCE = "warren-source"  # inbound: the configured source a received webhook came from
H_REQUEST_HEADERS = "warren-request-headers"  # inbound: the HTTP request's headers (a table, names lowercased)

# Characters no event id, type or ordering key may hold: C0 controls, DEL, C1 controls and the Unicode line
# and paragraph separators. A newline in an id would reach an HTTP header (aiohttp refuses it) and a log line.
_CONTROL = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
CONTROL_CHARACTERS = re.compile(f"[{_CONTROL}]")
NO_CONTROL_PATTERN = f"^[^{_CONTROL}]*$"  # the same rule as a JSON schema pattern (the ingest API's key)

# RabbitMQ's own dead-letter bookkeeping. It must be stripped before a message re-enters the delay chain:
# a message carrying its old x-death back into the same TTL cycle is dropped as a dead-letter cycle.
RABBITMQ_DEATH_HEADERS = (
    "x-death",
    "x-first-death-exchange",
    "x-first-death-queue",
    "x-first-death-reason",
    "x-last-death-exchange",
    "x-last-death-queue",
    "x-last-death-reason",
)


def onward(message: AbstractIncomingMessage, headers: Mapping[str, Any]) -> Message:
    """The same message with new headers, persistent: what a retry, a dead letter or a replay republishes.

    The body is kept byte for byte (it is what gets signed), and so are the properties that identify it.
    """
    return Message(
        message.body,
        headers=dict(headers),
        message_id=message.message_id,
        type=message.type,
        content_type=message.content_type or "application/json",
        timestamp=message.timestamp,
        app_id=message.app_id,
        correlation_id=message.correlation_id,
        delivery_mode=DeliveryMode.PERSISTENT,
    )
