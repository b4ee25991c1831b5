"""Publishing received webhooks to their inbound queue, confirmed, before the provider gets its answer."""

from __future__ import annotations

import asyncio

import aiormq.exceptions
from aio_pika import Message
from aio_pika.abc import AbstractChannel, AbstractConnection

from warren.broker.connection import CONNECTION_EXCEPTIONS
from warren.topology.errors import PublishError, UnroutableError

__all__ = ["InboundPublisher"]

# aio-pika raises RuntimeError for a channel that is closed or not reopened yet: the link, not the message.
_LINK_ERRORS: tuple[type[BaseException], ...] = (*CONNECTION_EXCEPTIONS, RuntimeError)


class InboundPublisher:
    """Publishes to a queue by name through the default exchange, ``mandatory`` and with confirms.

    A missing queue is an UnroutableError rather than a silent drop; a lost link is a PublishError.
    """

    def __init__(self, channel: AbstractChannel) -> None:
        self._channel = channel
        # aiormq matches a returned message to its publish by message_id, and providers do resend the
        # same id at once: publishes of one id on this channel go one after the other.
        self._in_flight: dict[str, asyncio.Future[None]] = {}

    @classmethod
    async def open(cls, connection: AbstractConnection) -> InboundPublisher:
        return cls(await connection.channel(publisher_confirms=True, on_return_raises=True))

    async def close(self) -> None:
        await self._channel.close()

    async def publish(self, queue: str, message: Message) -> None:
        event_id = message.message_id or ""
        while (previous := self._in_flight.get(event_id)) is not None:
            await asyncio.shield(previous)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._in_flight[event_id] = done
        try:
            await self._channel.default_exchange.publish(message, routing_key=queue, mandatory=True)
        except aiormq.exceptions.PublishError as exc:
            raise UnroutableError(f"inbound queue {queue} does not exist (run the topology setup)", event_id) from exc
        except aiormq.exceptions.DeliveryError as exc:
            raise PublishError(f"RabbitMQ refused inbound event {event_id} (nack)", event_id) from exc
        except _LINK_ERRORS as exc:
            raise PublishError(
                f"inbound event {event_id} not confirmed: connection to RabbitMQ lost ({exc or type(exc).__name__})",
                event_id,
            ) from exc
        finally:
            del self._in_flight[event_id]
            done.set_result(None)
