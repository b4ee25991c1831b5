"""Reading a RabbitMQ stream to its end: every record, oldest first, up to a marker appended just now.

AMQP gives no "end of stream" signal (a stream's declare-ok reports 0 messages), so the reader appends a marker
of its own and reads from the first record until it sees it. Used for the endpoint-state stream
(broker/endpoint_state/stream.py) and the live endpoints stream (consumers/live_endpoints.py, broker/applier.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Generic, TypeVar

from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractIncomingMessage

from warren.broker.amqp.channels import close_channel
from warren.core.deadlines import within
from warren.core.errors import BrokerUnavailable

__all__ = ["MARKER_HEADER", "read_to_end"]

T = TypeVar("T")

MARKER_HEADER = "warren-marker"
READ_PREFETCH = 500
ACK_EVERY = 50  # deliveries acked at once (well within the prefetch, so that credit never runs out)
ACK_SETTLE_TIMEOUT = 5.0


async def read_to_end(
    connection: AbstractConnection,
    confirming: AbstractChannel,
    stream_name: str,
    decode: Callable[[AbstractIncomingMessage], T | None],
    timeout: float = 15.0,
) -> list[T]:
    """Every record of a stream, oldest first, up to a marker appended just now through ``confirming``.

    ``decode`` turns a message into a record, or None to skip it (no marker reaches it).
    """
    marker = uuid.uuid4().hex
    await confirming.default_exchange.publish(
        Message(b"", headers={MARKER_HEADER: marker}, delivery_mode=DeliveryMode.PERSISTENT),
        routing_key=stream_name,
        mandatory=True,
    )
    read = _StreamRead(marker, decode)
    channel = await connection.channel()
    try:
        await channel.set_qos(prefetch_count=READ_PREFETCH)  # a stream consumer must have a prefetch
        stream = await channel.get_queue(stream_name, ensure=False)
        await stream.consume(read.on_message, arguments={"x-stream-offset": "first"})
        # ``timeout`` bounds a read that stalls, not a long one that makes progress: a stream of thousands of
        # records on a busy node can take longer than that to read, and a worker must not fail to start then.
        seen = -1
        while not read.reached.is_set():
            try:
                await within(read.reached.wait(), timeout)
            except TimeoutError:
                if read.seen == seen:
                    raise BrokerUnavailable(
                        f"could not read {stream_name} to its end: no record for {timeout:g}s "
                        f"({len(read.records)} records read)"
                    ) from None
                seen = read.seen
    finally:
        await read.stop()
        with contextlib.suppress(Exception):
            await close_channel(channel)
    return read.records


class _StreamRead(Generic[T]):
    """One read of the stream up to a marker, whose acks are all sent before its channel closes.

    Deliveries keep coming after the marker (other workers append), each handled in a task of its own. An ack
    sent after the channel's close would reach the broker on a closed channel number (or on the next channel
    given that number) and RabbitMQ would close the whole connection. So: no ack starts once the read stopped,
    and ``stop`` waits for the acks already under way.
    """

    def __init__(self, marker: str, decode: Callable[[AbstractIncomingMessage], T | None]) -> None:
        self.marker = marker
        self.decode = decode
        self.records: list[T] = []
        self.seen = 0  # messages delivered so far, records or not: the read's progress
        self.reached = asyncio.Event()
        self._stopped = False
        self._acking = 0
        self._settled = asyncio.Event()
        self._settled.set()

    async def on_message(self, message: AbstractIncomingMessage) -> None:
        if self._stopped:
            return  # the channel is closing: an ack now could outlive it
        self.seen += 1
        if (message.headers or {}).get(MARKER_HEADER) == self.marker:
            self._stopped = True
            self.reached.set()
            return
        # Before any await, so that records keep the stream's order; other readers' markers are no records.
        record = None if (message.headers or {}).get(MARKER_HEADER) is not None else self.decode(message)
        if record is not None:
            self.records.append(record)
        if self.seen % ACK_EVERY:
            return  # acked with a later one (``multiple``): a frame per record was most of a long read's cost
        self._acking += 1
        self._settled.clear()
        try:
            await message.ack(multiple=True)  # on a stream an ack only grants credit; nothing is removed
        finally:
            self._acking -= 1
            if not self._acking:
                self._settled.set()

    async def stop(self) -> None:
        """Start no more acks; wait (briefly: they are socket writes) for those under way."""
        self._stopped = True
        with contextlib.suppress(TimeoutError):
            await within(self._settled.wait(), ACK_SETTLE_TIMEOUT)
