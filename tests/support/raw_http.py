"""Raw HTTP over a socket, for what a well-behaved client library refuses to send (bytes that are not UTF-8)."""

from __future__ import annotations

import asyncio

__all__ = ["RawServer", "raw_exchange", "status_of"]


async def raw_exchange(port: int, request: bytes, timeout: float = 5.0) -> bytes:
    """Send ``request`` to 127.0.0.1:``port`` and read everything until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        await writer.drain()
        return await asyncio.wait_for(reader.read(), timeout)
    finally:
        writer.close()


def status_of(response: bytes) -> int:
    """The final status of a response (after any ``100 Continue``)."""
    statuses = [int(line.split()[1]) for line in response.split(b"\r\n") if line.startswith(b"HTTP/1.")]
    return statuses[-1]


class RawServer:
    """An HTTP server on 127.0.0.1 that answers every request with ``answer``, bytes as given, then closes the
    connection, or with ``hold`` keeps it open (sending nothing more) until the server stops.

    For answers aiohttp's own server will not write: a body shorter than its Content-Length, a body never sent.
    """

    def __init__(self, answer: bytes, *, hold: bool = False) -> None:
        self.answer = answer
        self.hold = hold
        self.requests = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._stopping = asyncio.Event()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            fields = dict(line.lower().split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)
            length = int(fields.get(b"content-length", b"0"))
            await reader.readexactly(length)
            self.requests += 1
            writer.write(self.answer)
            await writer.drain()
            if self.hold:
                await self._stopping.wait()
        finally:
            writer.close()

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._stopping.set()
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
