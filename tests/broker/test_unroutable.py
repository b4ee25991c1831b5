"""An event no endpoint subscribes to is an error the publisher sees, never a silent drop."""

from __future__ import annotations

from collections.abc import Callable

import aio_pika
import aiormq.exceptions
import pytest

from warren.broker.applier import apply_setup
from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.core.errors import UnroutableError
from warren.topology.config import WarrenConfig

ENDPOINTS = [
    {"name": "acme", "url": "http://127.0.0.1:9/a", "events": ["message.*"]},
    {"name": "billing", "url": "http://127.0.0.1:9/b", "events": ["order.paid"], "ordering": "key", "partitions": 2},
]


async def test_publishing_an_unsubscribed_type_raises_unroutable(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str
) -> None:
    await apply_setup(make_config(ENDPOINTS))
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        publisher = await Publisher.open(connection, prefix)
        # A subscribed type (unordered and ordered) is confirmed
        ok = Event("message.created", {"x": 1})
        assert await publisher.publish(ok) == ok.id
        assert await publisher.publish(Event("order.paid", {"x": 1}, key="c1"))
        # A type nobody subscribes to is an error naming the event
        lost = Event("order.refunded", {"x": 1})
        with pytest.raises(UnroutableError) as caught:
            await publisher.publish(lost)
        assert caught.value.event_id == lost.id
        assert (
            str(caught.value) == f"event {lost.id} of type 'order.refunded' is unroutable: no endpoint subscribes to it"
        )
        assert isinstance(caught.value.__cause__, aiormq.exceptions.PublishError)  # RabbitMQ's return, kept
        await publisher.close()


async def test_publish_many_reports_each_unroutable_event(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str
) -> None:
    await apply_setup(make_config(ENDPOINTS))
    events = [Event("message.created" if i % 3 else "nobody.listens", {"i": i}) for i in range(30)]
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        publisher = await Publisher.open(connection, prefix)
        report = await publisher.publish_many(events, window=8)
        await publisher.close()
    unroutable = {e.id for e in events if e.type == "nobody.listens"}
    assert {event_id for event_id, _ in report.failed} == unroutable
    assert all(isinstance(error, UnroutableError) for _, error in report.failed)
    assert set(report.confirmed) == {e.id for e in events} - unroutable
