"""PartitionLanes on its own: dispatch by key, one message per key at a time, and a whole-partition hand-back.

Pure asyncio with stand-in deliveries (the lanes read only the key header and the delivery tag); the broker's
side of the contract is in tests/broker/test_partition_returns.py, the whole path in test_key_lanes_live.py.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aio_pika.abc import AbstractIncomingMessage

from warren.consumers.key_lanes import PartitionLanes, lane_key
from warren.topology.headers import H_KEY

pytestmark = pytest.mark.timeout(5)


@dataclass
class Delivery:
    delivery_tag: int
    key: str | None
    headers: dict[str, Any] = field(default_factory=dict)
    channel: Any = None  # no channel: the lanes' ack batcher leaves a stand-in alone

    def __post_init__(self) -> None:
        if self.key is not None:
            self.headers[H_KEY] = self.key.encode()

    async def ack(self) -> None:
        """An ack of this delivery alone, outside the batcher."""
        self.channel.acks.append((self.delivery_tag, "alone"))


class Channel:
    """A stand-in for the partition's aiormq channel: records the acks sent on it."""

    def __init__(self) -> None:
        self.is_closed = False
        self.acks: list[tuple[int, bool | str]] = []

    async def basic_ack(self, delivery_tag: int, multiple: bool = False, wait: bool = True) -> None:
        self.acks.append((delivery_tag, multiple))


def deliveries(keys: str) -> list[AbstractIncomingMessage]:
    return [cast(AbstractIncomingMessage, Delivery(i + 1, k)) for i, k in enumerate(keys)]


