"""Retry policy: the exponential bound, an explicit schedule, full jitter, and when to give up."""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Any

import pytest

from warren.topology.backoff import Exhausted, RetryIn, backoff_bound, draw_delay, next_step
from warren.topology.config import RetryPolicy


def policy(**fields: Any) -> RetryPolicy:
    return RetryPolicy(**fields)


@pytest.mark.parametrize(
    ("attempt", "bound"),
    [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0), (11, 2048.0), (12, 3600.0), (13, 3600.0), (500, 3600.0)],
)
def test_bound_is_min_of_cap_and_base_times_factor_to_n_minus_one(attempt: int, bound: float) -> None:
    # Given base 2s, factor 2, cap 1h: bound(n) = min(3600, 2 * 2^(n-1))
    assert backoff_bound(attempt, policy(base="2s", factor=2, cap="1h")) == bound


def test_bound_never_overflows_for_huge_attempts() -> None:
    assert backoff_bound(1000, policy(base="1s", factor=10, cap="1h")) == 3600.0


def test_factor_one_is_a_constant_delay() -> None:
    assert [backoff_bound(n, policy(base="5s", factor=1)) for n in (1, 2, 10)] == [5.0, 5.0, 5.0]


def test_attempts_count_from_one() -> None:
    with pytest.raises(ValueError):
        backoff_bound(0, policy())


def test_an_explicit_schedule_is_followed_then_its_last_entry_repeats() -> None:
    schedule = policy(schedule=["10s", "1m", "5m", "30m", "2h"])
    assert [backoff_bound(n, schedule) for n in range(1, 8)] == [10.0, 60.0, 300.0, 1800.0, 7200.0, 7200.0, 7200.0]
    assert schedule.longest_delay == 7200.0


def test_the_cap_is_the_longest_delay_without_a_schedule() -> None:
    assert policy(cap="2s").longest_delay == 2.0


def test_full_jitter_draws_over_the_whole_window() -> None:
    # Given full jitter and a bound of 8s (attempt 3 of base 2s)
    rng = random.Random(7)
    jittered = policy(base="2s", factor=2, cap="1h", jitter="full")
    # When 2,000 delays are drawn
    draws = [draw_delay(3, jittered, rng) for _ in range(2000)]
    # Then every one lies in [0, bound] and they spread over it (not bunched at one end)
    assert all(0.0 <= d <= 8.0 for d in draws)
    assert min(draws) < 0.5 and max(draws) > 7.5
    assert 3.5 < sum(draws) / len(draws) < 4.5


def test_no_jitter_waits_exactly_the_bound() -> None:
    assert draw_delay(3, policy(base="2s", jitter="none")) == 8.0


def test_next_step_retries_until_max_attempts_then_is_exhausted() -> None:
    # Given 4 attempts allowed
    retry = policy(base="200ms", cap="2s", max_attempts=4, jitter="none")
    # Then after attempts 1..3 it retries with the bound, and after the 4th it gives up
    steps = [next_step(n, age=0.0, policy=retry) for n in (1, 2, 3, 4)]
    assert steps[:3] == [RetryIn(0.2), RetryIn(0.4), RetryIn(0.8)]
    assert isinstance(steps[3], Exhausted)
    assert "max_attempts" in steps[3].reason


def test_next_step_is_exhausted_when_the_wait_would_pass_max_age() -> None:
    retry = policy(base="10s", cap="10s", max_age="1m", jitter="none")
    assert next_step(1, age=45.0, policy=retry) == RetryIn(10.0)
    step = next_step(1, age=55.0, policy=retry)
    assert isinstance(step, Exhausted) and "max_age" in step.reason


def test_retry_after_lengthens_the_wait_but_is_bounded_by_the_longest_delay() -> None:
    retry = policy(base="1s", cap="30s", jitter="none")
    # A longer Retry-After than the drawn delay wins
    assert next_step(1, 0.0, retry, retry_after=12.0) == RetryIn(12.0)
    # A shorter one does not shorten the backoff
    assert next_step(3, 0.0, retry, retry_after=0.5) == RetryIn(4.0)
    # A hostile one is cut to the longest delay of the policy
    assert next_step(1, 0.0, retry, retry_after=365 * 86400.0) == RetryIn(30.0)


def test_next_step_with_full_jitter_stays_within_the_bound() -> None:
    rng = random.Random(1)
    retry = policy(base="1s", cap="4s", max_attempts=100)
    for attempt in range(1, 20):
        step = next_step(attempt, 0.0, retry, rng=rng)
        assert isinstance(step, RetryIn)
        assert 0.0 <= step.delay <= backoff_bound(attempt, retry) <= 4.0


def test_a_seeded_generator_is_what_draws_the_delay() -> None:
    # Given full jitter and a caller's generator seeded with 7 (tests and replays pass their own)
    jittered = policy(base="2s", factor=2, cap="1h", jitter="full")
    # When delays are drawn with it, directly and through next_step
    drawn = [draw_delay(3, jittered, random.Random(7)) for _ in range(2)]
    step = next_step(3, 0.0, jittered, rng=random.Random(7))
    # Then they are that generator's draws over [0, 8]: the same seed, the same delays
    expected = random.Random(7).uniform(0.0, 8.0)
    assert drawn == [expected, expected]
    assert step == RetryIn(expected)


def test_without_a_generator_the_process_wide_one_draws() -> None:
    # Given full jitter and no generator of the caller's, when the module-level generator is seeded
    jittered = policy(base="2s", factor=2, cap="1h", jitter="full")
    state = random.getstate()
    try:
        random.seed(11)
        drawn = draw_delay(3, jittered)
        random.seed(11)
        # Then the delay is its draw
        assert drawn == random.uniform(0.0, 8.0)
    finally:
        random.setstate(state)


def test_exhausted_once_max_attempts_are_made_or_passed() -> None:
    # Given 4 attempts allowed, when the 4th or a later one has failed (the policy was lowered since), exhausted
    retry = policy(base="200ms", max_attempts=4, jitter="none")
    for made in (4, 5, 40):
        assert next_step(made, 0.0, retry) == Exhausted("max_attempts (4) reached")


def test_a_wait_that_ends_exactly_at_max_age_is_still_taken() -> None:
    # Given a message 50 s old, a 10 s delay and max_age 1 min: 50 + 10 reaches max_age, it does not pass it
    retry = policy(base="10s", cap="10s", max_age="1m", jitter="none")
    assert next_step(1, age=50.0, policy=retry) == RetryIn(10.0)
    # And a moment later it would pass it
    assert next_step(1, age=50.5, policy=retry) == Exhausted("max_age (60s) would be exceeded")


@pytest.mark.parametrize(
    ("base", "factor"),
    [("1s", 2.0), ("1h", 1.0)],  # the cap passed on the way; the cap reached at once and never left
)
def test_past_the_cap_the_bound_is_not_computed_further(base: str, factor: float) -> None:
    # Given a cap of 1h, when the bound of an attempt with 100 million failures before it is asked for
    started = time.perf_counter()
    bound = backoff_bound(10**8, policy(base=base, factor=factor, cap="1h"))
    # Then it is the cap, at once: the power is not computed past the cap (that would take seconds here)
    assert bound == 3600.0
    assert time.perf_counter() - started < 1.0


def test_steps_are_values() -> None:
    # Given a step, when something tries to change it, then it cannot (decisions are built from it)
    for step, field in ((RetryIn(1.0), "delay"), (Exhausted("x"), "reason")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(step, field, None)
