"""The outgoing side's safety: private addresses refused (on the address actually connected to), no
redirects followed, bounded response bodies, and payload limits. Real worker, real receiver on 127.0.0.1."""

from __future__ import annotations

import logging
import time

import pytest
from aiohttp import web

from tests.consumers.test_delivery import dlq_messages
from tests.support.receiver import Receiver, always
from tests.support.topology import declare
from warren.broker import wire
from warren.broker.events import Event
from warren.consumers.egress import forbidden_reason
from warren.consumers.http_transport import HttpTransport, new_session
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::ffff:127.0.0.1]"])
async def test_a_private_address_is_refused_logged_and_dead_lettered(
    make_config, receiver: Receiver, publish, caplog: pytest.LogCaptureFixture, host: str
) -> None:
    # Given an endpoint whose URL resolves to 127.0.0.1 (a name, or a literal) and private networks not allowed
    url = f"http://{host}:{receiver.port}/hook"
    config = make_config([{"name": "inside", "url": url, "events": ["#"]}], delivery={"allow_private_networks": False})
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
    # Given a server answering 1 MiB
    async def big(request: web.Request) -> web.Response:
        return web.Response(status=500, body=b"x" * (1024 * 1024))

    app = web.Application()
    app.router.add_post("/", big)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    session = new_session(True, "test")
    try:
        sender = HttpTransport(session, allow_private_networks=True, body_limit=100)
        started = time.monotonic()
        result = await sender.post(f"http://127.0.0.1:{port}/", b"{}", {}, timeout=5, connect_timeout=1)
    finally:
        await session.close()
        await runner.cleanup()
    # Then only the first 100 bytes are kept for the attempt log
    assert result.status == 500 and result.excerpt == "x" * 100
    assert time.monotonic() - started < 5


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
    from warren.broker.connection import connect
    from warren.broker.publisher import Publisher
    from warren.topology.errors import EventError

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
