"""The ack batcher against RabbitMQ: a settled prefix goes in one multiple ack, a straggler is acked on its own."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from types import SimpleNamespace

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage

from warren.broker.amqp import ack_batcher
from warren.broker.amqp.ack_batcher import WINDOW_ACK_DELAY, AckBatcher
from warren.broker.amqp.channels import SETTLE_PAUSE


async def _unacked(queue: aio_pika.abc.AbstractQueue, channel: aio_pika.abc.AbstractChannel, expected: int) -> int:
    """Messages of ``queue`` delivered and not acked, back in it once their consumer's connection closed, as
    RabbitMQ counts them (passive declare on a fresh channel). A quorum queue applies a closed consumer's returns
    a moment after the close, so one read can come before them (0 where 5 came back, once in a CI run): read
    until the count is ``expected`` and holds for half a second, or holds another for a second (at most 5 s)."""
    deadline = time.monotonic() + 5
    last, since = -1, time.monotonic()
    while True:
        declared = await channel.declare_queue(queue.name, passive=True)
        count = declared.declaration_result.message_count
        assert count is not None
        now = time.monotonic()
        if count != last:
            last, since = count, now
        held = now - since
        if (count == expected and held >= 0.5) or held >= 1.0 or now > deadline:
            return count
        await asyncio.sleep(0.05)


async def _unacked_after(amqp_url: str, queue: aio_pika.abc.AbstractQueue, expected: int) -> int:
    """``_unacked`` on a connection of its own."""
    check = await aio_pika.connect(amqp_url)
    try:
        return await _unacked(queue, await check.channel(), expected)
    finally:
        await check.close()


async def _tracked(
    channel: aio_pika.abc.AbstractChannel, name: str, count: int, batcher: AckBatcher
) -> tuple[aio_pika.abc.AbstractQueue, list[AbstractIncomingMessage]]:
    """A quorum queue ``name`` with ``count`` messages, consumed on ``channel``, tracked by the batcher."""
    await channel.set_qos(prefetch_count=10)
    queue = await channel.declare_queue(name, durable=True, arguments={"x-queue-type": "quorum"})
    for i in range(count):
        await channel.default_exchange.publish(aio_pika.Message(str(i).encode()), routing_key=queue.name)
    delivered: list[AbstractIncomingMessage] = []

    async def on_message(message: AbstractIncomingMessage) -> None:
        batcher.track(message)
        delivered.append(message)

    await queue.consume(on_message)
    deadline = time.monotonic() + 5
    while len(delivered) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    return queue, delivered


@pytest.mark.timeout(20)
async def test_acks_wait_for_the_head_then_go_together_and_a_straggler_goes_alone(amqp_url: str, prefix: str) -> None:
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        batcher = AckBatcher(max_delay=0.002, straggler_after=0.3)
        queue, delivered = await _tracked(channel, f"{prefix}.acks", 5, batcher)
        assert [m.body for m in delivered] == [b"0", b"1", b"2", b"3", b"4"]

        # Message 0 is still being delivered: the acks of 1..4 wait behind it, then go on their own once stale.
        for message in delivered[1:]:
            await batcher.ack(message)
        acked_behind_head = time.monotonic()
        await asyncio.sleep(0.1)
        assert len(batcher._acked) == 4  # within straggler_after: nothing sent, none dropped
        while batcher._acked and time.monotonic() - acked_behind_head < 3:
            await asyncio.sleep(0.01)
        assert not batcher._acked
        assert time.monotonic() - acked_behind_head >= 0.3
        # Now the head: its ack completes the prefix (1..4 settled already) and is sent as a multiple ack.
        await batcher.ack(delivered[0])
        await batcher.flush()
        await asyncio.sleep(0.05)
        assert not batcher._order and not batcher._settled
    finally:
        await connection.close()  # anything not acked would go back to the queue now

    assert await _unacked_after(amqp_url, queue, 0) == 0  # every message was acked exactly once


@pytest.mark.timeout(20)
async def test_close_waits_the_settle_pause_after_the_last_ack_sent(amqp_url: str, prefix: str) -> None:
    """A quorum queue can apply a closing channel's return of its unacked deliveries before acks sent just before
    the close: the batcher's close keeps the channel open until SETTLE_PAUSE after its last ack, and no longer."""
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        batcher = AckBatcher(max_delay=0.002, straggler_after=0.05)
        queue, delivered = await _tracked(channel, f"{prefix}.settle", 6, batcher)
        assert len(delivered) == 6

        # Acks sent long before the close: nothing to wait for.
        for message in delivered[:3]:
            await batcher.ack(message)
        await batcher.flush()
        await asyncio.sleep(SETTLE_PAUSE + 0.05)
        # The rest is acked now and sent by the close itself: it waits the whole pause after sending them.
        for message in delivered[3:]:
            await batcher.ack(message)
        started = time.monotonic()
        await batcher.close()
        waited = time.monotonic() - started
        assert SETTLE_PAUSE - 0.01 <= waited < SETTLE_PAUSE + 1.0, waited
        await channel.close()

        idle = AckBatcher()
        started = time.monotonic()
        await idle.close()
        assert time.monotonic() - started < 0.05  # it sent nothing: it closes at once
    finally:
        await connection.close()

    assert await _unacked_after(amqp_url, queue, 0) == 0  # all six acked, none returned by the close


