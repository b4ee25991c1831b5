"""The routing stage's acks (warren/consumers/lane_router.py, ``ROUTE_PACE``): real RabbitMQ, real receivers.

An event the stage holds (a new endpoint's trial inline, a wait for a slot, a copy's confirm) keeps the events
routed behind it in its partition unacked until it is settled; their acks then go with it as one multiple ack,
not one frame each (each frame a settle of its own on the quorum queue).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import aiormq
import pytest

from tests.consumers.test_lane_inline import held_replies, long_bar
from tests.consumers.test_lanes_flow import LANES, lane_endpoint
from tests.support.receiver import Receiver
from warren.broker.amqp.ack_batcher import WINDOW_ACK_DELAY, AckBatcher
from warren.broker.events import Event
from warren.consumers import lane_inline
from warren.consumers.inline_policy import SLOW
from warren.consumers.lane_router import ROUTE_PACE
from warren.consumers.worker import Worker

pytestmark = pytest.mark.timeout(90)


def ack_frames(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, bool]]:
    """Every ``basic.ack`` the process sends from now: (its aiormq channel, multiple)."""
    sent: list[tuple[Any, bool]] = []
    original = aiormq.Channel.basic_ack

    async def recorded(self: Any, delivery_tag: int, multiple: bool = False, wait: bool = True) -> None:
        sent.append((self, multiple))
        await original(self, delivery_tag, multiple=multiple, wait=wait)

    monkeypatch.setattr(aiormq.Channel, "basic_ack", recorded)
    return sent


async def test_events_routed_behind_a_held_one_are_acked_with_it_in_one_frame_not_alone(
    endpoint_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a slow mark of 0.3 s, a lane endpoint new to the worker that answers only once the test lets it, and a
    # lane-mate subscribed to the same events
    monkeypatch.setattr(lane_inline, "SLOW", 0.3)
    long_bar(monkeypatch)
    release = held_replies(receiver, "/held")
    sent = ack_frames(monkeypatch)
    config = await endpoint_config(
        [lane_endpoint(receiver, "held", timeout="60s"), lane_endpoint(receiver, "mate")],
        lanes={"count": LANES, "route_prefetch": 64},
    )
    first = Event(type="order.paid", data={"n": 0}, key="one-key")
    behind = [Event(type="order.paid", data={"n": i}, key="one-key") for i in range(1, 31)]
    async with Worker(config) as worker:
        try:
            await _route_behind_a_held_event(worker, config, receiver, publish, sent, [first, *behind])
        finally:
            release.set()  # the held endpoint's requests end, whatever was asserted
        await receiver.wait_for(lambda r: r.ok_ids("/hook/held") == {e.id for e in [first, *behind]}, 45)


async def _route_behind_a_held_event(
    worker: Worker, config: Any, receiver: Receiver, publish: Any, sent: list[tuple[Any, bool]], events: list[Event]
) -> None:
    """One event held by its trial for the new endpoint, the rest published behind it: their ack frames."""
    first, behind = events[0], events[1:]
    assert worker.lanes is not None and worker.lanes.router.inline is not None
    router = worker.lanes.router
    # When one event is published and its trial for the new endpoint is under way (held by its receiver)
    await publish(config, [first])
    async with asyncio.timeout(20):
        while router.inline.started["held"] < 1:
            await asyncio.sleep(0.01)
    # and 30 more of its key (so of its route partition) are published behind it
    await publish(config, behind)
    await receiver.wait_for(lambda r: r.ok_ids("/hook/mate") == {e.id for e in events}, 30)
    async with asyncio.timeout(20):
        while router.routed < len(events):
            await asyncio.sleep(0.02)
    partitions = list(router.partitions._lanes.values())
    async with asyncio.timeout(10):  # the last batch's acks sent
        while any(p.acks._acked for p in partitions):
            await asyncio.sleep(0.02)
    route_channels = {id(p.acks._channel) for p in partitions}
    frames = Counter(multiple for channel, multiple in sent if id(channel) in route_channels)
    # Then the trial was cut at the slow mark (its event held that long, well within ROUTE_PACE.straggler_after), and
    # the 30 events behind it, routed meanwhile, were acked together with it: multiple acks only, far fewer
    # than the events (with the work queue's 50 ms straggler mark, each went alone)
    assert router.inline.cut == 1 and ROUTE_PACE.straggler_after > 0.3 * 2
    assert frames[False] == 0, frames
    assert 1 <= frames[True] <= 10, frames


@pytest.mark.parametrize(("prefetch", "hurry_at"), [(1, 1), (8, 8), (16, 15), (64, 60), (512, 480)])
def test_a_route_partition_batcher_waits_for_its_head_and_hurries_only_near_a_full_window(
    prefetch: int, hurry_at: int
) -> None:
    """A route partition's head can be held for its copy's confirm (most of a second on a busy broker): the acks
    behind it wait twice the slow mark, and go at once only once they fill all but a sixteenth of the window
    (the events not yet routed, which a backlog keeps there, do not count)."""
    batcher = AckBatcher.for_window(prefetch, ROUTE_PACE)
    assert batcher.straggler_after == 2 * SLOW > 2 * WINDOW_ACK_DELAY
    assert batcher.hurry_at == hurry_at
    assert batcher.hurry_counts == "waiting"
