"""Tracing end to end (docs/tracing.md): real RabbitMQ, a real receiver on 127.0.0.1, the Worker in this process,
spans read from OpenTelemetry's InMemorySpanExporter."""

from __future__ import annotations

from collections import Counter
from typing import Any

import aio_pika
import pytest
from opentelemetry.trace import SpanKind, StatusCode

from tests.support.dead_letters import wait_depth
from tests.support.receiver import Receiver, Reply
from tests.support.tracing import Spans, hex_span, hex_trace, parent_id_of, spans, trace_id_of
from warren.broker.dlq.recover import replay_events
from warren.broker.dlq.shovel import replay_by_shovel
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology import names
from warren.tracing.carry import attached

__all__ = ["spans"]

pytestmark = pytest.mark.timeout(60)

PRODUCER_TRACE = "0af7651916cd43dd8448eb211c80319c"
PRODUCER_PARENT = f"00-{PRODUCER_TRACE}-b7ad6b7169203331-01"


def refuse_first(status: int) -> Any:
    seen: Counter[str] = Counter()

    def reply(_: Receiver, request: Any, __: bytes) -> Reply:
        event_id = request.headers["webhook-id"]
        seen[event_id] += 1
        return Reply(status if seen[event_id] == 1 else 200)

    return reply


@pytest.mark.parametrize("home", ["dedicated", "lane", "ordered"])
async def test_one_trace_from_the_publish_through_a_retry_to_the_delivery(
    endpoint_config: Any, receiver: Receiver, publish: Any, spans: Spans, home: str
) -> None:
    # Given an endpoint that answers 503 to an event's first attempt, then 200 (on a lane: through the routing stage)
    receiver.behaviour = refuse_first(503)
    extra: dict[str, Any] = {"lanes": {"count": 4}} if home == "lane" else {}
    endpoint: dict[str, Any] = {"name": "traced", "events": ["order.*"]}
    endpoint |= {"lane": {"home": "lane"}, "ordered": {"ordering": "key", "partitions": 2}}.get(home, {})
    config = await endpoint_config([endpoint], retry={"base": "50ms", "cap": "100ms", "max_attempts": 5}, **extra)
    tracer = spans.provider.get_tracer("test")
    # When a producer publishes an event inside its own span, and a worker delivers it
    with tracer.start_as_current_span("checkout") as checkout:
        [event_id] = await publish(config, [Event(type="order.paid", data={"n": 1}, tenant=None)])
    async with Worker(config):
        await receiver.wait_for(lambda r: event_id in r.ok_ids(), 20)
        await spans.wait_for(lambda s: sum(x.name == "deliver traced" for x in s) == 2, 10)
    # Then one trace: the producer's span, its publish span, and an attempt span per attempt under the publish
    trace_id = f"{checkout.get_span_context().trace_id:032x}"
    [published] = spans.named("publish ")
    attempts = sorted(spans.named("deliver "), key=lambda s: s.attributes["warren.attempt"])  # type: ignore[index]
    assert {hex_trace(s) for s in [published, *attempts]} == {trace_id}
    assert published.kind is SpanKind.PRODUCER and published.parent is not None
    assert published.parent.span_id == checkout.get_span_context().span_id
    assert published.attributes is not None and published.attributes["messaging.message.id"] == event_id
    assert published.attributes["messaging.system"] == "rabbitmq"
    assert published.attributes["messaging.destination.name"] == f"{config.broker.prefix}.events"
    for span in attempts:
        assert span.kind is SpanKind.CLIENT
        assert span.parent is not None and span.parent.span_id == published.context.span_id  # type: ignore[union-attr]
    first, second = (dict(s.attributes or {}) for s in attempts)
    retried = "retry-in-place" if home == "ordered" else "retry"  # an ordered one is retried holding its place
    assert first["http.response.status_code"] == 503 and first["warren.outcome"] == retried
    assert first["error.type"] == "503" and attempts[0].status.status_code is StatusCode.ERROR
    # full jitter draws the delay from [0, 50 ms] and the span rounds it to the millisecond: 0.0 is a fair draw (~1%)
    assert 0 <= first["warren.retry.delay"] <= 0.1
    assert second["http.response.status_code"] == 200 and second["warren.outcome"] == "delivered"
    assert "error.type" not in second and attempts[1].status.status_code is StatusCode.UNSET
    for facts, attempt in ((first, 1), (second, 2)):
        assert facts["warren.attempt"] == attempt
        assert facts["warren.endpoint"] == "traced" and facts["warren.event.type"] == "order.paid"
        assert facts["messaging.message.id"] == event_id and facts["http.request.method"] == "POST"
        assert facts["server.address"] == "127.0.0.1" and facts["server.port"] == receiver.port
    # And the receiver got, with each attempt, a traceparent of the same trace naming that attempt's span
    got = [r.headers["traceparent"] for r in receiver.received]
    assert [trace_id_of(t) for t in got] == [trace_id, trace_id]
    assert [parent_id_of(t) for t in got] == [hex_span(s) for s in attempts]


