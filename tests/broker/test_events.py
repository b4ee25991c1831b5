"""Events and their AMQP encoding (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from warren.broker import wire
from warren.broker.event_lines import BadLine, read_event_lines
from warren.broker.events import Event, encode_event
from warren.core.errors import EventError


def test_envelope_is_the_standard_webhooks_payload() -> None:
    event = Event(
        type="order.paid",
        data={"a": 1},
        id="evt_1",
        key="k",
        sequence=7,
        timestamp=datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
    )
    message = encode_event(event)
    assert orjson.loads(message.body) == {
        "id": "evt_1",
        "type": "order.paid",
        "timestamp": "2026-01-02T03:04:05.678Z",
        "data": {"a": 1},
        "key": "k",
        "sequence": 7,
    }
    assert message.message_id == "evt_1" and message.type == "order.paid"
    assert message.headers[wire.H_KEY] == "k" and message.headers[wire.H_SEQUENCE] == 7


def test_without_key_the_hash_header_is_the_event_id() -> None:
    # A missing hash header would send every event to one partition: the id spreads them instead.
    event = Event(type="a.b", data=None)
    message = encode_event(event)
    assert message.headers[wire.H_KEY] == event.id
    assert set(orjson.loads(message.body)) == {"id", "type", "timestamp", "data"}


@pytest.mark.parametrize("event_type", ["", "a..b", "a.*", "a.#", "has space", "x" * 201])
def test_bad_event_types_are_refused(event_type: str) -> None:
    with pytest.raises(EventError):
        Event(type=event_type, data={})


def test_payload_limit_and_non_json_data() -> None:
    with pytest.raises(EventError, match="over the limit"):
        encode_event(Event(type="a.b", data="x" * 2000), max_payload=1024)
    with pytest.raises(EventError, match="not JSON"):
        encode_event(Event(type="a.b", data=object()))


def test_event_lines_report_bad_lines_by_number() -> None:
    items = list(read_event_lines([b'{"type": "a.b", "data": 1}', b"", b"[1]", b'{"type": "a.b"}', b"{x"]))
    assert isinstance(items[0], Event)
    assert [(i.line, i.reason.split(":")[0]) for i in items[1:] if isinstance(i, BadLine)] == [
        (3, "not a JSON object"),
        (4, "'data' is required"),
        (5, "not JSON"),
    ]


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"id": "x\n"}, "event id"),  # re.match with "$" accepted a trailing newline
        ({"id": "x\r\ny"}, "event id"),
        ({"type": "order.paid\n"}, "event type"),
        ({"key": "k\n"}, "control characters"),
        ({"key": "k\x00"}, "control characters"),
        ({"key": "k\u2028"}, "control characters"),
    ],
)
def test_control_characters_are_refused_at_publish(fields: dict[str, str], problem: str) -> None:
    # A newline would reach the webhook-id header (aiohttp refuses it) and every log line that names the event
    with pytest.raises(EventError, match=problem):
        Event(**{"type": "order.paid", "data": {}, **fields})


def test_a_tenant_leads_the_routing_key_and_joins_the_envelope() -> None:
    event = Event(type="order.paid", data={}, tenant="acme")
    message = encode_event(event)
    assert event.routing_key == "acme.order.paid"
    assert orjson.loads(message.body)["tenant"] == "acme"
    assert (message.headers or {})[wire.H_TENANT] == "acme"
    # and without a tenant nothing changes: no field, no header, the type alone routes it
    plain = Event(type="order.paid", data={})
    assert plain.routing_key == "order.paid" and "tenant" not in plain.envelope()
    assert wire.H_TENANT not in (encode_event(plain).headers or {})


@pytest.mark.parametrize("tenant", ["Acme", "a.b", "*", "#", "", "x" * 55, "-a"])
def test_bad_tenants_are_refused(tenant: str) -> None:
    with pytest.raises(EventError, match="tenant"):
        Event(type="order.paid", data={}, tenant=tenant)


def test_tenant_and_type_must_fit_one_routing_key() -> None:
    # The longest tenant and the longest type still make a routing key AMQP takes (255 bytes at most)
    assert len(Event(type="t" * 200, data={}, tenant="x" * 54).routing_key.encode()) == 255
    [parsed, bad] = list(
        read_event_lines(['{"type": "a", "data": 1, "tenant": "acme"}', '{"type": "a", "data": 1, "tenant": 7}'])
    )
    assert isinstance(parsed, Event) and parsed.tenant == "acme" and parsed.routing_key == "acme.a"
    assert isinstance(bad, BadLine) and "'tenant' must be a str" in bad.reason


@pytest.mark.parametrize("sequence", [2**63, 2**64 - 1])
def test_a_sequence_an_amqp_header_cannot_hold_is_refused(sequence: int) -> None:
    # A JSON line or --sequence may hold one (orjson reads up to 2^64 - 1): publishing it raised TypeError in
    # the middle of `warren publish --file`
    with pytest.raises(EventError, match="sequence is an integer from 0 to 9223372036854775807"):
        Event(type="a.b", data=1, sequence=sequence)
    [line] = read_event_lines([b'{"type": "a.b", "data": 1, "sequence": %d}' % sequence])
    assert isinstance(line, BadLine) and "sequence" in line.reason
