"""Live endpoint records on the wire: today's bytes and older releases' read back; anything else refused cleanly."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import orjson
import pytest
from aio_pika.abc import AbstractIncomingMessage

from warren.broker.endpoint_records import APPLY, REMOVE, EndpointRecord, decode_record

CONFIG = {"name": "acme", "url": "https://hooks.example/acme", "secret": ["gAAAAA-one", "gAAAAA-two"], "events": ["#"]}
# An apply record as to_message writes it (the secrets stand for Fernet tokens: nothing here opens them).
TODAY = (
    b'{"endpoint":"acme","action":"apply","version":1790000000000,"by":"api@host","config":{"name":"acme",'
    b'"url":"https://hooks.example/acme","secret":["gAAAAA-one","gAAAAA-two"],"events":["#"]},"sealed":"fernet",'
    b'"secret_expires":[null,1800000000.5]}'
)


def test_the_bytes_written_are_todays_and_read_back() -> None:
    record = EndpointRecord(
        "acme", APPLY, 1_790_000_000_000, "api@host", CONFIG, secret_expires=(None, 1_800_000_000.5)
    )
    assert record.to_message().body == TODAY
    assert EndpointRecord.from_bytes(TODAY) == record
    removal = EndpointRecord("acme", REMOVE, 7, "api@host")
    assert removal.to_message().body == b'{"endpoint":"acme","action":"remove","version":7,"by":"api@host"}'
    assert EndpointRecord.from_bytes(removal.to_message().body) == removal


def test_a_record_closing_the_routing_says_so_and_others_do_not() -> None:
    # (an ordered promotion under way: warren/broker/ordered_promotion.py)
    closing = EndpointRecord("acme", APPLY, 5, "api@host", CONFIG, routing_closed=True)
    body = orjson.loads(closing.to_message().body)
    assert body["routing"] == "closed"
    assert EndpointRecord.from_bytes(closing.to_message().body) == closing
    assert "routing" not in orjson.loads(EndpointRecord("acme", APPLY, 6, "api@host", CONFIG).to_message().body)
    assert not EndpointRecord.from_bytes(TODAY).routing_closed


def test_a_file_endpoints_routing_record_is_a_removal_that_closes_or_opens_its_routing() -> None:
    # (`warren setup` promoting an ordered file endpoint: warren/broker/setup_promotion.py)
    closing = EndpointRecord.file_routing("acme", "setup@host", closed=True)
    body = orjson.loads(closing.to_message().body)
    assert body["action"] == "remove" and body["routing"] == "closed" and "config" not in body
    assert EndpointRecord.from_bytes(closing.to_message().body) == closing
    opening = EndpointRecord.file_routing("acme", "setup@host", closed=False)
    assert opening.version > closing.version
    assert not EndpointRecord.from_bytes(opening.to_message().body).routing_closed


def test_records_of_earlier_releases_read_as_they_did() -> None:
    today: dict[str, Any] = orjson.loads(TODAY)
    # Before secrets had ends: no secret_expires
    unended = {k: v for k, v in today.items() if k != "secret_expires"}
    assert EndpointRecord.from_bytes(orjson.dumps(unended)).secret_expires == ()
    # Before records were sealed: no "sealed" (refused later, where a secret is needed), and ends as integers
    unsealed = EndpointRecord.from_bytes(orjson.dumps({**unended, "sealed": None, "secret_expires": [1, None]}))
    assert not unsealed.sealed and unsealed.secret_expires == (1.0, None)
    # Without "by", and with a key this release does not know
    bare = EndpointRecord.from_bytes(b'{"endpoint": "acme", "action": "remove", "version": 3, "later": {"x": 1}}')
    assert bare == EndpointRecord("acme", REMOVE, 3, "")
    # A removal never carries a configuration, even when one was written
    assert EndpointRecord.from_bytes(orjson.dumps({**today, "action": REMOVE})).config is None


DEEP = b"[" * 1020 + b"]" * 1020  # orjson reads it; a repr of it raises RecursionError


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        # What pydantic's lax mode would take
        ({"version": True}, "field 'version': expected int"),  # was read as the version True
        ({"version": "5"}, "field 'version': expected int"),
        ({"version": 5.0}, "field 'version': expected int"),
        ({"by": 5}, "field 'by': expected str"),  # was read as "5"
        ({"by": None}, "field 'by': expected str"),  # was read as "None"
        ({"secret_expires": [True]}, "field 'secret_expires[0]': expected int/float"),
        ({"secret_expires": ["1800000000"]}, "field 'secret_expires[0]': expected int/float"),
        ({"secret_expires": [[1]]}, "field 'secret_expires[0]': expected int/float"),
        ({"secret_expires": None}, "field 'secret_expires': expected a list"),
        ({"endpoint": 1}, "field 'endpoint': expected str"),
        ({"action": "zap"}, "field 'action': unknown 'zap'"),
        ({"config": None}, "an apply record carries the endpoint's config"),
        ({"config": ["x"]}, "field 'config': not a JSON object"),
        (
            {"sealed": "rot13"},
            "field 'sealed': secrets sealed with 'rot13', unknown here (this release knows 'fernet')",
        ),
        ({"sealed": 1}, "field 'sealed': expected str"),
    ],
)
def test_a_value_that_is_not_what_the_field_holds_is_refused(changes: dict[str, object], message: str) -> None:
    body = orjson.dumps({**orjson.loads(TODAY), **changes})
    with pytest.raises(ValueError) as caught:
        EndpointRecord.from_bytes(body)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (TODAY.replace(b'"sealed":"fernet"', b'"sealed":' + DEEP), "field 'sealed': expected str"),  # a RecursionError
        (TODAY.replace(b'"action":"apply"', b'"action":' + DEEP), "field 'action': unknown [...]"),
        (TODAY.replace(b'"sealed":"fernet"', b'"sealed":"' + b"s" * 10_000 + b'"'), "field 'sealed': secrets sealed"),
        (TODAY.replace(b"1800000000.5", b"NaN"), "not JSON: "),
        (TODAY.replace(b"1800000000.5", b"1e400"), "not JSON: "),
        (TODAY.replace(b"1790000000000", b"1" + b"0" * 400), "not JSON: "),
        # beyond 64 bits: orjson reads a float, which the integer field refuses
        (TODAY.replace(b"1790000000000", b"18446744073709551616"), "field 'version': expected int"),
        (b'{"config":' + b"[" * 1100 + b"]" * 1100 + b"}", "not JSON: "),
        (b"[]", "not a JSON object"),
    ],
)
def test_hostile_bodies_are_refused_cleanly(body: bytes, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        EndpointRecord.from_bytes(body)
    assert str(caught.value).startswith(message) and len(str(caught.value)) < 200


def test_a_message_that_is_not_a_record_is_logged_and_skipped(caplog: pytest.LogCaptureFixture) -> None:
    message = cast(
        AbstractIncomingMessage, SimpleNamespace(body=TODAY.replace(b'"sealed":"fernet"', b'"sealed":' + DEEP))
    )
    assert decode_record(message) is None
    assert "not a record this release reads: field 'sealed': expected str" in caplog.text
