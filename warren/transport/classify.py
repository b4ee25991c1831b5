"""What an HTTP answer means for the message: pure policy, no I/O (the HTTP transport applies it)."""

from __future__ import annotations

from dataclasses import dataclass

from warren.transport.base import Outcome
from warren.transport.retry_after import parse_retry_after

__all__ = ["Outcome", "Verdict", "classify", "parse_retry_after"]

RETRYABLE_4XX = frozenset({408, 425, 429})


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    reason: str


def classify(status: int | None, error: str | None, retry_statuses: frozenset[int] | tuple[int, ...] = ()) -> Verdict:
    """Map one attempt's result to what happens next.

    ``status`` is None when no response arrived; ``error`` then says why (timeout, connection refused, ...).
    Redirects are never followed, so a 3xx is a failure; it is retried, since a moved endpoint is usually a
    deployment mistake that gets fixed, not a verdict on the message.
    """
    if status is None:
        return Verdict(Outcome.RETRY, error or "no response")
    if 200 <= status < 300:
        return Verdict(Outcome.DELIVERED, f"HTTP {status}")
    if status == 410:
        return Verdict(Outcome.DISABLE, "HTTP 410 Gone: the endpoint asked to stop receiving")
    if status >= 500 or 300 <= status < 400 or status in RETRYABLE_4XX or status in retry_statuses:
        return Verdict(Outcome.RETRY, f"HTTP {status}")
    if 400 <= status < 500:
        return Verdict(Outcome.DEAD, f"HTTP {status}: the endpoint rejected the message")
    return Verdict(Outcome.RETRY, f"unexpected HTTP status {status}")
