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

from warren.topology.headers import (  # re-exported: the names are defined once, there
    CONTROL_CHARACTERS as CONTROL_CHARACTERS,
)
from warren.topology.headers import (
    H_ATTEMPT as H_ATTEMPT,
)
from warren.topology.headers import (
    H_DEAD_AT as H_DEAD_AT,
)
from warren.topology.headers import (
    H_DEAD_REASON as H_DEAD_REASON,
)
from warren.topology.headers import (
    H_DELIVERY_COUNT as H_DELIVERY_COUNT,
)
from warren.topology.headers import (
    H_ENDPOINT as H_ENDPOINT,
)
from warren.topology.headers import (
    H_FIRST_ATTEMPT as H_FIRST_ATTEMPT,
)
from warren.topology.headers import (
    H_HISTORY as H_HISTORY,
)
from warren.topology.headers import (
    H_KEY as H_KEY,
)
from warren.topology.headers import (
    H_LAST_ATTEMPT as H_LAST_ATTEMPT,
)
from warren.topology.headers import (
    H_LAST_ERROR as H_LAST_ERROR,
    H_LAST_RESPONSE as H_LAST_RESPONSE,
)
from warren.topology.headers import (
    H_LAST_STATUS as H_LAST_STATUS,
)
from warren.topology.headers import (
    H_PUBLISHED as H_PUBLISHED,
)
from warren.topology.headers import (
    H_REPLAYED as H_REPLAYED,
)
from warren.topology.headers import (
    H_REQUEST_HEADERS as H_REQUEST_HEADERS,
)
from warren.topology.headers import (
    H_SEQUENCE as H_SEQUENCE,
)
from warren.topology.headers import (
    H_SHOVELLED as H_SHOVELLED,
)
from warren.topology.headers import (
    H_SOURCE as H_SOURCE,
)
from warren.topology.headers import (
    NO_CONTROL_PATTERN as NO_CONTROL_PATTERN,
)
from warren.topology.headers import (
    RABBITMQ_DEATH_HEADERS as RABBITMQ_DEATH_HEADERS,
)

__all__ = ["onward"]  # and the header names above


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
