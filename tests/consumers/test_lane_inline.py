"""The routing stage's first attempt inline (warren/consumers/lane_inline.py): real RabbitMQ, real receivers.

A healthy lane endpoint's first attempt is made by the router with the endpoint's own runner, with no copy in
its lane; what the attempt leaves to do (a retry, a dead letter) goes through the broker as from the lane; a slow
endpoint is barred from the inline path and holds none of its lane-mates back.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from tests.consumers.test_lanes_flow import LANES, by_path, lane_endpoint
from tests.support.dead_letters import wait_depth
from tests.support.receiver import Receiver, Reply
from warren.broker.events import Event
from warren.consumers import lane_inline
from warren.consumers.lane_inline import InlinePolicy
from warren.consumers.worker import Worker
from warren.topology import names

pytestmark = pytest.mark.timeout(90)


def held_replies(receiver: Receiver, path_end: str) -> asyncio.Event:
    """The receiver answers 200 at once, but a request whose path ends with ``path_end`` only once the event is set."""
    release = asyncio.Event()

    async def hangs(_: Receiver, request: Any, __: bytes) -> Reply:
        if request.path.endswith(path_end):
            await release.wait()
        return Reply(200)

    receiver.behaviour = hangs
    return release


async def slow_and_fast(
    endpoint_config: Any, receiver: Receiver, pair: tuple[str, str], concurrency: int, window: int
) -> Any:
    """A lane endpoint for slow.* events (``concurrency``, timeout 60 s) and one for fast.*, a router window of
    ``window``."""
    slow, fast = pair
    return await endpoint_config(
        [
            lane_endpoint(receiver, slow, events=["slow.*"], concurrency=concurrency, timeout="60s"),
            lane_endpoint(receiver, fast, events=["fast.*"]),
        ],
        lanes={"count": LANES, "route_prefetch": window},
    )


def long_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bar that outlasts the test: a test that asserts an endpoint is barred after its waits (up to 45 s each on a
    loaded machine) must not find the default 30 s bar already over (it did once, in a CI run's 3.10 leg)."""
    monkeypatch.setattr(lane_inline, "BAR_BASE", 3600.0)
    monkeypatch.setattr(lane_inline, "BAR_MAX", 3600.0)


def prove(policy: InlinePolicy, *names: str) -> None:
    """Given endpoints already seen answering fast (an attempt through their lane): they may have inline ones."""
    for name in names:
        policy.attempted(name, 0.01)


