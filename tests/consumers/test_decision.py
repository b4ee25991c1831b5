"""The runner's one decision, as a table: an attempt's result and its context in, what becomes of the message out.

Pure: the same function serves ordered and unordered endpoints, so each row runs for the paths it concerns.
"""

from __future__ import annotations

from typing import Any

import pytest

from warren.consumers.decision import (
    Ack,
    Context,
    DeadLetter,
    Decision,
    Disable,
    HandBack,
    Retry,
    bounded_hand_back,
    decide,
)
from warren.topology.config import RetryPolicy
from warren.transport.base import Outcome, SendResult

# No jitter: the delay of attempt n is exactly min(cap, base * 2^(n-1)).
POLICY = RetryPolicy(base=1.0, cap=8.0, max_attempts=5, max_age=100.0, jitter="none")

OK = SendResult(Outcome.DELIVERED, "HTTP 200", status=200)
GONE = SendResult(Outcome.DISABLE, "HTTP 410 Gone", status=410)
REJECTED = SendResult(Outcome.DEAD, "HTTP 404: rejected", status=404)
DOWN = SendResult(Outcome.RETRY, "HTTP 503", status=503)
SLOW_DOWN = SendResult(Outcome.RETRY, "HTTP 503", status=503, retry_after=6.0)
CRASHED = SendResult(Outcome.RETRY, "ValueError: bad header", error="ValueError: bad header")


def ctx(**fields: Any) -> Context:
    return Context(**{"attempt": 1, "age": 0.0, "policy": POLICY, **fields})


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
@pytest.mark.parametrize(
    ("result", "context", "expected"),
    [
        # the sink's verdict on the message comes first, whatever the budget
        (OK, {}, Ack()),
        (OK, {"attempt": 99, "handbacks": 5000}, Ack()),
        (GONE, {}, Disable("HTTP 410 Gone")),
        (REJECTED, {}, DeadLetter("HTTP 404: rejected")),
        # a retryable failure while the circuit has just opened spends nothing: parked
        (DOWN, {"parks": True}, HandBack("the circuit is open; last: HTTP 503")),
        # ... unless the message has been handed back max_handbacks times already
        (
            DOWN,
            {"parks": True, "handbacks": 3, "max_handbacks": 3},
            DeadLetter("handed back 3 times (delivery.max_handbacks = 3); last: the circuit is open; last: HTTP 503"),
        ),
        # the budget: max_attempts, then max_age
        (DOWN, {"attempt": 5}, DeadLetter("max_attempts (5) reached; last: HTTP 503", label="exhausted")),
        (
            DOWN,
            {"attempt": 2, "age": 99.0},
            DeadLetter("max_age (100s) would be exceeded; last: HTTP 503", "exhausted"),
        ),
        # an unexpected exception is a failed attempt like any other: retried, then dead-lettered with its text
        (CRASHED, {"attempt": 5}, DeadLetter("max_attempts (5) reached; last: ValueError: bad header", "exhausted")),
    ],
)
def test_the_same_table_for_both_paths(
    result: SendResult, context: dict[str, Any], expected: Decision, ordered: bool
) -> None:
    assert decide(result, ctx(ordered=ordered, **context)) == expected


@pytest.mark.parametrize(
    ("result", "context", "expected"),
    [
        # unordered: through the delay chain, the backoff's delay (or longer, when the sink asks for it)
        (DOWN, {"attempt": 1}, Retry(1.0)),
        (DOWN, {"attempt": 3}, Retry(4.0)),
        (SLOW_DOWN, {"attempt": 1}, Retry(6.0)),
        (CRASHED, {"attempt": 2}, Retry(2.0)),
        # ordered: held in place while the hold stays within its limit
        (DOWN, {"ordered": True, "attempt": 2, "held": 5.0, "hold_limit": 10.0}, Retry(2.0, "retry-in-place")),
        # ordered: past the hold limit, handed back to the partition's head after the delay, attempts remembered
        (
            DOWN,
            {"ordered": True, "attempt": 3, "held": 7.0, "hold_limit": 10.0},
            HandBack("the ordered hold limit was reached", after=4.0, remember=True, label="retry-in-place"),
        ),
        # ... and that hand-back is bounded too
        (
            DOWN,
            {"ordered": True, "attempt": 3, "held": 7.0, "hold_limit": 10.0, "handbacks": 1000},
            DeadLetter(
                "handed back 1000 times (delivery.max_handbacks = 1000); last: the ordered hold limit was reached"
            ),
        ),
        # the hold limit means nothing to an unordered endpoint
        (DOWN, {"attempt": 3, "held": 7.0, "hold_limit": 1.0}, Retry(4.0)),
    ],
)
def test_retries_per_path(result: SendResult, context: dict[str, Any], expected: Decision) -> None:
    assert decide(result, ctx(**context)) == expected


@pytest.mark.parametrize(("handbacks", "dead"), [(0, False), (9, False), (10, True), (11, True)])
def test_a_hand_back_is_bounded_by_the_delivery_count(handbacks: int, dead: bool) -> None:
    decision = bounded_hand_back(HandBack("the worker is stopping"), handbacks, 10)
    assert isinstance(decision, DeadLetter) is dead
    if dead:
        assert "handed back" in decision.reason and "the worker is stopping" in decision.reason  # type: ignore[union-attr]
