"""The routing stage's bounded failures, the pure part (warren/consumers/route_attempts.py)."""

from __future__ import annotations

from warren.broker import wire
from warren.consumers.route_attempts import (
    OWED_MAX,
    ROUTE_DELAY_CAP,
    RouteState,
    copy_headers,
    owed_after,
    route_dead_headers,
    route_delay,
    route_retry_headers,
    route_state,
)

EVENTS, TENANTS = "w.events", "w.tenants"


def state_of(headers: dict[str, object], exchange: str, key: str) -> RouteState:
    return route_state(headers, exchange, key, events=EVENTS, tenants=TENANTS)


def test_a_published_event_is_read_from_its_exchange_and_key_whatever_its_headers_claim() -> None:
    claims = {wire.H_ROUTE_TYPE: "other.type", wire.H_ROUTE_ATTEMPT: 7, wire.H_ROUTE_OWED: "a"}
    assert state_of(claims, EVENTS, "order.paid") == RouteState(None, "order.paid", 0, None)
    assert state_of(claims, TENANTS, "acme.order.paid") == RouteState("acme", "order.paid", 0, None)


def test_an_event_sent_round_again_is_read_from_the_routers_headers() -> None:
    # Given an event of tenant acme that failed its first attempt, owing two endpoints
    first = state_of({}, TENANTS, "acme.order.paid")
    headers = route_retry_headers({"x-death": [{}], "warren-key": "k"}, first, frozenset({"b", "a"}))
    assert headers[wire.H_ROUTE_OWED] == "a,b" and "x-death" not in headers and headers["warren-key"] == "k"
    # When it comes back through the delay chain (another exchange, the chain's key)
    again = state_of(headers, "w.delay.due", "1.0.w.route")
    # Then the router knows its tenant, type, one attempt made and whom it still owes
    assert again == RouteState("acme", "order.paid", 1, frozenset({"a", "b"}))
    # and the next round counts on
    assert state_of(route_retry_headers(headers, again, None), "w.delay.due", "x").attempts == 2
    assert state_of(route_retry_headers(headers, again, None), "w.delay.due", "x").owed is None


def test_a_hostile_attempt_count_stays_in_range() -> None:
    base = {wire.H_ROUTE_TYPE: "t"}
    assert state_of({**base, wire.H_ROUTE_ATTEMPT: -5}, "x", "k").attempts == 0
    assert state_of({**base, wire.H_ROUTE_ATTEMPT: 2**62}, "x", "k").attempts == wire.MAX_COUNTED
    assert state_of({**base, wire.H_ROUTE_ATTEMPT: "junk"}, "x", "k").attempts == 0


def test_only_the_failed_copies_are_owed_unless_one_was_returned() -> None:
    targets = ["a", "b", "c"]
    # a nack (or a lost link) names its copy: only it is owed
    assert owed_after(targets, ["b"], returned=False, previous=None) == {"b"}
    # a return may be reported on another copy of the same id: every target is owed
    assert owed_after(targets, ["b"], returned=True, previous=None) == {"a", "b", "c"}
    assert owed_after(["b", "c"], ["c"], returned=True, previous=frozenset({"b", "c"})) == {"b", "c"}
    # every copy failed: still named, so that one promoted to queues of its own meanwhile is still owed its copy
    assert owed_after(targets, targets, returned=False, previous=None) == {"a", "b", "c"}
    # too many names for a header: every subscriber again (duplicates, never a loss)
    many = [f"e{i}" for i in range(OWED_MAX + 2)]
    assert owed_after(many, many[:-1], returned=False, previous=None) is None


def test_the_delay_doubles_up_to_its_cap() -> None:
    assert [route_delay(n, 1.0) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert route_delay(30, 1.0) == ROUTE_DELAY_CAP
    assert route_delay(10**9, 0.05) == ROUTE_DELAY_CAP


def test_copies_and_dead_letters_carry_what_they_need() -> None:
    state = RouteState(None, "order.paid", 2, frozenset({"a"}))
    moved = route_dead_headers({"warren-key": "k"}, state, state.owed, "not routed", 1234)
    assert moved[wire.H_DEAD_REASON] == "not routed" and moved[wire.H_DEAD_AT] == 1234
    assert moved[wire.H_ROUTE_ATTEMPT] == 3 and moved[wire.H_ROUTE_OWED] == "a"
    # a copy into a lane carries none of the router's bookkeeping (nor the reason, once moved back from the DLQ)
    assert copy_headers(moved | {"x-death": []}) == {"warren-key": "k"}
