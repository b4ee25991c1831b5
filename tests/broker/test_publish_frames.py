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

# What a publish on a channel the broker closed fails with: the close's reason, or aiormq's closed-channel error
CLOSED = (aiormq.exceptions.AMQPError, aiormq.exceptions.ChannelInvalidStateError)


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
        with pytest.raises(CLOSED):
            await asyncio.wait_for(frames.publish(b"b", "", "q", _properties("b")), timeout=5)


async def test_publishes_racing_the_brokers_close_of_their_channel_never_break_the_connection(
    amqp_url: str, prefix: str
) -> None:
    connection = await aio_pika.connect(amqp_url)
    async with connection:
        declared = await (await connection.channel()).declare_queue(f"{prefix}.frames", durable=True)
        frames = FramedPublishes(await _underlay(connection))
        # Given a publish that makes the broker close its channel (an exchange that does not exist)
        doomed = frames.publish(b"a", f"{prefix}.no-such-exchange", "k", _properties("a"))
        # When publishes keep being made, one loop turn apart, while that close is on its way and after it
        later: list[asyncio.Future[object]] = []
        refused = 0
        for n in range(300):
            try:
                later.append(frames.publish(b"b", "", declared.name, _properties(f"b{n}")))
            except aiormq.exceptions.ChannelInvalidStateError:
                refused += 1  # made once the close had arrived: refused at once
            await asyncio.sleep(0.001 if n % 10 == 0 else 0)
        answers = await asyncio.wait_for(asyncio.gather(doomed, *later, return_exceptions=True), 20)
        # Then each is answered: the channel's error (none is acked: the broker ignores a closing channel's frames)
        assert isinstance(answers[0], aiormq.exceptions.ChannelNotFoundEntity)
        assert all(isinstance(a, CLOSED) for a in answers[1:]), answers[1:]
        assert refused > 0 and refused + len(later) == 300
        # And the connection is not broken by a frame sent on the closed channel's number: another channel works
        await asyncio.sleep(0.5)
        assert not connection.is_closed
        channel = await connection.channel(publisher_confirms=True)
        await channel.default_exchange.publish(aio_pika.Message(b"after", message_id="after"), declared.name)
        assert await _take(declared, 1, within=10) == ["after"]
