"""The attempt log's wire format: a batch round-trips, and anything else is refused with the field named."""

from __future__ import annotations

import orjson
import pytest

from warren.store.attempt_records import (
    ERROR_CHARS,
    FIELDS,
    AttemptEntry,
    MalformedBatch,
    decode_batch,
    encode_batch,
    encode_rows,
)


def entry(**changes: object) -> AttemptEntry:
    fields: dict[str, object] = {
        "id": "r1",
        "event_id": "evt_1",
        "tenant": "acme",
        "endpoint": "billing",
        "attempt": 2,
        "at": 1_790_000_000.25,
        "status": 503,
        "duration_ms": 12.5,
        "outcome": "retry",
        "error": None,
        "next_delay_s": 0.8,
        "worker": "host:42",
    }
    fields.update(changes)
    return AttemptEntry(**fields)  # type: ignore[arg-type]


def test_rows_encode_as_the_entries_do() -> None:
    batch = [entry(), entry(id="r2", tenant=None, error="x" * 10)]
    rows = [{name: getattr(e, name) for name in FIELDS} for e in batch]
    assert encode_rows(rows) == encode_batch(batch)
    assert list(decode_batch(encode_rows(rows))) == batch


def test_a_batch_round_trips_and_knows_its_failures() -> None:
    batch = [entry(), entry(id="r2", attempt=3, status=200, outcome="delivered", next_delay_s=None, tenant=None)]
    decoded = decode_batch(encode_batch(batch))
    assert list(decoded) == batch
    assert [e.failed for e in decoded] == [True, False]


def test_a_long_error_is_clipped_on_the_way_in() -> None:
    body = encode_batch([entry(error="x" * (ERROR_CHARS * 3))])
    (decoded,) = decode_batch(body)
    assert decoded.error is not None and len(decoded.error) == ERROR_CHARS


def _body(records: object, version: object = 1) -> bytes:
    return orjson.dumps({"v": version, "attempts": records})


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"not json", "not JSON"),
        (b"[]", "not a JSON object"),
        (_body([], version=2), "version 2"),
        (orjson.dumps({"v": 1}), "'attempts'"),
        (_body(["x"]), "not a JSON object"),
        (_body([{**orjson.loads(encode_batch([entry()]))["attempts"][0], "outcome": "won"}]), "unknown 'won'"),
        (_body([{**orjson.loads(encode_batch([entry()]))["attempts"][0], "attempt": 0}]), "at least 1"),
        (_body([{**orjson.loads(encode_batch([entry()]))["attempts"][0], "attempt": True}]), "'attempt'"),
        (_body([{**orjson.loads(encode_batch([entry()]))["attempts"][0], "event_id": ""}]), "'event_id': empty"),
        (_body([{**orjson.loads(encode_batch([entry()]))["attempts"][0], "status": "200"}]), "'status'"),
        (_body([{**orjson.loads(encode_batch([entry()]))["attempts"][0], "worker": None}]), "'worker'"),
    ],
)
def test_anything_else_is_refused_naming_what_is_wrong(body: bytes, reason: str) -> None:
    with pytest.raises(MalformedBatch, match=reason):
        decode_batch(body)


# A batch exactly as the worker writes it today (encode_rows: every field, in FIELDS order) and as older workers
# wrote it: the attempt writer reads both, and the bytes the new code writes are these, to the byte.
BEFORE_ANSWERS = (
    b'{"v":1,"attempts":[{"id":"r1","event_id":"evt_1","tenant":"acme","endpoint":"billing","attempt":2,'
    b'"at":1790000000.25,"status":503,"duration_ms":12.5,"outcome":"retry","error":null,"next_delay_s":0.8,'
    b'"worker":"host:42"}]}'
)
TODAY = BEFORE_ANSWERS[:-3] + b',"response":null,"response_headers":null}]}'


def test_the_bytes_written_are_todays_and_read_back() -> None:
    assert encode_batch([entry()]) == TODAY
    assert encode_rows([{name: getattr(entry(), name) for name in FIELDS}]) == TODAY
    assert list(decode_batch(TODAY)) == [entry()]
    # A worker of the release before wrote no answer: its records read as today's without one
    assert list(decode_batch(BEFORE_ANSWERS)) == [entry()]


