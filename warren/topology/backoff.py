"""Retry policy as pure functions: the exponential bound, the full-jitter draw, and the next step."""

from __future__ import annotations

import random
from dataclasses import dataclass

from warren.topology.config import RetryPolicy

__all__ = ["Exhausted", "RetryIn", "backoff_bound", "draw_delay", "next_step"]


def backoff_bound(attempt: int, policy: RetryPolicy) -> float:
    """The longest wait after failed attempt ``attempt`` (1-based): ``min(cap, base * factor^(n-1))``,
    or the ``attempt``-th entry of an explicit schedule (its last entry once the list runs out)."""
    if attempt < 1:
        raise ValueError("attempts count from 1")
    if policy.schedule:
        return policy.schedule[min(attempt, len(policy.schedule)) - 1]
    # Past the cap the power would only overflow; stop computing it there.
    exponent = attempt - 1
    bound = policy.base
    for _ in range(exponent):
        bound *= policy.factor
        if bound >= policy.cap:
            return policy.cap
    return min(policy.cap, bound)


def draw_delay(attempt: int, policy: RetryPolicy, rng: random.Random | None = None) -> float:
    """The delay before the next attempt: uniform in ``[0, bound]`` with full jitter, the bound without."""
    bound = backoff_bound(attempt, policy)
    if policy.jitter == "none":
        return bound
    return (rng or random).uniform(0.0, bound)


@dataclass(frozen=True)
class RetryIn:
    """Try again after ``delay`` seconds."""

    delay: float


@dataclass(frozen=True)
class Exhausted:
    """No more attempts: ``reason`` says which limit ended it."""

    reason: str


def next_step(
    attempts_made: int,
    age: float,
    policy: RetryPolicy,
    *,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> RetryIn | Exhausted:
    """After ``attempts_made`` failed attempts on an event ``age`` seconds old, what comes next.

    A ``Retry-After`` from the endpoint replaces the jittered draw when it asks for longer, and is itself
    bounded by the policy's longest delay so a hostile header cannot park a message for a year.
    """
    if attempts_made >= policy.max_attempts:
        return Exhausted(f"max_attempts ({policy.max_attempts}) reached")
    delay = draw_delay(attempts_made, policy, rng)
    if retry_after is not None:
        delay = max(delay, min(retry_after, policy.longest_delay))
    if age + delay > policy.max_age:
        return Exhausted(f"max_age ({policy.max_age:g}s) would be exceeded")
    return RetryIn(delay)
