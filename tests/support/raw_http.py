"""Raw HTTP over a socket, for what a well-behaved client library refuses to send (bytes that are not UTF-8)."""

from __future__ import annotations

import asyncio

__all__ = ["raw_exchange", "status_of"]


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
