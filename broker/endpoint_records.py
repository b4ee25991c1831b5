"""Live endpoint records: what the admin side announces on ``<prefix>.endpoints`` and workers apply.

One record per change: ``apply`` carries the endpoint's whole configuration (its secrets included: workers sign
with them and read no database), ``remove`` only its name. The endpoints stream keeps every record; the latest
``version`` per endpoint wins, so a worker reading the stream from the start, or hearing the broadcast, ends
with the same set. Versions are epoch milliseconds, bumped past the last one this process wrote.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractIncomingMessage
from pydantic import ValidationError

from warren.topology.config import Endpoint

__all__ = ["APPLY", "REMOVE", "EndpointRecord", "decode_record", "latest_per_endpoint", "next_version"]

APPLY: Literal["apply"] = "apply"
REMOVE: Literal["remove"] = "remove"

_last_version = 0


def next_version() -> int:
    """Epoch ms, strictly above the last version this process handed out (two changes in one ms stay ordered)."""
    global _last_version
    _last_version = max(int(time.time() * 1000), _last_version + 1)
    return _last_version


@dataclass(frozen=True)
class EndpointRecord:
    """One live change of one endpoint."""

    endpoint: str
    action: Literal["apply", "remove"]
    version: int
    by: str
    config: dict[str, Any] | None = None  # the endpoint as JSON (``apply`` only)

    @classmethod
    def applying(cls, endpoint: Endpoint, by: str) -> EndpointRecord:
        return cls(endpoint.name, APPLY, next_version(), by, endpoint.model_dump(mode="json", exclude_defaults=True))

    @classmethod
    def removing(cls, name: str, by: str) -> EndpointRecord:
        return cls(name, REMOVE, next_version(), by)

    def endpoint_config(self) -> Endpoint:
        """The endpoint this record applies; ValueError when it cannot be built here (say, a missing env secret)."""
        if self.config is None:
            raise ValueError(f"record of {self.endpoint!r} carries no configuration")
        try:
            return Endpoint.model_validate(self.config)
        except ValidationError as exc:
            raise ValueError(f"endpoint {self.endpoint!r}: {exc}") from None

    def to_message(self) -> Message:
        body = {"endpoint": self.endpoint, "action": self.action, "version": self.version, "by": self.by}
        if self.config is not None:
            body["config"] = self.config
        return Message(orjson.dumps(body), content_type="application/json", delivery_mode=DeliveryMode.PERSISTENT)

    @classmethod
    def from_bytes(cls, body: bytes) -> EndpointRecord:
        """Parse a record; ValueError when the body is not one (a stray message must not break a worker)."""
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        endpoint, action, version = data.get("endpoint"), data.get("action"), data.get("version")
        config = data.get("config")
        if not isinstance(endpoint, str) or action not in (APPLY, REMOVE) or not isinstance(version, int):
            raise ValueError("an endpoint record has endpoint, action (apply|remove) and an integer version")
        if action == APPLY and not isinstance(config, dict):
            raise ValueError("an apply record carries the endpoint's config")
        return cls(endpoint, action, version, str(data.get("by", "")), config if action == APPLY else None)


def decode_record(message: AbstractIncomingMessage) -> EndpointRecord | None:
    """The record a message carries; None for a message that is not a record."""
    try:
        return EndpointRecord.from_bytes(message.body)
    except ValueError:
        return None


def latest_per_endpoint(records: list[EndpointRecord]) -> dict[str, EndpointRecord]:
    """The record in force for each endpoint: the highest version (the stream's later one on a tie)."""
    latest: dict[str, EndpointRecord] = {}
    for record in records:
        known = latest.get(record.endpoint)
        if known is None or record.version >= known.version:
            latest[record.endpoint] = record
    return latest
