"""A real aiohttp webhook receiver on 127.0.0.1 that records every request and answers as it is told."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web
from multidict import CIMultiDict


@dataclass
class Received:
    at: float  # time.monotonic() when the request arrived
    headers: CIMultiDict[str]  # case-insensitive, as HTTP headers are
    body: bytes
    status: int  # what the receiver answered
    path: str = ""  # the request's path: endpoints of one test differ by it

    @property
    def json(self) -> Any:
        return orjson.loads(self.body)

    @property
    def event_id(self) -> str:
        return self.headers.get("webhook-id", "")


@dataclass
class Reply:
    status: int = 200
    delay: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"


Behaviour = Callable[["Receiver", web.Request, bytes], Reply | Awaitable[Reply]]


def always(status: int = 200, delay: float = 0.0, headers: dict[str, str] | None = None) -> Behaviour:
    def reply(_: Receiver, __: web.Request, ___: bytes) -> Reply:
        return Reply(status, delay, headers or {})

    return reply


class Receiver:
    """``async with Receiver() as r: r.url`` — records into ``r.received``; ``r.behaviour`` picks the reply."""

    def __init__(self, behaviour: Behaviour | None = None, *, ssl_context: Any = None) -> None:
        self.behaviour: Behaviour = behaviour or always(200)
        self.ssl_context = ssl_context  # serve https (tests/support/tls.py) instead of http
        self.received: list[Received] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Event()
        self.port = 0

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}/hook"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        arrived = time.monotonic()
        try:
            reply = self.behaviour(self, request, body)
            if asyncio.iscoroutine(reply):
                reply = await reply
            assert isinstance(reply, Reply)
            if reply.delay:
                await asyncio.sleep(reply.delay)
        finally:
            self.in_flight -= 1
        self.received.append(Received(arrived, CIMultiDict(request.headers), body, reply.status, request.path))
        self._changed.set()
        return web.Response(status=reply.status, body=reply.body, headers=reply.headers)

    async def start(self, port: int = 0) -> Receiver:
        app = web.Application()
        app.router.add_route("POST", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, ssl_context=self.ssl_context)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Receiver:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def ok_ids(self, path: str | None = None) -> set[str]:
        """Ids answered 2xx, at every path or at the one given."""
        return {r.event_id for r in self.received if 200 <= r.status < 300 and (path is None or r.path == path)}

    async def wait_for(self, predicate: Callable[[Receiver], bool], timeout: float) -> None:
        """Wait until ``predicate(self)`` holds; fail the test with what was received if it never does."""
        deadline = time.monotonic() + timeout
        while not predicate(self):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"receiver condition not met in {timeout}s; {len(self.received)} requests, "
                    f"{len(self.ok_ids())} distinct ids answered 2xx"
                )
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.2))
            except TimeoutError:
                pass
