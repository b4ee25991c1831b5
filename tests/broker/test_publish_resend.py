"""A publisher rides through a lost connection: what was not confirmed is sent again (same ids), keys kept in order.

RabbitMQ closes the publisher's connection (as a node going away does) while ``publish_many`` has events in
flight; the robust connection comes back and every event ends up stored, none reported as not stored, and each
key's events are stored first-time in publish order (a re-sent event's later key-mates wait behind it).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, cast
from urllib.parse import quote, urlsplit

import orjson
import pytest
from aiormq import spec

from tests.support.dead_letters import drain
from tests.support.tcp_proxy import TcpProxy, through
from warren.broker.amqp.confirm import LinkLost, Nacked, Outgoing
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.connection import connect
from warren.broker.amqp.deadlines import Deadlines
from warren.broker.applier import apply_setup
from warren.broker.events import Event
from warren.broker.management import ManagementClient
from warren.broker.publisher import Publisher
from warren.broker.publisher import resend_until_confirmed as resend_on
from warren.core.errors import PublishError
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(90)

EVENTS = 600
KEYS = 10


async def _connection_named(management: ManagementClient, vhost: str, name: str) -> str:
    """The management API's name of the connection that calls itself ``name`` (its listing lags a few seconds)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        rows: list[dict[str, Any]] = await management.request("GET", f"vhosts/{quote(vhost, safe='')}/connections")
        for row in rows:
            if (row.get("client_properties") or {}).get("connection_name") == name:
                return str(row["name"])
        await asyncio.sleep(0.2)
    raise AssertionError(f"the management API did not list connection {name} in 20 s")


async def test_publish_many_sends_again_what_a_closed_connection_left_unconfirmed(
    make_config: Callable[..., WarrenConfig], amqp_url: str, management: ManagementClient, vhost: str
) -> None:
    # Given a publisher on a robust connection, and a stream of 600 keyed events published at a steady pace
    config = make_config([{"name": "sink", "url": "http://127.0.0.1:9/s", "events": ["order.*"]}])
    await apply_setup(config)
    name = f"warren-resend-{uuid.uuid4().hex[:8]}"
    connection = await connect(amqp_url, name=name)
    try:
        listed = await _connection_named(management, vhost, name)
        publisher = await Publisher.open(connection, config.broker.prefix)
        results: dict[str, PublishError | None] = {}

        async def paced() -> AsyncIterator[Event]:
            for n in range(EVENTS):
                if n == EVENTS // 3:
                    # When RabbitMQ closes the connection with publishes in flight (a node going away)
                    await management.request("DELETE", f"connections/{quote(listed, safe='')}", allow_404=True)
                key = f"k{n % KEYS}"
                yield Event("order.paid", {"n": n, "key": key}, id=f"e-{n}", key=key)
                await asyncio.sleep(0.002)

        def record(event_id: str, error: PublishError | None) -> None:
            results[event_id] = error

        report = await publisher.publish_many(paced(), on_result=record, deadline=40)
        await publisher.close()
    finally:
        await connection.close()
    # Then nothing is reported as not stored, and every event is in the endpoint's queue
    assert report.failed == [], report.failed[:3]
    assert len(report.confirmed) == EVENTS
    messages = await drain(config, names.work_queue(config.broker.prefix, "sink"))
    first_seen: list[dict[str, Any]] = []
    ids: set[str] = set()
    for message in messages:
        if message.message_id not in ids:
            ids.add(str(message.message_id))
            first_seen.append(orjson.loads(message.body)["data"])
    assert ids == {f"e-{n}" for n in range(EVENTS)}
    # And each key's events were stored for the first time in publish order
    for k in range(KEYS):
        mine = [d["n"] for d in first_seen if d["key"] == f"k{k}"]
        assert mine == sorted(mine), f"key k{k} out of order"
    # Duplicates are only re-sends of events whose confirm was lost with the connection: at most a window's worth
    assert len(messages) - EVENTS <= 256


class _Sends:
    """A ConfirmChannel whose ``publish`` is ``send()``: the re-send loop alone, without a broker."""

    def __init__(self, send: Callable[[], Awaitable[None]]) -> None:
        self._send = send

    async def publish(self, *_: object, **__: object) -> None:
        await self._send()


async def resend_until_confirmed(
    send: Callable[[], Awaitable[None]], event_id: str, deadline: float, deadlines: Deadlines | None = None
) -> None:
    """The publisher's re-send loop with ``send()`` as each publish."""
    channel, message = cast(ConfirmChannel, _Sends(send)), Outgoing(b"{}", spec.Basic.Properties())
    await resend_on(channel, "events", message, "order.paid", event_id, deadline, deadlines)


