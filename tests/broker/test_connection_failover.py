"""A list of nodes: every connection starts on a reachable node, spreads over the list, and fails over.

Nodes are TCP proxies in front of the one broker under test: cutting a proxy is a node dying (its links reset,
new ones refused). The real three-node cluster is in tests/cluster/.
"""

from __future__ import annotations

import asyncio
import random
import socket
from collections import Counter
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import aio_pika
import pytest

from tests.support.rabbit import RabbitServer
from tests.support.tcp_proxy import TcpProxy
from warren.broker.amqp.connection import connect, connect_once, node_order
from warren.broker.management import ManagementClient
from warren.core.errors import BrokerUnavailable, ManagementError


def _via(amqp_url: str, port: int, query: str = "") -> str:
    parts = urlsplit(amqp_url)
    netloc = f"{parts.netloc.rpartition('@')[0]}@127.0.0.1:{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_node_order_is_a_shuffle_that_spreads_a_fleet() -> None:
    # Given three nodes, When 600 connections order them, Then each is a permutation and each node comes first
    # about a third of the time (a fixed order would put the whole fleet on one node).
    nodes = ["amqp://a/", "amqp://b/", "amqp://c/"]
    rng = random.Random(7)
    orders = [node_order(nodes, rng) for _ in range(600)]
    assert all(sorted(order) == nodes for order in orders)
    firsts = Counter(order[0] for order in orders)
    assert all(150 <= firsts[node] <= 250 for node in nodes), firsts
    assert node_order("amqp://solo/") == ["amqp://solo/"]


@pytest.mark.timeout(20)
async def test_connections_skip_dead_nodes(amqp_url: str) -> None:
    # Given two dead nodes and a live one, When connections open in several shuffled orders, Then every one of
    # them opens on the live node (robust and one-shot alike).
    live = urlsplit(amqp_url).port or 5672
    nodes = [_via(amqp_url, _closed_port()), _via(amqp_url, _closed_port()), _via(amqp_url, live)]
    for _ in range(4):
        robust = await connect(nodes, name="test-failover", timeout=5)
        once = await connect_once(nodes, name="test-failover", timeout=5)
        try:
            assert robust.url.port == live and once.url.port == live
        finally:
            await robust.close()
            await once.close()


@pytest.mark.timeout(20)
async def test_no_node_reachable_names_every_node_without_passwords(amqp_url: str) -> None:
    nodes = [_via(amqp_url, _closed_port()), _via(amqp_url, _closed_port())]
    with pytest.raises(BrokerUnavailable) as caught:
        await connect_once(nodes, timeout=2)
    message = str(caught.value)
    assert "any of 2 nodes" in message
    assert all(f":{urlsplit(node).port}/" in message for node in nodes)
    assert (urlsplit(amqp_url).password or "guest") not in message
    with pytest.raises(BrokerUnavailable, match="any of 2 nodes"):
        await connect(nodes, timeout=2)


@pytest.fixture
async def three_nodes(amqp_url: str) -> AsyncIterator[list[TcpProxy]]:
    live = urlsplit(amqp_url).port or 5672
    proxies = [await TcpProxy(live).start() for _ in range(3)]
    yield proxies
    for proxy in proxies:
        await proxy.cut()


@pytest.mark.timeout(30)
async def test_robust_connection_moves_to_the_next_live_node(
    amqp_url: str, prefix: str, three_nodes: list[TcpProxy]
) -> None:
    # Given a robust connection over three nodes with a consumer on it
    by_port = {proxy.port: proxy for proxy in three_nodes}
    nodes = [_via(amqp_url, proxy.port, "reconnect_interval=0.2") for proxy in three_nodes]
    connection = await connect(nodes, name="test-failover", timeout=5)
    try:
        channel = await connection.channel()
        queue = await channel.declare_queue(f"{prefix}.failover", durable=True)
        received: asyncio.Queue[bytes] = asyncio.Queue()

        async def on_message(message: aio_pika.abc.AbstractIncomingMessage) -> None:
            await message.ack()
            await received.put(message.body)

        await queue.consume(on_message)
        first = connection.url.port
        # When its node dies, and so does the node after it in the connection's order
        order = [node.port for node in connection._nodes]  # type: ignore[attr-defined]
        second = order[(order.index(first) + 1) % 3]
        await by_port[first].cut()
        await by_port[second].cut()
        # Then it reconnects to the third, and its consumer (re-declared there) receives
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while not (connection.connected.is_set() and connection.url.port not in (first, second)):
            assert loop.time() < deadline, "the connection never reached the third node"
            await asyncio.sleep(0.05)
        publisher = await connect_once([_via(amqp_url, urlsplit(amqp_url).port or 5672)])
        try:
            await (await publisher.channel()).default_exchange.publish(
                aio_pika.Message(b"after failover"), routing_key=queue.name
            )
        finally:
            await publisher.close()
        assert await asyncio.wait_for(received.get(), 10) == b"after failover"
    finally:
        await connection.close()


@pytest.mark.timeout(20)
async def test_the_management_client_skips_a_node_that_refuses(rabbit_server: RabbitServer, vhost: str) -> None:
    # Given a management URL list whose first node refuses connections
    live = urlsplit(rabbit_server.management_url)
    bases = [f"http://127.0.0.1:{_closed_port()}", f"http://{live.hostname}:{live.port}"]
    async with ManagementClient(bases, rabbit_server.user, rabbit_server.password, vhost) as api:
        # When it is asked, Then the live node answers, and is asked first from then on
        assert await api.vhost_exists()
        assert api.base_url == bases[1]
    async with ManagementClient(bases[:1], rabbit_server.user, rabbit_server.password, vhost) as api:
        with pytest.raises(ManagementError, match="unreachable"):
            await api.overview()
