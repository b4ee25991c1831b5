"""What the admin API takes and answers, as pydantic models; its part of ``/openapi.json`` is generated from them.

Input models are strict (a number is a JSON number, never ``"3"``) and refuse unknown fields, so the document
and the server agree on what is invalid. Durations are seconds (a JSON number) here, where the TOML file also
takes ``"10s"``.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, JsonValue

from warren.api.admin.header_schemas import HEADERS_DOC, PROXY_DOC, PROXY_PATTERN, SecretHeaderIn
from warren.api.admin.key_schemas import MadeKeys, SecretInfo, Signing, SigningList
from warren.api.ingest.schemas import sendable
from warren.broker.events import EVENT_ID_PATTERN, EVENT_TYPE_PATTERN
from warren.topology.config_fields import TENANT_PATTERN

__all__ = [
    "EVENT_ID_PATTERN",
    "EVENT_TYPE_PATTERN",
    "INSTANT_PATTERN",
    "NAME_PATTERN",
    "STATES",
    "TENANT_PATTERN",
    "AttemptOut",
    "AttemptPage",
    "AttemptQuery",
    "EndpointCreated",
    "EndpointIn",
    "EndpointOut",
    "EndpointPage",
    "EndpointPatch",
    "EventAttempts",
    "EventTypeIn",
    "EventTypeList",
    "EventTypeOut",
    "KeyCreated",
    "KeyIn",
    "KeyList",
    "KeyOut",
    "ListQuery",
    "RecoverOut",
    "ReplayIn",
    "ReplayOut",
    "RevealedSecret",
    "RevealedSecrets",
    "RotateIn",
    "Rotated",
    "SecretInfo",
    "SessionIn",
    "SessionOut",
    "StateIn",
    "StateOut",
    "TestIn",
    "TestOut",
]

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,62}$"
_WORD = r"(?:\*|#|[A-Za-z0-9_\-:/]+)"
PATTERN_PATTERN = rf"^{_WORD}(?:\.{_WORD})*$"
SECRET_PATTERN = r"^(whsec|whsk)_[A-Za-z0-9+/]+={0,2}$"
STATES = ("active", "paused", "disabled", "open", "half-open", "throttled")

Name = Annotated[str, Field(pattern=NAME_PATTERN, description="Lowercase letters, digits, '-' and '_' (at most 63).")]
TenantName = Annotated[str, Field(pattern=TENANT_PATTERN, description="Like a name, at most 54 characters.")]
EventPattern = Annotated[
    str, Field(pattern=PATTERN_PATTERN, max_length=200, description="'*' matches one word, '#' any number.")
]
Seconds = Annotated[float, Field(gt=0, le=86400.0, description="Seconds.")]
RetryStatus = Annotated[int, Field(ge=400, le=499)]


class _In(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class _Options(_In):
    """The endpoint fields beside name, url, events, tenant and secret (docs/configuration.md, [[endpoints]])."""

    ordering: Literal["none", "key"] | None = Field(default=None, description="'key': in order per event key.")
    partitions: int | None = Field(default=None, ge=1, le=256, description="With ordering 'key' (default 4).")
    home: Literal["dedicated", "lane"] | None = Field(
        default=None,
        description="'lane': no queues of its own, shares the deployment's lanes; 'dedicated': queues of its own. "
        "Left out on a create: [lanes] api_default_home ('lane') while lanes are on, 'dedicated' when they are off "
        "or with ordering 'key'. Left out on an update: kept; another home is a move (an ordered endpoint: onto the "
        "lanes only, 409 back).",
    )
    concurrency: int | None = Field(default=None, ge=1, le=2048, description="Requests in flight per worker.")
    timeout: Seconds | None = None
    connect_timeout: Seconds | None = None
    retry_statuses: list[RetryStatus] | None = Field(default=None, max_length=100)
    headers: dict[str, str | SecretHeaderIn] | None = Field(default=None, max_length=32, description=HEADERS_DOC)
    proxy: str | None = Field(default=None, pattern=PROXY_PATTERN, description=PROXY_DOC)
    max_in_flight: int | None = Field(default=None, ge=1, le=100_000, description="Concurrent requests, fleet-wide.")
    rate_limit: float | None = Field(default=None, gt=0, le=1e6, description="Requests per second, fleet-wide.")
    burst: int | None = Field(default=None, ge=1, le=1_000_000, description="With rate_limit.")
    all_tenants: bool | None = Field(
        default=None, description="A platform endpoint (no tenant) that also receives every tenant's events."
    )
    signing: SigningList = None
    filter: dict[str, JsonValue] | None = Field(
        default=None, description='Only events whose data match it, e.g. {"amount": {"$gt": 1000}} (docs/endpoints.md).'
    )


class EndpointIn(_Options):
    """A new endpoint. Without ``secret`` one is generated; either way it is in the answer, once."""

    name: Name
    url: str = Field(max_length=2000, description="Absolute http:// or https:// URL.")
    events: list[EventPattern] = Field(min_length=1, max_length=100)
    tenant: TenantName | None = Field(
        default=None, description="The customer it belongs to: it receives only that tenant's events."
    )
    secret: str | None = Field(default=None, pattern=SECRET_PATTERN, max_length=200)


class EndpointPatch(_Options):
    """Fields to change; fields left out keep their value, ``null`` puts one back to its default
    (``tenant: null`` makes it a platform endpoint)."""

    url: str | None = Field(default=None, max_length=2000)
    events: list[EventPattern] | None = Field(default=None, min_length=1, max_length=100)
    tenant: TenantName | None = None


class EndpointOut(BaseModel):
    name: str
    tenant: str | None
    url: str
    events: list[str]
    home: Literal["dedicated", "lane"] = Field(description="'lane': shares the deployment's lanes; 'dedicated': not.")
    options: dict[str, JsonValue] = Field(description="The other fields set on the endpoint.")
    managed_by: Literal["api", "file"] = Field(description="'file': from the configuration file, read-only here.")
    state: str = Field(description="active, paused, disabled, open, half-open or throttled.")
    created_at: str
    updated_at: str
    version: int
    secrets: list[SecretInfo] = Field(description="Its signing secrets, never their text (see /secret).")


class EndpointCreated(EndpointOut, MadeKeys):
    secret: str = Field(description="The signing secret: shown now, and later only by GET .../secret.")


class EndpointPage(BaseModel):
    data: list[EndpointOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last one.")


class ListQuery(BaseModel):
    """The query of GET /v1/endpoints (strings from the URL, so not strict)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    tenant: TenantName | None = None
    state: Literal["active", "paused", "disabled", "open", "half-open", "throttled"] | None = None
    event_type: str | None = Field(default=None, pattern=EVENT_TYPE_PATTERN, max_length=200)
    managed_by: Literal["api", "file"] | None = None
    limit: int = Field(default=50, ge=1, le=500)
    cursor: Name | None = None


