"""The state store on the real broker: broadcast to listeners, remembered by the stream, read back to the end."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import aio_pika
import pytest

from tests.support.health import wait_until
from tests.support.topology import declare
from warren.broker.endpoint_state.records import ADMIN, CIRCUIT, DISABLED, OPEN, StateRecord
from warren.broker.endpoint_state.stream import StateStore
from warren.core.errors import TopologyError
from warren.topology.config import WarrenConfig

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
        # When a record is published, another only re-appended (the hourly refresh), then a third published
        opened = record(CIRCUIT, OPEN, 1)
        disabled = record(ADMIN, DISABLED, 2)
        later = record(CIRCUIT, OPEN, 3)
        await store.publish(opened)
        await store.refresh([disabled])
        await store.publish(later)
        # Then listeners heard the two broadcasts and not the refresh (it would have come before the third)
        await wait_until(lambda: later in heard, 5, "the broadcast")
        assert heard == [opened, later]
        # And a reader (a worker starting later) gets all three from the stream, in order, up to its marker
        assert await store.load(connection) == [opened, disabled, later]
        # And a second read (another marker later) still gets them: reading takes nothing away
        assert await store.load(connection) == [opened, disabled, later]
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


@pytest.mark.timeout(360)  # 3,000 confirmed appends one at a time: 85-209 s with two whole suites on 2 cores
async def test_loading_a_long_stream_many_times_never_breaks_the_connection(
    make_config: Callable[..., WarrenConfig],
) -> None:
    # Given a state stream holding thousands of records (several prefetch windows of the reader)
    config = make_config()
    await declare(config)
    connection = await aio_pika.connect(config.broker.url)
    writer_connection = await aio_pika.connect(config.broker.url)
    try:
        store = StateStore(config.broker.prefix)
        await store.attach(connection)
        records = [record(CIRCUIT, OPEN, version) for version in range(2000)]
        await store.refresh(records)
        other = StateStore(config.broker.prefix)
        await other.attach(writer_connection)
        for round_ in range(10):
            # When a worker reads it to its end while another worker appends (records arrive after its marker),
            # then at once opens another channel on the same connection (the number the reader just released)
            appended = [record(ADMIN, DISABLED, 10_000 + round_ * 100 + n) for n in range(100)]
            loaded, _ = await asyncio.gather(store.load(connection), other.refresh(appended))
            channel = await connection.channel()
            await channel.declare_queue(store.stream_name, passive=True)
            await channel.close()
            # Then every record came back in order and no late ack of the reader reached the new channel
            assert loaded[: len(records)] == records
            assert not connection.is_closed
    finally:
        await writer_connection.close()
        await connection.close()
