"""The egress proxy at the transport: a real forward proxy on 127.0.0.1 (tests/support/http_proxy.py) that records
what passes through, a real receiver (http, and https through a CONNECT tunnel). No RabbitMQ: the flow through a
worker is tests/consumers/test_proxy_flow.py."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from tests.conftest import TEST_SECRET
from tests.support.http_proxy import HttpProxy
from tests.support.receiver import Receiver
from tests.support.tls import self_signed
from warren.topology.config import DeliverySettings, Endpoint
from warren.topology.secrets import SIGNING_SECRETS, deferring
from warren.transport.base import Delivery, Outcome, SendResult
from warren.transport.egress import GuardedConnector
from warren.transport.http import HttpTransport
from warren.transport.proxying import CheckedNames, ProxyRoutes

pytestmark = pytest.mark.timeout(30)

PUBLIC = "93.184.215.14"  # what the stand-in DNS answers for the public names of these tests


class StandInDns(AbstractResolver):
    """TEST DOUBLE for DNS: fixed answers per name (a name it does not know fails like an unknown name)."""

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[ResolveResult]:
        self.asked.append(host)
        if host not in self.answers:
            raise OSError(f"Name or service not known: {host}")
        return [
            {"hostname": host, "host": a, "port": port, "family": socket.AF_INET, "proto": 0, "flags": 0}
            for a in self.answers[host]
        ]

    async def close(self) -> None:
        pass


def endpoint(url: str, **fields: Any) -> Endpoint:
    return Endpoint(name="e", url=url, secret=TEST_SECRET, events=["#"], **fields)


async def send(transport: HttpTransport, e: Endpoint) -> SendResult:
    return await transport.send(e, Delivery("evt_1", "a.b", b'{"n":1}', 0, 0, None, ()))


@pytest.fixture
async def proxy() -> AsyncIterator[HttpProxy]:
    async with HttpProxy(credentials="warren:pr0xy-pass") as p:
        yield p


async def test_an_http_endpoint_is_posted_through_the_proxy_with_its_credentials(proxy: HttpProxy) -> None:
    # Given a worker's transport whose [delivery] proxy carries credentials
    async with Receiver() as receiver:
        session, transport = HttpTransport.for_settings(DeliverySettings(allow_private_networks=True, proxy=proxy.url))
        try:
            result = await send(transport, endpoint(receiver.url, headers={"X-Team": "billing"}))
        finally:
            await session.close()
    # Then the POST went through the proxy (absolute form, authenticated) and arrived whole, headers included
    assert result.outcome is Outcome.DELIVERED, result
    assert [(p.method, p.target, p.status) for p in proxy.passed] == [("POST", receiver.url, 200)]
    assert proxy.passed[0].authorization == "Basic d2FycmVuOnByMHh5LXBhc3M="
    (received,) = receiver.received
    assert received.headers["X-Team"] == "billing" and "webhook-signature" in received.headers
    assert "proxy-authorization" not in received.headers


async def test_an_https_endpoint_is_tunnelled_with_connect_and_the_guard_holds_with_the_proxy_allowed() -> None:
    # Given the private-address guard on, a proxy on 127.0.0.1 (allowed because it is the configured proxy), and
    # an https endpoint whose name resolves to a public address (the proxy reaches it on 127.0.0.1)
    tls = self_signed("hooks.example.com")
    async with Receiver(ssl_context=tls.server) as receiver, HttpProxy() as proxy:
        proxy.hosts["hooks.example.com"] = ("127.0.0.1", receiver.port)
        delivery = DeliverySettings(proxy=proxy.url)
        routes = ProxyRoutes(delivery)
        dns = StandInDns({"hooks.example.com": [PUBLIC]})
        session = aiohttp.ClientSession(connector=GuardedConnector(allowed=routes.addresses, ssl=tls.client))
        transport = HttpTransport(session, allow_private_networks=False, body_limit=100, proxies=routes, resolver=dns)
        try:
            result = await send(transport, endpoint("https://hooks.example.com/hook"))
            again = await send(transport, endpoint("https://hooks.example.com/hook"))  # checked lately: not resolved
            # And a direct endpoint pointed at the proxy's own address is refused: it is allowed only as the proxy
            direct = await send(transport, endpoint(f"http://localhost:{proxy.port}/", proxy="direct"))
        finally:
            await session.close()
    # Then it went through a CONNECT tunnel, and the receiver got it over TLS
    assert result.outcome is Outcome.DELIVERED and again.outcome is Outcome.DELIVERED, (result, again)
    assert [(p.method, p.target, p.status) for p in proxy.passed] == [("CONNECT", "hooks.example.com:443", 200)]
    assert len(receiver.received) == 2 and dns.asked == ["hooks.example.com"]
    assert direct.refused and direct.outcome is Outcome.DEAD, direct


@pytest.mark.parametrize(
    ("url", "answers", "why"),
    [
        ("http://127.0.0.1:9/hook", {}, "127.0.0.1 is a loopback address"),
        ("http://[::1]:9/hook", {}, "loopback"),
        ("https://intranet.example.com/", {"intranet.example.com": ["10.1.2.3"]}, "10.1.2.3 is a private address"),
        # one forbidden answer among public ones is enough: which one the proxy picks is not Warren's choice
        ("https://mixed.example.com/", {"mixed.example.com": [PUBLIC, "169.254.169.254"]}, "169.254.169.254"),
    ],
)
async def test_a_private_target_is_refused_even_through_the_proxy(
    proxy: HttpProxy, url: str, answers: dict[str, list[str]], why: str
) -> None:
    delivery = DeliverySettings(proxy=proxy.url)
    routes = ProxyRoutes(delivery)
    session = aiohttp.ClientSession(connector=GuardedConnector(allowed=routes.addresses))
    dns = StandInDns(answers)
    transport = HttpTransport(session, allow_private_networks=False, body_limit=100, proxies=routes, resolver=dns)
    try:
        results = [await send(transport, endpoint(url)) for _ in range(2)]
    finally:
        await session.close()
    # Then it is refused before the proxy hears of it, dead-lettered with the reason (retrying cannot help), and a
    # refused name is asked again each time (only an allowed one is remembered)
    for result in results:
        assert result.refused and result.outcome is Outcome.DEAD and why in (result.error or ""), result
    assert proxy.passed == [] and dns.asked == [host for host in answers for _ in range(2)]


async def test_a_proxy_that_is_down_or_refuses_is_a_failed_attempt_retried(proxy: HttpProxy) -> None:
    async with Receiver() as receiver:
        closed = HttpProxy()
        await closed.start()
        await closed.stop()  # a port nothing listens on any more
        wrong = proxy.url.replace("pr0xy-pass", "wrong")
        for proxy_url, expected in [(closed.url, "proxy connection failed"), (wrong, "407")]:
            delivery = DeliverySettings(allow_private_networks=True, proxy=proxy_url)
            session, transport = HttpTransport.for_settings(delivery)
            try:
                for url in (receiver.url, receiver.url.replace("http://", "https://")):  # forwarded, then CONNECT
                    result = await send(transport, endpoint(url))
                    assert result.outcome is Outcome.RETRY and not result.refused, result
                    assert expected in (result.error or ""), result
                    assert "wrong" not in (result.error or "") and "pr0xy" not in (result.error or "")
            finally:
                await session.close()
        assert receiver.received == []


async def test_an_endpoint_picks_a_named_proxy_or_none(proxy: HttpProxy) -> None:
    async with Receiver() as receiver, HttpProxy() as default:
        delivery = DeliverySettings(allow_private_networks=True, proxy=default.url, proxies={"eu": proxy.url})
        session, transport = HttpTransport.for_settings(delivery)
        try:
            results = [
                await send(transport, endpoint(receiver.url, **fields))
                for fields in ({}, {"proxy": "eu"}, {"proxy": "direct"})
            ]
            # A live endpoint naming a proxy this process does not configure: retried until its file has it
            unknown = await send(transport, endpoint(receiver.url).model_copy(update={"proxy": "us"}))
        finally:
            await session.close()
    assert all(r.outcome is Outcome.DELIVERED for r in results), results
    assert len(default.passed) == 1 and len(proxy.passed) == 1 and len(receiver.received) == 3
    assert unknown.outcome is Outcome.RETRY and "names proxy 'us'" in (unknown.error or ""), unknown


async def test_a_target_name_that_cannot_be_resolved_for_the_guard_is_retried(proxy: HttpProxy) -> None:
    routes = ProxyRoutes(DeliverySettings(proxy=proxy.url))
    session = aiohttp.ClientSession(connector=GuardedConnector(allowed=routes.addresses))
    transport = HttpTransport(
        session, allow_private_networks=False, body_limit=0, proxies=routes, resolver=StandInDns({})
    )
    try:
        result = await send(transport, endpoint("https://nowhere.example.com/"))
    finally:
        await session.close()
    assert result.outcome is Outcome.RETRY and "cannot resolve nowhere.example.com" in (result.error or ""), result
    assert proxy.passed == []


async def test_a_proxy_or_header_whose_env_variable_is_not_set_here_is_a_failed_attempt(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a process that loaded [delivery] proxy = "env:..." without the variable (warren api: its test sends)
    monkeypatch.delenv("WARREN_TEST_NO_SUCH_PROXY", raising=False)
    with deferring([SIGNING_SECRETS]):
        delivery = DeliverySettings(allow_private_networks=True, proxy="env:WARREN_TEST_NO_SUCH_PROXY")
    session, transport = HttpTransport.for_settings(delivery)
    try:
        result = await send(transport, endpoint("http://127.0.0.1:9/hook"))
    finally:
        await session.close()
    # Then it says so as a failed attempt (retried), and sends nothing straight to the endpoint instead
    assert result.outcome is Outcome.RETRY and "WARREN_TEST_NO_SUCH_PROXY" in (result.error or ""), result
    # And so for a secret header's env:NAME
    with deferring([SIGNING_SECRETS]):
        unset = {"Authorization": {"value": "env:WARREN_TEST_NO_SUCH_PROXY", "secret": True}}
        with_header = endpoint("http://127.0.0.1:9/hook", headers=unset)
    session, transport = HttpTransport.for_settings(DeliverySettings(allow_private_networks=True))
    try:
        result = await send(transport, with_header)
    finally:
        await session.close()
    assert result.outcome is Outcome.RETRY and "WARREN_TEST_NO_SUCH_PROXY" in (result.error or ""), result


def test_names_checked_lately_are_remembered_for_the_ttl_only_and_in_bounds() -> None:
    now = [100.0]
    checked = CheckedNames(ttl=60.0, limit=2, clock=lambda: now[0])
    checked.allowed("a.example.com")
    assert checked.fresh("a.example.com") and not checked.fresh("b.example.com")
    now[0] += 60.0
    assert not checked.fresh("a.example.com")  # resolved and checked again after the ttl
    checked.allowed("a.example.com")
    checked.allowed("b.example.com")
    checked.allowed("c.example.com")  # the limit reached: forgotten at once, never grown past it
    assert [checked.fresh(h) for h in ("a.example.com", "b.example.com", "c.example.com")] == [False, False, True]
