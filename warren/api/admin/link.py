"""The admin side's one RabbitMQ connection: opened on first use, kept for the API's lifetime, closed on shutdown.

Every admin operation (live apply, remove, reading and changing endpoint states) runs on it, so a burst of
endpoint creations costs channels, not connections (each connection is a handshake of several round trips and a
process on the broker). It reconnects by itself: an operation that finds it closed (the broker restarted, the
link broke) opens a new one, to the first node of the cluster that answers (``warren/broker/amqp/connection.py``); an
operation that meets the link breaking fails with BrokerUnavailable (503, nothing changed), and the next one
reconnects.

It is a plain connection reopened on demand, not aio-pika's robust one: live apply probes objects with passive
declares, and RabbitMQ closes the channel of each one that finds nothing; a robust connection reopens every such
channel behind the caller's back, so a long-lived one would collect a channel per probe until it reached the
channel limit.

Its channels are numbered in turn and no number is used twice on one connection (``_TurnedNumbers``): RabbitMQ
closes the channel of a passive declare that finds nothing, aiormq frees that number as the broker's
``channel.close`` arrives, and its ``close-ok`` is not always written before the channel goes; a later
``channel.open`` with that number makes RabbitMQ close the whole connection ("second 'channel.open' seen"). So
once a connection has handed out ROTATE_AFTER numbers, the next operation opens a fresh one, and the spent one is
closed when its last operation ends: one connection at a time, renewed every couple of thousand channels.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any, cast

from aio_pika.abc import AbstractChannel, AbstractConnection

from warren.broker.amqp.connection import CONNECTION_EXCEPTIONS, connect_once
from warren.core.errors import BrokerUnavailable, describe
from warren.topology.settings import BrokerSettings

__all__ = ["CONNECTION_NAME", "AdminLink"]

CONNECTION_NAME = "warren-admin"
# Channel numbers a connection hands out before the next operation gets a fresh connection, and the most it may
# hand out (RabbitMQ's default channel_max, 2047): the margin is for the operations still running on it.
ROTATE_AFTER = 1500
MOST = 2047


class _TurnedNumbers:
    """The connection, every channel opened on it numbered in turn, 1, 2, 3..., never a number twice."""

    def __init__(self, connection: AbstractConnection) -> None:
        self._connection = connection
        self._last = 0
        self.users = 0  # operations running on it
        self.retired = False  # a fresh connection took over: close this one when its last operation ends

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)

    @property
    def spent(self) -> bool:
        return self._last >= ROTATE_AFTER

    def channel(self, channel_number: int | None = None, **kwargs: Any) -> AbstractChannel:
        if channel_number is None:
            if self._last >= MOST:
                raise BrokerUnavailable(f"the admin connection has used its {MOST} channel numbers; try again")
            self._last += 1
            channel_number = self._last
        return self._connection.channel(channel_number, **kwargs)

    async def close(self) -> None:
        if not self._connection.is_closed:
            with contextlib.suppress(*CONNECTION_EXCEPTIONS):
                await self._connection.close()


class AdminLink:
    """``async with link.connection() as c``: the shared connection; link failures become BrokerUnavailable."""

    def __init__(self, broker: BrokerSettings, *, name: str = CONNECTION_NAME) -> None:
        self._broker = broker
        self._name = name
        self._current: _TurnedNumbers | None = None
        self._lock = asyncio.Lock()

    async def _acquire(self) -> _TurnedNumbers:
        async with self._lock:
            current = self._current
            if current is None or current.is_closed or current.spent:
                fresh = _TurnedNumbers(await connect_once(self._broker.urls, name=self._name))
                self._current = fresh
                if current is not None:
                    current.retired = True
                    if not current.users:
                        await current.close()
                current = fresh
            current.users += 1
            return current

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AbstractConnection]:
        numbered = await self._acquire()
        try:
            yield cast(AbstractConnection, numbered)
        except CONNECTION_EXCEPTIONS as exc:
            raise BrokerUnavailable(f"connection to RabbitMQ lost: {describe(exc)}") from exc
        finally:
            numbered.users -= 1
            if numbered.retired and not numbered.users:
                await numbered.close()

    async def close(self) -> None:
        async with self._lock:
            current, self._current = self._current, None
        if current is not None:
            await current.close()
