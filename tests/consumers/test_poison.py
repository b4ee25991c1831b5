"""Poison messages reach the DLQ within seconds with a reason, and valid events on the same queue keep flowing.

Each kind runs on an unordered and an ordered endpoint (one partition, so the poison sits in front of valid
events): control characters in the id, type or key, published raw over AMQP past the Python publisher's
validation; a header value aiohttp refuses; an exception raised by a gate and by an observer. And the bound
on hand-backs: a message handed back ``delivery.max_handbacks`` times is dead-lettered with the reason.
Real RabbitMQ, real receiver on 127.0.0.1.
"""

from __future__ import annotations

import re
import time
from typing import Any

import aio_pika
import orjson
import pytest

from tests.consumers.test_delivery import dlq_messages
from tests.support.receiver import Receiver
from warren.broker import wire
from warren.broker.events import Event
from warren.consumers.hooks import ATTEMPTING, AttemptRecord, DeliveryHooks, EndpointBlocked
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig
from warren.transport.base import SendResult

pytestmark = pytest.mark.timeout(40)

KINDS = [
    pytest.param({"name": "ep"}, id="unordered"),
    pytest.param({"name": "ep", "ordering": "key", "partitions": 1}, id="ordered"),
]
FAST = {"base": "10ms", "cap": "40ms", "max_attempts": 3}


async def publish_raw(
    config: WarrenConfig,
    *,
    event_id: str,
    event_type: str = "x.y",
    key: str = "k",
    carried: dict[str, Any] | None = None,
) -> None:
    """A Warren-shaped message put on the events exchange by something other than Warren's publisher."""
    body = orjson.dumps(
        {"id": event_id, "type": event_type, "timestamp": "2026-01-01T00:00:00Z", "data": {}, "key": key}
    )
    connection = await aio_pika.connect(config.broker.url)
    try:
        channel = await connection.channel(publisher_confirms=True)
        exchange = await channel.get_exchange(names.events_exchange(config.broker.prefix))
        headers = {wire.H_KEY: key, wire.H_PUBLISHED: int(time.time() * 1000), **(carried or {})}
        message = aio_pika.Message(body, message_id=event_id, type=event_type, headers=headers)
        await exchange.publish(message, routing_key="x.y", mandatory=True)
    finally:
        await connection.close()


async def run_with_poison(
    endpoint_config: Any,
    receiver: Receiver,
    publish: Any,
    endpoint: dict[str, Any],
    poison: list[dict[str, Any]],
    *,
    hooks: DeliveryHooks | None = None,
    delivery: dict[str, Any] | None = None,
) -> tuple[list[Any], float]:
    """Valid events before and after the poison; returns the dead letters and the seconds until all settled."""
    config = await endpoint_config([endpoint], retry=FAST, delivery=delivery or {})
    before = [Event(type="x.y", data={"i": i}, key="k") for i in range(5)]
    after = [Event(type="x.y", data={"i": i}, key="k") for i in range(5, 10)]
    started = time.monotonic()
    async with Worker(config, hooks=hooks):
        await publish(config, before)
        for fields in poison:
            await publish_raw(config, **fields)
        await publish(config, after)
        # Then every valid event is delivered, those behind the poison too
        await receiver.wait_for(lambda r: r.ok_ids() >= {e.id for e in before + after}, 15)
        dead = await dlq_messages(None, config, "ep", len(poison), timeout=15)
        took = time.monotonic() - started
    assert {e.id for e in before + after} <= receiver.ok_ids()
    return dead, took


@pytest.mark.parametrize("endpoint", KINDS)
async def test_control_characters_in_id_type_or_key_are_dead_lettered_at_once(
    endpoint_config, receiver: Receiver, publish, endpoint: dict[str, Any]
) -> None:
    # Given messages whose id, type or key holds a control character, published raw over AMQP
    poison = [
        {"event_id": "id-with-newline\n"},
        {"event_id": "type-with-nul", "event_type": "x.y\x00"},
        {"event_id": "key-with-separator", "key": "k\u2028"},
        {"event_id": "id-with-del\x7f"},
    ]
    # When a worker consumes them among valid events
    dead, took = await run_with_poison(endpoint_config, receiver, publish, endpoint, poison)
    # Then each is a dead letter within seconds, never POSTed, with the reason
    assert sorted(m.message_id for m in dead) == sorted(p["event_id"] for p in poison)
    for letter in dead:
        reason = letter.headers[wire.H_DEAD_REASON]
        assert reason.startswith("malformed message:") and "control characters" in reason, reason
    assert not any(r.event_id.startswith(("id-with", "type-with", "key-with")) for r in receiver.received)
    assert took < 15


