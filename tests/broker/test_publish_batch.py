"""publish_many's hot path (issue 38) on a real broker: each key's order across a batch, a nacked event sent
again until it is stored with its key-mates behind it, unroutable events answered, one tracer lookup a batch.

The nacks are RabbitMQ's own: a queue holding at most one message with ``x-overflow = reject-publish``
nacks every publish while it is full, and the test frees the place by taking what is in it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable

import aio_pika
import pytest
from pamqp.header import ContentHeader

from tests.support.dead_letters import drain
from tests.support.tracing import Spans, spans
from warren.broker.amqp.confirm import Outgoing, one_at_a_time
from warren.broker.amqp.confirm_channel import RENEWALS, ConfirmChannel
from warren.broker.applier import apply_setup
from warren.broker.events import Event, encode_event, event_body, event_properties
from warren.broker.publisher import Publisher
from warren.core.errors import UnroutableError
from warren.topology import names
from warren.topology.config import WarrenConfig

__all__ = ["spans"]  # the fixture

pytestmark = pytest.mark.timeout(60)

ENDPOINTS = [{"name": "sink", "url": "http://127.0.0.1:9/s", "events": ["order.*"]}]


async def _take(queue: aio_pika.abc.AbstractQueue, count: int, within: float) -> list[str]:
    """The ids of ``count`` messages taken one by one with basic.get (each frees its place at once), in order."""
    taken: list[str] = []
    deadline = time.monotonic() + within
    while len(taken) < count:
        assert time.monotonic() < deadline, f"{len(taken)} of {count} messages in {within} s"
        if (message := await queue.get(no_ack=True, fail=False)) is not None:
            taken.append(message.message_id or "")
        else:
            await asyncio.sleep(0.05)
    return taken


@pytest.mark.parametrize("as_stream", [False, True], ids=["list", "async-stream"])
async def test_a_batch_is_stored_with_each_keys_events_in_publish_order(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str, as_stream: bool
) -> None:
    # Given 400 events over 7 keys and some without a key, published as a list or as an async stream
    config = make_config(ENDPOINTS)
    await apply_setup(config)
    events = [Event("order.paid", {"i": i}, key=None if i % 10 == 0 else f"k{i % 7}") for i in range(400)]

    async def stream() -> AsyncIterator[Event]:
        for event in events:
            yield event

    connection = await aio_pika.connect(amqp_url)
    async with connection:
        publisher = await Publisher.open(connection, prefix)
        report = await publisher.publish_many(stream() if as_stream else events, window=64)
        await publisher.close()
        # Then every one is confirmed, and the work queue holds each key's events in the order published
        assert sorted(report.confirmed) == sorted(e.id for e in events)
        assert report.failed == []
    stored = [m.message_id for m in await drain(config, names.work_queue(prefix, "sink"))]
    assert sorted(stored) == sorted(e.id for e in events)
    for key in {e.key for e in events if e.key is not None}:
        assert [i for i in stored if i in {e.id for e in events if e.key == key}] == [
            e.id for e in events if e.key == key
        ]


async def test_a_nacked_event_is_sent_again_until_stored_and_its_key_mates_wait_behind_it(
    amqp_url: str, prefix: str
) -> None:
    # Given an exchange bound to a queue that takes one message and nacks publishes while it is full
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        setup = await connection.channel()
        exchange = await setup.declare_exchange(f"{prefix}.x", aio_pika.ExchangeType.TOPIC, durable=True)
        queue = await setup.declare_queue(
            f"{prefix}.one", durable=True, arguments={"x-max-length": 1, "x-overflow": "reject-publish"}
        )
        await queue.bind(exchange, "#")
        channel = await ConfirmChannel(connection).open()
        publisher = Publisher(channel, exchange.name, None)
        first, second, third = (Event("order.paid", {"n": n}, key="k") for n in range(3))
        other = Event("order.paid", {"n": 9}, key="other")
        # When a batch of one key's three events and another key's one is published with a 30 s deadline
        batch = asyncio.create_task(publisher.publish_many([first, other, second, third], deadline=30))
        # Then only one fits and the others are nacked: ConfirmChannel publishes again on new channels (RENEWALS),
        # and once it gives up, resend_until_confirmed sends the event again (another round of renewals)
        deadline = time.monotonic() + 20
        while channel.renewals <= RENEWALS:
            assert time.monotonic() < deadline, f"{channel.renewals} channels renewed after nacks in 20 s"
            await asyncio.sleep(0.05)
        assert not batch.done()
        # And taking each stored message frees the place for the next send again: all four end up stored
        taken = await _take(queue, 4, 40)
        report = await batch
        await channel.close()
    assert sorted(report.confirmed) == sorted(e.id for e in (first, second, third, other))
    assert report.failed == []
    # And key k's events were stored in publish order, each sent only after the one before it was confirmed
    assert [i for i in taken if i != other.id] == [first.id, second.id, third.id]


async def test_unroutable_events_in_a_batch_are_answered_and_hold_no_place_in_their_key(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str
) -> None:
    # Given a batch where one key's middle event is of a type no endpoint takes (mandatory: RabbitMQ returns it)
    await apply_setup(make_config(ENDPOINTS))
    events = [Event("order.paid", {}, key="k"), Event("nobody.listens", {}, key="k"), Event("order.paid", {}, key="k")]
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        publisher = await Publisher.open(connection, prefix)
        report = await publisher.publish_many(events)
        await publisher.close()
    # Then it alone is reported, as unroutable, and the key's later event was still sent and confirmed
    assert [(event_id, type(error)) for event_id, error in report.failed] == [(events[1].id, UnroutableError)]
    assert report.confirmed.count(events[0].id) == 1
    assert report.confirmed.count(events[2].id) == 1


async def test_a_batch_records_a_publish_span_for_each_event(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str, spans: Spans
) -> None:
    # Given a tracer in use before the batch starts (looked up once for the batch)
    await apply_setup(make_config(ENDPOINTS))
    events = [Event("order.paid", {"i": i}, key=f"k{i % 3}") for i in range(12)]
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        publisher = await Publisher.open(connection, prefix)
        report = await publisher.publish_many(events, window=4)
        # And a single publish after the batch still looks the tracer up by itself
        single = Event("order.paid", {"i": 99})
        await publisher.publish(single)
        await publisher.close()
    assert len(report.confirmed) == len(events)
    recorded = {span.attributes.get("messaging.message.id") for span in spans.named("publish ") if span.attributes}
    assert {e.id for e in events} | {single.id} <= recorded


async def test_one_at_a_time_lets_the_next_publish_of_an_id_in_after_a_failure_or_a_cancel() -> None:
    # Given a publish of id e1 holding its place
    in_flight: dict[str, asyncio.Future[None]] = {}
    order: list[str] = []
    release = asyncio.Event()

    async def hold(name: str, fail: bool = False) -> None:
        async with one_at_a_time(in_flight, "e1"):
            order.append(f"{name} in")
            await release.wait()
            if fail:
                raise RuntimeError(name)
            order.append(f"{name} out")

    first = asyncio.create_task(hold("first", fail=True))
    await asyncio.sleep(0.01)
    second = asyncio.create_task(hold("second"))
    waiter = asyncio.create_task(hold("cancelled"))
    await asyncio.sleep(0.01)
    # When a third waiter is cancelled while it waits, and the first fails inside its block
    waiter.cancel()
    release.set()
    with pytest.raises(RuntimeError):
        await first
    await asyncio.wait_for(second, 5)
    with pytest.raises(asyncio.CancelledError):
        await waiter
    # Then the second went in only after the first left, and nothing of e1 is left in flight
    assert order == ["first in", "second in", "second out"]
    assert in_flight == {}


@pytest.mark.parametrize("extra", [{}, {"sequence": 7, "tenant": "acme"}], ids=["plain", "sequence-tenant"])
def test_the_publishers_properties_are_encode_events_on_the_wire(extra: dict[str, object]) -> None:
    # Given an event, and the aio-pika message encode_event makes of it
    event = Event("order.paid", {"n": 1}, key="k", **extra)  # type: ignore[arg-type]
    message = encode_event(event)
    assert message.headers is not None
    # When the publisher builds its properties directly, from the same headers
    built = Outgoing(event_body(event), event_properties(event, dict(message.headers)))
    # Then the content header frame it sends is byte for byte the one aio-pika sends, and so is the body
    assert (
        ContentHeader(0, len(built.body), built.properties).marshal()
        == ContentHeader(0, len(message.body), message.properties).marshal()
    )
    assert built.body == message.body
