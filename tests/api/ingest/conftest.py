"""Fixtures for the ingest API: a declared topology, the API on 127.0.0.1, an HTTP client, a queue reader."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aio_pika
import aiohttp
import orjson
import pytest
from aio_pika.abc import AbstractIncomingMessage
from aiohttp import web

from tests.support.topology import declare
from warren.api.app import create_app
from warren.api.ingest.app import LINK
from warren.topology import names
from warren.topology.config import WarrenConfig

TOKEN = "test-token-0123456789abcdef"
OTHER_TOKEN = "second-token-abcdef0123456789"
ENDPOINT = "acme"  # subscribes to order.* (see api_config)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def error(self) -> str | None:
        return self.body.get("error") if isinstance(self.body, dict) else None


@dataclass
class ApiServer:
    """The API running in the test's event loop, and a client for it."""

    config: WarrenConfig
    app: web.Application
    url: str
    session: aiohttp.ClientSession
    runners: list[web.AppRunner] = field(default_factory=list)

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        token: str | None = TOKEN,
        headers: dict[str, str] | None = None,
        data: bytes | None = None,
    ) -> Reply:
        sent = {"Content-Type": "application/json"} if body is not None else {}
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        sent.update(headers or {})
        payload = orjson.dumps(body) if body is not None else data
        async with self.session.request(method, self.url + path, data=payload, headers=sent) as response:
            raw = await response.read()
            ctype = response.headers.get("Content-Type", "")
            parsed = orjson.loads(raw) if raw and ctype.startswith("application/json") else raw
            return Reply(response.status, dict(response.headers), parsed)

    async def post(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return await self.request("POST", path, body, **kwargs)


@pytest.fixture
def api_config(make_config: Callable[..., WarrenConfig]) -> Callable[..., WarrenConfig]:
    """A config with one endpoint subscribed to ``order.*`` and two API tokens; sections override."""

    def build(**sections: Any) -> WarrenConfig:
        api = {"tokens": [TOKEN, OTHER_TOKEN], "publish_timeout": "3s", "retry_after": 7, **sections.pop("api", {})}
        endpoints = sections.pop(
            "endpoints", [{"name": ENDPOINT, "url": "http://127.0.0.1:9/hook", "events": ["order.*"]}]
        )
        return make_config(endpoints, api=api, **sections)

    return build


@pytest.fixture
async def start_api() -> AsyncIterator[Callable[..., Awaitable[ApiServer]]]:
    """``await start_api(config, declared=True, connected=True)``: the API on a free port of 127.0.0.1 (with
    the admin API when the config has a store and admin tokens, applying through ``applier``)."""
    runners: list[web.AppRunner] = []
    sessions: list[aiohttp.ClientSession] = []

    async def start(
        config: WarrenConfig, *, declared: bool = True, connected: bool = True, applier: Any = None
    ) -> ApiServer:
        if declared:
            await declare(config)
        app = create_app(config, applier=applier)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)
        port = server.sockets[0].getsockname()[1]
        if connected:
            await asyncio.wait_for(app[LINK].connected.wait(), 10)
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=15))
        sessions.append(session)
        return ApiServer(config, app, f"http://127.0.0.1:{port}", session)

    yield start
    for session in sessions:
        await session.close()
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def api(api_config: Callable[..., WarrenConfig], start_api: Callable[..., Awaitable[ApiServer]]) -> ApiServer:
    """The API with api_config's defaults (a module may override this fixture with its own settings)."""
    return await start_api(api_config())


@pytest.fixture
async def queue_reader(amqp_url: str) -> AsyncIterator[Callable[..., Awaitable[list[AbstractIncomingMessage]]]]:
    """``await read(queue_name, count)``: take ``count`` messages off a queue (acked), failing after 5 s."""
    connection = await aio_pika.connect(amqp_url)
    channel = await connection.channel()

    async def read(queue_name: str, count: int, timeout: float = 5.0) -> list[AbstractIncomingMessage]:
        queue = await channel.get_queue(queue_name, ensure=False)
        got: list[AbstractIncomingMessage] = []
        deadline = asyncio.get_running_loop().time() + timeout
        while len(got) < count:
            message = await queue.get(fail=False, no_ack=True)
            if message is not None:
                got.append(message)
            elif asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"{queue_name}: {len(got)} of {count} messages after {timeout}s")
            else:
                await asyncio.sleep(0.02)
        return got

    yield read
    await connection.close()


def work_queue(config: WarrenConfig, endpoint: str = ENDPOINT) -> str:
    return names.work_queue(config.broker.prefix, endpoint)
