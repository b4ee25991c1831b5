"""A node that stops answering without closing its links (paused, or cut off by a network fault that drops
packets) is left within Warren's heartbeat's grace, about 33 s, where RabbitMQ's 60 s heartbeat held a
connection on it for about three minutes (the partition harness's SIGSTOP pause: docs/cluster.md).

Nodes are TCP proxies in front of the one broker under test; a stalled proxy is a paused node.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.support.tcp_proxy import TcpProxy
from warren.broker.amqp.connection import HEARTBEAT, connect, with_heartbeat


def _via(amqp_url: str, port: int, query: str = "") -> str:
    parts = urlsplit(amqp_url)
    return urlunsplit((parts.scheme, f"{parts.netloc.rpartition('@')[0]}@127.0.0.1:{port}", parts.path, query, ""))


def test_a_url_without_a_heartbeat_asks_for_warrens_and_one_with_its_own_keeps_it() -> None:
    assert with_heartbeat("amqp://u:p@h:5672/%2F").query["heartbeat"] == str(HEARTBEAT)
    assert str(with_heartbeat("amqp://u:p@h:5672/%2F")).startswith("amqp://u:p@h:5672/%2F?")
    assert with_heartbeat("amqp://h/v?heartbeat=0").query["heartbeat"] == "0"
    assert with_heartbeat("amqp://h/v?heartbeat=30&x=1").query["heartbeat"] == "30"


@pytest.fixture
async def two_nodes(amqp_url: str) -> AsyncIterator[list[TcpProxy]]:
    live = urlsplit(amqp_url).port or 5672
    proxies = [await TcpProxy(live).start() for _ in range(2)]
    yield proxies
    for proxy in proxies:
        proxy.resume()
        await proxy.cut()


@pytest.mark.timeout(90)
async def test_a_connection_leaves_a_node_that_stops_answering_within_the_heartbeats_grace(
    amqp_url: str, two_nodes: list[TcpProxy]
) -> None:
    # Given a robust connection over two nodes, with an open channel
    by_port = {proxy.port: proxy for proxy in two_nodes}
    connection = await connect([_via(amqp_url, p.port, "reconnect_interval=0.2") for p in two_nodes], timeout=5)
    try:
        await connection.channel()
        first = connection.url.port
        # When its node stops answering, its links left open (a paused node)
        by_port[first].stall()
        loop = asyncio.get_running_loop()
        stalled_at = loop.time()
        # Then within three heartbeat periods and a reconnect it is on the other node, and it works there
        while not (connection.connected.is_set() and connection.url.port != first):
            assert loop.time() - stalled_at < 3 * (HEARTBEAT + 1) + 15, "still on the node that stopped answering"
            await asyncio.sleep(0.2)
        assert loop.time() - stalled_at >= HEARTBEAT, "left before a heartbeat was missed"
        channel = await connection.channel()
        queue = await channel.declare_queue("", exclusive=True)
        assert queue.name
    finally:
        await connection.close()
