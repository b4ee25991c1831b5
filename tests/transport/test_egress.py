"""The outgoing side's safety: private addresses refused (on the address actually connected to), no
redirects followed, bounded response bodies, and payload limits. Real worker, real receiver on 127.0.0.1."""

# ruff: noqa: RUF001  (the lookalike digits and full stops are the point of these tests)

from __future__ import annotations

import asyncio
import logging
import socket
import time

import aiohttp
import pytest
from aiohttp import web
from aiohttp.resolver import DefaultResolver

from tests.consumers.test_delivery import dlq_messages
from tests.support.receiver import Receiver, always
from tests.support.topology import declare
from warren.broker import wire
from warren.broker.events import Event
from warren.consumers.worker import Worker
from warren.topology.config import WarrenConfig
from warren.transport.egress import ForbiddenAddress, GuardedConnector, GuardedResolver, forbidden_reason
from warren.transport.http import HttpTransport, new_session

pytestmark = pytest.mark.timeout(30)


# Hosts that reach the receiver on 127.0.0.1: as written, folded by yarl's IDNA (fullwidth digits, ideographic
# and fullwidth full stops, circled digits), as an IPv4-mapped IPv6 literal, and as a name.
LOOPBACK_FORMS = [
    "127.0.0.1",
    "１２７.０.０.１",
    "127。0。0。1",
    "127．0．0．1",
    "127｡0｡0｡1",
    "①②⑦.⓪.⓪.①",
    "[::ffff:127.0.0.1]",
    "localhost",
]
# Legacy numeric forms the C library maps onto 127.0.0.1, and a trailing dot: refused, never connected.
NUMERIC_FORMS = ["2130706433", "0177.0.0.1", "0x7f.0.0.1", "0x7f000001", "127.1", "127.0.0.1."]


def _guarded(config: WarrenConfig, name: str, url: str) -> WarrenConfig:
    """``config`` with endpoint ``name`` pointed at ``url`` past config validation, which refuses these URLs
    already: the worker's own guard must hold on its own."""
    endpoints = tuple(e.model_copy(update={"url": url}) if e.name == name else e for e in config.endpoints)
    delivery = config.delivery.model_copy(update={"allow_private_networks": False})
    return config.model_copy(update={"endpoints": endpoints, "delivery": delivery})


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "１２７.０.０.１", "127。0。0。1", "①②⑦.⓪.⓪.①"])
async def test_a_private_address_is_refused_logged_and_dead_lettered(
    make_config, receiver: Receiver, publish, caplog: pytest.LogCaptureFixture, host: str
) -> None:
    # Given an endpoint whose URL reaches 127.0.0.1 (a name, a literal, or a form yarl folds into one) and
    # private networks not allowed
    url = f"http://{host}:{receiver.port}/hook"
    config = _guarded(make_config([{"name": "inside", "url": receiver.url, "events": ["#"]}]), "inside", url)
    await declare(config)
    caplog.set_level(logging.INFO)
    async with Worker(config):
        [event_id] = await publish(config, [Event(type="x.y", data={})])
        dead = await dlq_messages(None, config, "inside", 1)
    # Then nothing reached the receiver, the message is in the DLQ with the reason, and the log says why
    assert receiver.received == []
    assert dead[0].message_id == event_id
    reason = dead[0].headers[wire.H_DEAD_REASON]
    assert "refused" in reason and "loopback" in reason and "allow_private_networks" in reason
    assert any("loopback" in str(getattr(r, "error", "")) for r in caplog.records if r.name == "warren.delivery")


@pytest.mark.parametrize("host", LOOPBACK_FORMS + NUMERIC_FORMS)
async def test_no_form_of_a_loopback_host_gets_a_request_through(receiver: Receiver, host: str) -> None:
    # Given the worker's HTTP sender with private networks not allowed, and a receiver on 127.0.0.1
    session = new_session(False, "test")
    try:
        sender = HttpTransport(session, allow_private_networks=False, body_limit=10)
        # When it POSTs to the receiver under another spelling of its address
        result = await sender.post(f"http://{host}:{receiver.port}/x", b"{}", {}, timeout=2, connect_timeout=1)
    finally:
        await session.close()
    # Then it is refused as final (not retried), and the receiver got nothing
    assert result.refused and result.error is not None and result.error.startswith("refused"), result
    assert receiver.received == []


