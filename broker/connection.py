"""Connecting to RabbitMQ, with its failures mapped to BrokerUnavailable in one place."""

from __future__ import annotations

import asyncio
import socket

import aio_pika
import aiormq.exceptions
from aio_pika.abc import AbstractConnection, AbstractRobustConnection

from warren.topology.errors import BrokerUnavailable, describe

__all__ = ["CONNECTION_EXCEPTIONS", "connect", "connect_once", "redact_url"]

# Failures after which trying again later can succeed: the link or the broker, not our request.
CONNECTION_EXCEPTIONS: tuple[type[Exception], ...] = (
    aiormq.exceptions.AMQPConnectionError,
    aiormq.exceptions.ChannelInvalidStateError,
    ConnectionError,
    asyncio.TimeoutError,
    socket.gaierror,
)


def redact_url(url: str) -> str:
    """The URL with its password replaced, for messages and logs."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


async def connect(url: str, *, name: str = "warren", timeout: float = 10.0) -> AbstractRobustConnection:
    """A robust connection: after the first success it reconnects by itself and re-declares consumers."""
    try:
        return await aio_pika.connect_robust(url, timeout=timeout, client_properties={"connection_name": name})
    except CONNECTION_EXCEPTIONS as exc:
        raise BrokerUnavailable(f"cannot connect to RabbitMQ at {redact_url(url)}: {describe(exc)}") from exc


async def connect_once(url: str, *, name: str = "warren", timeout: float = 10.0) -> AbstractConnection:
    """A plain connection for one command (``warren dlq``, ``warren status``).

    A lost link fails the command, which then says to run it again; a robust connection would restore it
    behind the command's back and re-create consumers on channels the command no longer tracks.
    """
    try:
        return await aio_pika.connect(url, timeout=timeout, client_properties={"connection_name": name})
    except CONNECTION_EXCEPTIONS as exc:
        raise BrokerUnavailable(f"cannot connect to RabbitMQ at {redact_url(url)}: {describe(exc)}") from exc
