"""Operator events: state changes and exhaustion, published (confirmed) to ``<prefix>.operator``.

Same JSON envelope as webhooks (``{"id", "type", "timestamp", "data"}``, warren/broker/events.py), routing key =
event type, so an operator can bind a queue with ``endpoint.#`` or ``#``, or bind a Warren endpoint's
exchange to the operator exchange and receive them as signed webhooks. Callers never wait: events are queued
and a background task publishes them, keeping what it could not publish until the connection is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Any

import aiormq.exceptions
from aio_pika.abc import AbstractChannel, AbstractConnection, AbstractExchange

from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS
from warren.broker.endpoint_state.records import ACTIVE, ADMIN, CIRCUIT, CLOSED, OPEN, EndpointView, StateRecord
from warren.broker.endpoint_state.records import DISABLED as DISABLED_STATE
from warren.broker.events import Event, encode_event
from warren.core.deadlines import within
from warren.core.moments import iso_utc
from warren.topology import names

__all__ = [
    "CIRCUIT_CLOSED",
    "CIRCUIT_OPENED",
    "DISABLED",
    "ENABLED",
    "EXHAUSTED",
    "OperatorEvents",
    "event_data",
    "event_for",
    "iso",
    "publish_now",
]

log = logging.getLogger("warren.health")

CIRCUIT_OPENED = "endpoint.circuit_opened"
CIRCUIT_CLOSED = "endpoint.circuit_closed"
DISABLED = "endpoint.disabled"
ENABLED = "endpoint.enabled"
EXHAUSTED = "message.exhausted"

BACKLOG_LIMIT = 10_000  # events kept while RabbitMQ is away; the oldest go first past it
PUBLISH_FAILURES: tuple[type[Exception], ...] = (*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError)


async def publish_now(connection: AbstractConnection, prefix: str, event_type: str, data: dict[str, Any]) -> str:
    """Publish one event and wait for the confirm (for the CLI); returns the event id."""
    channel = await connection.channel(publisher_confirms=True)
    try:
        exchange = await channel.get_exchange(names.operator_exchange(prefix), ensure=False)
        event = Event(type=event_type, data=data)
        await exchange.publish(encode_event(event), routing_key=event.type, mandatory=False)
        return event.id
    finally:
        with contextlib.suppress(Exception):
            await channel.close()


class OperatorEvents:
    """Queued, confirmed publishing of operator events for the worker."""

    def __init__(self, prefix: str) -> None:
        self.exchange_name = names.operator_exchange(prefix)
        self.pending: deque[Event] = deque(maxlen=BACKLOG_LIMIT)
        self._channel: AbstractChannel | None = None
        self._exchange: AbstractExchange | None = None
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None

    async def attach(self, connection: AbstractConnection) -> None:
        self._channel = await connection.channel(publisher_confirms=True)
        # Not mandatory: an operator exchange nobody has bound yet is a normal state, not an error.
        self._exchange = await self._channel.get_exchange(self.exchange_name, ensure=True)
        if self._task is None:
            self._task = asyncio.create_task(self._pump(), name="operator-events")
        self._wake.set()

    def detach(self) -> None:
        self._exchange = None

    def publish(self, event_type: str, data: dict[str, Any]) -> None:
        self.pending.append(Event(type=event_type, data=data))
        self._idle.clear()
        self._wake.set()

    async def _pump(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self.pending and self._exchange is not None:
                event = self.pending[0]
                try:
                    await self._exchange.publish(encode_event(event), routing_key=event.type, mandatory=False)
                except PUBLISH_FAILURES as exc:
                    log.warning("operator event %s not published yet (%s)", event.type, exc or type(exc).__name__)
                    self._exchange = None  # wait for attach() after the reconnect
                    break
                if self.pending and self.pending[0] is event:
                    self.pending.popleft()
            if not self.pending:
                self._idle.set()

    async def flush(self, timeout: float) -> bool:
        """Wait until every queued event is confirmed, or ``timeout``; True when nothing is left."""
        with contextlib.suppress(TimeoutError):
            await within(self._idle.wait(), timeout)
        return not self.pending

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self.pending:
            log.warning("%d operator event(s) could not be published", len(self.pending))


iso = iso_utc  # epoch seconds as ISO 8601 UTC with milliseconds (None stays None, as does a moment out of range)


def event_for(view: EndpointView, record: StateRecord) -> str | None:
    """The operator event a record announces, judged against the state before it (None: not an event)."""
    if record.kind == CIRCUIT:
        if record.state == OPEN and view.circuit_state == CLOSED:
            return CIRCUIT_OPENED
        if record.state == CLOSED and view.circuit_state != CLOSED:
            return CIRCUIT_CLOSED
    elif record.kind == ADMIN:
        if record.state == DISABLED_STATE and view.admin_state != DISABLED_STATE:
            return DISABLED
        if record.state == ACTIVE and view.admin_state == DISABLED_STATE:
            return ENABLED
    return None


def event_data(record: StateRecord, previous: str) -> dict[str, Any]:
    """The ``data`` of a state-change event: what changed, why, since when, and who decided."""
    data: dict[str, Any] = {
        "endpoint": record.endpoint,
        "state": record.state,
        "previous": previous,
        "reason": record.reason,
        "since": iso(record.since),
        "by": record.by,
    }
    if record.kind == CIRCUIT and record.state != CLOSED:
        data.update(opened_at=iso(record.opened_at), failed_probes=record.failures, next_probe_at=iso(record.retry_at))
    return data
