"""RabbitMQ 3.10's stale-nack trap, reproduced on the cluster, and the way out (warren/broker/amqp/confirm_channel.py).

A channel whose first publish to a quorum queue lands just after the queue's leader died is nacked on every
retry until the old node returns; a new channel finds the new leader. ConfirmChannel opens one on a nack.
"""

from __future__ import annotations

import asyncio

import aio_pika
import aiormq.exceptions
import pytest

from tests.cluster.conftest import Cluster
from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.amqp.connection import connect
from warren.broker.management import ManagementClient


async def _leader_node(api: ManagementClient, queue: str) -> int:
    for _ in range(50):
        info = await api.queue(queue)
        if info and info.get("leader"):
            return int(str(info["leader"]).split("@")[0].removeprefix("warren"))
        await asyncio.sleep(0.1)
    raise AssertionError(f"no leader reported for {queue}")


@pytest.mark.timeout(120)
async def test_a_nack_after_the_leader_died_is_answered_with_a_new_channel(
    cluster: Cluster, cluster_vhost: str
) -> None:
    urls = cluster.in_vhost(cluster_vhost)
    queue = "stale-nack"
    # Given a quorum queue whose leader is node 1 (declared from there: leaders start where they are declared)
    declarer = await aio_pika.connect(urls[0])
    await (await declarer.channel()).declare_queue(queue, durable=True, arguments={"x-queue-type": "quorum"})
    async with ManagementClient(cluster.bases(), "guest", "guest", cluster_vhost) as api:
        leader = await _leader_node(api, queue)
    survivor = urls[leader % 3]
    # ... and, on a surviving node, a plain confirming channel and a ConfirmChannel, neither of which has
    # published to that queue yet
    connection = await connect([survivor], name="test-stale-nack")
    plain = await connection.channel(publisher_confirms=True, on_return_raises=True)
    confirmed = await ConfirmChannel(connection).open()
    try:

        async def plain_publish() -> str:
            try:
                await plain.default_exchange.publish(aio_pika.Message(b"stale"), routing_key=queue, mandatory=True)
            except aiormq.exceptions.DeliveryError:
                return "nack"
            return "ack"

        # When the leader's node is killed and both publish to the queue at once
        cluster.ctl("kill", str(leader))
        through_new = asyncio.create_task(
            confirmed.publish("", aio_pika.Message(b"through a new channel"), queue, what="the message")
        )
        outcomes = [await plain_publish()]
        await through_new
        for _ in range(3):
            await asyncio.sleep(0.5)
            outcomes.append(await plain_publish())
        # Then the ConfirmChannel's publish is stored on a new channel, while the plain channel is nacked on
        # every retry, seconds after a new leader took over (the trap, fixed upstream in 3.11/3.12)
        assert 1 <= confirmed.renewals <= 3
        version = str(connection.transport.connection.server_properties.get("version", ""))  # type: ignore[union-attr]
        if version.startswith("3.10"):
            assert outcomes == ["nack"] * 4
        counts = await (await connection.channel()).declare_queue(queue, passive=True)
        assert counts.declaration_result.message_count >= 1
    finally:
        await confirmed.close()
        await connection.close()
        await declarer.close()
        cluster.ctl("start", str(leader))
