"""Slow clients against every HTTP server Warren runs: header and body read timeouts, and a connection cap.

Each server runs for real on 127.0.0.1 with short limits (0.5 s); the clients are raw sockets that trickle.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.support.raw_http import status_of
from warren.api.server import serve
from warren.consumers.metrics import WorkerMetrics
from warren.consumers.metrics_server import MetricsServer
from warren.receiving.running import serve_receiver
from warren.serving.guard import ServerLimits
from warren.serving.server import serve_app
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(45)

TOKEN = "slow-client-token-0123456789"
HEADER_TIMEOUT = 0.5
LIMITS = {"header_timeout": "500ms", "body_timeout": "500ms", "max_connections": 40}

Started = Callable[[WarrenConfig], Awaitable[int]]


@pytest.fixture
async def running() -> AsyncIterator[Callable[[str, WarrenConfig], Awaitable[int]]]:
    """``await running(kind, config)``: the server of that kind on a free port of 127.0.0.1; its port."""
    stops: list[asyncio.Event] = []
    tasks: list[asyncio.Task[None]] = []
    metrics: list[MetricsServer] = []

    async def start(kind: str, config: WarrenConfig) -> int:
        if kind == "metrics":
            worker = config.worker
            limits = ServerLimits(worker.metrics_header_timeout, max_connections=worker.metrics_max_connections)
            server = MetricsServer(WorkerMetrics(), lambda: True, "127.0.0.1", 0, limits=limits)
            await server.start()
            metrics.append(server)
            return server.port
        bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        stops.append(stop)
        run = serve if kind == "api" else serve_receiver
        task = asyncio.create_task(
            run(config, host="127.0.0.1", port=0, stop=stop, grace=1, on_listening=lambda _, p: bound.set_result(p))
        )
        tasks.append(task)
        return await asyncio.wait_for(bound, 10)

    yield start
    for stop in stops:
        stop.set()
    for task in tasks:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)
    for server in metrics:
        await server.close()


def _config(make_config: Callable[..., WarrenConfig], kind: str, **limits: Any) -> WarrenConfig:
    chosen = {**LIMITS, **limits}
    if kind == "metrics":
        return make_config(worker={f"metrics_{k}": v for k, v in chosen.items() if k != "body_timeout"})
    if kind == "api":
        return make_config(api={"tokens": [TOKEN], **chosen})
    return make_config(receiver=chosen)


async def _trickle(port: int, lines: int = 50, every: float = 0.1) -> float:
    """Send a request head one line every ``every`` seconds; the seconds until the server closed on us."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    try:
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        for n in range(lines):
            await writer.drain()
            with contextlib.suppress(TimeoutError):
                if await asyncio.wait_for(reader.read(1024), every) == b"":
                    break
            writer.write(b"X-Slow-%d: 1\r\n" % n)
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()
    return time.monotonic() - started


async def _healthz(port: int) -> int:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/healthz") as response:
        return response.status


@pytest.mark.parametrize("kind", ["api", "receive", "metrics"])
async def test_trickling_headers_are_cut_off_and_the_server_keeps_answering(
    running: Callable[[str, WarrenConfig], Awaitable[int]], make_config: Callable[..., WarrenConfig], kind: str
) -> None:
    # Given the server with a 0.5 s header timeout
    port = await running(kind, _config(make_config, kind))
    # When 20 clients each trickle one header line every 0.1 s (a complete head would take 5 s)
    slow = [asyncio.create_task(_trickle(port)) for _ in range(20)]
    await asyncio.sleep(0.2)
    # Then a normal request is answered meanwhile
    assert await _healthz(port) == 200
    # And every trickling connection was closed by the server at the header timeout, not at its own pace
    held = await asyncio.gather(*slow)
    assert all(HEADER_TIMEOUT * 0.8 <= t < HEADER_TIMEOUT + 1.0 for t in held), held


@pytest.mark.parametrize("kind", ["api", "receive", "metrics"])
async def test_connections_past_the_cap_are_refused_and_the_rest_still_served(
    running: Callable[[str, WarrenConfig], Awaitable[int]], make_config: Callable[..., WarrenConfig], kind: str
) -> None:
    # Given the server allowing 5 connections (a long header timeout so idle ones stay), and 5 idle clients
    port = await running(kind, _config(make_config, kind, max_connections=5, header_timeout="20s"))
    idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(5)]
    await asyncio.sleep(0.1)
    # When a sixth connects
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    # Then it gets 503 and is closed at once
    assert status_of(answer) == 503, answer
    # And once the idle clients leave, requests are served again
    for _, idle_writer in idle:
        idle_writer.close()
    deadline = time.monotonic() + 5
    while True:
        with contextlib.suppress(aiohttp.ClientError):
            if await _healthz(port) == 200:
                break
        assert time.monotonic() < deadline, "not served again after the idle clients left"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize("kind", ["api", "receive"])
async def test_a_trickled_body_is_cut_off_at_the_body_timeout(
    running: Callable[[str, WarrenConfig], Awaitable[int]], make_config: Callable[..., WarrenConfig], kind: str
) -> None:
    # Given the server with a 0.5 s body timeout, and a request whose declared body never fully arrives
    config = _config(make_config, kind)
    if kind == "receive":
        source = {"name": "open", "verifier": "none", "id_field": "id", "handler": "m:f"}
        config = make_config(receiver=LIMITS, inbound=[source])
    port = await running(kind, config)
    path = b"/v1/events" if kind == "api" else b"/in/open"
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    writer.write(
        b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n"
        b"Authorization: Bearer " + TOKEN.encode() + b"\r\n\r\n{"
    )
    await writer.drain()
    # When it trickles nothing more; Then the server answers 408 after the body timeout and closes
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    assert status_of(answer) == 408, answer
    assert 0.4 <= time.monotonic() - started < 2.0


async def test_a_handler_slower_than_the_header_timeout_is_not_cut() -> None:
    # Given an app whose handler takes 1 s, served with a 0.3 s header timeout
    async def slow(_: web.Request) -> web.Response:
        await asyncio.sleep(1.0)
        return web.Response(text="done")

    app = web.Application()
    app.router.add_get("/slow", slow)
    stop = asyncio.Event()
    bound: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    limits = ServerLimits(header_timeout=0.3, body_timeout=0.3, max_connections=5)
    task = asyncio.create_task(
        serve_app(
            app,
            name="t",
            host="127.0.0.1",
            port=0,
            stop=stop,
            grace=1,
            log=logging.getLogger("t"),
            on_listening=lambda _, p: bound.set_result(p),
            limits=limits,
        )
    )
    try:
        port = await asyncio.wait_for(bound, 10)
        # When a client asks for it, Then the answer comes: the deadline covers the request head, not the handler
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/slow") as response:
            assert (response.status, await response.text()) == (200, "done")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
