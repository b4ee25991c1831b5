"""What live apply and live removal share: the endpoint's objects as RabbitMQ holds them now, a connection for
one call, and the announcement every worker hears (``<prefix>.endpoints``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass

from aio_pika.abc import AbstractChannel, AbstractConnection

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.confirm import publish_confirmed
from warren.broker.amqp.connection import connect_once
from warren.broker.amqp.probe import QueueProbe, existing_exchange
from warren.broker.endpoint_records import EndpointRecord
from warren.topology import names
from warren.topology.config import WarrenConfig

__all__ = ["Layout", "announce", "by", "one_call_connection", "own_queues", "read_layout"]


@contextlib.asynccontextmanager
async def one_call_connection(
    settings: WarrenConfig, given: AbstractConnection | None, name: str
) -> AsyncIterator[AbstractConnection]:
    """``given`` as it is (the caller's, kept open), or a connection of this call's own, closed after it."""
    if given is not None:
        yield given
        return
    connection = await connect_once(settings.broker.urls, name=name)
    try:
        yield connection
    finally:
        await connection.close()


def by() -> str:
    return f"live-apply@{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Layout:
    """What the broker holds of an endpoint now: its consumed queues' ready counts, its DLQ's, its exchange."""

    consumed: dict[str, int]
    dlq: int | None
    exchange: bool

    @property
    def exists(self) -> bool:
        return self.exchange or bool(self.consumed) or self.dlq is not None

    def held(self, dlq: str) -> dict[str, int]:
        """Queue -> ready messages, of the queues (the DLQ, named ``dlq``, among them) that hold any."""
        held = {q: n for q, n in self.consumed.items() if n}
        if self.dlq:
            held[dlq] = self.dlq
        return held


async def read_layout(connection: AbstractConnection, prefix: str, name: str) -> Layout:
    """Probed with passive declares, the first four at once (each on a channel of its own: a miss closes one)."""

    async def depth(queue: str) -> int | None:
        probe = QueueProbe(connection)
        try:
            found = await probe.depth(queue)
            return found.ready if found else None
        finally:
            await probe.close()

    async def exchange_exists() -> bool:
        probe = QueueProbe(connection)
        try:
            return await probe.exchange_exists(names.endpoint_exchange(prefix, name))
        finally:
            await probe.close()

    work_name, first_partition = names.work_queue(prefix, name), names.partition_queue(prefix, name, 0)
    work, partition, dlq, exchange = await asyncio.gather(
        depth(work_name), depth(first_partition), depth(names.dlq(prefix, name)), exchange_exists()
    )
    consumed: dict[str, int] = {}
    if work is not None:
        consumed[work_name] = work
    if partition is not None:
        consumed[first_partition] = partition
        probe = QueueProbe(connection)
        try:
            for index in range(1, 256):
                found = await probe.depth(names.partition_queue(prefix, name, index))
                if found is None:
                    break
                consumed[found.name] = found.ready
        finally:
            await probe.close()
    return Layout(consumed, dlq, exchange)


async def own_queues(connection: AbstractConnection, prefix: str, name: str) -> list[str]:
    """The endpoint's work queue and first partition, of the two, that RabbitMQ holds (two passive declares at
    once): all a lane endpoint's apply needs to know, where ``read_layout`` probes four objects."""

    async def held(queue: str) -> str | None:
        probe = QueueProbe(connection)
        try:
            return queue if await probe.depth(queue) is not None else None
        finally:
            await probe.close()

    work, partition = names.work_queue(prefix, name), names.partition_queue(prefix, name, 0)
    return [queue for queue in await asyncio.gather(held(work), held(partition)) if queue is not None]


async def announce(connection: AbstractConnection, prefix: str, record: EndpointRecord) -> None:
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    try:
        await announce_on(channel, prefix, record)
    finally:
        with contextlib.suppress(Exception):
            await close_channel(channel)


async def announce_on(
    channel: AbstractChannel, prefix: str, record: EndpointRecord, *, reply_to: str | None = None
) -> None:
    """Publish ``record`` on the endpoints exchange, confirmed, on ``channel`` (with confirms and returns raised);
    ``reply_to``: the queue where the workers answer once they applied it (warren/broker/route_fence.py)."""
    exchange = await existing_exchange(channel, names.endpoints_exchange(prefix))
    message = record.to_message()
    message.reply_to = reply_to
    await publish_confirmed(exchange, message, "", what=f"the record of endpoint {record.endpoint}")