async def test_first_attempts_are_made_by_the_router_with_no_copy_in_the_lanes(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given three lane endpoints answering 200
    endpoints = ["in-a", "in-b", "in-c"]
    config = await endpoint_config([lane_endpoint(receiver, n) for n in endpoints], lanes={"count": LANES})
    events = [Event(type="order.paid", data={"n": i}) for i in range(12)]  # fewer than a concurrency (16)
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        prove(worker.lanes.router.inline.policy, *endpoints)
        # When 12 events are published
        await publish(config, events)
        await receiver.wait_for(lambda r: all(r.ok_ids(f"/hook/{n}") == {e.id for e in events} for n in endpoints), 20)
        router = worker.lanes.router
        for partition in range(config.lanes.route_partitions):
            await wait_depth(config, names.route_partition(config.broker.prefix, partition), 0)
        # Then every first attempt was made inline, none handed to a lane, and every event acked
        assert router.inline is not None and router.inline.delivered == 36 and router.inline.handed == 0
        assert router.routed == 12 and router.copies == 0
    assert len(receiver.received) == 36  # each once


async def test_with_inline_off_every_copy_goes_through_its_lane(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    config = await endpoint_config([lane_endpoint(receiver, "off-a")], lanes={"count": LANES, "inline": False})
    events = [Event(type="order.paid", data={"n": i}) for i in range(10)]
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is None
        await publish(config, events)
        await receiver.wait_for(lambda r: r.ok_ids("/hook/off-a") == {e.id for e in events}, 20)
        # the router counts a copy once its publish is confirmed, which can come after the lane delivered it
        async with asyncio.timeout(10):
            while worker.lanes.router.copies < 10:
                await asyncio.sleep(0.01)
        assert worker.lanes.router.copies == 10
    assert len(receiver.received) == 10


async def test_a_failed_inline_attempt_goes_on_through_the_delay_chain_and_its_lane_counting_the_attempt(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a lane endpoint answering 503 to each event's first two attempts, then 200
    seen: Counter[str] = Counter()

    def flaky(event_id: str) -> Reply:
        seen[event_id] += 1
        return Reply(503 if seen[event_id] <= 2 else 200)

    receiver.behaviour = by_path({"flaky-in": flaky})
    config = await endpoint_config([lane_endpoint(receiver, "flaky-in")], lanes={"count": LANES})
    events = [Event(type="order.paid", data={"n": i}) for i in range(8)]
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        prove(worker.lanes.router.inline.policy, "flaky-in")
        await publish(config, events)
        await receiver.wait_for(lambda r: r.ok_ids("/hook/flaky-in") == {e.id for e in events}, 30)
        lane = names.lane_queue(config.broker.prefix, names.lane_of("flaky-in", LANES))
        assert await wait_depth(config, lane, 0) == 0
        # The first attempts were inline, settled by their retries (confirmed into the delay chain): no copy owed
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        assert worker.lanes.router.inline.delivered == 8 and worker.lanes.router.inline.handed == 0
    # Then each event was attempted three times (the inline one counted) and delivered once
    assert all(seen[e.id] == 3 for e in events), seen
    assert len(receiver.ok_ids("/hook/flaky-in")) == 8


async def test_a_slow_endpoint_is_barred_from_the_inline_path_and_holds_no_lane_mate_back(
    endpoint_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an inline delivery counted slow past 0.3 s, a router window of 8 (2 inline deliveries an endpoint at
    # most), a lane endpoint whose replies are withheld until the test releases them (1 s at least; concurrency
    # 4) and a fast one
    monkeypatch.setattr(lane_inline, "SLOW", 0.3)
    long_bar(monkeypatch)
    release = asyncio.Event()

    async def withheld(_: Receiver, request: Any, __: bytes) -> Reply:
        if not request.path.endswith("/slow-in"):
            return Reply(200)
        await asyncio.gather(release.wait(), asyncio.sleep(1.0))
        return Reply(200)

    receiver.behaviour = withheld
    config = await slow_and_fast(endpoint_config, receiver, ("slow-in", "fast-in"), concurrency=4, window=8)
    slow = [Event(type="slow.x", data={"n": i}) for i in range(8)]
    fast = [Event(type="fast.x", data={"n": i}) for i in range(60)]
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        inline = worker.lanes.router.inline
        prove(inline.policy, "slow-in", "fast-in")  # both seen fast before: the slow one turns slow now
        # When the slow endpoint's events are published first, then the fast one's
        await publish(config, slow)
        await publish(config, fast)
        # Then the fast one's 60 are all delivered while every reply of the slow one is still withheld: held
        # behind a slow delivery, none would be (a causal bound, whatever the machine's load)
        await receiver.wait_for(lambda r: r.ok_ids("/hook/fast-in") == {e.id for e in fast}, 45)
        assert not receiver.ok_ids("/hook/slow-in")
        release.set()
        await receiver.wait_for(lambda r: r.ok_ids("/hook/slow-in") == {e.id for e in slow}, 45)
        # and the slow one is barred after its first inline deliveries (at most 2 at once); its others went
        # through its lane
        assert inline.policy.barred("slow-in", time.monotonic())
        assert 1 <= inline.started["slow-in"] <= 2, inline.started
    assert len(receiver.ok_ids("/hook/slow-in")) == 8


def test_the_policy_caps_each_endpoint_at_a_quarter_of_the_window_and_its_concurrency_keeping_an_eighth_free() -> None:
    policy = InlinePolicy(window=16)  # 4 an endpoint at most, 14 in all
    prove(policy, "a", "b", "c", "d", "e")
    for _ in range(4):
        assert policy.may("a", 32, 0.0)
        policy.began("a")
    assert not policy.may("a", 32, 0.0)
    assert policy.may("b", 2, 0.0)
    policy.began("b")
    policy.began("b")
    assert not policy.may("b", 2, 0.0)  # its concurrency
    policy.ended("a", 0.01, 0.0)
    assert policy.may("a", 32, 0.0)
    for name in ("a", "c", "c", "c", "c", "d", "d", "d"):
        policy.began(name)  # 14 in flight in all (a 4, b 2, c 4, d 4 after one more)
    assert policy.may("d", 32, 0.0)
    policy.began("d")
    assert not policy.may("e", 32, 0.0)  # two of the 16 stay free
    policy.ended("d", 0.01, 0.0)
    assert policy.may("e", 32, 0.0)


def test_a_slow_inline_delivery_bars_its_endpoint_longer_each_time_in_a_row() -> None:
    policy = InlinePolicy(window=64, slow=1.0, bar=30.0, bar_max=100.0)
    for k in range(16):  # its lane-mates' deliveries take 10 ms
        policy.began(f"fast-{k}")
        policy.ended(f"fast-{k}", 0.01, 0.0)
    policy.began("s")
    policy.ended("s", 2.0, 0.0)  # slow: barred for 30 s
    assert policy.barred("s", 29.0) and not policy.may("s", 8, 29.0)
    assert not policy.barred("s", 30.0) and not policy.may("s", 8, 30.0)  # the bar is over, but it was slow
    prove(policy, "s")  # until an attempt through its lane is fast
    assert policy.may("s", 8, 30.0)
    policy.began("s")
    policy.ended("s", 2.0, 30.0)  # again: 60 s
    assert policy.barred("s", 89.0) and not policy.barred("s", 90.0)
    policy.began("s")
    policy.ended("s", 2.0, 90.0)  # again: 120, at most 100
    assert policy.barred("s", 189.0) and not policy.barred("s", 190.0)
    policy.began("s")
    policy.ended("s", 0.01, 190.0)  # fast again: the count starts over
    policy.began("s")
    policy.ended("s", 2.0, 191.0)
    assert not policy.barred("s", 221.0)


def test_when_every_inline_delivery_is_slow_together_nobody_is_barred() -> None:
    # A loaded machine or receiver: every delivery takes about 2 s
    policy = InlinePolicy(window=512, slow=1.0)
    for k in range(64):
        policy.began(f"e{k}")
        policy.ended(f"e{k}", 2.0, 0.0)
    assert not any(policy.barred(f"e{k}", 0.0) for k in range(64))
    policy.began("a")
    policy.ended("a", 2.5, 0.0)  # as slow as the others: not barred
    assert not policy.barred("a", 0.0)
    policy.began("b")
    policy.ended("b", 9.0, 0.0)  # four times slower than they are: barred
    assert policy.barred("b", 0.0)


async def test_an_event_for_a_hanging_endpoint_holds_back_no_later_event_of_its_key(
    endpoint_config: Any, receiver: Receiver, publish: Any
) -> None:
    # Given a lane endpoint that answers only once the test lets it (timeout 60 s) and a fast lane-mate, both
    # unordered, and every event of one key: the hanging one's first, then 30 for the mate
    release = held_replies(receiver, "/hangs-in")
    config = await endpoint_config(
        [
            lane_endpoint(receiver, "hangs-in", events=["slow.*"], timeout="60s"),
            lane_endpoint(receiver, "mate-in", events=["fast.*"]),
        ],
        lanes={"count": LANES},
    )
    slow = Event(type="slow.x", data={}, key="one-key")
    fast = [Event(type="fast.x", data={"n": i}, key="one-key") for i in range(30)]
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        router = worker.lanes.router
        prove(router.inline.policy, "hangs-in", "mate-in")  # both seen fast before: the first one hangs now
        # When they are published in that order
        await publish(config, [slow, *fast])
        # Then the mate's events are all delivered while the hanging delivery is still held (a causal bound:
        # routed behind it in its key, they would wait for its release). The slow event was routed apart from
        # its key (no ordered subscriber), inline, and is delivered in the end, once.
        await receiver.wait_for(lambda r: r.ok_ids("/hook/mate-in") == {e.id for e in fast}, 45)
        assert not receiver.ok_ids("/hook/hangs-in")
        assert router.detached >= 1 and router.inline.started["hangs-in"] == 1
        release.set()
        await receiver.wait_for(lambda r: r.ok_ids("/hook/hangs-in") == {slow.id}, 45)
        for partition in range(config.lanes.route_partitions):
            await wait_depth(config, names.route_partition(config.broker.prefix, partition), 0)
    assert len(receiver.ok_ids("/hook/mate-in")) == 30 and len(receiver.received) == 31


def test_an_inline_delivery_still_running_past_the_slow_mark_bars_its_endpoint_once_before_it_ends() -> None:
    policy = InlinePolicy(window=64, slow=1.0, bar=30.0, bar_max=100.0)
    for k in range(16):  # its lane-mates' deliveries take 10 ms
        policy.began(f"fast-{k}", 0.0)
        policy.ended(f"fast-{k}", 0.01, 0.01)
    # Given an endpoint with two inline deliveries hanging since t=0
    prove(policy, "h")
    policy.began("h", 0.0)
    policy.began("h", 0.0)
    assert policy.may("h", 16, 0.5) and not policy.barred("h", 0.5)
    # When 1.2 s have passed, the endpoint is barred at once (not at their timeout): no more inline for it
    assert policy.barred("h", 1.2) and not policy.may("h", 16, 1.2)
    # And their ends, slow, do not bar it again: the bar is the one of 30 s from 1.2 s
    policy.ended("h", 10.0, 10.0)
    policy.ended("h", 10.0, 10.0)
    assert policy.barred("h", 31.0) and not policy.barred("h", 31.3)


def test_the_oldest_inline_delivery_still_running_decides_whatever_order_the_others_end_in() -> None:
    policy = InlinePolicy(window=64, slow=1.0, bar=30.0, bar_max=100.0)
    for k in range(16):  # its lane-mates' deliveries take 10 ms
        policy.began(f"fast-{k}", 0.0)
        policy.ended(f"fast-{k}", 0.01, 0.01)
    # Given deliveries of one endpoint begun at 0.6, 0.0 and 0.3 s (in that order), and the one of 0.0 s ending fast
    prove(policy, "e")
    for start in (0.6, 0.0, 0.3):
        policy.began("e", start)
    policy.ended("e", 0.05, 0.05)
    # Then at 1.2 s none still running is past the slow mark (the oldest began at 0.3 s), so it is not barred
    assert policy.may("e", 16, 1.2)
    # When the one of 0.3 s ends fast too, the oldest still running began at 0.6 s: barred only past 1.6 s
    policy.ended("e", 0.9, 1.2)
    assert policy.may("e", 16, 1.55) and not policy.may("e", 16, 1.65)
    # And that one's slow end does not bar it again: the bar is the one of 30 s from 1.65 s
    policy.ended("e", 2.0, 2.6)
    assert policy.barred("e", 31.6) and not policy.barred("e", 31.7)


async def test_a_new_endpoint_s_events_wait_for_its_trial_inline_and_then_go_inline_with_no_lane_copy(
    endpoint_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given three lane endpoints new to the worker, answering 200; a slow mark of 10 s, so that a loaded machine's
    # trials still answer within it
    monkeypatch.setattr(lane_inline, "SLOW", 10.0)
    endpoints = ["new-a", "new-b", "new-c"]
    config = await endpoint_config([lane_endpoint(receiver, n) for n in endpoints], lanes={"count": LANES})
    events = [Event(type="order.paid", data={"n": i}) for i in range(12)]
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        router, inline = worker.lanes.router, worker.lanes.router.inline
        # When 12 events are published at once
        await publish(config, events)
        await receiver.wait_for(lambda r: all(r.ok_ids(f"/hook/{n}") == {e.id for e in events} for n in endpoints), 30)
        async with asyncio.timeout(20):
            while router.routed < len(events):
                await asyncio.sleep(0.02)
        # Then each endpoint's first event was its trial, made inline, and the others waited for its answer and
        # went inline too: no copy in any lane, none cut
        assert inline.delivered == 36 and router.copies == 0 and inline.cut == 0, (inline.refused, inline.waited)
        assert not inline.refused
    assert len(receiver.received) == 36  # each once


def test_a_new_endpoint_has_one_trial_inline_then_its_lane_until_an_attempt_is_fast() -> None:
    policy = InlinePolicy(window=16)
    # Given an endpoint new to the router: its first inline delivery is its trial
    assert policy.may("new", 8, 0.0) and policy.on_trial("new")
    policy.began("new", 0.0)
    # Then no second one begins before an attempt of it is fast; its events may wait for that answer a quarter of
    # the slow mark (no inline delivery has ended yet: no median to go by)
    assert policy.refusal("new", 8, 0.1) == "unproven"
    assert policy.proof_due("new", 0.1) == policy.slow / 4
    assert policy.proof_due("new", 0.3) is None
    policy.ended("new", 1.2, 1.2)  # its trial, cut at the slow mark
    assert policy.refusal("new", 8, 1.3) is not None and policy.proof_due("new", 1.3) is None
    # and an attempt through its lane that is fast proves it
    policy.attempted("new", 0.01)
    assert policy.may("new", 8, 40.0) and not policy.on_trial("new")
    # An endpoint seen slow since gets no trial (through its lane until a fast attempt); one forgotten gets one again
    policy.attempted("new", 5.0)
    assert policy.refusal("new", 8, 41.0) == "unproven"
    policy.forget("new")
    assert policy.may("new", 8, 42.0) and policy.on_trial("new")


def test_a_new_endpoint_s_events_wait_for_its_first_answer_as_long_as_fast_endpoints_take_within_the_slow_mark() -> (
    None
):
    policy = InlinePolicy(window=64, slow=1.0)
    # Given no inline delivery ended yet: a quarter of the slow mark
    assert policy.proof_wait() == 0.25
    # Given fast endpoints answering in 10 ms: still the quarter (a first request connects)
    for i in range(16):
        policy.began("fast", float(i))
        policy.ended("fast", 0.01, float(i) + 0.01)
    assert policy.proof_wait() == 0.25
    # Given every endpoint answering in 150 ms: four times that median
    for i in range(64):
        policy.began("fast", 100.0 + i)
        policy.ended("fast", 0.15, 100.15 + i)
    assert abs(policy.proof_wait() - 0.6) < 1e-9
    # Given every endpoint answering in 500 ms: never past the slow mark
    for i in range(64):
        policy.began("fast", 200.0 + i)
        policy.ended("fast", 0.5, 200.5 + i)
    assert policy.proof_wait() == 1.0
    # And a new endpoint's events wait that long from its trial's start, not longer
    policy.began("new", 300.0)
    assert policy.proof_due("new", 300.5) == 301.0 and policy.proof_due("new", 301.0) is None


async def test_a_new_endpoint_that_hangs_has_its_trial_cut_at_the_slow_mark_and_is_served_through_its_lane(
    endpoint_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a slow mark of 0.3 s, a lane endpoint new to the worker that answers only once the test lets it
    # (timeout 60 s), and a lane-mate subscribed to the same events
    monkeypatch.setattr(lane_inline, "SLOW", 0.3)
    long_bar(monkeypatch)
    release = held_replies(receiver, "/new-hangs")
    config = await endpoint_config(
        [lane_endpoint(receiver, "new-hangs", timeout="60s"), lane_endpoint(receiver, "new-mate")],
        lanes={"count": LANES},
    )
    events = [Event(type="order.paid", data={"n": i}) for i in range(8)]
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        router = worker.lanes.router
        # When 8 events are published
        await publish(config, events)
        # Then the mate gets them all, and every event is acked by the router while the hanging endpoint's
        # attempts are still held: its one trial inline was cut at the slow mark and the rest were made from its
        # lane (a causal bound: inline and uncut, they would hold their events unacked in the route partitions,
        # and with them the partitions' batched acks)
        await receiver.wait_for(lambda r: r.ok_ids("/hook/new-mate") == {e.id for e in events}, 30)
        async with asyncio.timeout(20):
            while router.routed < len(events):
                await asyncio.sleep(0.02)
        assert not receiver.ok_ids("/hook/new-hangs")
        assert router.inline.started["new-hangs"] == 1 and router.inline.cut == 1
        # no other inline delivery for it until an attempt is fast (barred too, unless the machine is so loaded
        # that the mate's inline deliveries took over a quarter of the slow mark: not asserted)
        assert router.inline.policy.refusal("new-hangs", 16, time.monotonic()) is not None
        # and once it answers, each is delivered to it (the cut trial's request may be answered too: a duplicate)
        release.set()
        await receiver.wait_for(lambda r: r.ok_ids("/hook/new-hangs") == {e.id for e in events}, 45)
    assert len(receiver.ok_ids("/hook/new-mate")) == 8


def test_events_wait_for_an_endpoint_s_inline_slot_within_its_quarter_of_the_window_and_the_free_eighth() -> None:
    policy = InlinePolicy(window=16)  # 4 an endpoint at most, 14 in all
    prove(policy, "a", "b")
    policy.began("a")
    policy.began("a")
    # Given "a" with 2 inline deliveries in flight (its concurrency): 2 more of its events may wait, not 3
    assert not policy.may("a", 2, 0.0)
    assert policy.may_wait("a", waiting=0, waiting_all=0) and policy.may_wait("a", waiting=1, waiting_all=1)
    assert not policy.may_wait("a", waiting=2, waiting_all=2)
    # and none at all once every endpoint's waiting and in flight fill the 14
    assert policy.may_wait("b", waiting=0, waiting_all=11) and not policy.may_wait("b", waiting=0, waiting_all=12)


async def test_events_over_an_endpoint_s_concurrency_wait_for_its_inline_slots_instead_of_lane_copies(
    endpoint_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a lane endpoint with 2 in flight at most, seen fast, and a router window of 128 (32 an endpoint); a
    # slow mark of 10 s, so that a loaded machine's 15 rounds of 2 still come within the wait it bounds
    monkeypatch.setattr(lane_inline, "SLOW", 10.0)
    config = await endpoint_config(
        [lane_endpoint(receiver, "narrow-in", concurrency=2)], lanes={"count": LANES, "route_prefetch": 128}
    )
    events = [Event(type="order.paid", data={"n": i}) for i in range(30)]
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        router, inline = worker.lanes.router, worker.lanes.router.inline
        prove(inline.policy, "narrow-in")
        # When 30 events are published at once
        await publish(config, events)
        await receiver.wait_for(lambda r: r.ok_ids("/hook/narrow-in") == {e.id for e in events}, 30)
        async with asyncio.timeout(20):
            while router.routed < len(events):
                await asyncio.sleep(0.02)
        # Then every one was delivered inline, those over its 2 after a wait for a slot: no copy in its lane
        assert inline.delivered == 30 and inline.waited >= 1 and router.copies == 0, (inline.refused, inline.waited)
        assert not inline.refused
    assert len(receiver.received) == 30  # each once


async def test_events_waiting_for_a_hanging_endpoint_s_slot_go_to_its_lane_once_it_is_barred(
    endpoint_config: Any, receiver: Receiver, publish: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given an inline delivery counted slow past 0.3 s, a router window of 64 (16 an endpoint), a lane endpoint
    # seen fast (concurrency 2) whose replies are now withheld until the test releases them, and a fast one
    monkeypatch.setattr(lane_inline, "SLOW", 0.3)
    long_bar(monkeypatch)
    release = held_replies(receiver, "/hangs-wait")
    config = await slow_and_fast(endpoint_config, receiver, ("hangs-wait", "fast-wait"), concurrency=2, window=64)
    slow = [Event(type="slow.x", data={"n": i}) for i in range(8)]
    fast = [Event(type="fast.x", data={"n": i}) for i in range(10)]
    async with Worker(config) as worker:
        assert worker.lanes is not None and worker.lanes.router.inline is not None
        router, inline = worker.lanes.router, worker.lanes.router.inline
        prove(inline.policy, "hangs-wait", "fast-wait")
        # When its 8 events are published, then the fast one's 10
        await publish(config, slow)
        await publish(config, fast)
        # Then the fast one's are all delivered while every reply of the hanging one is withheld, and its 6
        # events over its 2 inline deliveries are routed (acked) after their wait, as copies into its lane: a
        # causal bound (held while its deliveries hang, they would stay unacked until the release)
        await receiver.wait_for(lambda r: r.ok_ids("/hook/fast-wait") == {e.id for e in fast}, 45)
        async with asyncio.timeout(20):
            while router.routed < len(fast) + len(slow) - 2:
                await asyncio.sleep(0.02)
        assert not receiver.ok_ids("/hook/hangs-wait")
        assert inline.started["hangs-wait"] == 2 and router.copies == 6
        # and it is barred: at once on a quiet machine, else once its hanging deliveries are 4 times the recent
        # inline median old (a loaded CI machine's median made them younger than that when the routing ended)
        async with asyncio.timeout(10):
            while not inline.policy.barred("hangs-wait", time.monotonic()):
                await asyncio.sleep(0.02)
        assert inline.policy.barred("hangs-wait", time.monotonic())
        release.set()
        await receiver.wait_for(lambda r: r.ok_ids("/hook/hangs-wait") == {e.id for e in slow}, 45)
    assert len(receiver.ok_ids("/hook/hangs-wait")) == 8


def test_the_inline_deliveries_of_a_router_consuming_several_partitions_may_hold_seven_eighths_of_their_windows() -> (
    None
):
    policy = InlinePolicy(window=16)  # each partition's: 4 an endpoint at most
    prove(policy, *(f"e{k}" for k in range(20)))
    # Given a router consuming 4 partitions of 16: 56 of the 64 may be held, each endpoint still at most 4
    policy.consumed(4)
    for k in range(14):
        for _ in range(4):
            assert policy.may(f"e{k}", 32, 0.0)
            policy.began(f"e{k}")
        assert not policy.may(f"e{k}", 32, 0.0)
    assert not policy.may("e15", 32, 0.0)  # 56 in flight: the last eighth stays free
    # When it consumes one partition only, the one window's bounds are back
    policy.consumed(1)
    assert policy.total_cap == 14 and policy.cap == 4