@pytest.mark.parametrize("how", ["client", "shovel"])
async def test_a_dlq_replay_keeps_the_trace(
    endpoint_config: Any, receiver: Receiver, publish: Any, spans: Spans, management: Any, how: str
) -> None:
    # Given an event dead-lettered at once (HTTP 400), then replayed from the DLQ and delivered
    receiver.behaviour = refuse_first(400)
    config = await endpoint_config([{"name": "strict"}])
    [event_id] = await publish(config, [Event(type="x.y", data={})])
    async with Worker(config):
        assert await wait_depth(config, names.dlq(config.broker.prefix, "strict"), 1) == 1
        connection = await aio_pika.connect(config.broker.url)
        try:
            if how == "client":
                moved = (await replay_events(connection, config.broker.prefix, "strict", frozenset({event_id}))).moved
            else:
                moved = (
                    await replay_by_shovel(connection, management, config.broker.prefix, "strict", timeout=30)
                ).moved
        finally:
            await connection.close()
        assert moved == 1
        await receiver.wait_for(lambda r: event_id in r.ok_ids(), 20)
        await spans.wait_for(lambda s: sum(x.name == "deliver strict" for x in s) == 2, 10)
    # Then both attempts are in the publish's trace, under its span, the replayed one delivered
    [published] = spans.named("publish ")
    dead, replayed = spans.named("deliver ")
    assert hex_trace(dead) == hex_trace(replayed) == hex_trace(published)
    assert dead.parent is not None and replayed.parent is not None
    assert dead.parent.span_id == replayed.parent.span_id == published.context.span_id  # type: ignore[union-attr]
    assert dead.attributes is not None and dead.attributes["warren.outcome"] == "dead"
    assert replayed.attributes is not None and replayed.attributes["warren.outcome"] == "delivered"
    assert replayed.attributes["warren.attempt"] == 1  # a replay starts a fresh budget
    assert {trace_id_of(r.headers["traceparent"]) for r in receiver.received} == {hex_trace(published)}


async def test_with_tracing_off_a_producers_trace_context_reaches_the_endpoint_unchanged(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given no tracer provider (tracing off), one event published in a producer's trace context and one without
    receiver.behaviour = refuse_first(503)
    config = await endpoint_config([{"name": "plain"}], retry={"base": "50ms", "cap": "100ms", "max_attempts": 5})
    with attached((PRODUCER_PARENT, "vendor=abc")):
        [traced] = await publish(config, [Event(type="x.y", data={})])
    [untraced] = await publish(config, [Event(type="x.y", data={})])
    async with Worker(config):
        await receiver.wait_for(lambda r: {traced, untraced} <= r.ok_ids(), 20)
    # Then every attempt of the first (through the delay chain) carries it as it was, and the second none
    first = [r for r in receiver.received if r.event_id == traced]
    assert len(first) == 2
    assert {(r.headers["traceparent"], r.headers["tracestate"]) for r in first} == {(PRODUCER_PARENT, "vendor=abc")}
    assert all("traceparent" not in r.headers for r in receiver.received if r.event_id == untraced)
