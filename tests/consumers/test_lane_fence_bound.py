"""An ordered promotion's fence that its lane cannot pass on (warren/consumers/lane_fences.py) is tried again only
until its promotion stops waiting (``warren-fence-until``), then dropped with an error: the lane moves on."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from warren.broker import wire
from warren.consumers import lane_fences
from warren.consumers.lane_fences import pass_lane_fence
from warren.core.errors import PublishError

pytestmark = pytest.mark.timeout(30)


class Fence:
    """What the lane's consumer reads of a fence's delivery."""

    def __init__(self, until_ms: int | None) -> None:
        self.headers: dict[str, Any] = {wire.H_LANE_FENCE: "f1", wire.H_ENDPOINT: "ledger", wire.H_FENCE_QUEUE: "o0"}
        if until_ms is not None:
            self.headers[wire.H_FENCE_UNTIL] = until_ms
        self.message_id = "fence-f1-o0"
        self.reply_to = "amq.gen-replies"


class Acks:
    def __init__(self) -> None:
        self.acked: list[Any] = []

    async def ack(self, message: Any) -> None:
        self.acked.append(message)


class Lanes:
    """An ordered lane's channel: everything before the fence settled; hand-backs counted."""

    def __init__(self) -> None:
        self.acks = Acks()
        self.handed_back = 0

    async def settled_before(self, message: Any) -> bool:
        return True

    def hand_back(self) -> None:
        self.handed_back += 1


class Refusing:
    """A publisher whose every publish into the park queue fails (nacked: the queue refuses it)."""

    def __init__(self) -> None:
        self.tries = 0

    async def publish(self, exchange: str, message: Any, routing_key: str, *, what: str) -> None:
        self.tries += 1
        raise PublishError(f"{what}: nacked")


async def test_a_fence_that_can_never_pass_is_dropped_once_its_promotion_stops_waiting(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(lane_fences, "PASS_FAILED_WAIT", 0.05)
    # Given a fence whose promotion waits 0.5 s more, and a park queue that refuses every publish
    fence, lanes, publisher = Fence(int((time.time() + 0.5) * 1000)), Lanes(), Refusing()
    started = time.monotonic()
    # When the lane takes it again each time it was handed back (as RabbitMQ redelivers it)
    with caplog.at_level(logging.WARNING, logger="warren.worker"):
        while not lanes.acks.acked:
            assert time.monotonic() - started < 5, "the fence was tried again for ever"
            await pass_lane_fence(fence, "f1", lanes, publisher, "p.lane.park.ledger")  # type: ignore[arg-type]
    # Then it was tried until its promotion stopped waiting, not after: dropped (acked), the lane no longer handed back
    assert 0.45 <= time.monotonic() - started < 2
    assert publisher.tries == lanes.handed_back + 1 and lanes.handed_back >= 2
    assert lanes.acks.acked == [fence]
    dropped = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(dropped) == 1 and "lane fence f1 of endpoint ledger dropped" in dropped[0].getMessage()


async def test_a_fence_that_names_no_deadline_is_dropped_at_its_first_failure() -> None:
    # Given a fence of an earlier release (no warren-fence-until: its age cannot be told)
    fence, lanes, publisher = Fence(None), Lanes(), Refusing()
    # When it cannot be passed on: Then it is dropped at once, its lane not handed back
    await asyncio.wait_for(pass_lane_fence(fence, "f1", lanes, publisher, "p.lane.park.ledger"), 1)  # type: ignore[arg-type]
    assert publisher.tries == 1 and lanes.handed_back == 0 and lanes.acks.acked == [fence]


async def test_a_fence_still_awaited_goes_back_with_its_lane_to_be_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lane_fences, "PASS_FAILED_WAIT", 0.01)
    # Given a fence its promotion waits for another 30 s
    fence, lanes, publisher = Fence(int((time.time() + 30) * 1000)), Lanes(), Refusing()
    # When it cannot be passed on: Then its lane goes back (the fence with it, unacked), as before
    await pass_lane_fence(fence, "f1", lanes, publisher, "p.lane.park.ledger")  # type: ignore[arg-type]
    assert lanes.handed_back == 1 and lanes.acks.acked == []