@pytest.mark.timeout(10)
async def test_resend_stops_at_the_deadline_and_passes_other_failures_at_once() -> None:
    sends: list[float] = []

    async def nacked() -> None:
        sends.append(time.monotonic())
        raise Nacked("refused", "e1")

    # A nack is sent again with growing pauses until the deadline, then reported naming the deadline
    with pytest.raises(PublishError, match=r"sent again for 1 s"):
        await resend_until_confirmed(nacked, "e1", 1.0)
    assert 3 <= len(sends) <= 5  # 0, 0.25, 0.75 (then 1.0 is the deadline)
    assert sends[-1] - sends[0] == pytest.approx(1.0, abs=0.3)

    # A lost link that comes back: stored on the next send
    outcomes: list[BaseException | None] = [LinkLost("gone", "e2"), None]

    async def flaky() -> None:
        outcome = outcomes.pop(0)
        if outcome is not None:
            raise outcome

    await resend_until_confirmed(flaky, "e2", 5.0)
    assert outcomes == []

    # Anything else (an exchange that does not exist, say) is an answer: raised at once, never sent again
    calls = 0

    async def missing() -> None:
        nonlocal calls
        calls += 1
        raise PublishError("no exchange", "e3")

    with pytest.raises(PublishError, match="no exchange"):
        await resend_until_confirmed(missing, "e3", 5.0)
    assert calls == 1
    # deadline 0 sends once
    sends.clear()
    with pytest.raises(Nacked):
        await resend_until_confirmed(nacked, "e1", 0)
    assert len(sends) == 1


@pytest.mark.timeout(10)
async def test_a_send_that_never_answers_is_given_up_at_its_deadline_and_a_callers_cancel_passes_through() -> None:
    never = asyncio.Event()

    async def hangs() -> None:
        await never.wait()  # a confirm that never comes, on a link that stays up

    # Given two sends waiting on one publisher's deadlines, one with 30 s and one with 0.3 s
    shared = Deadlines()
    patient = asyncio.create_task(resend_until_confirmed(hangs, "e-long", 30, shared))
    # When the short one's deadline passes, it is given up, named so
    with pytest.raises(PublishError, match=r"e-short not confirmed in 0.3 s"):
        await resend_until_confirmed(hangs, "e-short", 0.3, shared)
    # Then the long one still waits, and its caller's own cancellation is a cancellation, not a PublishError
    assert not patient.done()
    patient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await patient


@pytest.fixture
async def sink(make_config: Callable[..., WarrenConfig]) -> WarrenConfig:
    """An endpoint that takes ``order.*``, set up: what the proxy tests publish to."""
    config = make_config([{"name": "sink", "url": "http://127.0.0.1:9/s", "events": ["order.*"]}])
    await apply_setup(config)
    return config


@pytest.mark.timeout(60)
async def test_a_publish_whose_confirm_never_comes_on_a_live_link_is_not_stored_at_its_deadline(
    sink: WarrenConfig, amqp_url: str
) -> None:
    # Given a publisher whose node holds every frame from now on but keeps the link open (a node RabbitMQ left
    # split after a pause: heartbeats flow there, confirms never come; a stalled proxy here, whose link lasts
    # until the heartbeat gives up on it, about 33 s)
    async with TcpProxy(urlsplit(amqp_url).port or 5672) as proxy:
        connection = await connect(through(amqp_url, proxy.port), name=f"warren-stalled-{uuid.uuid4().hex[:8]}")
        try:
            publisher = await Publisher.open(connection, sink.broker.prefix)
            proxy.stall()
            # When it publishes with a 1 s deadline
            with pytest.raises(PublishError, match=r"not confirmed in 1 s"):
                await publisher.publish(Event("order.paid", {"n": 1}, id="e-stalled"), deadline=1.0)
            # Then the event is reported as not stored while the link is still up: the deadline bounded the wait,
            # not the heartbeat (without the bound it waited until the heartbeat gave the link up, about 33 s)
            assert connection.connected.is_set(), "the publish waited until the link was lost"
        finally:
            proxy.resume()
            await connection.close()


@pytest.mark.timeout(120)
async def test_a_publish_on_a_node_that_stops_answering_is_sent_again_on_the_next_one(
    sink: WarrenConfig, amqp_url: str
) -> None:
    # Given a publisher on a robust connection over two nodes (proxies in front of the one broker)
    live = urlsplit(amqp_url).port or 5672
    async with TcpProxy(live) as first, TcpProxy(live) as second:
        urls = [f"{through(amqp_url, p.port)}?reconnect_interval=0.2" for p in (first, second)]
        connection = await connect(urls, name=f"warren-paused-{uuid.uuid4().hex[:8]}", timeout=5)
        try:
            publisher = await Publisher.open(connection, sink.broker.prefix)
            nodes = {first.port: first, second.port: second}
            on = connection.url.port
            # When its node stops answering with the publish in flight (paused past the heartbeat's grace: aiormq
            # gives the link up and cancels the confirms it still owed)
            nodes[on].stall()
            event_id = await publisher.publish(Event("order.paid", {"n": 2}, id="e-paused"), deadline=90)
            # Then the publish was sent again on the other node and confirmed there (the cancelled confirm was a
            # lost link, not a cancellation of the caller)
            assert event_id == "e-paused"
            assert connection.url.port != on
        finally:
            first.resume()
            second.resume()
            await connection.close()
    messages = await drain(sink, names.work_queue(sink.broker.prefix, "sink"))
    assert {m.message_id for m in messages} == {"e-paused"}
