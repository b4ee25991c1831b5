"""Fixtures for delivery tests (tests/consumers, tests/transport, tests/broker/endpoint_state import them into their
conftest.py): a recording receiver, a declared topology, a publisher."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.support.receiver import Receiver
from tests.support.topology import declare
from warren.broker.amqp.connection import connect
from warren.broker.events import Event
from warren.broker.publisher import Publisher
from warren.topology.config import WarrenConfig


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    async with Receiver() as r:
        yield r


@pytest.fixture
def endpoint_config(make_config: Callable[..., WarrenConfig], receiver: Receiver) -> Callable[..., Any]:
    """``await endpoint_config(endpoints=[...], retry=...)``: a config pointing at the receiver, declared."""

    async def build(endpoints: list[dict[str, Any]], **sections: Any) -> WarrenConfig:
        eps = [{"url": receiver.url + "/" + e["name"], "events": ["#"], **e} for e in endpoints]
        config = make_config(eps, **sections)
        await declare(config)
        return config

    return build


class Publish:
    def __init__(self) -> None:
        self._publishers: list[Any] = []

    async def __call__(self, config: WarrenConfig, events: list[Event]) -> list[str]:
        connection = await connect(config.broker.url)
        self._publishers.append(connection)
        publisher = await Publisher.open(connection, config.broker.prefix)
        report = await publisher.publish_many(events)
        assert not report.failed, report.failed
        return report.confirmed

    async def close(self) -> None:
        for connection in self._publishers:
            await connection.close()


@pytest.fixture
async def publish() -> AsyncIterator[Publish]:
    p = Publish()
    yield p
    await p.close()
