"""Events as producers hand them to Warren, and their encoding into one AMQP message."""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from aio_pika import DeliveryMode, Message
from aiormq import spec

from warren.broker import wire
from warren.core.errors import EventError
from warren.topology import names
from warren.topology.config_fields import TENANT_PATTERN, TENANT_RULE
from warren.topology.headers import MAX_HEADER_INT

__all__ = [
    "EVENT_ID_PATTERN",
    "EVENT_TYPE_PATTERN",
    "TENANT_PATTERN",
    "Event",
    "encode_event",
    "envelope_bytes",
    "event_body",
    "event_headers",
    "event_properties",
    "new_event_id",
    "validate_event_type",
    "validate_tenant",
]

_TENANT = re.compile(TENANT_PATTERN)

# Also the ingest API's JSON schema patterns (pydantic's and OpenAPI's). Python applies them with fullmatch:
# with re.match, "$" also matches before a trailing newline, and "x\n" would pass as an id.
EVENT_TYPE_PATTERN = r"^[A-Za-z0-9_\-:/]+(?:\.[A-Za-z0-9_\-:/]+)*$"
EVENT_ID_PATTERN = r"^[A-Za-z0-9_\-.:]{1,200}$"
_EVENT_TYPE = re.compile(EVENT_TYPE_PATTERN)
_EVENT_ID = re.compile(EVENT_ID_PATTERN)


def new_event_id() -> str:
    """A fresh, unique event id in the ``msg_`` form Standard Webhooks examples use."""
    return f"msg_{uuid.uuid4().hex}"


# Event types already found valid: a producer publishes few types many times, each checked once (issue 38).
_VALID_TYPES: set[str] = set()
_VALID_TYPES_KEPT = 4096


def validate_event_type(event_type: str) -> str:
    """An event type is a routing key: dot-separated words, no wildcards, at most 200 bytes."""
    if type(event_type) is str and event_type in _VALID_TYPES:
        return event_type
    if len(event_type.encode()) > 200 or not _EVENT_TYPE.fullmatch(event_type):
        raise EventError(
            f"event type {event_type!r} must be dot-separated words of letters, digits, '_', '-', ':' or '/'"
        )
    if type(event_type) is str and len(_VALID_TYPES) < _VALID_TYPES_KEPT:
        _VALID_TYPES.add(event_type)
    return event_type


def validate_tenant(tenant: str) -> str:
    """A tenant is one word of the routing key (see names.tenant_routing_key): a short lowercase token."""
    if not isinstance(tenant, str) or not _TENANT.fullmatch(tenant):
        raise EventError(f"tenant {tenant!r}: {TENANT_RULE}")
    return tenant


@dataclass(frozen=True, slots=True)  # slots: no __dict__ per event in a publisher's flight (issue 38)
class Event:
    """One event: ``type`` routes it, ``id`` becomes the ``webhook-id``, ``key`` orders it per endpoint.

    ``tenant``, when set, sends it only to that tenant's endpoints (and platform endpoints with ``all_tenants``).
    """

    type: str
    data: Any
    id: str = field(default_factory=new_event_id)
    key: str | None = None
    sequence: int | None = None
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    tenant: str | None = None

    def __post_init__(self) -> None:
        validate_event_type(self.type)
        if self.tenant is not None:
            validate_tenant(self.tenant)  # at most 54: with a type of at most 200 bytes, the key fits 255
        if not _EVENT_ID.fullmatch(self.id):
            raise EventError(f"event id {self.id!r} must be 1-200 letters, digits, '_', '-', '.' or ':'")
        if self.key is not None and not 0 < len(self.key.encode()) <= 200:
            raise EventError("an ordering key is 1-200 bytes")
        if self.key is not None and wire.CONTROL_CHARACTERS.search(self.key):
            raise EventError(f"ordering key {self.key!r} holds control characters")
        if self.sequence is not None and (isinstance(self.sequence, bool) or not 0 <= self.sequence <= MAX_HEADER_INT):
            raise EventError(f"sequence is an integer from 0 to {MAX_HEADER_INT} (a header holds no larger one)")

    @property
    def routing_key(self) -> str:
        """The key it is published with: its type, after its tenant when it names one."""
        return self.type if self.tenant is None else names.tenant_routing_key(self.tenant, self.type)

    def envelope(self) -> dict[str, Any]:
        """The Standard Webhooks payload: exactly what the endpoint receives as the JSON body."""
        body: dict[str, Any] = {
            "id": self.id,
            "type": self.type,
            "timestamp": self.timestamp.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "data": self.data,
        }
        if self.key is not None:
            body["key"] = self.key
        if self.sequence is not None:
            body["sequence"] = self.sequence
        if self.tenant is not None:
            body["tenant"] = self.tenant
        return body


def envelope_bytes(event: Event) -> bytes:
    """The envelope as JSON; EventError when the data is not JSON or nests deeper than orjson writes (254)."""
    try:
        return orjson.dumps(event.envelope())
    except TypeError as exc:
        raise EventError(f"event {event.id}: data is not JSON-serialisable: {exc}") from None


def encode_event(event: Event, max_payload: int | None = None) -> Message:
    """The AMQP message for ``event``; raises EventError when the data is not JSON or the body too large."""
    return Message(
        event_body(event, max_payload),
        message_id=event.id,
        type=event.type,
        content_type="application/json",
        delivery_mode=DeliveryMode.PERSISTENT,
        timestamp=event.timestamp,
        app_id="warren",
        headers=event_headers(event),
    )


def event_body(event: Event, max_payload: int | None = None) -> bytes:
    """The envelope as JSON, at most ``max_payload`` bytes; EventError otherwise (as ``envelope_bytes``)."""
    body = envelope_bytes(event)
    if max_payload is not None and len(body) > max_payload:
        raise EventError(f"event {event.id}: envelope is {len(body)} bytes, over the limit of {max_payload}")
    return body


def event_headers(event: Event) -> dict[str, Any]:
    """The headers ``encode_event`` sends: the ordering key, the publish time, the sequence and tenant if any."""
    headers: dict[str, Any] = {
        wire.H_KEY: event.key if event.key is not None else event.id,
        wire.H_PUBLISHED: int(time.time() * 1000),
    }
    if event.sequence is not None:
        headers[wire.H_SEQUENCE] = event.sequence
    if event.tenant is not None:
        headers[wire.H_TENANT] = event.tenant
    return headers


def event_properties(event: Event, headers: dict[str, Any]) -> spec.Basic.Properties:
    """The AMQP properties ``encode_event``'s message goes out with, built directly (the publisher's hot path:
    no aio-pika ``Message`` to convert them in and out again). tests/broker/test_publish_batch.py holds the two
    equal on the wire."""
    return spec.Basic.Properties(
        app_id="warren",
        content_type="application/json",
        delivery_mode=int(DeliveryMode.PERSISTENT),
        headers=headers,
        message_id=event.id,
        message_type=event.type,
        priority=0,  # as aio-pika's Message sets it
        timestamp=event.timestamp,
    )
