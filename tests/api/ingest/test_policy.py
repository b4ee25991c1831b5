"""Pure parts of the ingest API: tokens, event-type patterns, ids from Idempotency-Key, checks, batch status."""

from __future__ import annotations

import re

import orjson
import pytest
from pydantic import SecretStr, ValidationError

from warren.api.ingest.accept import (
    BatchOutcome,
    Limits,
    batch_key_max_length,
    build_events,
    check_idempotency_key,
    event_ids,
)
from warren.api.ingest.auth import bearer_token, check_authorization, encode_tokens, token_matches
from warren.api.ingest.batch_count import events_over
from warren.api.ingest.body import field_path
from warren.api.ingest.errors import ApiError
from warren.api.ingest.eventtypes import TypeFilter
from warren.api.ingest.idempotency.base import Decision, Row, decide, fingerprint
from warren.api.ingest.schemas import EVENT_ID_PATTERN, EVENT_TYPE_PATTERN, EventIn
from warren.broker import events

TOKENS = encode_tokens([SecretStr("a" * 20), SecretStr("b" * 24)])


def limits(**overrides: object) -> Limits:
    values: dict[str, object] = {
        "type_filter": TypeFilter(None),
        "max_payload": 4096,
        "max_batch": 10,
        "publish_timeout": 1.0,
        "retry_after": 5,
    }
    values.update(overrides)
    return Limits(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer   abc ", "abc"),
        ("Basic abc", None),
        ("Bearer", None),
        ("Bearer   ", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token_reads_only_the_bearer_scheme(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_token_matches_any_configured_token_and_nothing_else() -> None:
    assert token_matches("a" * 20, TOKENS)
    assert token_matches("b" * 24, TOKENS)
    assert not token_matches("a" * 19, TOKENS)
    assert not token_matches("a" * 21, TOKENS)
    assert not token_matches("", TOKENS)
    assert not token_matches("anything", ())


def test_check_authorization_raises_401_with_a_challenge() -> None:
    check_authorization("Bearer " + "a" * 20, TOKENS)
    for header in (None, "Bearer wrong"):
        with pytest.raises(ApiError) as caught:
            check_authorization(header, TOKENS)
        assert caught.value.status == 401
        assert "WWW-Authenticate" in caught.value.headers


def test_type_filter_without_patterns_allows_everything() -> None:
    assert TypeFilter(None).allows("x.y")
    assert not TypeFilter(()).allows("x.y")
    assert TypeFilter(("order.*", "user.#")).allows("user.a.b")


def test_schema_patterns_agree_with_the_event_model() -> None:
    # The API's patterns are copies of broker.events'; a body the schema accepts must make a valid Event.
    assert events._EVENT_TYPE.pattern == EVENT_TYPE_PATTERN
    assert events._EVENT_ID.pattern == EVENT_ID_PATTERN


def _items(n: int, **fields: object) -> list[EventIn]:
    return [EventIn.model_validate({"type": "order.created", "data": i, **fields}) for i in range(n)]


def test_single_event_takes_the_key_as_its_id() -> None:
    assert event_ids(_items(1), "key-1", batch=False) == ["key-1"]


def test_batch_events_take_key_dot_index_and_keep_their_own_ids() -> None:
    items = _items(3)
    items[1] = EventIn(type="order.created", data=None, id="own")
    assert event_ids(items, "k", batch=True) == ["k.0", "own", "k.2"]
    # The same request retried yields the same ids.
    assert event_ids(items, "k", batch=True) == event_ids(items, "k", batch=True)


def test_without_a_key_every_event_gets_a_fresh_id() -> None:
    first, second = event_ids(_items(2), None, batch=True)
    assert first != second and re.fullmatch(r"msg_[0-9a-f]{32}", first)


def test_batch_key_leaves_room_for_the_largest_index() -> None:
    assert batch_key_max_length(500) == 200 - len(".499")
    assert batch_key_max_length(1) == 200 - len(".0")
    longest = "k" * batch_key_max_length(500)
    check_idempotency_key(longest, max_length=batch_key_max_length(500))
    assert re.fullmatch(EVENT_ID_PATTERN, f"{longest}.499")


@pytest.mark.parametrize("key", ["", "has space", "é", "x" * 201])
def test_a_key_that_cannot_be_an_id_is_refused(key: str) -> None:
    with pytest.raises(ApiError) as caught:
        check_idempotency_key(key)
    assert caught.value.status == 422 and caught.value.fields[0].field == "Idempotency-Key"


def test_build_events_refuses_a_type_outside_the_allowed_patterns_naming_its_index() -> None:
    items = _items(2)
    items[1] = EventIn(type="user.created", data=1)
    with pytest.raises(ApiError) as caught:
        build_events(items, ["a", "b"], limits(type_filter=TypeFilter(("order.*",))), batch=True)
    assert caught.value.status == 422 and caught.value.code == "event_type_not_allowed"
    assert [f.field for f in caught.value.fields] == ["events[1].type"]


def test_build_events_refuses_duplicate_ids_in_one_batch() -> None:
    with pytest.raises(ApiError) as caught:
        build_events(_items(3), ["a", "b", "a"], limits(), batch=True)
    assert caught.value.status == 422 and caught.value.fields[0].field == "events[2].id"


def test_build_events_measures_the_webhook_body_against_max_payload() -> None:
    items = [EventIn(type="order.created", data="x" * 3000), EventIn(type="order.created", data="x" * 5000)]
    with pytest.raises(ApiError) as caught:
        build_events(items, ["a", "b"], limits(), batch=True)
    assert caught.value.status == 413 and caught.value.message.startswith("events[1]")


def test_build_events_keeps_every_field() -> None:
    [event] = build_events([EventIn(type="a.b", data={"x": 1}, key="k", sequence=3)], ["id1"], limits(), batch=False)
    assert (event.id, event.type, event.data, event.key, event.sequence) == ("id1", "a.b", {"x": 1}, "k", 3)


@pytest.mark.parametrize(
    ("ids", "errors", "status"),
    [
        (["a", "b"], [], 202),
        (["a"], ["broker_unavailable"], 207),
        (["a"], ["unroutable"], 207),
        ([], ["unroutable", "unroutable"], 409),
        ([], ["unroutable", "broker_unavailable"], 503),
        ([], ["broker_unavailable"], 503),
    ],
)
def test_batch_status(ids: list[str], errors: list[str], status: int) -> None:
    failed = [{"index": i, "id": f"f{i}", "error": e, "message": ""} for i, e in enumerate(errors)]
    assert BatchOutcome(ids, failed).status == status


@pytest.mark.parametrize(
    ("loc", "path"),
    [(("events", 3, "type"), "events[3].type"), (("type",), "type"), ((), "(body)"), (("data", "a", 0), "data.a[0]")],
)
def test_field_path(loc: tuple[int | str, ...], path: str) -> None:
    assert field_path(loc) == path


def test_numbers_in_data_reach_the_webhook_body_exactly() -> None:
    # Integers beyond 64 bits are valid JSON; orjson cannot write them, so they travel as verbatim text.
    item = EventIn.model_validate_json(
        '{"type": "a.b", "data": {"big": 123456789012345678901234567890, "neg": -9223372036854775809, "f": 1.5}}'
    )
    [event] = build_events([item], ["id1"], limits(), batch=False)
    body = events.encode_event(event).body
    assert b'"big":123456789012345678901234567890' in body
    assert b'"neg":-9223372036854775809' in body and b'"f":1.5' in body


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_numbers_json_cannot_carry_are_refused_not_sent_as_null(number: str) -> None:
    with pytest.raises(ValidationError) as caught:
        EventIn.model_validate_json('{"type": "a.b", "data": {"x": [' + number + "]}}")
    assert caught.value.errors()[0]["loc"] == ("data",)


def test_the_measured_size_is_the_size_of_the_published_body() -> None:
    item = EventIn(type="order.created", data={"x": "é" * 100, "n": [1, 2.5, None]}, key="k", sequence=1)
    [event] = build_events([item], ["id1"], limits(), batch=False)
    assert len(orjson.dumps(event.envelope())) == len(events.encode_event(event).body)


def test_counting_a_batch_stops_at_the_first_event_over_the_limit() -> None:
    # Given 3 well-formed events and then garbage: a walk that went on would fail on it, not answer True
    body = b'{"events": [' + b",".join([b'{"type": "a", "data": {"x": {}}}'] * 3) + b", {nonsense"
    assert events_over(body, 2) is True


@pytest.mark.parametrize(
    "body",
    [
        b'{"events": [{"type": "a", "data": {"x": {}}}, {"type": "a", "data": {"y": {}}}]}',  # 2, many braces
        b'{"other": {"a": {}}, "events": [{}, {}]}',
        b"[{}, {}, {}, {}, {}]",  # not the shape: the full parse explains
        b'{"events": [{} oops, {}, {}, {}]}',
    ],
)
def test_counting_a_batch_at_or_under_the_limit_or_of_another_shape(body: bytes) -> None:
    assert events_over(body, 2) is False


@pytest.mark.parametrize(
    ("row", "print_", "decision"),
    [
        (None, "a", Decision.CLAIM),
        (Row("a", "done", 202, b"{}", 10.0, 50.0), "a", Decision.REPLAY),
        (Row("a", "done", 202, b"{}", 10.0, 50.0), "b", Decision.CONFLICT),
        (Row("a", "open", None, None, 10.0, 50.0), "b", Decision.CONFLICT),  # bound to its body even unanswered
        (Row("a", "open", None, None, 10.0, 50.0), "a", Decision.CLAIM),  # a 503 before: try again
        (Row("a", "busy", None, None, 25.0, 50.0), "a", Decision.BUSY),
        (Row("a", "busy", None, None, 15.0, 50.0), "a", Decision.CLAIM),  # claimed by a request that died
        (Row("b", "done", 202, b"{}", 10.0, 30.0), "a", Decision.CLAIM),  # expired: forgotten
    ],
)
def test_idempotency_decision(row: Row | None, print_: str, decision: Decision) -> None:
    # now = 30, claims older than 20 are stale
    assert decide(row, print_, 30.0, 20.0).decision is decision


def test_the_fingerprint_binds_method_path_and_body() -> None:
    base = fingerprint("POST", "/v1/events", b"{}")
    assert base == fingerprint("POST", "/v1/events", b"{}")
    assert len({base, fingerprint("POST", "/v1/events/batch", b"{}"), fingerprint("POST", "/v1/events", b"{ }")}) == 3
