"""Connecting to RabbitMQ, with its failures mapped to BrokerUnavailable in one place.

A vhost that does not exist (or that the user may not use) is refused while the connection opens: RabbitMQ
answers ``connection.open`` with ``connection.close`` (530 NOT_ALLOWED), which aiormq reports as an
InvalidFrameError and a long traceback. ``open_failure`` turns it into one line naming the vhost.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from urllib.parse import unquote, urlsplit

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractConnection, AbstractRobustConnection

from warren.topology.errors import BrokerUnavailable, describe
from warren.topology.redact import redact_url

__all__ = ["CONNECTION_EXCEPTIONS", "OPEN_EXCEPTIONS", "connect", "connect_once", "open_failure", "redact_url"]

# Failures after which trying again later can succeed: the link or the broker, not our request.
CONNECTION_EXCEPTIONS: tuple[type[Exception], ...] = (
    aiormq.exceptions.AMQPConnectionError,
    aiormq.exceptions.ChannelInvalidStateError,
    ConnectionError,
    asyncio.TimeoutError,
    socket.gaierror,
)

# How long a connection whose first connect failed may take to close (it never opened: nothing to flush).
ABANDON_TIMEOUT = 2.0

# What opening a connection can raise besides a broken link: the broker closing it instead of opening it.
OPEN_EXCEPTIONS: tuple[type[Exception], ...] = (*CONNECTION_EXCEPTIONS, aiormq.exceptions.InvalidFrameError)


def open_failure(url: str, exc: Exception) -> BrokerUnavailable:
    """The one-line error for a connection that could not be opened (see the module docstring)."""
    if isinstance(exc, aiormq.exceptions.InvalidFrameError) and "Connection.Close" in str(exc):
        parts = urlsplit(url)
        vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
        user = unquote(parts.username) if parts.username else "guest"
        return BrokerUnavailable(
            f"RabbitMQ at {redact_url(url)} refused to open vhost '{vhost}': it does not exist, or user '{user}' "
            f"may not use it; create it (`rabbitmqctl add_vhost {vhost}`, then `rabbitmqctl set_permissions -p "
            f"{vhost} {user} '.*' '.*' '.*'`) or fix the vhost in broker.url"
        )
    return BrokerUnavailable(f"cannot connect to RabbitMQ at {redact_url(url)}: {describe(exc)}")


class _RobustConnection(aio_pika.RobustConnection):
    """aio-pika's robust connection, closed when its first connect fails or is cancelled.

    aio-pika starts a reconnecting task on the first connect and leaves it running when that connect is cancelled
    (it logs "cancelled. Reconnecting" and swallows further cancellations): a process told to stop while
    RabbitMQ hangs its handshake would then never exit.
    """

    async def connect(self, timeout: float | None = None) -> None:
        try:
            await super().connect(timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self.close()), ABANDON_TIMEOUT)
            raise


async def connect(url: str, *, name: str = "warren", timeout: float = 10.0) -> AbstractRobustConnection:
    """A robust connection: after the first success it reconnects by itself and re-declares consumers."""
    try:
        return await aio_pika.connect_robust(
            url, timeout=timeout, client_properties={"connection_name": name}, connection_class=_RobustConnection
        )
    except OPEN_EXCEPTIONS as exc:
        raise open_failure(url, exc) from exc


async def connect_once(url: str, *, name: str = "warren", timeout: float = 10.0) -> AbstractConnection:
    """A plain connection for one command (``warren dlq``, ``warren status``).

    A lost link fails the command, which then says to run it again; a robust connection would restore it
    behind the command's back and re-create consumers on channels the command no longer tracks.
    """
    try:
        return await aio_pika.connect(url, timeout=timeout, client_properties={"connection_name": name})
    except OPEN_EXCEPTIONS as exc:
        raise open_failure(url, exc) from exc
