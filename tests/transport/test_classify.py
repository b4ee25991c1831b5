"""What an HTTP answer means for the message: every edge of every range, the reason written, the Verdict a value."""

from __future__ import annotations

import dataclasses

import pytest

from warren.transport.classify import RETRYABLE_4XX, Outcome, Verdict, classify


@pytest.mark.parametrize(
    ("status", "error", "outcome"),
    [
        (200, None, Outcome.DELIVERED),
        (204, None, Outcome.DELIVERED),
        (299, None, Outcome.DELIVERED),
        (301, None, Outcome.RETRY),
        (408, None, Outcome.RETRY),
        (429, None, Outcome.RETRY),
        (500, None, Outcome.RETRY),
        (503, None, Outcome.RETRY),
        (410, None, Outcome.DISABLE),
        (400, None, Outcome.DEAD),
        (404, None, Outcome.DEAD),
        (422, None, Outcome.DEAD),
        (None, "timed out after 10s", Outcome.RETRY),
        (None, "connection failed: refused", Outcome.RETRY),
    ],
)
def test_classify(status: int | None, error: str | None, outcome: Outcome) -> None:
    assert classify(status, error).outcome is outcome


def test_retry_statuses_make_a_4xx_retryable() -> None:
    assert classify(404, None, (404,)).outcome is Outcome.RETRY


@pytest.mark.parametrize(
    ("status", "outcome", "reason"),
    [
        # below 2xx: no status an endpoint should send; retried, and said to be unexpected
        (100, Outcome.RETRY, "unexpected HTTP status 100"),
        (199, Outcome.RETRY, "unexpected HTTP status 199"),
        # 2xx, both ends: delivered
        (200, Outcome.DELIVERED, "HTTP 200"),
        (299, Outcome.DELIVERED, "HTTP 299"),
        # 3xx, both ends: redirects are not followed, so a failure; retried (a moved endpoint gets fixed)
        (300, Outcome.RETRY, "HTTP 300"),
        (301, Outcome.RETRY, "HTTP 301"),
        (399, Outcome.RETRY, "HTTP 399"),
        # 4xx, both ends: the endpoint rejected the message
        (400, Outcome.DEAD, "HTTP 400: the endpoint rejected the message"),
        (409, Outcome.DEAD, "HTTP 409: the endpoint rejected the message"),
        (499, Outcome.DEAD, "HTTP 499: the endpoint rejected the message"),
        # ... except 410, the endpoint asking to stop receiving
        (410, Outcome.DISABLE, "HTTP 410 Gone: the endpoint asked to stop receiving"),
        # ... and the three that say "later": 408 Request Timeout, 425 Too Early, 429 Too Many Requests
        (408, Outcome.RETRY, "HTTP 408"),
        (425, Outcome.RETRY, "HTTP 425"),
        (429, Outcome.RETRY, "HTTP 429"),
        # their neighbours are ordinary rejections
        (407, Outcome.DEAD, "HTTP 407: the endpoint rejected the message"),
        (424, Outcome.DEAD, "HTTP 424: the endpoint rejected the message"),
        (426, Outcome.DEAD, "HTTP 426: the endpoint rejected the message"),
        (428, Outcome.DEAD, "HTTP 428: the endpoint rejected the message"),
        (430, Outcome.DEAD, "HTTP 430: the endpoint rejected the message"),
        # 5xx and beyond: the endpoint failed; retried
        (500, Outcome.RETRY, "HTTP 500"),
        (501, Outcome.RETRY, "HTTP 501"),
        (599, Outcome.RETRY, "HTTP 599"),
        (600, Outcome.RETRY, "HTTP 600"),
    ],
)
def test_each_range_at_its_edges_with_its_reason(status: int, outcome: Outcome, reason: str) -> None:
    # Given an answer with this status, when it is classified, then it means this, in these words
    assert classify(status, None) == Verdict(outcome, reason)


def test_the_retryable_4xx_are_exactly_those_docs_configuration_names() -> None:
    # docs/configuration.md: "5xx, 3xx, 408, 425, 429, timeouts and connection errors always retry"
    assert frozenset({408, 425, 429}) == RETRYABLE_4XX


@pytest.mark.parametrize(
    ("error", "reason"),
    [("timed out after 10s", "timed out after 10s"), (None, "no response"), ("", "no response")],
)
def test_no_answer_is_retried_with_why_or_no_response(error: str | None, reason: str) -> None:
    # Given no answer at all (status None), when it is classified, then it is retried, saying why
    assert classify(None, error) == Verdict(Outcome.RETRY, reason)


@pytest.mark.parametrize("status", [400, 404, 499])
def test_an_endpoints_retry_statuses_turn_a_rejection_into_a_retry(status: int) -> None:
    # Given an endpoint that lists this 4xx among its retry statuses (a tuple or a frozenset)
    for listed in ((status,), frozenset({status, 418})):
        # Then it is retried like a 5xx
        assert classify(status, None, listed) == Verdict(Outcome.RETRY, f"HTTP {status}")
    # And another 4xx it does not list is still a rejection
    assert classify(status, None, (418,)).outcome is Outcome.DEAD


@pytest.mark.parametrize("status", [200, 410])
def test_retry_statuses_never_override_delivered_or_gone(status: int) -> None:
    # Given an endpoint listing 200 and 410 as retry statuses, the 2xx and the 410 still mean what they say
    assert classify(status, None, (200, 410)).outcome is classify(status, None).outcome


def test_a_verdict_is_a_value() -> None:
    # Given a verdict, when something tries to change it, then it cannot (it is shared, and hashed)
    verdict = classify(503, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.reason = "changed"  # type: ignore[misc]
    assert {verdict: 1}[Verdict(Outcome.RETRY, "HTTP 503")] == 1
