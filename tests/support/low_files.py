"""The node of its own with a low open-files limit (``scripts/cluster lowfiles up``; its URLs from ``env``), for the
tests that fill a RabbitMQ 3.10 node's file handles or serve many endpoints on one: a vhost each, removed after."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator

import pytest

from tests.support.rabbit import RabbitServer
from warren.broker.management import ManagementClient

LOW_AMQP = os.environ.get("WARREN_TEST_LOW_FD_AMQP_URL")
LOW_MANAGEMENT = os.environ.get("WARREN_TEST_LOW_FD_MANAGEMENT_URL")

needs_low_node = pytest.mark.skipif(
    not (LOW_AMQP and LOW_MANAGEMENT), reason="needs a 3.10 node with a low open-files limit"
)


@contextlib.asynccontextmanager
async def low_node_vhost(stem: str) -> AsyncIterator[tuple[ManagementClient, str]]:
    """A new vhost on the low node: its management client and AMQP URL; deleted with all it holds at the end."""
    assert LOW_AMQP and LOW_MANAGEMENT, "needs_low_node"
    vhost = f"{stem}-{uuid.uuid4().hex[:8]}"
    server = RabbitServer(LOW_AMQP, LOW_MANAGEMENT)
    async with ManagementClient(server.management_base, server.user, server.password, vhost, timeout=120) as api:
        await _node_figures_ready(api)
        await api.create_vhost(vhost, "guest")
        try:
            yield api, LOW_AMQP.rstrip("/") + f"/{vhost}"
        finally:
            await api.delete_vhost(vhost)


async def _node_figures_ready(api: ManagementClient) -> None:
    """Wait (at most 60 s) until the management API reports the node's file-handle figures: a node just started
    answers before its first statistics sample (every 5 s), and without ``sockets_total`` a 3.10 node reads as one
    with no file-handle cache (as 4.x)."""
    async with asyncio.timeout(60):
        while not any(
            n.get("sockets_total") for n in await api.request("GET", "nodes?columns=name,sockets_total") or []
        ):
            await asyncio.sleep(0.2)