def test_a_record_with_fields_left_out_or_written_as_integers_reads_as_before() -> None:
    # Given a record without its nullable fields, numbers written as integers, and a key this release does not know
    record = {
        "id": "r1",
        "event_id": "evt_1",
        "endpoint": "billing",
        "attempt": 1,
        "at": 1_790_000_000,
        "duration_ms": 12,
        "outcome": "delivered",
        "worker": "",
        "added_later": {"x": [1]},
    }
    (decoded,) = decode_batch(_body([record]))
    # Then the absent ones are null, the numbers floats (as float() made them), the unknown key ignored
    assert decoded == entry(
        attempt=1,
        at=1_790_000_000.0,
        duration_ms=12.0,
        outcome="delivered",
        worker="",
        tenant=None,
        status=None,
        next_delay_s=None,
    )
    assert isinstance(decoded.at, float) and isinstance(decoded.duration_ms, float)
    # And a version written as 1.0 or true is read, as `== 1` read it
    assert decode_batch(orjson.dumps({"v": 1.0, "attempts": []})) == []


def _record(**changes: object) -> dict[str, object]:
    return {**orjson.loads(TODAY)["attempts"][0], **changes}


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        # What pydantic's lax mode would take, and the hand-written checks refused
        ({"attempt": "3"}, "field 'attempt': expected int"),
        ({"attempt": 3.0}, "field 'attempt': expected int"),
        ({"status": True}, "field 'status': expected int"),
        ({"status": 200.0}, "field 'status': expected int"),
        ({"at": True}, "field 'at': expected int/float"),
        ({"at": "1790000000.25"}, "field 'at': expected int/float"),
        ({"duration_ms": "12"}, "field 'duration_ms': expected int/float"),
        ({"next_delay_s": False}, "field 'next_delay_s': expected int/float"),
        ({"error": 5}, "field 'error': expected str"),
        ({"tenant": ["acme"]}, "field 'tenant': expected str"),
        ({"outcome": 1}, "field 'outcome': expected str"),
        ({"id": None}, "field 'id': expected str"),
        ({"endpoint": ""}, "field 'endpoint': empty"),
        ({"attempt": -1}, "field 'attempt': must be at least 1"),
    ],
)
def test_a_value_that_is_not_what_the_field_holds_is_refused(changes: dict[str, object], reason: str) -> None:
    with pytest.raises(MalformedBatch) as caught:
        decode_batch(_body([_record(**changes)]))
    assert str(caught.value) == f"attempt record {reason}"


DEEP = b"[" * 1020 + b"]" * 1020  # orjson reads it; a repr of it raises RecursionError


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (TODAY.replace(b'"at":1790000000.25', b'"at":NaN'), "attempt batch is not JSON: "),
        (TODAY.replace(b'"at":1790000000.25', b'"at":1e400'), "attempt batch is not JSON: "),
        (TODAY.replace(b'"status":503', b'"status":1' + b"0" * 400), "attempt batch is not JSON: "),
        # beyond 64 bits: orjson reads a float, which the integer field refuses
        (TODAY.replace(b'"status":503', b'"status":18446744073709551616'), "attempt record field 'status': expected"),
        (b'{"v":1,"attempts":' + b"[" * 1100 + b"]" * 1100 + b"}", "attempt batch is not JSON: "),
        (b'{"v":' + DEEP + b',"attempts":[]}', "attempt batch version [...]: this writer reads version 1"),
        (TODAY.replace(b'"outcome":"retry"', b'"outcome":' + DEEP), "attempt record field 'outcome': expected str"),
        (TODAY.replace(b'"retry"', b'"' + b"w" * 10_000 + b'"'), "attempt record field 'outcome': unknown 'www"),
        (orjson.dumps({"attempts": []}), "attempt batch version None: this writer reads version 1"),
        (orjson.dumps({"v": "1", "attempts": []}), "attempt batch version '1': this writer reads version 1"),
    ],
)
def test_hostile_bodies_are_refused_cleanly(body: bytes, message: str) -> None:
    with pytest.raises(MalformedBatch) as caught:
        decode_batch(body)
    assert str(caught.value).startswith(message) and len(str(caught.value)) < 200