class Handler:
    """Records starts and ends; each message is released by the test through its own event."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.ended: list[int] = []
        self.release: dict[int, asyncio.Event] = {}
        self.running: set[str] = set()
        self.overlap = False  # two messages of one key ever running at once

    async def __call__(self, message: AbstractIncomingMessage) -> None:
        tag, key = message.delivery_tag or 0, lane_key(message)
        self.overlap |= key in self.running
        self.running.add(key)
        self.started.append(tag)
        try:
            await self.release.setdefault(tag, asyncio.Event()).wait()
        finally:
            self.running.discard(key)
            self.ended.append(tag)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_keys_run_side_by_side_and_each_key_in_delivery_order() -> None:
    # Given a partition's lanes and six deliveries for keys a, b, a, c, b, a
    handler, returned = Handler(), asyncio.Event()
    lanes = PartitionLanes(handler, returned.wait)
    tasks = [asyncio.create_task(lanes.dispatch(m)) for m in deliveries("abacba")]
    await settle()
    # Then the head of each key starts at once, and nothing else
    assert handler.started == [1, 2, 4]
    assert lanes.busy and lanes.held == 6
    # When b's head finishes, b's next one starts; a's second waits behind a's head
    handler.release.setdefault(2, asyncio.Event()).set()
    await settle()
    assert handler.started == [1, 2, 4, 5]
    for tag in (1, 3, 4, 5, 6):
        handler.release.setdefault(tag, asyncio.Event()).set()
    await asyncio.gather(*tasks)
    # Then each key saw its messages in delivery order, never two at once
    by_key = {k: [t for t in handler.ended if "abacba"[t - 1] == k] for k in "abc"}
    assert by_key == {"a": [1, 3, 6], "b": [2, 5], "c": [4]}
    assert not handler.overlap and not lanes.busy and lanes.held == 0


async def test_a_hand_back_waits_for_running_lanes_and_starts_nothing_new() -> None:
    # Given a partition whose key a is in flight with a second message queued, and key b waiting to retry
    handler, closed = Handler(), []

    async def on_returned() -> None:
        closed.append(list(handler.started))

    lanes = PartitionLanes(handler, on_returned)
    tasks = [asyncio.create_task(lanes.dispatch(m)) for m in deliveries("aa")]
    await settle()
    waited = asyncio.create_task(lanes.wait(60))
    await settle()
    # When the partition is handed back
    lanes.hand_back()
    # Then a retry wait ends at once, saying so
    assert await waited is True
    # And the channel is not closed while a's head is in flight
    await settle()
    assert closed == [] and not lanes.returned.is_set()
    # And once it finishes, a's next message is not started; the channel closes
    handler.release.setdefault(1, asyncio.Event()).set()
    await asyncio.gather(*tasks)
    await asyncio.wait_for(lanes.returned.wait(), 1)
    assert closed == [[1]]
    # And a delivery arriving now is left alone (the channel's close returns it, in order): not started, not
    # held, and nothing remembered of it (its clock, asked later, is now)
    late = deliveries("aaab")[3]
    await lanes.dispatch(late)
    await asyncio.sleep(0.01)
    asked = time.monotonic()
    assert handler.started == [1] and lanes.held == 0
    assert lanes.held_since(late) >= asked


async def test_an_idle_partition_is_closed_at_once_and_a_message_without_key_has_a_lane() -> None:
    handler, returned = Handler(), asyncio.Event()

    async def on_returned() -> None:
        returned.set()

    lanes = PartitionLanes(handler, on_returned)
    assert lane_key(cast(AbstractIncomingMessage, Delivery(1, None))) == ""
    # When a partition with nothing in flight is handed back, its channel is closed at once
    lanes.hand_back()
    await asyncio.wait_for(lanes.returned.wait(), 1)
    assert returned.is_set() and not handler.started


async def test_a_drained_lane_is_let_go_and_the_keys_next_message_runs() -> None:
    # Given a partition whose key a had one message, handled and settled
    handler, returned = Handler(), asyncio.Event()
    lanes = PartitionLanes(handler, returned.wait)
    first, second = deliveries("aa")
    handler.release.setdefault(1, asyncio.Event()).set()
    await asyncio.wait_for(lanes.dispatch(first), 1)
    assert not lanes.busy and lanes.held == 0
    # When the key's next message arrives, later
    task = asyncio.create_task(lanes.dispatch(second))
    await settle()
    # Then it runs at once (the drained lane is gone: nothing waits behind it)
    assert handler.started == [1, 2] and lanes.busy and lanes.held == 1
    handler.release.setdefault(2, asyncio.Event()).set()
    await asyncio.wait_for(task, 1)
    assert handler.ended == [1, 2] and not lanes.busy and lanes.held == 0


async def test_one_lane_running_makes_the_partition_busy() -> None:
    # Given a partition with one key's message in flight, then it is busy, holding one message
    handler, returned = Handler(), asyncio.Event()
    lanes = PartitionLanes(handler, returned.wait)
    assert not lanes.busy and lanes.held == 0
    task = asyncio.create_task(lanes.dispatch(deliveries("a")[0]))
    await settle()
    assert lanes.busy and lanes.held == 1
    # When it settles, then it is idle again
    handler.release.setdefault(1, asyncio.Event()).set()
    await asyncio.wait_for(task, 1)
    assert not lanes.busy and lanes.held == 0


@pytest.mark.parametrize("tag", [7, None], ids=["tagged", "no-tag"])
async def test_the_hold_clock_starts_at_delivery_and_is_forgotten_at_settlement(tag: int | None) -> None:
    # Given a message delivered to a partition (a stand-in without a delivery tag too) and held by its handler
    handler, returned = Handler(), asyncio.Event()
    lanes = PartitionLanes(handler, returned.wait)
    message = cast(AbstractIncomingMessage, Delivery(cast(int, tag), "a"))
    before = time.monotonic()
    task = asyncio.create_task(lanes.dispatch(message))
    await settle()
    after = time.monotonic()
    # When time passes, then it has been held since its delivery, not since now
    await asyncio.sleep(0.05)
    assert before <= lanes.held_since(message) <= after
    # And once settled, its delivery time is forgotten: asked again, the answer is now
    handler.release.setdefault(tag or 0, asyncio.Event()).set()
    await asyncio.wait_for(task, 1)
    settled = time.monotonic()
    assert lanes.held_since(message) >= settled


async def test_hand_back_now_closes_an_idle_partition_in_the_callers_task() -> None:
    # Given an idle partition whose channel close records the task it runs in
    handler, closed_in = Handler(), []

    async def on_returned() -> None:
        closed_in.append(asyncio.current_task())

    lanes = PartitionLanes(handler, on_returned)
    # When it is handed back at once (awaited in this task: the file's timeout bounds it)
    await lanes.hand_back_now()
    # Then the channel was closed before the call returned, in the caller's task (its time bound covers it)
    assert closed_in == [asyncio.current_task()] and lanes.returned.is_set() and lanes.returning
    # And a second call closes nothing more, nor does a delivery arriving now start anything
    await lanes.hand_back_now()
    await lanes.dispatch(deliveries("a")[0])
    assert closed_in == [asyncio.current_task()] and handler.started == [] and lanes.held == 0


async def test_hand_back_now_with_a_lane_running_closes_once_after_it_settles() -> None:
    # Given a partition with key a in flight and a second message of a queued behind it
    handler, closed = Handler(), []

    async def on_returned() -> None:
        closed.append(list(handler.ended))

    lanes = PartitionLanes(handler, on_returned)
    tasks = [asyncio.create_task(lanes.dispatch(m)) for m in deliveries("aa")]
    await settle()
    # When the partition is handed back at once, twice over
    await asyncio.wait_for(lanes.hand_back_now(), 1)
    await asyncio.wait_for(lanes.hand_back_now(), 1)
    # Then neither call waited for the message in flight, and the channel is still open
    await settle()
    assert closed == [] and not lanes.returned.is_set() and lanes.returning
    # And once it settles, a's next message is not started; the channel closes, once
    handler.release.setdefault(1, asyncio.Event()).set()
    await asyncio.gather(*tasks)
    await asyncio.wait_for(lanes.returned.wait(), 1)
    assert closed == [[1]] and handler.started == [1]


async def test_hand_back_now_twice_at_once_closes_the_channel_once() -> None:
    # Given an idle partition whose channel takes a while to close
    closing, calls = asyncio.Event(), []

    async def on_returned() -> None:
        calls.append(1)
        await closing.wait()

    lanes = PartitionLanes(Handler(), on_returned)
    # When it is handed back at once from two tasks, the second while the first is still closing
    first = asyncio.create_task(lanes.hand_back_now())
    await settle()
    second = asyncio.create_task(lanes.hand_back_now())
    await settle()
    closing.set()
    await asyncio.wait_for(asyncio.gather(first, second), 1)
    # Then the channel was closed once
    assert calls == [1] and lanes.returned.is_set()


async def test_a_retry_wait_sleeps_its_time_unless_the_partition_is_handed_back() -> None:
    # Given a partition not being handed back, when a lane waits 0.2 s, then it sleeps that long and says so
    lanes = PartitionLanes(Handler(), asyncio.Event().wait)
    started = time.monotonic()
    assert await lanes.wait(0.2) is False
    assert time.monotonic() - started >= 0.19
    # And a wait of nothing returns at once
    assert await asyncio.wait_for(lanes.wait(0), 1) is False
    # When the partition is being handed back, then a wait returns at once, saying so
    lanes.hand_back()
    assert await asyncio.wait_for(lanes.wait(60), 1) is True


@pytest.mark.parametrize(
    ("headers", "key"),
    [
        ({H_KEY: b"order-1"}, "order-1"),  # as RabbitMQ hands a header over: bytes, read as UTF-8
        ({H_KEY: b"caf\xc3\xa9"}, "caf\u00e9"),
        ({H_KEY: b"\xff"}, "\ufffd"),  # not UTF-8: replaced, never an error
        ({H_KEY: "order-1"}, "order-1"),  # a str, as a client library may give it
        ({H_KEY: 42}, "42"),
        ({}, ""),  # no key (raw AMQP): one lane of its own
        (None, ""),  # no headers at all
    ],
)
def test_a_lane_is_chosen_by_the_key_header_as_text(headers: dict[str, Any] | None, key: str) -> None:
    message = Delivery(1, None)
    message.headers = cast(dict[str, Any], headers)
    assert lane_key(cast(AbstractIncomingMessage, message)) == key


async def test_what_the_lanes_settled_is_acked_in_one_frame_before_the_channel_closes() -> None:
    # Given a partition channel whose handler acks each message through the lanes' batcher, which would wait
    # a minute before sending a batch of its own accord
    channel, closed_with = Channel(), []

    async def handle(message: AbstractIncomingMessage) -> None:
        await lanes.acks.ack(message)

    async def on_returned() -> None:
        closed_with.append(list(channel.acks))

    lanes = PartitionLanes(handle, on_returned)
    lanes.acks.max_delay = 60.0
    messages = [cast(AbstractIncomingMessage, Delivery(tag, "a", channel=channel)) for tag in (1, 2, 3)]
    for message in messages:
        await asyncio.wait_for(lanes.dispatch(message), 1)
    assert channel.acks == []
    # When the partition is handed back
    lanes.hand_back()
    await asyncio.wait_for(lanes.returned.wait(), 2)
    # Then the three acks went before the channel's close, as one multiple ack up to the last tag
    assert closed_with == [[(3, True)]]


async def test_a_partition_handed_back_forgets_its_messages() -> None:
    # Given a partition with key a in flight and a second message of a queued behind it
    handler = Handler()
    lanes = PartitionLanes(handler, asyncio.Event().wait)
    first, second = deliveries("aa")
    tasks = [asyncio.create_task(lanes.dispatch(m)) for m in (first, second)]
    await settle()
    # When it is handed back and the message in flight settles
    lanes.hand_back()
    handler.release.setdefault(1, asyncio.Event()).set()
    await asyncio.gather(*tasks)
    await settle()
    returned_at = time.monotonic()
    # Then nothing is held, and the message left unhandled (RabbitMQ has it back) is forgotten: its clock is now
    assert lanes.held == 0 and not lanes.busy
    assert lanes.held_since(second) >= returned_at


async def test_a_lane_cancelled_then_the_partition_handed_back_at_once_forgets_its_message() -> None:
    # Given a partition whose only lane is cancelled mid-message (the worker is stopping)
    handler, returned = Handler(), asyncio.Event()

    async def on_returned() -> None:
        returned.set()

    lanes = PartitionLanes(handler, on_returned)
    message = deliveries("a")[0]
    task = asyncio.create_task(lanes.dispatch(message))
    await settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not lanes.busy and lanes.held == 0
    # When the partition is handed back at once
    await lanes.hand_back_now()
    handed_back_at = time.monotonic()
    # Then its channel is closed, and the message it never settled is forgotten: its clock is now
    assert returned.is_set()
    assert lanes.held_since(message) >= handed_back_at


async def test_a_detached_handling_lets_its_key_move_on_and_holds_the_hand_back_until_it_ends() -> None:
    # Given a handler that finishes key a's first message apart from the lane (the router's unordered event)
    inner, closed = Handler(), []

    async def on_returned() -> None:
        closed.append(list(inner.ended))

    async def handle(message: AbstractIncomingMessage) -> None:
        if message.delivery_tag == 1:
            lanes.detach(inner(message))
        else:
            await inner(message)

    lanes = PartitionLanes(handle, on_returned)
    tasks = [asyncio.create_task(lanes.dispatch(m)) for m in deliveries("aa")]
    await settle()
    # Then a's second message starts while the first is still running, and the partition counts as busy
    assert sorted(inner.started) == [1, 2] and lanes.busy
    inner.release.setdefault(2, asyncio.Event()).set()
    await asyncio.gather(*tasks)
    assert inner.ended == [2] and lanes.busy
    # When the partition is handed back, its channel is not closed while the detached handling runs
    lanes.hand_back()
    await settle()
    assert closed == [] and not lanes.returned.is_set()
    inner.release.setdefault(1, asyncio.Event()).set()
    await asyncio.wait_for(lanes.returned.wait(), 1)
    assert closed == [[2, 1]] and not lanes.busy


async def test_a_message_handled_apart_never_holds_its_key_and_holds_the_hand_back_until_it_ends() -> None:
    # Given lanes whose apart hook takes key a's first message (the router's event with no ordered subscriber)
    inner, closed, in_lane = Handler(), [], []

    async def on_returned() -> None:
        closed.append(list(inner.ended))

    async def handle(message: AbstractIncomingMessage) -> None:
        in_lane.append(message.delivery_tag)
        await inner(message)

    def apart(message: AbstractIncomingMessage) -> Any:
        return inner(message) if message.delivery_tag == 1 else None

    lanes = PartitionLanes(handle, on_returned, apart=apart)
    tasks = [asyncio.create_task(lanes.dispatch(m)) for m in deliveries("aa")]
    await settle()
    # Then both run at once, the first never in its key's lane, and the partition counts as busy
    assert sorted(inner.started) == [1, 2] and in_lane == [2] and lanes.busy
    inner.release.setdefault(2, asyncio.Event()).set()
    await settle()
    assert inner.ended == [2] and lanes.busy and lanes.held == 0
    # When the partition is handed back, its channel is not closed while the handling apart runs
    lanes.hand_back()
    await settle()
    assert closed == [] and not lanes.returned.is_set()
    inner.release.setdefault(1, asyncio.Event()).set()
    await asyncio.gather(*tasks)
    await asyncio.wait_for(lanes.returned.wait(), 1)
    assert closed == [[2, 1]] and not lanes.busy


async def test_a_handling_apart_that_fails_is_logged_and_leaves_nothing_running(caplog: Any) -> None:
    # Given an apart hook whose handling raises
    async def boom() -> None:
        raise RuntimeError("boom")

    lanes = PartitionLanes(Handler(), asyncio.Event().wait, apart=lambda message: boom())
    # When a message is dispatched, the failure is logged, not raised into the consumer, and nothing stays running
    with caplog.at_level("ERROR", logger="warren.worker"):
        await lanes.dispatch(deliveries("a")[0])
    assert "a detached handling failed: " in caplog.text and "boom" in caplog.text
    assert not lanes.busy and lanes.held == 0


async def test_a_hand_back_tells_which_deliveries_go_back_never_started() -> None:
    # Given a partition whose key a has its head in flight and two more queued, key b one in flight
    handler, unstarted = Handler(), []
    lanes = PartitionLanes(handler, asyncio.Event().wait, unstarted=lambda m: unstarted.append(m.delivery_tag))
    tasks = [asyncio.create_task(lanes.dispatch(m)) for m in deliveries("aaab")]
    await settle()
    # When the partition is handed back, and a delivery arrives after that
    lanes.hand_back()
    await lanes.dispatch(deliveries("aaaab")[4])
    # and the heads in flight end (settled or not: they were started, their returns are theirs)
    for tag in (1, 4):
        handler.release.setdefault(tag, asyncio.Event()).set()
    await asyncio.gather(*tasks)
    # Then the lanes told of a's two queued messages and of the late delivery, and of nothing started
    assert sorted(unstarted) == [2, 3, 5] and handler.started == [1, 4]
