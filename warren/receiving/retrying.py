"""What happens to an inbound event whose handler failed: the same policy as outgoing deliveries. Pure.

A failure is retried through the broker's delay chain with the backoff of ``warren.topology.backoff`` (the
source's ``retry`` override over the global ``[retry]``), until the attempts or the age run out; then the
event goes to the source's DLQ. A handler raising ``NonRetryable`` skips the retries.
"""

from __future__ import annotations

import random

from warren.receiving.errors import NonRetryable
from warren.topology import names
from warren.topology.backoff import Exhausted, RetryIn, next_step
from warren.topology.config import RetryPolicy
from warren.topology.delays import delay_routing_key

__all__ = ["dead_letter_route", "failure_step", "retry_route"]


def failure_step(
    attempts_made: int, age: float, policy: RetryPolicy, error: BaseException, rng: random.Random | None = None
) -> RetryIn | Exhausted:
    """After ``attempts_made`` failed attempts (this one included), the event ``age`` seconds into its
    retries: retry after a delay, or give up."""
    if isinstance(error, NonRetryable):
        return Exhausted(f"non-retryable: {error}")
    return next_step(attempts_made, age, policy, rng=rng)


def retry_route(prefix: str, levels: int, queue: str, delay: float) -> tuple[str, str]:
    """The exchange and routing key that hold a message ``delay`` seconds, then return it to ``queue``."""
    return names.delay_exchange(prefix, levels - 1), delay_routing_key(delay, levels, queue)


def dead_letter_route(prefix: str, source: str) -> tuple[str, str]:
    """The exchange and routing key that land a message in the source's DLQ."""
    return names.dead_exchange(prefix), names.inbound_dead_key(source)
