"""The egress proxy end to end: real RabbitMQ, a worker, a real forward proxy on 127.0.0.1 that records what passed
through it (tests/support/http_proxy.py), real receivers (http, and https through CONNECT)."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
import pytest

from tests.consumers.test_delivery import dlq_messages
from tests.support.http_proxy import HttpProxy
from tests.support.receiver import Receiver
from tests.support.tls import self_signed
from tests.transport.test_proxy import PUBLIC, StandInDns
from warren.broker import wire
from warren.broker.events import Event
from warren.consumers.hooks import AttemptRecord, DeliveryHooks
from warren.consumers.worker import Worker
from warren.transport.egress import GuardedConnector
from warren.transport.http import HttpTransport
from warren.transport.proxying import ProxyRoutes

pytestmark = pytest.mark.timeout(60)


async def test_deliveries_go_through_the_proxy_with_the_endpoints_headers(
    endpoint_config: Any, receiver: Receiver, publish: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # Given a global proxy with credentials, and an endpoint that opts out of it with proxy = "direct"
    async with HttpProxy(credentials="warren:pr0xy-pass") as proxy:
        config = await endpoint_config(
            [
                {
                    "name": "via",
                    "headers": {"X-Team": "billing", "Authorization": {"value": "Bearer t0k", "secret": True}},
                },
                {"name": "straight", "proxy": "direct"},
            ],
            delivery={"proxy": proxy.url},
        )
        events = [Event(type="order.paid", data={"n": i}) for i in range(20)]
        # When events are published and the worker (its own transport, from [delivery]) delivers them
        async with Worker(config):
            await publish(config, events)
            await receiver.wait_for(lambda r: len(r.ok_ids()) == 20 and len(r.received) >= 40, 20)
    ids = {e.id for e in events}
    # Then every delivery of "via" went through the proxy, authenticated, with its headers; "straight" did not
    via = [r for r in receiver.received if r.path == "/hook/via"]
    assert {r.event_id for r in via} == ids == receiver.ok_ids("/hook/straight")
    assert all(r.headers["X-Team"] == "billing" and r.headers["Authorization"] == "Bearer t0k" for r in via)
    assert sorted(p.target for p in proxy.passed) == sorted(f"{receiver.url}/via" for _ in via)
    assert all(p.authorization == "Basic d2FycmVuOnByMHh5LXBhc3M=" and p.status == 200 for p in proxy.passed)
    assert {p.headers["webhook-id"] for p in proxy.passed} == ids
    # And no log line of the worker holds the secret header's value or the proxy's password
    logged = "\n".join(r.getMessage() + repr(r.args) for r in caplog.records)
    assert "worker connected" in logged and "t0k" not in logged and "pr0xy-pass" not in logged


async def test_a_proxy_that_is_down_fails_attempts_which_are_retried_not_lost(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a proxy whose port nothing listens on yet
    proxy = HttpProxy()
    await proxy.start()
    port = proxy.port
    await proxy.stop()
    config = await endpoint_config(
        [{"name": "later"}], delivery={"proxy": f"http://127.0.0.1:{port}"}, retry={"max_attempts": 50, "cap": "300ms"}
    )
    attempts: list[AttemptRecord] = []
    events = [Event(type="a.b", data={"n": i}) for i in range(3)]
    async with Worker(config, hooks=DeliveryHooks(observers=[attempts.append])):
        await publish(config, events)
        # When every event has failed at least twice
        deadline = time.monotonic() + 15
        while sum(a.outcome == "retry" for a in attempts) < 6:
            assert time.monotonic() < deadline, attempts
            await asyncio.sleep(0.05)
        assert receiver.received == []
        assert all("proxy connection failed" in (a.error or "") for a in attempts)
        # and then the proxy comes up
        proxy = HttpProxy(port=port)
        async with proxy:
            await receiver.wait_for(lambda r: len(r.ok_ids()) == 3, 15)
    # Then each event was delivered through it: retried within its budget, not dead-lettered
    assert receiver.ok_ids() == {e.id for e in events}
    assert {p.headers["webhook-id"] for p in proxy.passed} == {e.id for e in events}
    assert await dlq_messages(None, config, "later", 0, timeout=0.2) == []


async def test_the_guard_holds_through_the_proxy(endpoint_config: Any, publish: Any) -> None:
    # Given the private-address guard on, a proxy on 127.0.0.1 (allowed as the configured proxy), an https endpoint
    # whose name resolves to a public address (reached by the proxy on 127.0.0.1), and one whose name resolves to
    # loopback
    tls = self_signed("hooks.example.com")
    async with Receiver(ssl_context=tls.server) as receiver, HttpProxy() as proxy:
        proxy.hosts["hooks.example.com"] = ("127.0.0.1", receiver.port)
        config = await endpoint_config(
            [
                {"name": "public", "url": "https://hooks.example.com/hook", "headers": {"X-Env": "prod"}},
                {"name": "inside", "url": f"http://intranet.example.com:{receiver.port}/hook"},
            ],
            delivery={"allow_private_networks": False, "proxy": proxy.url},
        )
        routes = ProxyRoutes(config.delivery)
        dns = StandInDns({"hooks.example.com": [PUBLIC], "intranet.example.com": ["127.0.0.1"]})
        proxy.hosts["intranet.example.com"] = ("127.0.0.1", receiver.port)  # reachable, were it let through
        session = aiohttp.ClientSession(connector=GuardedConnector(allowed=routes.addresses, ssl=tls.client))
        transport = HttpTransport(session, allow_private_networks=False, body_limit=100, proxies=routes, resolver=dns)
        event = Event(type="a.b", data={})
        try:
            async with Worker(config, transport=transport):
                await publish(config, [event])
                await receiver.wait_for(lambda r: len(r.ok_ids()) == 1, 15)
                dead = await dlq_messages(None, config, "inside", 1)
        finally:
            await session.close()
    # Then the public endpoint got it through a CONNECT tunnel, with its header
    assert [(p.method, p.target) for p in proxy.passed] == [("CONNECT", "hooks.example.com:443")]
    assert receiver.received[0].headers["X-Env"] == "prod"
    # And the private one was refused before the proxy heard of it: dead-lettered with the reason
    assert dead[0].message_id == event.id
    reason = dead[0].headers[wire.H_DEAD_REASON]
    assert "refused" in reason and "loopback" in reason, reason