@pytest.mark.timeout(20)
async def test_flush_at_sends_a_full_batch_without_waiting_out_the_delay(amqp_url: str, prefix: str) -> None:
    """A long ``max_delay`` bounds how long acks wait, ``flush_at`` how many: the 4th ack goes with its 3 neighbours
    at once, not 10 s later (a killed replay leaves at most a batch of confirmed copies unacked in its DLQ)."""
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        batcher = AckBatcher(max_delay=10.0, flush_at=4)
        queue, delivered = await _tracked(channel, f"{prefix}.flush-at", 6, batcher)
        assert len(delivered) == 6

        for message in delivered[:3]:
            await batcher.ack(message)
        await asyncio.sleep(0.1)
        assert len(batcher._acked) == 3  # below flush_at: they wait for the delay
        started = time.monotonic()
        await batcher.ack(delivered[3])
        while batcher._acked and time.monotonic() - started < 2:
            await asyncio.sleep(0.005)
        assert not batcher._acked and time.monotonic() - started < 2
        await asyncio.sleep(SETTLE_PAUSE + 0.05)  # let the quorum queue apply the ack before the close
    finally:
        await connection.close()  # 4 and 5 were never acked: they go back to the queue

    assert await _unacked_after(amqp_url, queue, 2) == 2  # 0..3 acked by the batch, 4 and 5 returned


@contextlib.asynccontextmanager
async def _consumed(
    amqp_url: str, name: str, count: int, batcher: AckBatcher
) -> AsyncIterator[tuple[aio_pika.abc.AbstractQueue, list[AbstractIncomingMessage]]]:
    """``_tracked`` on a connection of its own, closed after (what was not acked goes back to the queue)."""
    connection = await aio_pika.connect(amqp_url)
    try:
        queue, delivered = await _tracked(await connection.channel(), name, count, batcher)
        assert len(delivered) == count
        yield queue, delivered
    finally:
        await connection.close()


@pytest.mark.timeout(20)
async def test_acks_hurry_while_the_window_is_nearly_full_and_wait_while_it_is_not(amqp_url: str, prefix: str) -> None:
    """A partition's batcher waits long for company (its channel sees a share of the deliveries), but never while
    the window is nearly full: then an ack that waited would keep RabbitMQ's next delivery waiting."""
    # Given a batcher that would wait 10 s, hurrying while 6 deliveries are outstanding, and 6 outstanding
    batcher = AckBatcher(max_delay=10.0, hurry_at=6)
    async with _consumed(amqp_url, f"{prefix}.hurry", 6, batcher) as (queue, delivered):
        # When the first is acked, the window full: it goes at once
        started = time.monotonic()
        await batcher.ack(delivered[0])
        while batcher._acked and time.monotonic() - started < 2:
            await asyncio.sleep(0.005)
        assert not batcher._acked and time.monotonic() - started < 2
        # And the next, with 5 outstanding, waits for company
        await batcher.ack(delivered[1])
        await asyncio.sleep(0.1)
        assert len(batcher._acked) == 1
        await asyncio.sleep(SETTLE_PAUSE + 0.05)  # let the quorum queue apply the first ack before the close
    # (1..5 were never sent: the close returned them to the queue)
    assert await _unacked_after(amqp_url, queue, 5) == 5  # only the hurried one was acked


