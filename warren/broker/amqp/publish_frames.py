"""The publishes that are ready in one loop iteration written to RabbitMQ as one payload (issue 38).

aiormq's ``Channel.basic_publish`` takes the channel's lock, gives the publish its delivery tag, puts its three
frames (method, content header, body) on the connection's write queue as one payload and holds the lock until
the connection's writer has written it: one lock round, one writer wake-up and one ``send()`` per publish, the
largest part of a confirmed publisher's CPU (bench/README.md, "The fourth pass"). ``FramedPublishes`` does what
``basic_publish`` does for every publish made on the channel while a write is under way, at once: under the same
lock, each takes the next delivery tag, its confirm is registered where aiormq's reader looks for it (so acks,
nacks, ``multiple`` acks and returned messages are answered as for ``basic_publish``), and their frames go on the
write queue as one payload, in the order the publishes were made. What a publish is sent with is unchanged:
``mandatory``, the properties, the frames, byte for byte.
"""

from __future__ import annotations

import asyncio
from functools import partial
from random import getrandbits
from uuid import UUID

import aiormq
import aiormq.exceptions
import pamqp.frame
from aiormq.abc import ChannelFrame
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

__all__ = ["FramedPublishes"]


def _forget(channel: aiormq.Channel, message_id: str, tag: int, _: object) -> None:
    """What ``basic_publish`` does once a publish is answered: its message id no longer maps to its tag."""
    if channel.message_id_delivery_tag.get(message_id) == tag:
        channel.message_id_delivery_tag.pop(message_id)


def _closing(channel: aiormq.Channel) -> bool:
    """Closed, or closing at the broker's word: aiormq puts the ``Channel.CloseOk`` on the write queue as the
    broker's ``Channel.Close`` arrives and marks the channel closed only after an await, so a write in between
    would follow the CloseOk (and aiormq's own ``basic_publish`` has that gap). ``_close_exception`` is set at once.
    """
    return channel.is_closed or getattr(channel, "_close_exception", None) is not None


class FramedPublishes:
    """``publish(body, exchange, routing_key, properties)`` -> the future of its confirm, as ``basic_publish``'s.

    One per aiormq channel with publisher confirms (a new channel, after a nack, gets a new one)."""

    __slots__ = ("_channel", "_pending", "_writing")

    def __init__(self, channel: aiormq.Channel) -> None:
        self._channel = channel
        # The publishes made since the write under way took its own: (frames' fields, their confirm's future).
        self._pending: list[tuple[bytes, str, str, spec.Basic.Properties, asyncio.Future[object]]] = []
        self._writing = False  # a writer task runs: it takes what is pending once it holds the lock

    @property
    def channel(self) -> aiormq.Channel:
        return self._channel

    def publish(
        self, body: bytes, exchange: str, routing_key: str, properties: spec.Basic.Properties
    ) -> asyncio.Future[object]:
        """The publish queued for the next write; its future is answered as ``basic_publish``'s confirm (the ack,
        or aiormq's ``DeliveryError`` for a nack, ``PublishError`` for a returned message, the channel's close
        reason). Cancelling the future before the write takes it means the publish is never sent."""
        if len(routing_key) > 255:
            raise ValueError("Routing key too long (max 255 bytes)")
        if not properties.message_id:  # as basic_publish: a returned message is matched by its id
            properties.message_id = UUID(int=getrandbits(128), version=4).hex
        if _closing(self._channel):  # its future store would reject the new future twice (InvalidStateError)
            raise aiormq.exceptions.ChannelInvalidStateError(f"{self._channel!r} closed")
        confirmation: asyncio.Future[object] = self._channel.create_future()
        self._pending.append((body, exchange, routing_key, properties, confirmation))
        if not self._writing:
            self._writing = True
            self._channel.create_task(self._write())
        return confirmation

    async def _write(self) -> None:
        channel = self._channel
        try:
            while self._pending:
                async with channel.lock:
                    batch, self._pending = self._pending, []
                    await self._write_batch(channel, batch)
        except Exception:  # the link failed: each publish's future holds the error (the confirms rejected)
            pass
        finally:
            self._writing = False
            if self._pending and not channel.is_closed:  # made while this task was ending
                self._writing = True
                channel.create_task(self._write())

    @staticmethod
    async def _write_batch(
        channel: aiormq.Channel, batch: list[tuple[bytes, str, str, spec.Basic.Properties, asyncio.Future[object]]]
    ) -> None:
        """``basic_publish``'s body under the channel's lock, for the whole batch: one payload, one drain."""
        if _closing(channel):  # closed while these waited: a frame on its number now is a connection error
            # (RabbitMQ's "CHANNEL_ERROR - expected 'channel.open'" once its close is acknowledged)
            for *_, confirmation in batch:
                if not confirmation.done():
                    confirmation.set_exception(aiormq.exceptions.ChannelInvalidStateError(f"{channel!r} closed"))
            return
        number, marshal, confirmations = channel.number, pamqp.frame.marshal, channel.confirmations
        ids, max_size = channel.message_id_delivery_tag, channel.max_content_size
        parts: list[bytes] = []
        sent: list[tuple[int, str, asyncio.Future[object]]] = []
        first_tag = channel.delivery_tag
        for body, exchange, routing_key, properties, confirmation in batch:
            if confirmation.done():  # its publisher gave up (cancelled) before the write: not sent
                continue
            try:
                frames = [
                    marshal(spec.Basic.Publish(exchange=exchange, routing_key=routing_key, mandatory=True), number),
                    marshal(ContentHeader(properties=properties, body_size=len(body)), number),
                ]
                # as basic_publish's _split_body: one body frame below the frame size, else chunks of it
                chunks = (
                    [body] if len(body) < max_size else [body[i : i + max_size] for i in range(0, len(body), max_size)]
                )
                frames.extend(marshal(ContentBody(chunk), number) for chunk in chunks if chunk)
            except Exception as exc:  # a property pamqp cannot encode: that publish's error, as basic_publish's
                confirmation.set_exception(exc)
                continue
            parts.extend(frames)
            channel.delivery_tag += 1
            tag = channel.delivery_tag
            message_id = properties.message_id or ""
            confirmations[tag] = confirmation
            ids[message_id] = tag
            sent.append((tag, message_id, confirmation))
        if not sent:
            return
        drain: asyncio.Future[None] = channel.create_future()
        try:
            await channel.write_queue.put(ChannelFrame(payload=b"".join(parts), should_close=False, drain_future=drain))
        except BaseException as exc:  # not on the write queue: RabbitMQ has not seen them; the tags given back
            channel.delivery_tag = first_tag
            for tag, message_id, confirmation in sent:
                confirmations.pop(tag, None)
                _forget(channel, message_id, tag, None)
                if not confirmation.done():
                    confirmation.set_exception(
                        exc if isinstance(exc, Exception) else aiormq.exceptions.ChannelInvalidStateError("closed")
                    )
            drain.cancel()
            raise
        for tag, message_id, confirmation in sent:
            confirmation.add_done_callback(partial(_forget, channel, message_id, tag))
        try:
            await drain  # as basic_publish: the lock held until the writer has it (the next batch gathers)
        finally:
            drain.cancel()
