"""The seams around each delivery: gates that may hold an attempt back, observers told what happened.

The endpoint runner knows nothing of circuit breakers, rate limits or metrics; they plug in here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

from warren.core.errors import WarrenError
from warren.core.frozen import quick_init
from warren.transport.base import SendResult

__all__ = ["ATTEMPTING", "AttemptRecord", "DeliveryGate", "DeliveryHooks", "EndpointBlocked", "Settlement"]

log = logging.getLogger("warren.worker")

# The id of the event being attempted, while its gates are acquired and its transport sends it: for a gate
# (or a log filter) that wants to know which event it is holding back.
ATTEMPTING: ContextVar[str | None] = ContextVar("warren_attempting", default=None)


@quick_init
@dataclass(frozen=True)
class AttemptRecord:
    """One finished attempt, as logged: what observers (metrics, breakers) receive."""

    endpoint: str
    event_id: str
    attempt: int  # 1-based number of this attempt
    status: int | None
    error: str | None
    duration: float  # seconds the attempt took
    outcome: str  # delivered | retry | retry-in-place | exhausted | dead | disabled | parked
    next_delay: float | None
    age: float  # seconds since the event was published (or replayed)
    retry_after: float | None  # what the endpoint asked for, if it did
    tenant: str | None = None  # the event's tenant, when it names one
    response: str | None = None  # the start of the endpoint's answer (response_body_limit); None: no answer
    response_headers: tuple[tuple[str, str], ...] = ()  # its headers the log keeps (content-type, retry-after)


# How a message left the worker: acked after delivery, moved into the delay chain, moved to the DLQ, or
# handed back to its queue (shutdown, pause, a failed move).
Settlement = str  # "acked" | "retry-scheduled" | "dead-lettered" | "handed-back" | "parked" | "discarded" | "filtered"


class EndpointBlocked(WarrenError):  # control flow, like dramatiq's Retry, not a failure
    """Raised by a gate's ``acquire``: the endpoint may not be attempted now (circuit open, paused, disabled).

    The runner hands the message back to RabbitMQ untouched: no attempt is made or counted.
    """


class DeliveryGate(Protocol):
    """Holds an attempt back until it may go (circuit, concurrency, rate); told when it is over."""

    async def acquire(self, endpoint: str) -> None: ...

    def release(self, endpoint: str, result: SendResult | None) -> None:
        """The attempt is over: ``result`` is None when it was never made (a later gate refused, cancelled)."""


@dataclass
class DeliveryHooks:
    gates: list[DeliveryGate] = field(default_factory=list)
    observers: list[Callable[[AttemptRecord], None]] = field(default_factory=list)
    settlements: list[Callable[[str, Settlement], None]] = field(default_factory=list)  # endpoint, how
    on_disable: list[Callable[[str, str], Awaitable[None] | None]] = field(default_factory=list)  # endpoint, reason
    # Asked after a retryable failure: True hands the message back untouched instead of spending an attempt
    # (the endpoint's circuit has just opened: its messages wait in RabbitMQ with their budget intact).
    park_failures: list[Callable[[str], bool]] = field(default_factory=list)  # endpoint
    # When an endpoint held by its health lets go by itself (epoch seconds: an open circuit's next probe, a
    # throttle's end), None if not known: a lane parks a held endpoint's messages until then (lanes.py).
    hold_ends: list[Callable[[str], float | None]] = field(default_factory=list)  # endpoint

    def parks(self, endpoint: str) -> bool:
        """Whether a retryable failure should leave the message untouched in RabbitMQ (the circuit opened)."""
        return any(check(endpoint) for check in self.park_failures)

    def held_until(self, endpoint: str) -> float | None:
        """When the endpoint's hold ends by itself (epoch seconds), the latest any hook knows; None if none does."""
        ends = [end for check in self.hold_ends if (end := check(endpoint)) is not None]
        return max(ends) if ends else None

    def settled(self, endpoint: str, how: Settlement) -> None:
        """Tell every settlement callback; one that fails is logged, never raised."""
        for callback in self.settlements:
            try:
                callback(endpoint, how)
            except Exception:
                # Told after the fact: the message is settled already, so a failing callback cannot count as
                # a failed attempt (acking it twice would close the channel).
                log.exception("a settlement callback of %s failed", endpoint)