def _spied(message: AbstractIncomingMessage) -> list[tuple[int, bool]]:
    """Every ack sent on ``message``'s channel from now: (tag, multiple)."""
    channel = message.channel
    sent: list[tuple[int, bool]] = []
    real_ack = channel.basic_ack

    async def spy(delivery_tag: int, multiple: bool = False, wait: bool = True) -> None:
        sent.append((delivery_tag, multiple))
        await real_ack(delivery_tag, multiple=multiple, wait=wait)

    channel.basic_ack = spy  # type: ignore[method-assign]
    return sent


async def _until_sent(sent: list[tuple[int, bool]], count: int) -> None:
    """Wait (at most 3 s) until ``count`` acks were sent; the caller asserts which."""
    deadline = time.monotonic() + 3
    while len(sent) < count and time.monotonic() < deadline:
        await asyncio.sleep(0.005)


@pytest.mark.timeout(20)
async def test_a_delivery_acked_alone_leaves_the_window_so_the_next_acks_wait_for_the_head(
    amqp_url: str, prefix: str
) -> None:
    """Hurrying counts what RabbitMQ still holds unsettled, not the span behind a held head: once the hurried acks
    went alone, the window has room again, and the next acks wait to go with the head in one multiple ack (they
    went alone one by one while the head was held, a route partition's acks behind a lane copy's confirm)."""
    # Given a batcher hurrying while 6 deliveries are outstanding, stragglers waiting 10 s, 6 delivered, the head
    # still in flight, and a spy on the channel's acks
    batcher = AckBatcher(max_delay=0.02, straggler_after=10.0, hurry_at=6)
    async with _consumed(amqp_url, f"{prefix}.hurried", 6, batcher) as (queue, delivered):
        sent = _spied(delivered[0])
        tags = [m.delivery_tag for m in delivered]
        # When the second is acked with the window full: it goes at once, alone
        await batcher.ack(delivered[1])
        await _until_sent(sent, 1)
        assert sent == [(tags[1], False)]
        # And the next three, with 5 outstanding, wait behind the head (well past max_delay)
        for message in delivered[2:5]:
            await batcher.ack(message)
        await asyncio.sleep(0.2)
        assert sent == [(tags[1], False)] and len(batcher._acked) == 3
        # Then the head's ack takes them all in one multiple ack
        await batcher.ack(delivered[0])
        await _until_sent(sent, 2)
        assert sent == [(tags[1], False), (tags[4], True)]
        await batcher.close()
    assert await _unacked_after(amqp_url, queue, 1) == 1  # only the last, never acked, came back


@pytest.mark.timeout(20)
async def test_counting_waiting_acks_a_backlog_does_not_hurry_them_only_the_acks_themselves_do(
    amqp_url: str, prefix: str
) -> None:
    """Counting "waiting", deliveries not yet handled never hurry the acks (with a backlog RabbitMQ keeps the
    window full, and counting them sent every ack behind a held head alone): only as many acks waiting do."""
    # Given a batcher hurrying while 3 acks wait, stragglers waiting 10 s, 6 delivered (all outstanding), the
    # head still in flight, and a spy on the channel's acks
    batcher = AckBatcher(max_delay=0.02, straggler_after=10.0, hurry_at=3, hurry_counts="waiting")
    async with _consumed(amqp_url, f"{prefix}.waiting", 6, batcher) as (queue, delivered):
        sent = _spied(delivered[0])
        tags = [m.delivery_tag for m in delivered]
        # When two are acked behind the head: they wait (well past max_delay), though 6 are outstanding
        for message in delivered[1:3]:
            await batcher.ack(message)
        await asyncio.sleep(0.2)
        assert sent == [] and len(batcher._acked) == 2
        # Then a third: three wait, so they go at once, alone (the head still holds the prefix)
        await batcher.ack(delivered[3])
        await _until_sent(sent, 3)
        assert sent == [(tags[1], False), (tags[2], False), (tags[3], False)]
        # And the head's ack with the next one's goes as one multiple ack
        await batcher.ack(delivered[4])
        await batcher.ack(delivered[0])
        await _until_sent(sent, 4)
        assert sent[3:] == [(tags[4], True)]
        await batcher.close()
    assert await _unacked_after(amqp_url, queue, 1) == 1  # only the last, never acked, came back


