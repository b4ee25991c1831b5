"""The admin side's one RabbitMQ connection: opened on first use, kept for the API's lifetime, closed on shutdown.

Every admin operation (live apply, remove, reading and changing endpoint states) runs on it, so a burst of
endpoint creations costs channels, not connections (each connection is a handshake of several round trips and a
process on the broker). It is robust (``broker/connection.py``): a lost link reconnects by itself, to the next
node of a cluster; an operation that meets the link down fails with BrokerUnavailable (503, nothing changed),
and the next one finds it restored.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from aio_pika.abc import AbstractRobustConnection

from warren.broker.connection import CONNECTION_EXCEPTIONS, connect
from warren.topology.errors import BrokerUnavailable, describe
from warren.topology.settings import BrokerSettings

__all__ = ["CONNECTION_NAME", "AdminLink"]

CONNECTION_NAME = "warren-admin"


class AdminLink:
    """``async with link.connection() as c``: the shared connection; link failures become BrokerUnavailable."""

    def __init__(self, broker: BrokerSettings, *, name: str = CONNECTION_NAME) -> None:
        self._broker = broker
        self._name = name
        self._connection: AbstractRobustConnection | None = None
        self._lock = asyncio.Lock()

    async def _get(self) -> AbstractRobustConnection:
        if self._connection is not None:
            return self._connection
        async with self._lock:
            if self._connection is None:
                self._connection = await connect(self._broker.urls, name=self._name)
            return self._connection

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[AbstractRobustConnection]:
        connection = await self._get()
        try:
            yield connection
        except CONNECTION_EXCEPTIONS as exc:
            raise BrokerUnavailable(f"connection to RabbitMQ lost: {describe(exc)}") from exc

    async def close(self) -> None:
        async with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(*CONNECTION_EXCEPTIONS):
                await connection.close()
