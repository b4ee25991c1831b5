"""Shared endpoint state: last writer wins per kind, what a worker may do, and the wire form. Pure."""

from __future__ import annotations

import orjson
import pytest

from warren.broker.endpoint_state.records import (
    ACTIVE,
    ADMIN,
    CIRCUIT,
    CLOSED,
    DISABLED,
    OPEN,
    PAUSED,
    THROTTLE,
    THROTTLED,
    EndpointView,
    StateRecord,
    standing,
    summary,
)


def rec(kind: str, state: str, version: int, by: str = "w", **fields: object) -> StateRecord:
    return StateRecord("acme", kind, state, f"{state} because", version / 1000, version, by, **fields)  # type: ignore[arg-type]


def test_the_newest_record_of_each_kind_wins_whatever_the_arrival_order() -> None:
    records = [rec(CIRCUIT, OPEN, 10), rec(CIRCUIT, CLOSED, 20), rec(ADMIN, DISABLED, 15), rec(CIRCUIT, OPEN, 5)]
    for order in (records, list(reversed(records))):
        view = EndpointView("acme")
        for record in order:
            view.apply(record)
        # Then both arrival orders converge: circuit closed (v20), admin disabled (v15): kinds never overwrite
        assert (view.circuit_state, view.admin_state) == (CLOSED, DISABLED)


def test_equal_versions_break_ties_by_writer_and_replays_change_nothing() -> None:
    view = EndpointView("acme")
    assert view.apply(rec(CIRCUIT, OPEN, 10, by="a"))
    assert view.apply(rec(CIRCUIT, CLOSED, 10, by="b"))
    assert not view.apply(rec(CIRCUIT, OPEN, 10, by="a"))  # the same record read again from the stream
    assert view.circuit_state == CLOSED


def test_a_new_record_always_wins_over_what_the_writer_knows() -> None:
    view = EndpointView("acme")
    view.apply(rec(ADMIN, DISABLED, 5_000_000_000_000))  # a writer whose clock ran far ahead
    enable = view.record(ADMIN, ACTIVE, "enabled", now=1000.0, by="cli")
    assert view.apply(enable) and view.admin_state == ACTIVE


@pytest.mark.parametrize(
    ("records", "probing", "mode", "reason_starts"),
    [
        ([], False, "deliver", ""),
        ([rec(ADMIN, DISABLED, 1)], False, "hold", "disabled:"),
        ([rec(ADMIN, PAUSED, 1)], False, "hold", "paused:"),
        ([rec(CIRCUIT, OPEN, 1)], False, "hold", "circuit open:"),
        ([rec(CIRCUIT, OPEN, 1)], True, "probe", "probing:"),
        ([rec(CIRCUIT, OPEN, 1), rec(ADMIN, DISABLED, 2)], True, "hold", "disabled:"),  # the operator first
        ([rec(THROTTLE, THROTTLED, 1, until=2000.0)], False, "hold", "throttled:"),
        ([rec(THROTTLE, THROTTLED, 1, until=500.0)], False, "deliver", ""),  # expired
    ],
)
def test_standing(records: list[StateRecord], probing: bool, mode: str, reason_starts: str) -> None:
    view = EndpointView("acme")
    for record in records:
        view.apply(record)
    where = standing(view, now=1000.0, probing=probing)
    assert where.mode == mode and where.reason.startswith(reason_starts)


def test_summary_names_the_state_an_operator_cares_about_most() -> None:
    view = EndpointView("acme")
    assert summary(view, 1000.0) == (ACTIVE, "", None)
    view.apply(rec(CIRCUIT, OPEN, 2000))
    assert summary(view, 1000.0)[0] == OPEN
    view.apply(rec(ADMIN, DISABLED, 3000))
    assert summary(view, 1000.0) == (DISABLED, "disabled because", 3.0)


def test_records_round_trip_and_garbage_is_refused() -> None:
    record = rec(CIRCUIT, OPEN, 42, opened_at=1.5, failures=2, retry_at=9.0)
    assert StateRecord.from_bytes(record.to_bytes()) == record
    for body in (b"not json", b"[]", b'{"endpoint": "a"}', rec(CIRCUIT, "sideways", 1).to_bytes()):
        with pytest.raises(ValueError):
            StateRecord.from_bytes(body)