@pytest.mark.parametrize(("prefetch", "hurry_at"), [(1, 1), (2, 2), (4, 3), (16, 12), (128, 96)])
def test_a_partition_batcher_waits_longer_and_hurries_at_three_quarters_of_its_window(
    prefetch: int, hurry_at: int
) -> None:
    batcher = AckBatcher.for_window(prefetch)
    assert batcher.max_delay == WINDOW_ACK_DELAY > AckBatcher().max_delay
    assert batcher.straggler_after == 2 * WINDOW_ACK_DELAY  # a straggler outlives the batch it missed
    assert batcher.hurry_at == hurry_at
    assert batcher.flush_at == 0
    assert batcher.hurry_counts == "outstanding"  # a key's deliveries may wait behind its head: room may help


@pytest.mark.timeout(20)
async def test_settled_before_waits_for_every_earlier_delivery_whatever_order_they_finish_in(
    amqp_url: str, prefix: str
) -> None:
    connection = await aio_pika.connect(amqp_url)
    try:
        channel = await connection.channel()
        batcher = AckBatcher(max_delay=0.002, straggler_after=0.01)
        _, delivered = await _tracked(channel, f"{prefix}.fenced", 5, batcher)
        fence = delivered[3]
        waiting = asyncio.ensure_future(batcher.settled_before(fence))
        # Later deliveries and the fence itself do not count; the earlier ones finish out of order, one nacked
        for message in (delivered[4], fence, delivered[2], delivered[0]):
            await batcher.ack(message)
        await asyncio.sleep(0)
        assert not waiting.done() and not batcher.done_before(fence)  # delivery 1 is still being handled
        await delivered[1].nack(requeue=False)
        batcher.settled(delivered[1])
        await asyncio.wait_for(waiting, 5)
        assert batcher.done_before(fence) and batcher.done_before(delivered[0])
    finally:
        await connection.close()


@pytest.mark.timeout(20)
async def test_stragglers_go_in_one_pass_of_the_writer_only_the_last_frame_waiting(
    amqp_url: str, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Acks behind a slow head go on their own, but queued together: only the last waits for the connection's
    writer (one awaited each kept the window, and RabbitMQ's next deliveries, waiting on a busy machine)."""
    # Given 8 delivered, the head still in flight, and a spy on the channel's acks
    batcher = AckBatcher(max_delay=0.002, straggler_after=0.05)
    async with _consumed(amqp_url, f"{prefix}.stragglers", 8, batcher) as (queue, delivered):
        channel = delivered[0].channel
        sent: list[tuple[int, bool, bool]] = []
        real_ack = channel.basic_ack

        async def spy(delivery_tag: int, multiple: bool = False, wait: bool = True) -> None:
            sent.append((delivery_tag, multiple, wait))
            await real_ack(delivery_tag, multiple=multiple, wait=wait)

        channel.basic_ack = spy  # type: ignore[method-assign]
        # When 2..8 are acked at one instant and wait out straggler_after behind the head (the batcher's clock held
        # while they are acked: a loaded machine that preempted the test between two acks made them stragglers a
        # flush apart, rightly sent in two passes; 1 run in many of the 4.x leg, 2026-12-07)
        now = time.monotonic()
        with monkeypatch.context() as held:
            held.setattr(ack_batcher, "time", SimpleNamespace(monotonic=lambda: now))
            for message in delivered[1:]:
                await batcher.ack(message)
        deadline = time.monotonic() + 3
        while batcher._acked and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        # Then the seven went on their own in one send, only the last awaiting the write
        tags = [m.delivery_tag for m in delivered[1:]]
        assert sent == [(tag, False, tag == tags[-1]) for tag in tags]
        await batcher.ack(delivered[0])
        await batcher.close()
    assert await _unacked_after(amqp_url, queue, 0) == 0  # every one reached RabbitMQ, acked once
