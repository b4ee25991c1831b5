"""The state store on the real broker: broadcast to listeners, remembered by the stream, read back to the end."""

from __future__ import annotations

import time
from collections.abc import Callable

import aio_pika
import pytest

from tests.support.health import wait_until
from tests.support.topology import declare
from warren.consumers.health.records import ADMIN, CIRCUIT, DISABLED, OPEN, StateRecord
from warren.consumers.health.state_store import StateStore
from warren.topology.config import WarrenConfig
from warren.topology.errors import TopologyError

pytestmark = pytest.mark.timeout(20)


def record(kind: str, state: str, version: int) -> StateRecord:
    return StateRecord("acme", kind, state, "because", time.time(), version, "test")


async def test_publish_reaches_listeners_and_the_stream_refresh_only_the_stream(
    make_config: Callable[..., WarrenConfig],
) -> None:
    config = make_config()
    await declare(config)
    connection = await aio_pika.connect(config.broker.url)
    try:
        store = StateStore(config.broker.prefix)
        await store.attach(connection)
        heard: list[StateRecord] = []
        await store.listen(heard.append)
        # When a record is published and another only re-appended (the hourly refresh)
        opened = record(CIRCUIT, OPEN, 1)
        disabled = record(ADMIN, DISABLED, 2)
        await store.publish(opened)
        await store.refresh([disabled])
        await wait_until(lambda: heard == [opened], 5, "the broadcast")
        # Then a reader (a worker starting later) gets both from the stream, in order, up to its marker
        assert await store.load(connection) == [opened, disabled]
        # And a second read (another marker later) still gets them: reading takes nothing away
        assert await store.load(connection) == [opened, disabled]
        assert heard == [opened]  # the refresh was not broadcast
    finally:
        await connection.close()


async def test_missing_objects_name_the_fix(make_config: Callable[..., WarrenConfig]) -> None:
    config = make_config()  # nothing declared under this prefix
    connection = await aio_pika.connect(config.broker.url)
    try:
        with pytest.raises(TopologyError, match="warren setup"):
            await StateStore(config.broker.prefix).attach(connection)
    finally:
        await connection.close()