@pytest.mark.parametrize("host", ["127.0.0.1", "[::ffff:127.0.0.1]", "localhost"])
async def test_the_connector_refuses_literals_and_names_without_the_pre_check(receiver: Receiver, host: str) -> None:
    # Given a session on the guarded connector, used directly (no check of the URL before the request)
    async with aiohttp.ClientSession(connector=GuardedConnector()) as session:
        # When it connects to the receiver by an IP literal (which aiohttp never resolves) or a name
        with pytest.raises(ForbiddenAddress, match="loopback"):
            await session.post(f"http://{host}:{receiver.port}/x", data=b"{}")
    # Then no request reached the receiver
    assert receiver.received == []


async def test_a_name_resolving_to_loopback_is_refused_by_the_resolver() -> None:
    class Inner(DefaultResolver):
        async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET) -> list:  # type: ignore[type-arg]
            return [{"hostname": host, "host": "127.0.0.1", "port": port, "family": family, "proto": 0, "flags": 0}]

    # Given a name whose DNS answer is loopback (a rebinding attack, say); Then the resolver gives no address
    with pytest.raises(ForbiddenAddress, match=r"evil\.example resolves only to forbidden addresses"):
        await GuardedResolver(Inner()).resolve("evil.example", 80)


@pytest.mark.parametrize(
    ("address", "why"),
    [("2002:7f00:1::", "loopback"), ("64:ff9b::a00:1", "private"), ("100.64.0.1", "non-global")],
)
def test_ipv4_hidden_in_ipv6_and_non_global_addresses_are_refused(address: str, why: str) -> None:
    reason = forbidden_reason(address)
    assert reason is not None and why in reason


async def test_redirects_are_not_followed(endpoint_config, receiver: Receiver, publish) -> None:
    # Given an endpoint that answers with a redirect to another path
    receiver.behaviour = always(302, headers={"Location": "/elsewhere"})
    config = await endpoint_config(
        [{"name": "moved", "circuit": {"enabled": False}}], retry={"base": "20ms", "cap": "50ms", "max_attempts": 2}
    )
    async with Worker(config):
        await publish(config, [Event(type="x.y", data={})])
        dead = await dlq_messages(None, config, "moved", 1)
    # Then each attempt was one request to the endpoint's own URL (never to /elsewhere), and a 3xx is a failure
    assert len(receiver.received) == 2
    assert dead[0].headers[wire.H_LAST_STATUS] == 302


