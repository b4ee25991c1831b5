"""The Publisher and `warren publish` check an event's data against its type's schema in the catalog: refused
(EventError, a failed event in a batch, a usage error on the command line) or, with warn, published."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import aio_pika
import pytest

from tests.support.cli import warren
from tests.support.processes import write_config
from warren.broker.applier import apply_setup
from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.core.errors import EventError
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(60)

PAID = {"type": "object", "required": ["amount"], "properties": {"amount": {"type": "number"}}}
SECTIONS = {"event_types": [{"name": "order.paid", "json_schema": PAID}]}
ENDPOINTS = [{"name": "shop", "url": "http://127.0.0.1:9/a", "events": ["order.*"]}]


async def test_the_publisher_refuses_what_breaks_the_schema_and_reports_it_in_a_batch(
    make_config: Callable[..., WarrenConfig], amqp_url: str, prefix: str
) -> None:
    config = make_config(ENDPOINTS, **SECTIONS)
    await apply_setup(config)
    async with await aio_pika.connect(amqp_url) as connection:
        publisher = await Publisher.open(connection, prefix, catalog=config.event_catalog())
        with pytest.raises(EventError, match=r"data\.amount: 'ten' is not of type 'number'"):
            await publisher.publish(Event("order.paid", {"amount": "ten"}))
        # In a batch the bad one is reported, and the key's next event still goes (it holds no place)
        events = [
            Event("order.paid", {"amount": 1}, key="c1"),
            Event("order.paid", {}, key="c1"),
            Event("order.paid", {"amount": 3}, key="c1"),
        ]
        report = await publisher.publish_many(events)
        assert report.confirmed == [events[0].id, events[2].id]
        assert [(i, "'amount' is a required property" in str(e)) for i, e in report.failed] == [(events[1].id, True)]
        await publisher.close()
        warned = make_config(ENDPOINTS, catalog={"on_invalid": "warn"}, **SECTIONS)
        lenient = await Publisher.open(connection, prefix, catalog=warned.event_catalog())
        assert await lenient.publish(Event("order.paid", {"amount": "ten"}))
        await lenient.close()


async def test_warren_publish_checks_the_catalog_of_its_file(
    make_config: Callable[..., WarrenConfig], tmp_path: Path
) -> None:
    config = make_config(ENDPOINTS, **SECTIONS)
    await apply_setup(config)
    path = str(write_config(tmp_path, config))
    refused = await warren("publish", "--config", path, "--type", "order.paid", "--data", '{"amount": "ten"}')
    assert refused.code != 0 and "data.amount" in refused.err, (refused.out, refused.err)
    lines = tmp_path / "events.jsonl"
    lines.write_text("\n".join(json.dumps({"type": "order.paid", "data": d}) for d in ({"amount": 1}, {})) + "\n")
    batch = await warren("publish", "--config", path, "--file", str(lines))
    assert batch.code == 1 and "published 1 event(s)" in batch.out + batch.err, (batch.out, batch.err)
    assert "'amount' is a required property" in batch.out + batch.err
