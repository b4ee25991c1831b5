"""PartitionLanes on its own: dispatch by key, one message per key at a time, and a whole-partition hand-back.

Pure asyncio with stand-in deliveries (the lanes read only the key header and the delivery tag); the broker's
side of the contract is in tests/broker/test_partition_returns.py, the whole path in test_key_lanes_live.py.
"""

from __future__ import annotations

import asyncio
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
    # And a delivery arriving now is left alone (the channel's close returns it, in order)
    await lanes.dispatch(deliveries("aaab")[3])
    assert handler.started == [1] and lanes.held == 0


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
