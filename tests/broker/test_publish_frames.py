"""FramedPublishes (issue 38) on a real broker: the publishes ready together go out in one write, each confirmed,
returned or never sent as with aiormq's basic_publish, and in the order they were made."""

from __future__ import annotations

import asyncio
from typing import cast

import aio_pika
import aiormq
import aiormq.exceptions
import pytest
from pamqp import commands as spec

from tests.broker.test_publish_batch import _take
from warren.broker.amqp.publish_frames import FramedPublishes

pytestmark = pytest.mark.timeout(60)


def _properties(message_id: str) -> spec.Basic.Properties:
    return spec.Basic.Properties(message_id=message_id, delivery_mode=2)


async def _underlay(connection: aio_pika.abc.AbstractConnection) -> aiormq.Channel:
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    return cast(aiormq.Channel, await channel.get_underlay_channel())


async def test_publishes_made_together_are_one_write_confirmed_and_stored_in_order(amqp_url: str, prefix: str) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        declared = await (await connection.channel()).declare_queue(f"{prefix}.frames", durable=True)
        underlay = await _underlay(connection)
        # Given the connection's write queue watched (what aiormq's writer will write, one entry per write)
        writes: list[bytes] = []
        put = underlay.write_queue.put

        async def watched(frame: aiormq.abc.ChannelFrame) -> None:
            writes.append(frame.payload)
            await put(frame)

        underlay.write_queue.put = watched  # type: ignore[method-assign]
        frames = FramedPublishes(underlay)
        # When 200 publishes are made in one go, one of them larger than a frame (split in body frames)
        big = b"x" * (underlay.max_content_size * 2 + 7)
        bodies = [big if n == 100 else f"m{n}".encode() for n in range(200)]
        answers = [frames.publish(body, "", declared.name, _properties(f"id-{n}")) for n, body in enumerate(bodies)]
        confirms = await asyncio.gather(*answers)
        # Then each is acked, and all went out in one write
        assert all(isinstance(confirm, spec.Basic.Ack) for confirm in confirms)
        assert len(writes) == 1, len(writes)
        # And the queue holds them all, whole, in the order they were made
        taken = await _take(declared, 200, within=20)
        assert taken == [f"id-{n}" for n in range(200)]
        assert underlay.confirmations == {} and underlay.message_id_delivery_tag == {}


async def test_a_returned_publish_fails_alone_and_a_cancelled_one_is_never_sent(amqp_url: str, prefix: str) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        declared = await (await connection.channel()).declare_queue(f"{prefix}.frames", durable=True)
        frames = FramedPublishes(await _underlay(connection))
        # Given three publishes made together: one to a queue that does not exist (mandatory: returned), and
        # one cancelled by its publisher before the write
        stored = frames.publish(b"a", "", declared.name, _properties("a"))
        returned = frames.publish(b"b", "", f"{prefix}.nowhere", _properties("b"))
        cancelled = frames.publish(b"c", "", declared.name, _properties("c"))
        cancelled.cancel()
        last = frames.publish(b"d", "", declared.name, _properties("d"))
        # Then the returned one is aiormq's PublishError, the others are acked
        with pytest.raises(aiormq.exceptions.PublishError):
            await returned
        assert isinstance(await stored, spec.Basic.Ack)
        assert isinstance(await last, spec.Basic.Ack)
        # And the cancelled one never reached the queue (made between the two, it would be between them)
        assert await _take(declared, 2, within=10) == ["a", "d"]


async def test_publishes_on_a_closed_channel_fail_with_its_error(amqp_url: str, prefix: str) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        underlay = await _underlay(connection)
        frames = FramedPublishes(underlay)
        # Given the channel closed by the broker (a publish to an exchange that does not exist)
        doomed = frames.publish(b"a", f"{prefix}.no-such-exchange", "k", _properties("a"))
        with pytest.raises(aiormq.exceptions.ChannelNotFoundEntity):
            await doomed
        # Then a later publish fails at once with the channel's error instead of waiting
        with pytest.raises(aiormq.exceptions.AMQPError):
            await asyncio.wait_for(frames.publish(b"b", "", "q", _properties("b")), timeout=5)
