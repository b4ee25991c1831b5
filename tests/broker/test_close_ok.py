"""A channel RabbitMQ closes is answered with close-ok even while the connection's write queue is full, so that
RabbitMQ does not keep it ``closing`` for the connection's lifetime (warren/broker/amqp/close_ok.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from typing import Any
from urllib.parse import quote

import aio_pika
import aiormq.exceptions
import pytest
from aiormq.channel import Channel

from warren.broker.amqp.close_ok import _on_close_frame, answer_every_channel_close
from warren.broker.amqp.connection import connect_once
from warren.broker.management import ManagementClient

pytestmark = pytest.mark.timeout(60)

PROBES = 40


def test_the_installed_aiormq_is_patched() -> None:
    # aiormq 7.2.4 drops the answer when its write queue is full: the patch must be in place for it
    assert answer_every_channel_close()
    assert Channel._on_close_frame is _on_close_frame


async def _channels_of(management: ManagementClient, name: str) -> list[tuple[int, Any]] | None:
    """The connection's channels as RabbitMQ lists them: (number, state); None until it lists the connection."""
    connections = await management.request("GET", f"vhosts/{quote(management.vhost, safe='')}/connections") or []
    mine = [c for c in connections if (c.get("client_properties") or {}).get("connection_name") == name]
    if not mine:
        return None
    rows = await management.request("GET", f"connections/{quote(mine[0]['name'], safe='')}/channels", allow_404=True)
    return sorted((int(r["number"]), r.get("state")) for r in rows or [])


async def test_missing_queues_probed_during_a_publish_burst_leave_no_channel_closing(
    amqp_url: str, management: ManagementClient, prefix: str
) -> None:
    # Given one connection busy publishing (its write queue of 10 frames stays full)
    name = f"warren-close-ok-{uuid.uuid4().hex[:8]}"
    connection = await connect_once(amqp_url, name=name)
    try:
        publisher = await connection.channel()
        queue = await publisher.declare_queue(f"{prefix}.burst", durable=True, arguments={"x-queue-type": "quorum"})

        async def burst() -> None:
            for _ in range(3000):
                await publisher.default_exchange.publish(aio_pika.Message(b"x" * 200), routing_key=queue.name)

        async def probe(i: int) -> None:
            channel = await connection.channel()
            raw = await channel.get_underlay_channel()
            with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
                await raw.queue_declare(f"{prefix}.missing-{i}", passive=True)
            await channel.close()

        # When 40 passive declares of missing queues, each on its own channel, are answered by RabbitMQ's close
        await asyncio.gather(burst(), *(probe(i) for i in range(PROBES)))
        # Then RabbitMQ lists only the publishing channel: every closed one was answered
        deadline = time.monotonic() + 20
        while (channels := await _channels_of(management, name)) != [(1, "running")]:
            assert time.monotonic() < deadline, channels
            await asyncio.sleep(0.25)
        await publisher.queue_delete(queue.name)
    finally:
        await connection.close()


def test_importing_changes_nothing_and_connecting_installs_it(amqp_url: str) -> None:
    # Given a fresh interpreter (the suite's own has connected long ago)
    program = f"""
import asyncio
import subprocess
import sys
from aiormq.channel import Channel
original = Channel._on_close_frame
import warren.broker.amqp.connection as connection, warren.broker.amqp.close_ok as close_ok
assert Channel._on_close_frame is original, "importing patched aiormq"
async def main():
    conn = await connection.connect_once({amqp_url!r})
    await conn.close()
asyncio.run(main())
assert Channel._on_close_frame is close_ok._on_close_frame, "connecting did not install the workaround"
print("explicit")
"""
    # When it imports the connection module, then connects once
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    # Then the import left aiormq as it was, and the connection installed the workaround
    assert done.returncode == 0 and done.stdout.strip() == "explicit", done.stderr
