"""What the ingest API takes and answers, as pydantic models; the OpenAPI document is generated from them.

The patterns mirror ``warren.broker.events`` (an ``Event`` re-checks them), so a body that passes here can always
be turned into an event: a test holds the two in step.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field, JsonValue, field_validator

from warren.broker import wire
from warren.broker.events import EVENT_ID_PATTERN, EVENT_TYPE_PATTERN, TENANT_PATTERN
from warren.topology.headers import MAX_HEADER_INT

__all__ = [
    "EVENT_ID_PATTERN",
    "EVENT_TYPE_PATTERN",
    "TENANT_PATTERN",
    "Accepted",
    "BatchAccepted",
    "BatchIn",
    "ErrorBody",
    "EventIn",
    "FailedEvent",
    "FieldError",
    "Health",
    "sendable",
]

MAX_SEQUENCE = MAX_HEADER_INT  # an AMQP signed 64-bit header value
_INT_RANGE = (-(2**63), 2**64 - 1)  # what orjson writes as a number; larger integers go through as text


def _scan(value: Any) -> bool:
    """Raise on NaN/Infinity (not JSON; they would be sent as null); True if an integer is beyond orjson."""
    big = False
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError("numbers must be finite: NaN, Infinity and overflowing numbers are not JSON")
        elif isinstance(item, int) and not isinstance(item, bool) and not _INT_RANGE[0] <= item <= _INT_RANGE[1]:
            big = True
    return big


def _exact(value: Any) -> Any:
    """``value`` with every integer beyond 64 bits as a verbatim JSON fragment, so no digit is lost."""
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exact(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and not _INT_RANGE[0] <= value <= _INT_RANGE[1]:
        return orjson.Fragment(str(value).encode())
    return value


def sendable(value: JsonValue) -> JsonValue:
    """Event data as pydantic read it, made safe to re-encode with orjson: ValueError on NaN or an overflowing
    number (pydantic reads ``1e999`` as infinity, which orjson writes as null), and integers beyond 64 bits kept
    digit for digit (orjson refuses them)."""
    return _exact(value) if _scan(value) else value


class _In(BaseModel):
    # Unknown fields are refused, so a misspelt "sequense" is a 422, never silently ignored.
    model_config = ConfigDict(extra="forbid", frozen=True)


class EventIn(_In):
    """One event as a producer posts it."""

    type: str = Field(
        max_length=200,
        pattern=EVENT_TYPE_PATTERN,
        description="Routing key: dot-separated words of letters, digits, '_', '-', ':' or '/'.",
        examples=["order.created"],
    )
    data: JsonValue = Field(description="Any JSON value: becomes the `data` of the webhook body.")
    id: str | None = Field(
        default=None,
        pattern=EVENT_ID_PATTERN,
        description="Event id, sent as `webhook-id`. Default: from `Idempotency-Key`, else a fresh `msg_...`.",
    )
    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        pattern=wire.NO_CONTROL_PATTERN,
        description="Ordering key (at most 200 bytes of UTF-8, no control characters): events of one key reach "
        "ordered endpoints in order.",
    )
    sequence: int | None = Field(
        default=None, ge=0, le=MAX_SEQUENCE, description="Producer's sequence number within `key`."
    )
    tenant: str | None = Field(
        default=None,
        pattern=TENANT_PATTERN,
        description="The tenant the event is for: only its endpoints (and platform endpoints with `all_tenants`) "
        "receive it. Accepted even when none subscribes (counted in `warren_tenant_events_unrouted_total`).",
        examples=["acme"],
    )

    @field_validator("data")
    @classmethod
    def _sendable(cls, value: JsonValue) -> JsonValue:
        # The webhook body is re-encoded with orjson: keep every number exactly as the producer sent it.
        return sendable(value)

    @field_validator("sequence", mode="before")
    @classmethod
    def _a_json_number(cls, value: object) -> object:
        # As JSON Schema's integer: 3 and 3.0, never "3" or true (which pydantic's lax mode would take).
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise ValueError("sequence must be an integer")
        return value

    @field_validator("key")
    @classmethod
    def _key_bytes(cls, value: str | None) -> str | None:
        if value is not None and len(value.encode()) > 200:
            raise ValueError("key is at most 200 bytes of UTF-8")
        return value


class BatchIn(_In):
    """Several events in one request; the configured ``api.max_batch`` bounds their number."""

    events: list[EventIn] = Field(min_length=1)


class Accepted(BaseModel):
    """202: RabbitMQ confirmed the event; it is stored durably and will be delivered."""

    id: str


class FailedEvent(BaseModel):
    """One event of a batch that RabbitMQ did not confirm: retry it (with the same id) later."""

    index: int = Field(description="Position in the request's `events`.")
    id: str
    error: Literal["unroutable", "broker_unavailable"]
    message: str


class BatchAccepted(BaseModel):
    """202 (all stored) or 207 (some stored): the ids RabbitMQ confirmed, and every event it did not."""

    ids: list[str] = Field(description="Ids of the stored events, in request order.")
    failed: list[FailedEvent] = Field(description="Events not stored; empty on 202.")


class FieldError(BaseModel):
    field: str = Field(description="Where in the body, e.g. `events[3].type`, or a header name.")
    message: str


class ErrorBody(BaseModel):
    """Every error: a stable code, a one-line message, and details when there are some."""

    error: str = Field(description="Stable code: switch on this, not on the message.")
    message: str
    fields: list[FieldError] | None = None
    failed: list[FailedEvent] | None = Field(default=None, description="Batch only: why each event failed.")


class Health(BaseModel):
    status: Literal["ok", "ready", "not ready"]
    reason: str | None = None
