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
