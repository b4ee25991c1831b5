"""Errors the ingest API answers with: each one is an HTTP status, a stable code and a one-line message.

WarrenError
└── ApiError                 an HTTP error response (status, code, message, optional field details)

Handlers raise ApiError; the error middleware in ``app.py`` turns it, and aiohttp's own HTTP exceptions
(404, 405), into the same JSON body: ``{"error": code, "message": text, "fields": [...], "failed": [...]}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from warren.core.errors import WarrenError

__all__ = [
    "BAD_JSON",
    "BROKER_UNAVAILABLE",
    "EVENT_TYPE_NOT_ALLOWED",
    "IDEMPOTENCY_CONFLICT",
    "IDEMPOTENCY_IN_PROGRESS",
    "INTERNAL",
    "INVALID",
    "PAYLOAD_TOO_LARGE",
    "REQUEST_TIMEOUT",
    "STORE_UNAVAILABLE",
    "UNAUTHORIZED",
    "UNROUTABLE",
    "UNSUPPORTED_MEDIA_TYPE",
    "ApiError",
    "FieldProblem",
]

# The stable ``error`` codes; clients switch on these, never on the message text.
BAD_JSON = "malformed_json"
UNAUTHORIZED = "unauthorized"
UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
PAYLOAD_TOO_LARGE = "payload_too_large"
REQUEST_TIMEOUT = "request_timeout"
INVALID = "invalid_event"
EVENT_TYPE_NOT_ALLOWED = "event_type_not_allowed"
UNROUTABLE = "unroutable"
BROKER_UNAVAILABLE = "broker_unavailable"
INTERNAL = "internal_error"
IDEMPOTENCY_CONFLICT = "idempotency_conflict"
IDEMPOTENCY_IN_PROGRESS = "idempotency_in_progress"
STORE_UNAVAILABLE = "store_unavailable"


def _printable(text: str) -> str:
    """``text`` as valid UTF-8: a message may quote a header whose bytes were not UTF-8 (aiohttp hands them
    over as lone surrogates, which no JSON encoder writes), so those bytes become U+FFFD."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:  # a surrogate that is no escaped byte
        return text.encode("utf-8", "replace").decode("utf-8")


@dataclass(frozen=True)
class FieldProblem:
    """One field that failed validation: ``events[3].type`` and what is wrong with it."""

    field: str
    message: str


@dataclass
class ApiError(WarrenError):
    """An error response; ``headers`` carries e.g. ``Retry-After`` or ``WWW-Authenticate``."""

    status: int
    code: str
    message: str
    fields: list[FieldProblem] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    failed: list[dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def body(self) -> dict[str, Any]:
        """The JSON body (shape: ``ErrorBody`` in schemas.py)."""
        out: dict[str, Any] = {"error": self.code, "message": _printable(self.message)}
        if self.fields:
            out["fields"] = [{"field": f.field, "message": _printable(f.message)} for f in self.fields]
        if self.failed is not None:
            out["failed"] = self.failed
        return out

    def __str__(self) -> str:
        return self.message
