"""503 with Retry-After whenever RabbitMQ did not store the event: unreachable from the start, or lost."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.api.ingest.conftest import ApiServer
from tests.support.tcp_proxy import TcpProxy
from warren.api.ingest.app import LINK
from warren.core.errors import BrokerUnavailable
from warren.topology.config import WarrenConfig

Start = Callable[..., Awaitable[ApiServer]]
EVENT = {"type": "order.created", "data": {"n": 1}}


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_unreachable_broker_gives_503_with_retry_after(
    api_config: Callable[..., WarrenConfig], start_api: Start
) -> None:
    # Given an API whose broker URL points at a closed port
    config = api_config(broker={"url": f"amqp://guest:guest@127.0.0.1:{closed_port()}/"})
    api = await start_api(config, declared=False, connected=False)
    # When a producer posts one event, and a batch
    single = await api.post("/v1/events", EVENT)
    batch = await api.post("/v1/events/batch", {"events": [EVENT, EVENT]})
    # Then both are 503 with Retry-After from the configuration, never 202
    for reply in (single, batch):
        assert reply.status == 503, reply.body
        assert reply.error == "broker_unavailable"
        assert reply.headers["Retry-After"] == "7"
    # And the process is alive but not ready
    assert (await api.request("GET", "/healthz", token=None)).status == 200
    ready = await api.request("GET", "/readyz", token=None)
    assert ready.status == 503 and "not connected" in ready.body["reason"]


async def test_readyz_names_no_broker_detail_but_the_log_does(
    api_config: Callable[..., WarrenConfig], start_api: Start, caplog: pytest.LogCaptureFixture
) -> None:
    # Given an API whose broker (user, host, port, vhost in its URL) cannot be reached
    port = closed_port()
    config = api_config(broker={"url": f"amqp://someuser:somepass@127.0.0.1:{port}/secret-vhost"})
    api = await start_api(config, declared=False, connected=False)
    caplog.set_level(logging.INFO, logger="warren.api")
    # When the unauthenticated readiness probe is asked
    ready = await api.request("GET", "/readyz", token=None)
    # Then it says only that RabbitMQ is not connected: no user, host, port or vhost
    assert ready.status == 503 and ready.body == {"status": "not ready", "reason": "not connected to RabbitMQ"}
    # And the details are in the log, for the operator
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert f"127.0.0.1:{port}" in logged and "secret-vhost" in logged and "somepass" not in logged


async def test_lost_connection_gives_503_then_recovers(
    api_config: Callable[..., WarrenConfig], start_api: Start, amqp_url: str
) -> None:
    # Given an API connected to RabbitMQ through a proxy, reconnecting quickly
    parts = urlsplit(amqp_url)
    async with TcpProxy(parts.port or 5672) as proxy:
        url = urlunsplit(parts._replace(netloc=f"guest:guest@127.0.0.1:{proxy.port}", query="reconnect_interval=0.2"))
        api = await start_api(api_config(broker={"url": url}))
        assert (await api.post("/v1/events", EVENT)).status == 202
        # When the connection is lost and RabbitMQ stays unreachable
        await proxy.cut()
        link = api.app[LINK]

        def link_down() -> bool:
            try:
                link.publisher()
            except BrokerUnavailable:
                return True
            return False

        await _until(link_down, 5.0)
        # Then every post is a 503 with Retry-After, single or batch
        single = await api.post("/v1/events", EVENT)
        batch = await api.post("/v1/events/batch", {"events": [EVENT]})
        assert (single.status, batch.status) == (503, 503)
        assert single.headers["Retry-After"] == batch.headers["Retry-After"] == "7"
        assert (await api.request("GET", "/readyz", token=None)).status == 503
        # And once RabbitMQ is reachable again, aio-pika reconnects and posts are stored again
        await proxy.restore()
        statuses: list[int] = []

        async def stored() -> bool:
            statuses.append((await api.post("/v1/events", EVENT)).status)
            return statuses[-1] == 202

        await _until_async(stored, 10.0)
        assert set(statuses) <= {202, 503}
        assert (await api.request("GET", "/readyz", token=None)).status == 200


async def _until(condition: Callable[[], bool], timeout: float) -> None:
    async def check() -> bool:
        return condition()

    await _until_async(check, timeout)


async def _until_async(condition: Callable[[], Awaitable[bool]], timeout: float) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met in {timeout}s")
        await asyncio.sleep(0.05)


async def test_publish_timeout_gives_503(
    api_config: Callable[..., WarrenConfig], start_api: Start, amqp_url: str
) -> None:
    # Given an API connected through a proxy, and a broker that then stops answering (the proxy holds every
    # byte: the publish goes out, its confirm never comes back), publish_timeout 200 ms
    parts = urlsplit(amqp_url)
    async with TcpProxy(parts.port or 5672) as proxy:
        url = urlunsplit(parts._replace(netloc=f"guest:guest@127.0.0.1:{proxy.port}"))
        api = await start_api(api_config(broker={"url": url}, api={"publish_timeout": "200ms"}))
        proxy.stall()
        try:
            # When a producer posts an event
            started = asyncio.get_running_loop().time()
            reply = await api.post("/v1/events", EVENT)
            elapsed = asyncio.get_running_loop().time() - started
            # Then the answer is 503 after about the timeout (not the broker's own timeouts), telling to retry
            assert reply.status == 503 and "within 0.2s" in reply.body["message"]
            assert 0.19 <= elapsed < 0.2 + 2.0, elapsed  # far below the broker's own timeouts
            batch = await api.post("/v1/events/batch", {"events": [EVENT]})
            assert batch.status == 503 and batch.body["failed"][0]["error"] == "broker_unavailable"
        finally:
            proxy.resume()
