"""Publishing received webhooks to their inbound queue, confirmed, before the provider gets its answer."""

from __future__ import annotations

import asyncio

from aio_pika import Message
from aio_pika.abc import AbstractConnection

from warren.broker.amqp.confirm import one_at_a_time
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.probe import missing

__all__ = ["InboundPublisher"]


class InboundPublisher:
    """Publishes to a queue by name through the default exchange, ``mandatory`` and with confirms.

    A missing queue is an UnroutableError rather than a silent drop; a lost link is a PublishError.
    """

    def __init__(self, channel: ConfirmChannel) -> None:
        self._channel = channel
        # Providers do resend the same id at once: publishes of one id on this channel go one after the
        # other (see one_at_a_time).
        self._in_flight: dict[str, asyncio.Future[None]] = {}

    @classmethod
    async def open(cls, connection: AbstractConnection) -> InboundPublisher:
        return cls(await ConfirmChannel(connection).open())

    async def close(self) -> None:
        await self._channel.close()

    async def publish(self, queue: str, message: Message) -> None:
        event_id = message.message_id or ""
        async with one_at_a_time(self._in_flight, event_id):
            await self._channel.publish(
                "",
                message,
                queue,
                what=f"inbound event {event_id}",
                event_id=event_id,
                unroutable=missing("inbound queue", queue),
            )
