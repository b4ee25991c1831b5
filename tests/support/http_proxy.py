"""A real HTTP forward proxy on 127.0.0.1 for the egress-proxy tests: CONNECT tunnels (https targets) and
absolute-form requests (http targets), recording what passed through.

``hosts`` maps a target host to the (host, port) the proxy really connects to, so that a test can name a public
host (``hooks.example.com``) that the proxy reaches on 127.0.0.1. ``credentials`` ("user:password") makes it ask
for ``Proxy-Authorization: Basic`` (407 otherwise).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from dataclasses import dataclass, field


@dataclass
class Passed:
    method: str  # CONNECT, POST...
    target: str  # host:port for CONNECT, the absolute URL otherwise
    authorization: str | None  # the Proxy-Authorization header, as received
    status: int  # what the proxy answered itself (200 for a tunnel, the upstream's status when forwarded)
    headers: dict[str, str] = field(default_factory=dict)  # the request's headers (forwarded requests only)


class HttpProxy:
    """``async with HttpProxy() as p: p.url``; ``p.passed`` lists every request, in order."""

    def __init__(
        self, *, hosts: dict[str, tuple[str, int]] | None = None, credentials: str | None = None, port: int = 0
    ) -> None:
        self.hosts = hosts or {}
        self.credentials = credentials
        self.port = port
        self.passed: list[Passed] = []
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        auth = f"{self.credentials}@" if self.credentials else ""
        return f"http://{auth}127.0.0.1:{self.port}"

    async def start(self) -> HttpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.close()
            for task in list(self._tasks):
                task.cancel()
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> HttpProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _upstream(self, host: str, port: int) -> tuple[str, int]:
        return self.hosts.get(host, (host, port))

    def _authorized(self, headers: dict[str, str]) -> bool:
        if self.credentials is None:
            return True
        expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
        return headers.get("proxy-authorization") == expected

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; False when the client connection is done with."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        authorization = headers.get("proxy-authorization")
        if not self._authorized(headers):
            self.passed.append(Passed(method, target, authorization, 407))
            writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return False
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            await self._tunnel(
                reader, writer, self._upstream(host, int(port)), Passed(method, target, authorization, 200)
            )
            return False
        await self._forward(reader, writer, method, target, headers, head, authorization)
        return False

    async def _tunnel(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, upstream: tuple[str, int], passed: Passed
    ) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*upstream)
        except OSError:
            passed.status = 502
            self.passed.append(passed)
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
            return
        self.passed.append(passed)
        writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        await writer.drain()
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    async def _forward(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        method: str,
        target: str,
        headers: dict[str, str],
        head: bytes,
        authorization: str | None,
    ) -> None:
        """An absolute-form request, sent on to its origin with ``Connection: close``; the answer comes back
        with ``Connection: close`` too (one request per client connection keeps this proxy small)."""
        from urllib.parse import urlsplit

        parts = urlsplit(target)
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        passed = Passed(method, target, authorization, 0, headers)
        self.passed.append(passed)
        path = parts.path + ("?" + parts.query if parts.query else "") or "/"
        kept = [
            line
            for line in head.decode("latin-1").split("\r\n")[1:]
            if line and line.partition(":")[0].strip().lower() not in ("proxy-authorization", "connection")
        ]
        request = (
            f"{method} {path} HTTP/1.1\r\n" + "".join(f"{line}\r\n" for line in kept) + "Connection: close\r\n\r\n"
        )
        try:
            up_reader, up_writer = await asyncio.open_connection(
                *self._upstream(parts.hostname or "", parts.port or 80)
            )
        except OSError:
            passed.status = 502
            writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            await writer.drain()
            return
        up_writer.write(request.encode("latin-1") + body)
        await up_writer.drain()
        answer = await up_reader.read()
        up_writer.close()
        status_line, _, rest = answer.partition(b"\r\n")
        with contextlib.suppress(ValueError, IndexError):
            passed.status = int(status_line.split(b" ")[1])
        answer_head, _, answer_body = rest.partition(b"\r\n\r\n")
        kept_answer = [
            line for line in answer_head.split(b"\r\n") if line.partition(b":")[0].strip().lower() != b"connection"
        ]
        writer.write(status_line + b"\r\n" + b"".join(line + b"\r\n" for line in kept_answer))
        writer.write(b"Connection: close\r\n\r\n" + answer_body)
        await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