async def test_the_response_body_is_read_up_to_the_limit() -> None:
    # Given a server answering a large body: 1 KiB at once, then the rest only after 3 s
    async def big(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(status=500)
        response.content_length = 1024 * 1024
        await response.prepare(request)
        await response.write(b"x" * 1024)
        await asyncio.sleep(3)
        await response.write(b"x" * (1024 * 1024 - 1024))
        return response

    app = web.Application()
    app.router.add_post("/", big)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    session = new_session(True, "test")
    try:
        sender = HttpTransport(session, allow_private_networks=True, body_limit=100)
        started = time.monotonic()
        result = await sender.post(f"http://127.0.0.1:{port}/", b"{}", {}, timeout=5, connect_timeout=1)
        took = time.monotonic() - started
    finally:
        await session.close()
        await runner.cleanup()
    # Then only the first 100 bytes are kept for the attempt log, read without waiting for the rest
    assert result.status == 500 and result.excerpt == "x" * 100
    assert took < 1.5, took


async def test_an_oversized_message_is_dead_lettered_at_delivery(endpoint_config, receiver: Receiver) -> None:
    import aio_pika

    from warren.topology import names

    # Given a message larger than delivery.max_payload put on the events exchange by someone else than Warren
    config = await endpoint_config([{"name": "small"}], delivery={"max_payload": 2048})
    body = b'{"id": "big-1", "type": "x.y", "timestamp": "2026-01-01T00:00:00Z", "data": "' + b"x" * 4096 + b'"}'
    connection = await aio_pika.connect(config.broker.url)
    channel = await connection.channel()
    exchange = await channel.get_exchange(names.events_exchange(config.broker.prefix))
    await exchange.publish(aio_pika.Message(body, message_id="big-1"), routing_key="x.y")
    await connection.close()
    async with Worker(config):
        dead = await dlq_messages(None, config, "small", 1)
    # Then it is never POSTed: it goes to the DLQ with the reason
    assert receiver.received == []
    assert "max_payload" in dead[0].headers[wire.H_DEAD_REASON]


async def test_publishing_over_max_payload_is_refused_with_a_clear_error(endpoint_config) -> None:
    from warren.broker.amqp.connection import connect
    from warren.broker.publisher import Publisher
    from warren.core.errors import EventError

    config = await endpoint_config([{"name": "small"}], delivery={"max_payload": 2048})
    connection = await connect(config.broker.url)
    try:
        publisher = await Publisher.open(connection, config.broker.prefix, max_payload=config.delivery.max_payload)
        with pytest.raises(EventError, match="over the limit of 2048"):
            await publisher.publish(Event(type="x.y", data="x" * 4096))
    finally:
        await connection.close()


async def test_invalid_url_forms_are_refused_not_retried() -> None:
    # "127.1" means 127.0.0.1 to some resolvers; yarl refuses it as a non-canonical address: no retry can help
    session = new_session(False, "test")
    try:
        sender = HttpTransport(session, allow_private_networks=False, body_limit=10)
        result = await sender.post("http://127.1:9/x", b"{}", {}, timeout=1, connect_timeout=1)
    finally:
        await session.close()
    assert result.refused and result.error is not None and result.error.startswith("refused")


async def _junk_server() -> tuple[asyncio.Server, int]:
    """A server answering garbage: aiohttp's error for it quotes the whole URL, query included."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.write(b"garbage\r\n\r\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def test_error_texts_hide_credentials_in_the_url() -> None:
    # Given URLs with credentials in the query (to a server whose reply aiohttp cannot parse) and in userinfo
    server, port = await _junk_server()
    session = new_session(True, "test")
    try:
        sender = HttpTransport(session, allow_private_networks=True, body_limit=10)
        bad_reply = await sender.post(
            f"http://127.0.0.1:{port}/x?token=s3cret", b"{}", {}, timeout=2, connect_timeout=1
        )
        bad_url = await sender.post("http://user:pa55@[::1/?token=s3cret", b"{}", {}, timeout=2, connect_timeout=1)
    finally:
        await session.close()
        server.close()
    # Then the error texts still show the URL, without the secrets
    assert bad_reply.error is not None and "token=***" in bad_reply.error and "s3cret" not in bad_reply.error
    assert bad_url.error is not None and "***@" in bad_url.error
    assert "pa55" not in bad_url.error and "s3cret" not in bad_url.error


async def test_dead_letter_headers_and_logs_hide_credentials_in_the_url(
    make_config, publish, caplog: pytest.LogCaptureFixture
) -> None:
    # Given an endpoint with a token in its URL's query, answering garbage, one attempt allowed
    server, port = await _junk_server()
    url = f"http://127.0.0.1:{port}/x?token=s3cret"
    config = make_config([{"name": "leaky", "url": url, "events": ["#"]}], retry={"max_attempts": 1})
    await declare(config)
    caplog.set_level(logging.INFO)
    try:
        async with Worker(config):
            await publish(config, [Event(type="x.y", data={})])
            [dead] = await dlq_messages(None, config, "leaky", 1)
    finally:
        server.close()
    # Then neither the dead letter's headers nor any log line carry the token
    assert "token=***" in dead.headers[wire.H_LAST_ERROR]
    assert "s3cret" not in repr(dead.headers)
    assert not [r for r in caplog.records if "s3cret" in r.getMessage() or "s3cret" in repr(r.__dict__)]