class RotateIn(_In):
    secret: str | None = Field(default=None, pattern=SECRET_PATTERN, max_length=200, description="Default: new.")
    grace: float | None = Field(
        default=None, ge=0, le=30 * 86400.0, description="Seconds the old secret keeps signing (store.secret_grace)."
    )
    kind: Signing | None = Field(default=None, description="'ed25519': a new Ed25519 key (default: hmac).")


class KeyIn(_In):
    """A new tenant-scoped API key."""

    name: str | None = Field(default=None, max_length=200, description="What the key is for (shown in lists).")
    expires_in: float | None = Field(
        default=None, gt=0, le=5 * 366 * 86400.0, description="Seconds until the key stops working; default: never."
    )


class KeyOut(BaseModel):
    """A tenant's API key as lists show it: never the key itself."""

    id: str = Field(description="Names the key (its form is wtk_<id>_...): what to revoke.")
    tenant: str
    name: str | None
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    active: bool = Field(description="Neither revoked nor expired.")


class KeyCreated(KeyOut):
    key: str = Field(description="The key itself: shown this once, never again (the store keeps its SHA-256).")


class KeyList(BaseModel):
    data: list[KeyOut] = Field(description="Every key of the tenant, revoked ones too, oldest first.")


class SessionIn(_In):
    """A portal session for one tenant."""

    ttl: float = Field(default=900.0, gt=0, le=86400.0, description="Seconds it works (default 15 minutes).")


class SessionOut(BaseModel):
    tenant: str
    token: str = Field(description="A bearer token of the tenant (wps_...), like its key until `expires_at`.")
    expires_at: str


class EventTypeIn(_In):
    """One version of an event type (``PUT /v1/event-types/{name}``)."""

    version: int = Field(default=1, ge=1, le=1000, description="Events are checked against the newest version.")
    description: str = Field(default="", max_length=2000)
    json_schema: dict[str, JsonValue] | None = Field(
        default=None, description="A JSON Schema (2020-12) of the events' `data`."
    )
    deprecated: bool = Field(default=False, description="Still accepted; marked for customers to move off.")


class EventTypeOut(BaseModel):
    name: str
    version: int
    description: str
    json_schema: dict[str, JsonValue] | None
    deprecated: bool
    managed_by: Literal["file", "api"]


class EventTypeList(BaseModel):
    data: list[EventTypeOut] = Field(description="Every version of every type, by name then version.")


class Rotated(MadeKeys):
    name: str
    secret: str = Field(description="The new secret: it signs from now on, beside the old one until it expires.")
    secrets: list[SecretInfo]


class RevealedSecret(BaseModel):
    secret: str
    created_at: str
    expires_at: str | None


class RevealedSecrets(BaseModel):
    name: str
    secrets: list[RevealedSecret] = Field(description="Newest first; every one signs each delivery.")


class StateIn(_In):
    reason: str | None = Field(default=None, max_length=500)


class StateOut(BaseModel):
    name: str
    state: str
    changed: bool


_TEST_DATA: JsonValue = {"message": "a test event from Warren"}


