"""The seam between deciding and sending: a ``Transport`` sends one delivery and says what happened.

The runner decides what becomes of a message; the transport only sends it and describes the result in
terms that are not tied to any protocol (modelled on httpx's transport seam). The health code reads the
same neutral result, so nothing above a transport knows it is HTTP. HTTP (warren/transport/http.py) is
the only transport shipped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from warren.core.frozen import quick_init

if TYPE_CHECKING:
    from warren.topology.config import Endpoint

__all__ = ["HISTORY_LIMIT", "Delivery", "Outcome", "SendResult", "Transport", "failed_result"]

HISTORY_LIMIT = 5  # attempts kept in the warren-history header: enough to tell the story, bounded in size


@quick_init
@dataclass(frozen=True)
class Delivery:
    """What the worker needs of one message: the bytes to POST and Warren's bookkeeping."""

    event_id: str
    event_type: str
    body: bytes
    attempts_made: int  # before this one
    published_ms: int
    first_attempt_ms: int | None
    history: tuple[dict[str, Any], ...]
    tenant: str | None = None  # the tenant the event was published for (None: no tenant)
    trace: tuple[str, str | None] | None = None  # the W3C traceparent and tracestate it carries (warren/tracing)
    # The envelope as parsed when the message was read (None: not kept), so that nothing parses the body again
    # (an endpoint's payload filter reads its ``data``); never sent, compared or shown.
    envelope: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    def age(self, now_ms: int) -> float:
        return max(0, now_ms - self.published_ms) / 1000

    def continued(self, attempts_made: int, first_attempt_ms: int | None, history: list[dict[str, Any]]) -> Delivery:
        """The same message after attempts made while it was held unacked (its headers cannot change then); itself
        when none were (an ordered message's first attempt: no copy per delivery)."""
        if (
            attempts_made == self.attempts_made
            and first_attempt_ms == self.first_attempt_ms
            and len(history) == len(self.history) <= HISTORY_LIMIT
            and tuple(history) == self.history
        ):
            return self
        return replace(
            self,
            attempts_made=attempts_made,
            first_attempt_ms=first_attempt_ms,
            history=tuple(history[-HISTORY_LIMIT:]),
        )


class Outcome(enum.Enum):
    """What an attempt means for the message, as the transport classifies it."""

    DELIVERED = "delivered"  # the sink took it: ack
    RETRY = "retry"  # try again after a delay
    DEAD = "dead"  # dead-letter now, no further attempt
    DISABLE = "disable"  # the sink is gone: park its messages, attempt nothing more


@quick_init
@dataclass(frozen=True)
class SendResult:
    """One attempt's result, transport-neutral: the outcome class and the facts behind it."""

    outcome: Outcome
    reason: str  # the outcome in words, for dead letters and circuit records ("HTTP 503", "timed out after 5s")
    status: int | None = None  # the sink's status code; None when no answer came
    error: str | None = None  # why no answer came (timeout, connection refused, refused before sending)
    duration: float = 0.0  # seconds the attempt took
    retry_after: float | None = None  # seconds the sink asked to wait, parsed once by the transport
    answer: str | None = None  # the sink's answer in words ("HTTP 503"); None when there was none
    excerpt: str = ""  # the start of the sink's answer, for the attempt log
    response_headers: tuple[tuple[str, str], ...] = ()  # the answer's headers the attempt log keeps (KEPT_HEADERS)
    refused: bool = False  # refused before sending (egress guard, bad address): says nothing of the sink's health
    throttled: bool = False  # the sink asked to slow down: the throttle's business, not the breaker's

    @property
    def status_code(self) -> int:
        """The status, or 0 when there was no answer (for headers and metrics)."""
        return self.status or 0

    @property
    def failure(self) -> str | None:
        """Why the attempt did not deliver, in short (the ``warren-last-error`` header); None when it did."""
        if self.outcome is Outcome.DELIVERED:
            return None
        return self.error or self.answer or self.reason


def failed_result(exc: BaseException, duration: float = 0.0) -> SendResult:
    """An unexpected exception while attempting, as a failed attempt: retried within the normal budget."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return SendResult(Outcome.RETRY, text, error=text, duration=duration)


class Transport(Protocol):
    """Sends one delivery to one endpoint. It must not raise for the sink's failures: it describes them."""

    async def send(self, endpoint: Endpoint, delivery: Delivery) -> SendResult: ...
