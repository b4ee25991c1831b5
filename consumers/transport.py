"""The seam between deciding and sending: a ``Transport`` sends one delivery and says what happened.

The runner decides what becomes of a message; the transport only sends it and describes the result in
terms that are not tied to any protocol (modelled on httpx's transport seam). The health code reads the
same neutral result, so nothing above a transport knows it is HTTP. HTTP (consumers/http_transport.py) is
the only transport shipped.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from warren.consumers.delivery import Delivery
    from warren.topology.config import Endpoint

__all__ = ["Outcome", "SendResult", "Transport", "failed_result"]


class Outcome(enum.Enum):
    """What an attempt means for the message, as the transport classifies it."""

    DELIVERED = "delivered"  # the sink took it: ack
    RETRY = "retry"  # try again after a delay
    DEAD = "dead"  # dead-letter now, no further attempt
    DISABLE = "disable"  # the sink is gone: park its messages, attempt nothing more


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
