"""Endpoint state kept in RabbitMQ: broadcast on the control exchange, remembered in the state stream.

A record is published once, to ``<prefix>.control`` (fanout). Two kinds of queue are bound to it:

- every worker's own exclusive, auto-delete queue: the live broadcast (a worker applies what it hears);
- ``<prefix>.state``, a stream: the durable memory. A stream is read without being consumed away, so any
  number of workers (and ``warren endpoint list``) can read it at once, and it survives restarts of workers
  and of RabbitMQ. It is size-bounded; the records still in force are re-appended hourly (``refresh``) so
  that retention never drops a disabled endpoint's record.

Reading the stream to its end: warren/broker/amqp/stream_read.py (a marker appended, then read up to it).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable

from aio_pika import DeliveryMode, Message
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractExchange, AbstractIncomingMessage

from warren.broker.amqp.probe import all_exist, missing
from warren.broker.amqp.stream_read import MARKER_HEADER, read_to_end
from warren.broker.endpoint_state.records import StateRecord
from warren.core.errors import TopologyError
from warren.topology import names

__all__ = ["MARKER_HEADER", "StateStore"]

log = logging.getLogger("warren.health")


class StateStore:
    """Publish, listen to and read back endpoint state records (see the module docstring)."""

    def __init__(self, prefix: str) -> None:
        self.control_name = names.control_exchange(prefix)
        self.stream_name = names.state_queue(prefix)
        self._channel: AbstractChannel | None = None
        self._control: AbstractExchange | None = None

    async def attach(self, connection: AbstractConnection) -> None:
        """Open a confirming channel; fail clearly when ``warren setup`` has not declared the objects."""
        if not await all_exist(connection, exchanges=[self.control_name], queues=[self.stream_name]):
            raise TopologyError(missing("the endpoint-state objects", f"{self.control_name} and {self.stream_name}"))
        self._channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
        self._control = await self._channel.get_exchange(self.control_name, ensure=False)

    async def detach(self) -> None:
        """Close the channel ``attach`` opened (for a caller whose connection outlives this store)."""
        channel, self._channel, self._control = self._channel, None, None
        if channel is not None and not channel.is_closed:
            with contextlib.suppress(Exception):
                await channel.close()

    async def publish(self, record: StateRecord) -> None:
        """Broadcast a record to every worker and the stream; returns once RabbitMQ confirmed it."""
        assert self._control is not None, "attach() first"
        await self._control.publish(_message(record.to_bytes()), routing_key="", mandatory=True)

    async def refresh(self, records: Iterable[StateRecord]) -> int:
        """Append records to the stream only (no broadcast): they are already known, but must not age out."""
        assert self._channel is not None, "attach() first"
        count = 0
        for record in records:
            await self._channel.default_exchange.publish(
                _message(record.to_bytes()), routing_key=self.stream_name, mandatory=True
            )
            count += 1
        return count

    async def listen(self, callback: Callable[[StateRecord], None]) -> None:
        """Hear every record published from now on, through an exclusive queue of this connection."""
        assert self._channel is not None, "attach() first"
        queue = await self._channel.declare_queue(
            exclusive=True, auto_delete=True, arguments={"x-queue-type": "classic"}
        )
        await queue.bind(self.control_name)

        async def on_message(message: AbstractIncomingMessage) -> None:
            record = _decode(message)
            if record is not None:
                callback(record)

        await queue.consume(on_message, no_ack=True)

    async def load(self, connection: AbstractConnection, timeout: float = 15.0) -> list[StateRecord]:
        """Every record in the stream, oldest first, up to a marker appended just now."""
        assert self._channel is not None, "attach() first"
        return await read_to_end(connection, self._channel, self.stream_name, _decode, timeout)


def _message(body: bytes) -> Message:
    return Message(body, content_type="application/json", delivery_mode=DeliveryMode.PERSISTENT)


def _decode(message: AbstractIncomingMessage) -> StateRecord | None:
    if (message.headers or {}).get(MARKER_HEADER) is not None:
        return None
    try:
        return StateRecord.from_bytes(message.body)
    except ValueError as exc:
        log.warning("ignoring a message that is not an endpoint state record: %s", exc)
        return None
