"""Shared endpoint state: last writer wins per kind, what a worker may do, and the wire form. Pure."""

from __future__ import annotations

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
