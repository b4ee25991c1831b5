"""Errors of the receiving toolkit, under Warren's one root (``warren.core.errors.WarrenError``).

WarrenError
├── VerificationError     an inbound request failed its source's check (answered 401); ``reason`` is a code
├── IdentityError         the event id, key or sequence could not be read from a request (answered 400)
├── StoreError            the idempotency store is unusable (bad URL, cannot connect, schema failure)
├── HandlerError          a ``module:function`` handler cannot be imported or is not callable
└── NonRetryable          raised by a handler: dead-letter the event now instead of retrying it
"""

from __future__ import annotations

from warren.core.errors import WarrenError

__all__ = ["HandlerError", "IdentityError", "NonRetryable", "StoreError", "VerificationError"]


class VerificationError(WarrenError):
    """A request's signature, token or timestamp did not check out.

    ``reason`` is a short stable code for the JSON error body and metrics (``missing_signature``,
    ``no_matching_signature``, ``timestamp_too_old``, ...); ``str()`` is a sentence for logs. Neither ever
    holds a secret or an expected signature.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class IdentityError(WarrenError, ValueError):
    """The event id (or key, or sequence) is missing or malformed in a request."""


class StoreError(WarrenError):
    """The idempotency store cannot be opened or used."""


class HandlerError(WarrenError):
    """A configured handler cannot be loaded."""


class NonRetryable(WarrenError):
    """Raise it from a handler for an event that can never succeed: it goes to the DLQ without retries."""
