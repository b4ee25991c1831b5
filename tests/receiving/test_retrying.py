"""The failure policy of the inbox: the outgoing backoff, the delay chain's route, the DLQ's route. Pure."""

from __future__ import annotations

import random

from warren.receiving.errors import NonRetryable
from warren.receiving.retrying import dead_letter_route, failure_step, retry_route
from warren.topology.backoff import Exhausted, RetryIn
from warren.topology.config import RetryPolicy

POLICY = RetryPolicy(base=0.1, factor=2, cap=1, max_attempts=3, jitter="none")


def test_failures_retry_with_the_exponential_backoff_until_the_attempts_run_out() -> None:
    error = RuntimeError("down")
    assert failure_step(1, 0, POLICY, error) == RetryIn(0.1)
    assert failure_step(2, 0.1, POLICY, error) == RetryIn(0.2)
    assert isinstance(failure_step(3, 0.3, POLICY, error), Exhausted)


def test_full_jitter_draws_within_the_bound() -> None:
    policy = RetryPolicy(base=1, factor=2, cap=10, max_attempts=5, jitter="full")
    step = failure_step(2, 0, policy, RuntimeError(), random.Random(1))
    assert isinstance(step, RetryIn) and 0 <= step.delay <= 2


def test_the_age_limit_ends_retries_too() -> None:
    policy = RetryPolicy(base=10, max_attempts=10, max_age=15, jitter="none")
    assert isinstance(failure_step(1, 10, policy, RuntimeError()), Exhausted)


def test_non_retryable_is_exhausted_at_once() -> None:
    step = failure_step(1, 0, POLICY, NonRetryable("bad payload"))
    assert isinstance(step, Exhausted) and step.reason == "non-retryable: bad payload"


def test_retry_route_enters_the_top_delay_level_with_the_delay_spelled_in_binary() -> None:
    exchange, key = retry_route("w", 4, "w.in.shop", 0.005)
    assert exchange == "w.delay.l03"
    assert key == "1.0.1.0.w.in.shop"


def test_dead_letter_route() -> None:
    assert dead_letter_route("w", "shop") == ("w.dead", "in.shop")