class TestIn(_In):
    type: str = Field(default="warren.test", pattern=EVENT_TYPE_PATTERN, max_length=200)
    # As an ingested event's data: 1e999 was sent as null, and an integer beyond 64 bits was a 500
    data: Annotated[JsonValue, AfterValidator(sendable)] = Field(default_factory=lambda: _TEST_DATA)


class TestOut(BaseModel):
    event_id: str
    delivered: bool
    outcome: Literal["delivered", "retry", "dead", "disable"] = Field(
        description="What a worker would do next: delivered, retry later, dead-letter, or disable the endpoint."
    )
    status: int | None = Field(description="The endpoint's HTTP status; null when it did not answer.")
    duration_ms: float
    error: str | None
    response: str = Field(description="The start of the endpoint's answer.")


# A moment in a query: seconds since the epoch, or an RFC 3339 time (an offset-less time is UTC).
INSTANT_PATTERN = (
    r"^(?:[0-9]{1,12}(?:\.[0-9]{1,9})?"
    r"|[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]{1,9})?)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})?)$"
)
_INSTANT = re.compile(INSTANT_PATTERN)


def parse_instant(value: object) -> float | None:
    """Epoch seconds from ``1764590400``, ``1764590400.5`` or ``2025-12-01T12:00:00Z``; ValueError otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or not _INSTANT.fullmatch(value):
        raise ValueError("a time is seconds since the epoch or RFC 3339 (2025-12-01T12:00:00Z)")
    if ":" not in value:
        return float(value)
    text = value.upper().replace(" ", "T").replace("Z", "+00:00")
    if "." in text:  # Python reads at most 6 digits of a fraction
        head, _, tail = text.partition(".")
        digits = re.match(r"[0-9]+", tail)
        assert digits is not None
        text = f"{head}.{digits.group()[:6].ljust(6, '0')}{tail[digits.end() :]}"
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{value!r} is not a valid time") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.timestamp()


Instant = Annotated[float | None, BeforeValidator(parse_instant)]


class AttemptQuery(BaseModel):
    """The query of GET /v1/endpoints/{name}/attempts (strings from the URL, so not strict)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    status: Literal["failed", "all"] = "all"
    since: Instant = None
    until: Instant = None
    limit: int = Field(default=50, ge=1, le=500)
    cursor: str | None = Field(default=None, max_length=400)


class AttemptOut(BaseModel):
    """One delivery attempt, as the attempt log keeps it."""

    id: str = Field(description="The record's id (unique).")
    event_id: str
    tenant: str | None
    endpoint: str
    attempt: int = Field(description="1 for the first attempt of the event at this endpoint.")
    at: str = Field(description="When the attempt ended (RFC 3339, UTC).")
    status: int | None = Field(description="The endpoint's HTTP status; null when it did not answer.")
    duration_ms: float
    outcome: str = Field(
        description="delivered, retry, retry-in-place, exhausted, dead, disabled or parked (all but delivered failed)."
    )
    failed: bool
    error: str | None
    next_delay_s: float | None = Field(description="The delay before the next attempt, when one was scheduled.")
    worker: str = Field(description="The worker that made it (host and PID).")
    response: str | None = Field(
        description="The start of the endpoint's answer as text (at most `delivery.response_body_limit` bytes read;"
        " invalid UTF-8 shown as U+FFFD); null when no answer came (a timeout, a refused connection) or for an"
        " attempt recorded before Warren kept answers."
    )
    response_headers: dict[str, str] | None = Field(
        description="The answer's `content-type` and `retry-after` headers, those it sent; null with `response`."
    )


class EventAttempts(BaseModel):
    event_id: str
    data: list[AttemptOut] = Field(description="Every attempt, across endpoints, in time order.")


class AttemptPage(BaseModel):
    data: list[AttemptOut] = Field(description="Newest first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last one.")


class ReplayIn(_In):
    event_ids: list[Annotated[str, Field(pattern=EVENT_ID_PATTERN, max_length=200)]] = Field(
        min_length=1, max_length=100, description="The events whose dead letters to send again."
    )


class ReplayOut(BaseModel):
    name: str
    replayed: int = Field(description="Dead letters sent back for delivery (those of the events asked for found).")
    dlq_depth: int = Field(description="Dead letters the endpoint's DLQ held before (a lane endpoint: its own).")
    scanned: int = Field(description="Dead letters read to find them (a lane endpoint: of its lane's DLQ).")


class RecoverOut(BaseModel):
    name: str
    since: str = Field(description="The moment asked for, in ISO 8601 (UTC).")
    recovered: int = Field(description="Dead letters sent back for delivery (dead at or after `since`).")
    dlq_depth: int = Field(
        description="Dead letters the endpoint's DLQ held before the recovery (a lane endpoint: its own letters "
        "among those read of its lane's shared DLQ)."
    )
    scanned: int = Field(
        description="Dead letters read: all of them unless the DLQ held more than one pass reads (a lane endpoint: "
        "of its lane's shared DLQ, its lane-mates' included)."
    )
