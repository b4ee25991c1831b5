"""Slow clients: a header read timeout and a cap on open connections for Warren's aiohttp servers.

aiohttp has neither. A client that opens a connection and sends its request head one line every few
seconds (slowloris) holds a socket and a task for as long as it likes, before any authentication can
run; a few hundred of them exhaust the process's file descriptors.

``ConnectionGuard`` sits in front of aiohttp's protocol factory. Every connection gets a deadline of
``header_timeout`` from the moment it opens, and again from the end of each response (the idle wait of a
keep-alive connection): a request head must be complete by then, or the server answers 408 and closes
(a middleware marks a connection busy while a handler runs, so a slow handler is never cut). Past
``max_connections`` open connections, a new one is answered 503 and closed at once. The body has its
own timeout, applied where handlers read it (``body_timeout``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from aiohttp import web
from aiohttp.typedefs import Handler

__all__ = ["ConnectionGuard", "GuardedSite", "ServerLimits"]

_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
_BUSY = b"HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n"


@dataclass(frozen=True)
class ServerLimits:
    """How long a client may take over its request head and body, and how many connections may be open."""

    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_connections: int = 512


class _Watch:
    """One connection's header deadline: armed while idle, disarmed while a handler runs."""

    def __init__(self, guard: ConnectionGuard, transport: asyncio.Transport) -> None:
        self._guard = guard
        self._transport = transport
        self._timer: asyncio.TimerHandle | None = None
        self.partial = False  # bytes of a request head arrived since the deadline was armed
        self.arm()

    def arm(self) -> None:
        self.disarm()
        self.partial = False
        loop = asyncio.get_running_loop()
        self._timer = loop.call_later(self._guard.limits.header_timeout, self._expire)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if not self._transport.is_closing():
            # An idle keep-alive connection just closes (a 408 there could be read as the answer to a request
            # the client is sending at this moment); a half-sent head is told why.
            if self.partial:
                self._transport.write(_TIMEOUT)
            self._transport.close()


class _Watched(asyncio.Protocol):
    """aiohttp's protocol for one connection, with the guard's deadline around it."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self._guard = guard
        self._inner = inner
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not an isinstance check: uvloop's TCP transports do not derive from asyncio.Transport.
        transport = cast(asyncio.Transport, transport)
        self._transport = transport
        self._guard.opened(transport)
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._guard.closed(self._transport)
        self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._guard.saw_data(self._transport)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class _Refused(asyncio.Protocol):
    """The answer past the connection cap: 503, then close."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)
        transport.write(_BUSY)
        transport.close()


class ConnectionGuard:
    """Wraps an aiohttp server's protocol factory; ``middleware`` must be the served app's first."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self._server: Callable[[], asyncio.Protocol] | None = None
        self._watches: dict[asyncio.Transport, _Watch] = {}

    def bind(self, server: Callable[[], asyncio.Protocol]) -> None:
        """The factory of aiohttp's protocols (``runner.server``, which exists once the runner is set up)."""
        self._server = server

    @property
    def open_connections(self) -> int:
        return len(self._watches)

    def __call__(self) -> asyncio.Protocol:
        if self._server is None or len(self._watches) >= self.limits.max_connections:
            return _Refused()
        return _Watched(self, self._server())

    def opened(self, transport: asyncio.Transport) -> None:
        self._watches[transport] = _Watch(self, transport)

    def saw_data(self, transport: asyncio.Transport | None) -> None:
        watch = self._watches.get(transport) if transport is not None else None
        if watch is not None:
            watch.partial = True

    def closed(self, transport: asyncio.Transport) -> None:
        watch = self._watches.pop(transport, None)
        if watch is not None:
            watch.disarm()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """The head is in: no deadline while the handler runs; a fresh one for the next request after it."""
        transport = request.transport
        watch = self._watches.get(transport) if transport is not None else None
        if watch is None:
            return await handler(request)
        watch.disarm()
        try:
            return await handler(request)
        finally:
            watch.arm()


class GuardedSite(web.TCPSite):
    """A TCPSite whose connections go through a ConnectionGuard."""

    __slots__ = ("_guard",)

    def __init__(self, runner: web.BaseRunner, guard: ConnectionGuard, host: str, port: int, backlog: int) -> None:
        super().__init__(runner, host, port, backlog=backlog)
        self._guard = guard

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None, "the runner must be set up first"
        self._guard.bind(server)
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._guard, self._host, self._port, backlog=self._backlog)
        self._bound_port = self._server.sockets[0].getsockname()[1] if self._server.sockets else self._port
