"""``Delivery.continued``: an ordered message's state for its next attempt in place (endpoint_runner.py)."""

from __future__ import annotations

import pytest

from warren.transport.base import HISTORY_LIMIT, Delivery

pytestmark = pytest.mark.timeout(30)

RECORD = {"at": 1, "status": 503, "ms": 12}


def test_nothing_spent_in_place_is_the_same_delivery() -> None:
    # Given a delivery as read from its message, one attempt already in its headers
    delivery = Delivery("evt_1", "a.b", b"{}", 1, 0, 5, (RECORD,))
    # When its first attempt in place is prepared with exactly what it carries
    same = delivery.continued(1, 5, [RECORD])
    # Then it is the delivery itself (no copy per ordered delivery)
    assert same is delivery


@pytest.mark.parametrize(
    ("attempts", "first_ms", "history"),
    [(2, 5, [RECORD, RECORD]), (1, 6, [RECORD]), (1, 5, [{**RECORD, "status": 500}])],
)
def test_attempts_spent_in_place_are_carried(attempts: int, first_ms: int, history: list[dict[str, int]]) -> None:
    # Given a delivery and attempts made while it was held
    delivery = Delivery("evt_1", "a.b", b"{}", 1, 0, 5, (RECORD,))
    # When its next attempt is prepared
    after = delivery.continued(attempts, first_ms, history)
    # Then it carries them
    assert after is not delivery
    assert (after.attempts_made, after.first_attempt_ms, after.history) == (attempts, first_ms, tuple(history))
    assert after.event_id == delivery.event_id and after.body == delivery.body


def test_a_history_past_the_limit_is_cut_as_before() -> None:
    # Given a delivery whose history is longer than the header keeps
    long = tuple({**RECORD, "at": i} for i in range(HISTORY_LIMIT + 2))
    delivery = Delivery("evt_1", "a.b", b"{}", len(long), 0, 5, long)
    # When it is continued with nothing new
    after = delivery.continued(len(long), 5, list(long))
    # Then the history is cut to the last HISTORY_LIMIT records, as it always was
    assert after.history == long[-HISTORY_LIMIT:]