@pytest.mark.parametrize("endpoint", KINDS)
async def test_a_header_value_aiohttp_refuses_is_a_failed_attempt(
    endpoint_config, receiver: Receiver, publish, endpoint: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an id that slips past the parser's validation (switched off here), which aiohttp refuses as a
    # header value with ValueError
    monkeypatch.setattr(wire, "CONTROL_CHARACTERS", re.compile("(?!)"))
    # When a worker consumes it among valid events
    dead, took = await run_with_poison(endpoint_config, receiver, publish, endpoint, [{"event_id": "bad\nid"}])
    # Then it was retried within the normal budget and is a dead letter with the exception's type and text
    (letter,) = dead
    assert letter.headers[wire.H_ATTEMPT] == 3
    assert "ValueError" in letter.headers[wire.H_LAST_ERROR]
    assert letter.headers[wire.H_DEAD_REASON].startswith("max_attempts (3) reached; last: ValueError")
    assert took < 15


class BrokenGate:
    """A gate whose acquire raises for one event (a bug in a gate), and lets the others through."""

    async def acquire(self, endpoint: str) -> None:
        if ATTEMPTING.get() == "poison":
            raise RuntimeError("gate broke")

    def release(self, endpoint: str, result: SendResult | None) -> None:
        pass


def broken_observer(record: AttemptRecord) -> None:
    if record.event_id == "poison":
        raise RuntimeError("observer broke")


@pytest.mark.parametrize("endpoint", KINDS)
@pytest.mark.parametrize(
    ("hooks", "text"),
    [
        pytest.param(lambda: DeliveryHooks(gates=[BrokenGate()]), "RuntimeError: gate broke", id="gate"),
        pytest.param(lambda: DeliveryHooks(observers=[broken_observer]), "RuntimeError: observer broke", id="observer"),
    ],
)
async def test_an_exception_in_a_gate_or_observer_is_a_failed_attempt(
    endpoint_config, receiver: Receiver, publish, endpoint: dict[str, Any], hooks: Any, text: str
) -> None:
    # Given a gate or an observer that raises for one event
    # When a worker consumes it among valid events
    dead, took = await run_with_poison(
        endpoint_config, receiver, publish, endpoint, [{"event_id": "poison"}], hooks=hooks()
    )
    # Then it is a dead letter after the normal budget, with the exception's type and text
    (letter,) = dead
    assert letter.headers[wire.H_LAST_ERROR] == text
    assert letter.headers[wire.H_DEAD_REASON] == f"max_attempts (3) reached; last: {text}"
    assert took < 15


class RefusingGate:
    """A gate that always holds one event back (as an open circuit would): it is handed back each time."""

    def __init__(self) -> None:
        self.refused = 0

    async def acquire(self, endpoint: str) -> None:
        if ATTEMPTING.get() == "poison":
            self.refused += 1
            raise EndpointBlocked("held for the test")

    def release(self, endpoint: str, result: SendResult | None) -> None:
        pass


@pytest.mark.parametrize("endpoint", KINDS)
async def test_hand_backs_are_bounded_by_max_handbacks(
    endpoint_config, receiver: Receiver, publish, endpoint: dict[str, Any]
) -> None:
    # Given a message that is handed back every time it is delivered, and delivery.max_handbacks = 4
    gate = RefusingGate()
    dead, took = await run_with_poison(
        endpoint_config,
        receiver,
        publish,
        endpoint,
        [{"event_id": "poison"}],
        hooks=DeliveryHooks(gates=[gate]),
        delivery={"max_handbacks": 4},
    )
    # Then after four hand-backs (RabbitMQ's x-delivery-count) it is dead-lettered with the reason, never POSTed
    (letter,) = dead
    reason = letter.headers[wire.H_DEAD_REASON]
    assert reason.startswith("handed back 4 times (delivery.max_handbacks = 4)"), reason
    assert "held for the test" in reason
    assert gate.refused == 5
    assert "poison" not in {r.event_id for r in receiver.received}
    assert took < 15


@pytest.mark.parametrize("endpoint", KINDS)
async def test_a_carried_delivery_count_is_not_a_hand_back(
    endpoint_config, receiver: Receiver, publish, endpoint: dict[str, Any]
) -> None:
    # Given a message that arrives with an x-delivery-count it did not earn in this queue (a DLQ replay by shovel
    # forwards the DLQ copy's; RabbitMQ 4.0.5 delivers it as it is), handed back every time, max_handbacks = 4
    gate = RefusingGate()
    dead, _ = await run_with_poison(
        endpoint_config,
        receiver,
        publish,
        endpoint,
        [{"event_id": "poison", "carried": {wire.H_DELIVERY_COUNT: 10}}],
        hooks=DeliveryHooks(gates=[gate]),
        delivery={"max_handbacks": 4},
    )
    # Then it still gets its four hand-backs before the DLQ: the carried count is not taken for the queue's
    (letter,) = dead
    assert letter.headers[wire.H_DEAD_REASON].startswith("handed back 4 times"), letter.headers[wire.H_DEAD_REASON]
    assert gate.refused == 5
