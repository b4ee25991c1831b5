"""Messages from any AMQP client at the worker (deeply nested bodies, header values Warren never writes): a dead
letter with a clear reason, or a delivery; never a crash or a loop. Real RabbitMQ (raw AMQP messages on the
events exchange) and a real receiver."""

from __future__ import annotations

from typing import Any

import aio_pika
import orjson
import pytest

from tests.consumers.test_delivery import dlq_messages
from tests.support.deep_json import BEYOND_ORJSON, nested, with_duplicate
from tests.support.raw_amqp import NotUtf8
from tests.support.receiver import Receiver, always
from warren.broker import wire
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(60)


def envelope(event_id: str, data: bytes) -> bytes:
    return b'{"id": "%s", "type": "x.y", "timestamp": "2026-01-01T00:00:00Z", "data": %s}' % (event_id.encode(), data)


async def publish_raw(config: WarrenConfig, bodies: dict[str, bytes], headers: dict[str, Any] | None = None) -> None:
    """Each body as a raw AMQP message on the events exchange (a producer that bypassed the publisher)."""
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(names.events_exchange(config.broker.prefix))
        for event_id, body in bodies.items():
            await exchange.publish(aio_pika.Message(body, message_id=event_id, headers=headers), routing_key="x.y")
    finally:
        await connection.close()


@pytest.mark.parametrize(
    "endpoint",
    [pytest.param({"name": "ep"}, id="unordered"), pytest.param({"name": "ep", "ordering": "key"}, id="ordered")],
)
async def test_deep_bodies_are_dead_lettered_with_the_reason_or_delivered(
    endpoint_config, receiver: Receiver, endpoint: dict[str, object]
) -> None:
    # Given three raw messages: 200,000 levels (beyond orjson), an envelope 1,000 levels deep (orjson reads it,
    # the standard library's parser raised RecursionError) with its id twice, and one 300 levels deep (orjson
    # reads it but writes at most 254 levels: TypeError) that is a good envelope
    config = await endpoint_config([endpoint], delivery={"max_payload": 1 << 20})
    good = envelope("deep-300", nested(300))
    await publish_raw(
        config,
        {
            "deep-200000": BEYOND_ORJSON,
            "deep-1000": with_duplicate(envelope("deep-1000", nested(1000)), "id"),
            "deep-300": good,
        },
    )
    # When a worker takes them
    async with Worker(config):
        dead = await dlq_messages(None, config, "ep", 2)
        await receiver.wait_for(lambda r: len(r.received) >= 1, 15)
    # Then the two bad ones are dead letters at once, each saying why
    reasons = {m.message_id: m.headers[wire.H_DEAD_REASON] for m in dead}
    assert reasons.keys() == {"deep-200000", "deep-1000"}, reasons
    assert reasons["deep-200000"].startswith("malformed message: body is not JSON"), reasons
    assert reasons["deep-1000"] == "malformed message: body has a duplicate key 'id' in one JSON object", reasons
    assert all(wire.H_ATTEMPT not in m.headers for m in dead)  # no attempt was made or counted
    # And the good one was delivered as it was published, once
    assert [(r.event_id, r.body) for r in receiver.received] == [("deep-300", good)]


@pytest.mark.parametrize(
    ("attempt", "posts", "written"),
    [
        pytest.param(2**63 - 1, 1, 2**31 + 1, id="largest-header-integer"),  # one more is no header integer
        pytest.param("\u0663", 3, 3, id="arabic-indic-three"),  # int() read it as 3 attempts made
    ],
)
async def test_an_attempt_count_warren_never_wrote_is_settled_once(
    endpoint_config, receiver: Receiver, attempt: object, posts: int, written: int
) -> None:
    # Given a raw message claiming an attempt count, to an endpoint answering 500 (3 attempts allowed)
    receiver.behaviour = always(500)
    config = await endpoint_config([{"name": "ep"}], retry={"base": "10ms", "cap": "20ms", "max_attempts": 3})
    await publish_raw(config, {"counted": envelope("counted", b"{}")}, headers={wire.H_ATTEMPT: attempt})
    # When a worker delivers it
    async with Worker(config):
        (letter,) = await dlq_messages(None, config, "ep", 1, timeout=20)
    # Then the count is read as a count (capped at 2^31), or as none when it is not ASCII digits, and the message
    # is dead-lettered as exhausted once the budget is spent. With 2^63 - 1 the move into the DLQ itself failed
    # (TypeError: 2^63 is no header integer): handed back and POSTed again, up to delivery.max_handbacks times.
    assert letter.headers[wire.H_DEAD_REASON].startswith("max_attempts (3) reached"), letter.headers
    assert letter.headers[wire.H_ATTEMPT] == written
    assert len(receiver.received) == posts


async def test_a_history_deeper_than_orjson_writes_is_settled_once(endpoint_config, receiver: Receiver) -> None:
    # Given a raw message whose warren-history nests 300 levels (orjson reads it; writing it back with the next
    # retry raised TypeError, so every move failed and the message was handed back and POSTed again)
    receiver.behaviour = always(500)
    config = await endpoint_config([{"name": "ep"}], retry={"base": "10ms", "cap": "20ms", "max_attempts": 2})
    history = '[{"at": 1, "status": 503, "x": ' + "[" * 300 + "]" * 300 + "}]"
    await publish_raw(config, {"deep-history": envelope("deep-history", b"{}")}, headers={wire.H_HISTORY: history})
    # When a worker delivers it
    async with Worker(config):
        (letter,) = await dlq_messages(None, config, "ep", 1, timeout=20)
    # Then its budget is spent once and it is dead-lettered, its history kept without the nested value
    assert letter.headers[wire.H_DEAD_REASON].startswith("max_attempts (2) reached"), letter.headers
    assert len(receiver.received) == 2
    assert orjson.loads(letter.headers[wire.H_HISTORY])[0] == {"at": 1, "status": 503}


async def test_a_header_that_is_not_utf8_travels_on_unchanged(endpoint_config, receiver: Receiver) -> None:
    # Given a raw message with a header whose string is not UTF-8: pamqp reads it as bytes, which it cannot write,
    # so every move into the delay chain or the DLQ raised TypeError and the message was handed back for ever
    receiver.behaviour = always(500)
    config = await endpoint_config([{"name": "ep"}], retry={"base": "10ms", "cap": "20ms", "max_attempts": 2})
    odd = {"x-odd": NotUtf8(b"\xff\xfe"), "x-nested": {"inner": [NotUtf8(b"\xc3")]}}
    await publish_raw(config, {"odd-header": envelope("odd-header", b"{}")}, headers=odd)
    # When a worker delivers it
    async with Worker(config):
        (letter,) = await dlq_messages(None, config, "ep", 1, timeout=20)
    # Then it is retried and dead-lettered as any other, its headers' bytes unchanged
    assert letter.headers[wire.H_DEAD_REASON].startswith("max_attempts (2) reached"), letter.headers
    assert len(receiver.received) == 2
    assert bytes(letter.headers["x-odd"]) == b"\xff\xfe"
    assert bytes(letter.headers["x-nested"]["inner"][0]) == b"\xc3"
