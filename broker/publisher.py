"""Publishing events with publisher confirms and ``mandatory``: an event is either stored or an error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from aio_pika.abc import AbstractConnection

from warren.broker.confirm import one_at_a_time
from warren.broker.confirm_channel import ConfirmChannel
from warren.broker.events import Event, encode_event
from warren.topology import names
from warren.topology.errors import PublishError

__all__ = ["DEFAULT_WINDOW", "PublishReport", "Publisher"]

DEFAULT_WINDOW = 256  # unconfirmed publishes kept in flight by publish_many


@dataclass
class PublishReport:
    """What publish_many did: ids confirmed, and (event id, error) for every event that was not stored."""

    confirmed: list[str] = field(default_factory=list)
    failed: list[tuple[str, PublishError]] = field(default_factory=list)


class Publisher:
    """Publishes events to the events exchange and waits for RabbitMQ's confirm of each one."""

    def __init__(self, channel: ConfirmChannel, exchange: str, max_payload: int | None) -> None:
        self._channel = channel
        self._exchange = exchange
        self._max_payload = max_payload
        # Publishes of one id on this channel go one after the other (see one_at_a_time).
        self._in_flight: dict[str, asyncio.Future[None]] = {}

    @classmethod
    async def open(cls, connection: AbstractConnection, prefix: str, *, max_payload: int | None = None) -> Publisher:
        channel = await ConfirmChannel(connection).open()
        return cls(channel, names.events_exchange(prefix), max_payload)

    async def close(self) -> None:
        await self._channel.close()

    async def publish(self, event: Event) -> str:
        """Publish one event; return its id once confirmed. Raises EventError, UnroutableError, PublishError."""
        message = encode_event(event, self._max_payload)
        async with one_at_a_time(self._in_flight, event.id):
            await self._channel.publish(
                self._exchange,
                message,
                event.type,
                what=f"event {event.id}",
                event_id=event.id,
                unroutable=f"event {event.id} of type {event.type!r} is unroutable: no endpoint subscribes to it",
            )
        return event.id

    async def publish_many(
        self,
        events: Iterable[Event] | AsyncIterable[Event],
        *,
        window: int = DEFAULT_WINDOW,
        on_result: Callable[[str, PublishError | None], Awaitable[None] | None] | None = None,
    ) -> PublishReport:
        """Publish a stream of events keeping up to ``window`` unconfirmed; report every outcome."""
        report = PublishReport()
        slots = asyncio.Semaphore(window)
        tasks: set[asyncio.Task[None]] = set()

        async def one(event: Event) -> None:
            error: PublishError | None = None
            try:
                await self.publish(event)
                report.confirmed.append(event.id)
            except PublishError as exc:
                error = exc
                report.failed.append((event.id, exc))
            finally:
                slots.release()
            if on_result is not None:
                outcome = on_result(event.id, error)
                if outcome is not None:
                    await outcome

        async def each() -> AsyncIterable[Event]:
            if isinstance(events, AsyncIterable):
                async for event in events:
                    yield event
            else:
                for event in events:
                    yield event

        async for event in each():
            await slots.acquire()
            task = asyncio.create_task(one(event))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
        return report
