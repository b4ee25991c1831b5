"""The runner's one decision, as a table: an attempt's result and its context in, what becomes of the message out.

Pure: the same function serves ordered and unordered endpoints, so each row runs for the paths it concerns.
"""

from __future__ import annotations

import dataclasses
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
from warren.topology.config import DeliverySettings, RetryPolicy
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
        (OK, {}, Ack(label="delivered")),
        (OK, {"attempt": 99, "handbacks": 5000}, Ack(label="delivered")),
        (GONE, {}, Disable("HTTP 410 Gone", label="disabled")),
        (REJECTED, {}, DeadLetter("HTTP 404: rejected", label="dead")),
        # a retryable failure while the circuit has just opened spends nothing: parked, handed back at once, its
        # attempt not remembered
        (
            DOWN,
            {"parks": True},
            HandBack("the circuit is open; last: HTTP 503", after=0.0, remember=False, label="parked"),
        ),
        # ... unless the message has been handed back max_handbacks times already
        (
            DOWN,
            {"parks": True, "handbacks": 3, "max_handbacks": 3},
            DeadLetter(
                "handed back 3 times (delivery.max_handbacks = 3); last: the circuit is open; last: HTTP 503",
                label="dead",
            ),
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
        (DOWN, {"attempt": 1}, Retry(1.0, label="retry")),
        (DOWN, {"attempt": 3}, Retry(4.0, label="retry")),
        (SLOW_DOWN, {"attempt": 1}, Retry(6.0, label="retry")),
        (CRASHED, {"attempt": 2}, Retry(2.0, label="retry")),
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
                "handed back 1000 times (delivery.max_handbacks = 1000); last: the ordered hold limit was reached",
                label="dead",
            ),
        ),
        # the hold limit means nothing to an unordered endpoint
        (DOWN, {"attempt": 3, "held": 7.0, "hold_limit": 1.0}, Retry(4.0, label="retry")),
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


@pytest.mark.parametrize(
    ("held", "hold_limit", "expected"),
    [
        # attempt 2 of POLICY: a delay of 2 s. Held 0 s, the delay exactly reaches the limit: still held in place
        (0.0, 2.0, Retry(2.0, label="retry-in-place")),
        # ... held 3 s, 3 + 2 reaches a limit of 5 exactly: still in place (only passing the limit hands back)
        (3.0, 5.0, Retry(2.0, label="retry-in-place")),
        # ... 0.5 s held, 0.5 + 2 passes 2.4: handed back (a product of the two, 1.0, would not have)
        (
            0.5,
            2.4,
            HandBack("the ordered hold limit was reached", after=2.0, remember=True, label="retry-in-place"),
        ),
        # ... never held, the delay alone passes the limit: handed back after the delay
        (
            0.0,
            1.5,
            HandBack("the ordered hold limit was reached", after=2.0, remember=True, label="retry-in-place"),
        ),
    ],
)
def test_an_ordered_retry_is_held_in_place_up_to_the_hold_limit_inclusive(
    held: float, hold_limit: float, expected: Decision
) -> None:
    # Given an ordered endpoint whose message failed its 2nd attempt after being held `held` seconds
    context = Context(attempt=2, age=0.0, policy=POLICY, ordered=True, held=held, hold_limit=hold_limit)
    # When the decision is made, then it is held in place while held + delay stays within the limit
    assert decide(DOWN, context) == expected


def test_a_context_given_only_attempt_age_and_policy() -> None:
    # Given a context that states nothing but the attempt, the age and the policy
    context = Context(attempt=1, age=0.0, policy=POLICY)
    # Then it is an unordered endpoint whose circuit is not parking, a message never held nor handed back, no
    # hold limit, the configuration's default bound on hand-backs, and the process's own random generator
    assert (context.ordered, context.parks, context.held, context.hold_limit) == (False, False, 0.0, float("inf"))
    assert (context.handbacks, context.max_handbacks, context.rng) == (0, 1000, None)
    assert context.max_handbacks == DeliverySettings().max_handbacks


def test_a_message_never_handed_back_may_be_handed_back_once_under_a_bound_of_one() -> None:
    # Given a circuit that parks and delivery.max_handbacks = 1 (its least), and a context that does not say how
    # often the message was handed back (a first delivery)
    context = Context(attempt=1, age=0.0, policy=POLICY, parks=True, max_handbacks=1)
    # When the decision is made, then the message is parked, not dead-lettered
    assert decide(DOWN, context) == HandBack(
        "the circuit is open; last: HTTP 503", after=0.0, remember=False, label="parked"
    )


def test_a_hand_back_made_with_only_its_reason_is_immediate_and_forgets_the_attempt() -> None:
    # The runner hands back with a reason alone (a stopping worker, a held endpoint, a disabled one): at once,
    # the attempt not counted, labelled as parked
    hand_back = HandBack("the worker is stopping")
    assert (hand_back.after, hand_back.remember, hand_back.label) == (0.0, False, "parked")


@pytest.mark.parametrize(
    "decision",
    [
        Ack(),
        Retry(1.0),
        HandBack("x"),
        DeadLetter("x"),
        Disable("x"),
        Context(attempt=1, age=0.0, policy=POLICY),
    ],
    ids=lambda d: type(d).__name__,
)
def test_decisions_and_contexts_are_values(decision: object) -> None:
    # Given a decision (or its context), when something tries to change it, then it cannot
    field = next(iter(dataclasses.fields(decision)))  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(decision, field.name, None)
