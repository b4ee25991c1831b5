"""What becomes of a message after an attempt: one pure decision for ordered and unordered endpoints alike.

::

    outcome    context                                       decision
    delivered  -                                             Ack
    disable    -                                             Disable (pause the endpoint; hand the message back)
    dead       -                                             DeadLetter (the transport's reason)
    retry      the circuit has just opened (parks)           HandBack "parked" (no attempt spent)
    retry      budget spent (max_attempts or max_age)        DeadLetter "exhausted"
    retry      unordered                                     Retry after a delay (through the delay chain)
    retry      ordered, the hold stays within its limit      Retry after a delay, in place (held unacked)
    retry      ordered, the delay would pass the hold limit  HandBack after the delay (attempts remembered)

Every hand-back, here or anywhere else in the runner, goes through :func:`bounded_hand_back`: a message that
RabbitMQ has already redelivered ``max_handbacks`` times (``x-delivery-count``) is dead-lettered with the
reason instead of being handed back once more, so that nothing circulates without bound.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from warren.topology.backoff import Exhausted, next_step
from warren.topology.config import RetryPolicy
from warren.transport.base import Outcome, SendResult

__all__ = [
    "ACK",
    "Ack",
    "Context",
    "DeadLetter",
    "Decision",
    "Disable",
    "HandBack",
    "Retry",
    "bounded_hand_back",
    "decide",
]


@dataclass(frozen=True)
class Ack:
    """Delivered: acknowledge the message."""

    label: str = "delivered"


@dataclass(frozen=True)
class Retry:
    """Attempt again after ``delay`` seconds: through the delay chain (unordered) or in place (ordered)."""

    delay: float
    label: str = "retry"


@dataclass(frozen=True)
class HandBack:
    """Return the message to RabbitMQ unsettled, after ``after`` seconds; ``remember`` keeps its attempt count."""

    reason: str
    after: float = 0.0
    remember: bool = False
    label: str = "parked"


@dataclass(frozen=True)
class DeadLetter:
    """Publish the message to its DLQ with ``reason``, then acknowledge it."""

    reason: str
    label: str = "dead"


@dataclass(frozen=True)
class Disable:
    """The endpoint asked to stop receiving: disable it; the message is handed back (bounded)."""

    reason: str
    label: str = "disabled"


Decision = Ack | Retry | HandBack | DeadLetter | Disable


@dataclass(frozen=True)
class Context:
    """What the decision needs besides the attempt's result."""

    attempt: int  # the number of the attempt just made, 1-based
    age: float  # seconds since the event was published (or replayed), at this attempt
    policy: RetryPolicy
    ordered: bool = False
    parks: bool = False  # the endpoint's circuit has just opened: a retryable failure spends no attempt
    held: float = 0.0  # ordered: seconds the message has been held in place so far
    hold_limit: float = float("inf")  # ordered: delivery.ordered_hold_limit
    handbacks: int = 0  # times RabbitMQ has already redelivered the message (x-delivery-count)
    max_handbacks: int = 1000  # delivery.max_handbacks
    rng: random.Random | None = None  # the jitter's source (tests pass a seeded one)


def bounded_hand_back(hand_back: HandBack, handbacks: int, max_handbacks: int) -> HandBack | DeadLetter:
    """``hand_back``, unless the message has been handed back ``max_handbacks`` times already: then the DLQ."""
    if handbacks < max_handbacks:
        return hand_back
    return DeadLetter(
        f"handed back {handbacks} times (delivery.max_handbacks = {max_handbacks}); last: {hand_back.reason}"
    )


ACK = Ack()  # what every delivered attempt is decided to be: one instance (frozen), not one a delivery


def decide(result: SendResult, ctx: Context | Callable[[], Context]) -> Decision:
    """The decision for one attempt's result (see the table in the module docstring).

    ``ctx`` may be a function that makes the context: a delivered attempt, which needs none, does not call it."""
    if result.outcome is Outcome.DELIVERED:
        return ACK
    if callable(ctx):
        ctx = ctx()
    if result.outcome is Outcome.DISABLE:
        return Disable(result.reason)
    if result.outcome is Outcome.DEAD:
        return DeadLetter(result.reason)
    if ctx.parks:
        parked = HandBack(f"the circuit is open; last: {result.reason}")
        return bounded_hand_back(parked, ctx.handbacks, ctx.max_handbacks)
    step = next_step(ctx.attempt, ctx.age, ctx.policy, retry_after=result.retry_after, rng=ctx.rng)
    if isinstance(step, Exhausted):
        return DeadLetter(f"{step.reason}; last: {result.reason}", label="exhausted")
    if not ctx.ordered:
        return Retry(step.delay)
    if ctx.held + step.delay > ctx.hold_limit:
        # Past the hold limit, RabbitMQ's consumer_timeout would close the channel: hand the message back to
        # the head of its partition after the delay, and continue its schedule at its next delivery.
        held = HandBack("the ordered hold limit was reached", after=step.delay, remember=True, label="retry-in-place")
        return bounded_hand_back(held, ctx.handbacks, ctx.max_handbacks)
    return Retry(step.delay, label="retry-in-place")