def test_in_force_lists_only_records_that_still_change_something() -> None:
    view = EndpointView("acme")
    view.apply(rec(CIRCUIT, CLOSED, 1))
    view.apply(rec(THROTTLE, THROTTLED, 2, until=10.0))
    assert view.in_force(now=20.0) == []
    view.apply(rec(ADMIN, DISABLED, 3))
    assert [r.kind for r in view.in_force(now=20.0)] == [ADMIN]


# A record as StateRecord.to_bytes writes it (this release and every one before): None fields left out.
TODAY = (
    b'{"endpoint":"acme","kind":"circuit","state":"open","reason":"timeout","since":1790000000.5,'
    b'"version":1790000000500,"by":"w1","opened_at":1790000000.5,"failures":2,"retry_at":1790000030.0}'
)


def test_the_bytes_written_are_todays_and_read_back() -> None:
    record = StateRecord(
        "acme", CIRCUIT, OPEN, "timeout", 1_790_000_000.5, 1_790_000_000_500, "w1", 1_790_000_000.5, 2, 1_790_000_030.0
    )
    assert record.to_bytes() == TODAY
    assert StateRecord.from_bytes(TODAY) == record


def test_a_record_without_its_optional_fields_and_with_integer_times_reads_as_before() -> None:
    fields = {"endpoint": "acme", "kind": ADMIN, "state": DISABLED, "reason": "", "since": 17, "version": 3, "by": "w"}
    body = orjson.dumps({**fields, "added_later": [1]})
    record = StateRecord.from_bytes(body)
    assert record == StateRecord("acme", ADMIN, DISABLED, "", 17.0, 3, "w")
    assert (record.opened_at, record.failures, record.retry_at, record.until) == (None, 0, None, None)
    assert StateRecord.from_bytes(orjson.dumps({**orjson.loads(body), "until": None})) == record  # null: absent


DEEP = b"[" * 1020 + b"]" * 1020  # orjson reads it; a repr of it raises RecursionError


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        # What pydantic's lax mode would take; before, several reached the worker and failed there
        ({"version": True}, "field 'version': expected int"),
        ({"version": "5"}, "field 'version': expected int"),
        ({"version": 5.0}, "field 'version': expected int"),
        ({"since": True}, "field 'since': expected int/float"),
        ({"since": "1"}, "field 'since': expected int/float"),
        ({"failures": "2"}, "field 'failures': expected int"),  # was kept, and `failures + 1` raised in the guard
        ({"failures": None}, "field 'failures': expected int"),
        ({"failures": True}, "field 'failures': expected int"),
        ({"until": "9"}, "field 'until': expected int/float"),  # was kept, and compared with a float in the guard
        ({"retry_at": False}, "field 'retry_at': expected int/float"),
        ({"reason": 5}, "field 'reason': expected str"),
        ({"by": None}, "field 'by': expected str"),
        ({"kind": [1]}, "field 'kind': expected str"),  # was a TypeError (unhashable), which no caller caught
        ({"kind": "mood"}, "unknown 'mood' state 'open'"),
        ({"state": "x" * 5000}, "unknown 'circuit' state 'xxxx"),
    ],
)
def test_a_value_that_is_not_what_the_field_holds_is_refused(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        StateRecord.from_bytes(orjson.dumps({**orjson.loads(TODAY), **changes}))
    assert str(caught.value).startswith(message) and len(str(caught.value)) < 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (TODAY.replace(b'"failures":2', b'"failures":1' + b"0" * 400), "not JSON: "),
        (TODAY.replace(b'"since":1790000000.5', b'"since":NaN'), "not JSON: "),
        (TODAY.replace(b'"failures":2', b'"failures":18446744073709551616'), "field 'failures': expected int"),
        (TODAY.replace(b'"state":"open"', b'"state":' + DEEP), "field 'state': expected str"),
        (TODAY.replace(b'"kind":"circuit"', b'"kind":' + DEEP), "field 'kind': expected str"),
        (b'{"endpoint": "a"}', "field 'kind': missing"),
        (b"[1]", "not a JSON object"),
    ],
)
def test_hostile_bodies_are_refused_cleanly(body: bytes, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        StateRecord.from_bytes(body)
    assert str(caught.value).startswith(message)
