"""The API server's link to RabbitMQ: it connects in the background and never makes a request wait for it.

Until the first connection succeeds, and while aio-pika reconnects after a loss, ``publisher()`` raises
BrokerUnavailable at once, which the API answers with 503 and ``Retry-After``. A request is never held
open hoping the broker comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from dataclasses import dataclass

import aiormq.exceptions
from aio_pika.abc import AbstractRobustConnection

from warren.broker.amqp.channels import close_channel
from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS, connect, current_node, nodes_text
from warren.broker.amqp.probe import missing
from warren.broker.publisher import Publisher
from warren.core.errors import BrokerUnavailable, WarrenError
from warren.topology import names
from warren.topology.config import BrokerSettings

__all__ = ["BrokerLink", "NotReady"]

log = logging.getLogger("warren.api")

# Anything the broker or the link can throw at a probe; all mean "not ready", none is a bug of ours.
_PROBE_FAILURES: tuple[type[BaseException], ...] = (*CONNECTION_EXCEPTIONS, aiormq.exceptions.AMQPError)
_PROBE_AND_WARREN: tuple[type[BaseException], ...] = (*_PROBE_FAILURES, WarrenError)


@dataclass(frozen=True)
class NotReady:
    """Why the API is not ready: ``reason`` for the unauthenticated ``/readyz``, ``detail`` for the log only
    (it names the broker's user, host, port and vhost, which are nobody else's business)."""

    reason: str
    detail: str


class BrokerLink:
    """One robust connection and one confirming Publisher, shared by every request of the server."""

    def __init__(
        self,
        broker: BrokerSettings,
        *,
        name: str | None = None,
        connect_timeout: float = 5.0,
        retry_initial: float = 0.5,
        retry_cap: float = 5.0,
    ) -> None:
        self._broker = broker
        self._name = name or f"warren-api-{os.getpid()}"  # like the worker's: tells the processes apart
        self._connect_timeout = connect_timeout
        self._retry_initial = retry_initial
        self._retry_cap = retry_cap
        self._connection: AbstractRobustConnection | None = None
        self._publisher: Publisher | None = None
        self._task: asyncio.Task[None] | None = None
        self._attempt: asyncio.Task[AbstractRobustConnection] | None = None
        self.connected = asyncio.Event()

    @property
    def exchange(self) -> str:
        return names.events_exchange(self._broker.prefix)

    async def start(self) -> None:
        """Start connecting in the background; returns at once."""
        if self._task is None:
            self._task = asyncio.create_task(self._connect_forever(), name="warren-api-connect")

    async def _connect_forever(self) -> None:
        delay = self._retry_initial
        while True:
            # The attempt runs as its own task and is shielded: cancelling a robust connect half-way leaves
            # aio-pika reconnecting in the background, so on close() we let it finish and close what it made.
            self._attempt = asyncio.create_task(
                connect(self._broker.urls, name=self._name, timeout=self._connect_timeout)
            )
            try:
                connection = await asyncio.shield(self._attempt)
            except BrokerUnavailable as exc:
                self._attempt = None
                log.warning("%s; retrying in %.1fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self._retry_cap)
                continue
            self._connection, self._attempt = connection, None
            url = current_node(connection)
            try:
                # Size is checked by the API before publishing (it answers 413 for it), not again here.
                self._publisher = await Publisher.open(connection, self._broker.prefix)
            except _PROBE_FAILURES as exc:
                log.warning("cannot open a channel on %s: %s; retrying in %.1fs", url, exc, delay)
                self._connection = None
                with contextlib.suppress(*_PROBE_FAILURES):
                    await connection.close()
                await asyncio.sleep(delay)
                continue
            self.connected.set()
            log.info("connected to RabbitMQ at %s", url)
            return

    def publisher(self) -> Publisher:
        """The publisher, or BrokerUnavailable when RabbitMQ is not connected right now."""
        connection, publisher = self._connection, self._publisher
        if connection is None or publisher is None:
            raise BrokerUnavailable(f"not connected to RabbitMQ at {nodes_text(self._broker.urls)} yet")
        if connection.is_closed or not connection.connected.is_set():
            raise BrokerUnavailable("connection to RabbitMQ lost; reconnecting")
        return publisher

    async def ready_publisher(self, wait: float) -> Publisher:
        """``publisher()``, after waiting up to ``wait`` seconds for a connection that is reconnecting (its node
        failing over) to come back; BrokerUnavailable when it is not back by then, or there is none."""
        connection = self._connection
        if connection is not None and not connection.is_closed and not connection.connected.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await connection.connected.wait()
        return self.publisher()

    async def not_ready_reason(self, timeout: float = 5.0) -> NotReady | None:
        """None when connected and the events exchange exists; otherwise why not (for ``/readyz``)."""
        try:
            self.publisher()
        except BrokerUnavailable as exc:
            return NotReady("not connected to RabbitMQ", str(exc))
        assert self._connection is not None
        try:
            async with asyncio.timeout(timeout):
                channel = await self._connection.channel(publisher_confirms=False)
                try:
                    await channel.declare_exchange(self.exchange, passive=True, robust=False)
                finally:
                    await close_channel(channel)
        except aiormq.exceptions.ChannelNotFoundEntity:
            return NotReady(
                "the events exchange does not exist (run `warren setup`)", missing("exchange", self.exchange)
            )
        except _PROBE_AND_WARREN as exc:
            return NotReady("RabbitMQ did not answer the probe", str(exc) or type(exc).__name__)
        return None

    async def close(self) -> None:
        """Stop connecting and close the connection (in-flight publishes should be finished by now)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        attempt, self._attempt = self._attempt, None
        if attempt is not None:
            # An attempt the loop did not see through: bounded by the connect timeout, and a connection it
            # made after all is closed below.
            with contextlib.suppress(BrokerUnavailable, asyncio.CancelledError):
                self._connection = await attempt
        publisher, connection = self._publisher, self._connection
        self._publisher = self._connection = None
        self.connected.clear()
        if publisher is not None:
            with contextlib.suppress(*_PROBE_FAILURES):
                await publisher.close()
        if connection is not None:
            with contextlib.suppress(*_PROBE_FAILURES):
                await connection.close()
