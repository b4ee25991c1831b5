"""The breaker's policy: what trips it, how the cool-down grows, what an attempt says about health. Pure."""

from __future__ import annotations

import pytest

from warren.broker.endpoint_state.records import CLOSED, HALF_OPEN, OPEN, EndpointView
from warren.consumers.health import breaker
from warren.consumers.health.breaker import FailureCounter, cooldown_for, judge
from warren.topology.config import CircuitSettings
from warren.transport.base import Outcome, SendResult
from warren.transport.http import http_result


def settings(**overrides: object) -> CircuitSettings:
    return CircuitSettings.model_validate(overrides)


def test_n_consecutive_failures_trip_and_a_success_resets_the_count() -> None:
    counter = FailureCounter(settings(consecutive_failures=3, failure_ratio=None))
    # Given two failures, a success, then two more: no trip (never three in a row)
    for ok in (False, False, True, False, False):
        assert counter.record(ok, 100.0) is None
    # When a third consecutive failure comes, then it trips and says why
    assert counter.record(False, 100.0) == "3 consecutive failures"


def test_the_failure_ratio_needs_the_minimum_number_of_requests_in_the_window() -> None:
    counter = FailureCounter(settings(consecutive_failures=100, failure_ratio=0.5, min_requests=10, window="10s"))
    # Given alternating outcomes (50% failed): nothing until 10 requests were seen
    results = [counter.record(i % 2 == 0, 100.0 + i * 0.1) for i in range(9)]
    assert results == [None] * 9
    reason = counter.record(False, 101.0)
    assert reason is not None and "of 10 attempts failed in 10s" in reason


def test_old_outcomes_leave_the_window() -> None:
    counter = FailureCounter(settings(consecutive_failures=100, failure_ratio=0.5, min_requests=4, window="5s"))
    # Given 3 failures long ago, then successes now: the old failures no longer count
    for i in range(3):
        counter.record(False, 100.0 + i)
    counter.record(True, 200.0)
    counter.record(True, 200.0)
    counter.record(True, 200.0)
    assert counter.record(False, 200.5) is None  # 1 of 4 failed in the window


def test_the_cooldown_grows_per_failed_probe_and_is_bounded() -> None:
    s = settings(cooldown="1s", cooldown_factor=2.0, cooldown_max="5s")
    assert [cooldown_for(n, s) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]


def test_cooldown_max_below_cooldown_is_refused() -> None:
    with pytest.raises(ValueError, match="cooldown_max"):
        settings(cooldown="10s", cooldown_max="1s")


@pytest.mark.parametrize(
    ("status", "error", "forbidden", "expected"),
    [
        (200, None, False, "success"),
        (400, None, False, "success"),  # the endpoint answered: a verdict on the message, not on its health
        (404, None, False, "success"),
        (503, None, False, "failure"),
        (500, None, False, "failure"),
        (None, "timed out after 1s", False, "failure"),
        (None, "connection failed", False, "failure"),
        (302, None, False, "failure"),
        (429, None, False, "neutral"),  # alive but asking to slow down: the throttle's business
        (410, None, False, "neutral"),  # disables the endpoint instead
        (None, "refused: 127.0.0.1 is a loopback address", True, "neutral"),
    ],
)
def test_what_an_attempt_says_about_the_endpoint(
    status: int | None, error: str | None, forbidden: bool, expected: str
) -> None:
    if forbidden:
        result = SendResult(Outcome.DEAD, error or "refused", error=error, refused=True)
    else:
        result = http_result(status, error, 0.01)
    assert judge(result) == expected


def test_the_state_machine_keeps_the_outage_start_and_counts_failed_probes() -> None:
    s = settings(cooldown="1s", cooldown_factor=3.0, cooldown_max="1m")
    view = EndpointView("acme")
    # closed -> open
    opened = breaker.trip(view, "5 consecutive failures", 1000.0, "w1", s)
    assert view.apply(opened)
    assert (opened.state, opened.opened_at, opened.failures, opened.retry_at) == (OPEN, 1000.0, 0, 1001.0)
    # open -> half-open (the probe), keeping when the outage began
    probing = breaker.probe_started(view, 1001.5, "w2")
    assert view.apply(probing)
    assert (probing.state, probing.opened_at, probing.since) == (HALF_OPEN, 1000.0, 1000.0)
    # half-open -> open: one more failed probe, three times the cool-down
    failed = breaker.probe_failed(view, "HTTP 503", 1002.0, "w2", s)
    assert view.apply(failed)
    assert (failed.state, failed.failures, failed.retry_at, failed.opened_at) == (OPEN, 1, 1005.0, 1000.0)
    # half-open -> closed
    assert view.apply(breaker.probe_started(view, 1005.1, "w1"))
    done = breaker.closed(view, "probe succeeded", 1005.2, "w1")
    assert view.apply(done) and view.circuit_state == CLOSED
    # every transition won over the one before it
    versions = [r.version for r in (opened, probing, failed, done)]
    assert versions == sorted(versions) and len(set(versions)) == 4
