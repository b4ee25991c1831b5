"""A lane endpoint's promotion fences the routing stage first (warren/broker/partition_fence.py): every event the
route partitions held for it is routed before any router hears it is dedicated, or the promotion is refused and
undone; a fence is never an event (never delivered, never dead-lettered)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import aio_pika
import pytest
from aio_pika.abc import AbstractIncomingMessage
from aiohttp import web

from tests.broker.test_lanes_live import endpoint, publish
from tests.consumers.test_lane_route_failures import delete_queue
from tests.support.dead_letters import wait_depth
from tests.support.health import wait_until
from tests.support.receiver import Receiver, Reply
from tests.support.topology import declare
from warren.broker.events import Event
from warren.broker.live_apply import RoutingUnconfirmed, apply_endpoint
from warren.broker.management import ManagementClient
from warren.consumers import lane_router, route_fences
from warren.consumers.lanes import LaneRunner
from warren.consumers.worker import Worker
from warren.topology import names
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(90)


async def _nothing_left_anywhere(config: WarrenConfig, partitions: int) -> None:
    """Every fence acked (the partitions empty) and none of them, nor any event, in a DLQ."""
    prefix = config.broker.prefix
    for i in range(partitions):
        assert await wait_depth(config, names.route_partition(prefix, i), 0) == 0
    for queue in (names.route_dlq(prefix), names.lane_dlq(prefix, 0), names.dlq(prefix, "rising")):
        assert await wait_depth(config, queue, 0) == 0, queue


def holding() -> tuple[Callable[[Receiver, web.Request, bytes], Awaitable[Reply]], asyncio.Event, asyncio.Event]:
    """A receiver's behaviour that holds each event marked "hold" until ``release`` is set (``held`` says it is)."""
    release, held = asyncio.Event(), asyncio.Event()

    async def answer(_: Receiver, __: web.Request, body: bytes) -> Reply:
        if b'"hold"' in body and not release.is_set():
            held.set()
            await release.wait()
        return Reply(200)

    return answer, held, release


async def test_a_promotion_with_no_router_running_is_refused_undone_and_succeeds_once_one_routes(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    async with Receiver() as receiver:
        # Given a lane endpoint with events waiting for it in the route partitions, and no worker running
        config = make_config([], lanes={"count": 1, "route_partitions": 2, "promote_wait": "300ms"})
        await declare(config)
        await apply_endpoint(config, endpoint(receiver, "rising", home="lane"))
        before = [Event(type="order.paid", data={"n": i}) for i in range(10)]
        await publish(config, before)
        # When it is promoted to queues of its own
        with pytest.raises(RoutingUnconfirmed) as refused:
            await apply_endpoint(config, endpoint(receiver, "rising", home="dedicated"))
        # Then the promotion is refused, saying why and what to do, and undone: it has no queue of its own
        assert "apply it again" in str(refused.value)
        assert sorted(refused.value.missing) == [names.route_partition(prefix, i) for i in range(2)]
        assert await management.queue(names.work_queue(prefix, "rising")) is None
        assert await management.queue(names.dlq(prefix, "rising")) is None
        async with Worker(config) as worker:
            # and it keeps receiving on its lane, the events that waited among them
            await receiver.wait_for(lambda r: r.ok_ids("/hook/rising") >= {e.id for e in before}, 15)
            assert isinstance(worker.runners.get("rising"), LaneRunner)
            # When it is applied again while a router routes
            await apply_endpoint(config, endpoint(receiver, "rising", home="dedicated"))
            await wait_until(lambda: not isinstance(worker.runners.get("rising"), LaneRunner), 10, "re-served")
            after = [Event(type="order.paid", data={"n": i}) for i in range(10, 20)]
            await publish(config, after)
            # Then it succeeds and nothing is lost, from before either apply or after
            wanted = {e.id for e in [*before, *after]}
            await receiver.wait_for(lambda r: r.ok_ids("/hook/rising") >= wanted, 15)
            assert await management.queue(names.work_queue(prefix, "rising")) is not None
            # and the refused apply's fences, late, were acked like the second's: nothing left, nothing dead
            await _nothing_left_anywhere(config, 2)
        # and no fence ever reached the receiver
        assert {r.event_id for r in receiver.received} <= wanted


async def test_a_fence_is_answered_only_once_the_events_delivered_before_it_are_routed(
    make_config: Callable[..., WarrenConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    answer, held, release = holding()

    # What the router does with the fence, in order, beside what the test does
    story: list[str] = []
    taken = asyncio.Event()
    real = lane_router.answer_fence

    async def watched(*args: Any) -> None:
        story.append("fence taken")
        taken.set()
        await real(*args)
        story.append("fence answered")

    monkeypatch.setattr(lane_router, "answer_fence", watched)
    async with Receiver(answer) as receiver:
        # Given a lane endpoint whose first attempt of an event hangs in the router (inline: the event unacked)
        config = make_config([], lanes={"count": 1, "route_partitions": 1, "inline": True})
        await declare(config)
        async with Worker(config) as worker:
            await apply_endpoint(config, endpoint(receiver, "rising", home="lane", timeout="60s"))
            await wait_until(lambda: isinstance(worker.runners.get("rising"), LaneRunner), 10, "served on its lane")
            assert worker.lanes is not None and worker.lanes.router.inline is not None
            worker.lanes.router.inline.policy.attempted("rising", 0.01)  # seen answering fast: inline from now
            slow = Event(type="order.paid", data={"hold": True}, key="slow")
            await publish(config, [slow])
            await asyncio.wait_for(held.wait(), 10)
            router = worker.lanes.router  # type: ignore[union-attr]
            assert router.copies == 0 and router.routed == 0  # the router holds it: made inline, not yet settled
            # When it is promoted meanwhile
            promotion = asyncio.ensure_future(apply_endpoint(config, endpoint(receiver, "rising", home="dedicated")))
            await asyncio.wait_for(taken.wait(), 10)
            # Then the router took the fence but does not answer it while the event before it is being routed:
            # an event published after the fence, of another key, is routed and delivered meanwhile
            later = Event(type="order.paid", data={"n": 1}, key="other")
            await publish(config, [later])
            await receiver.wait_for(lambda r: later.id in r.ok_ids("/hook/rising"), 10)
            assert story == ["fence taken"] and not promotion.done()
            # and answers once it is routed: only then is the promotion announced
            story.append("event released")
            release.set()
            await asyncio.wait_for(promotion, 30)
            assert story == ["fence taken", "event released", "fence answered"]
            await receiver.wait_for(lambda r: slow.id in r.ok_ids("/hook/rising"), 10)
            await wait_until(lambda: not isinstance(worker.runners.get("rising"), LaneRunner), 10, "re-served")
            await _nothing_left_anywhere(config, 1)
        assert {r.event_id for r in receiver.received} <= {slow.id, later.id}


async def test_an_event_sent_round_the_delay_chain_owing_a_lane_endpoint_reaches_it_once_it_is_promoted(
    make_config: Callable[..., WarrenConfig], prefix: str
) -> None:
    async with Receiver() as receiver:
        # Given a lane endpoint whose lane is missing (every copy to it is returned), routed by copies
        lanes = {"count": 1, "route_partitions": 1, "inline": False, "route_retry_delay": "1s", "route_attempts": 10}
        config = make_config([], lanes=lanes)
        await declare(config)
        async with Worker(config) as worker:
            await apply_endpoint(config, endpoint(receiver, "rising", home="lane"))
            await wait_until(lambda: "rising" in worker.lanes.index, 10, "routed to")  # type: ignore[union-attr]
            await delete_queue(config.broker.url, names.lane_queue(prefix, 0))
            # and an event for it, published before its promotion, sent round the delay chain owing it a copy
            event = Event(type="order.paid", data={"n": 1})
            await publish(config, [event])
            router = worker.lanes.router  # type: ignore[union-attr]
            await wait_until(lambda: router.retried >= 1, 10, "sent round the delay chain")
            # When it is promoted to queues of its own while the event is on its way back to the routing stage
            await apply_endpoint(config, endpoint(receiver, "rising", home="dedicated"))
            # Then the event reaches it there: the router, owing it a copy, sends it to its own queues
            await receiver.wait_for(lambda r: event.id in r.ok_ids("/hook/rising"), 30)
            assert await wait_depth(config, names.route_dlq(prefix), 0) == 0


async def test_a_fence_waiting_when_its_router_stops_returns_with_the_events_before_it_and_the_next_router_answers(
    make_config: Callable[..., WarrenConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    answer, held, release = holding()

    taken: list[bool] = []  # each time a router takes the fence: whether it was delivered before
    answers: list[str] = []
    real_answer_fence, real_fence_answer = lane_router.answer_fence, route_fences.fence_answer

    async def watched(message: AbstractIncomingMessage, *args: Any) -> None:
        taken.append(message.redelivered)
        await real_answer_fence(message, *args)

    def counted(fence: str, partition: str) -> Any:
        answers.append(partition)
        return real_fence_answer(fence, partition)

    monkeypatch.setattr(lane_router, "answer_fence", watched)
    monkeypatch.setattr(route_fences, "fence_answer", counted)
    async with Receiver(answer) as receiver:
        # Given a router holding an event (its first attempt inline, hanging) when the promotion's fence reaches it
        lanes = {"count": 1, "route_partitions": 1, "inline": True}
        config = make_config([], lanes=lanes, delivery={"grace_period": "1s"})
        await declare(config)
        slow = Event(type="order.paid", data={"hold": True}, key="slow")
        async with Worker(config) as first:
            await apply_endpoint(config, endpoint(receiver, "rising", home="lane", timeout="60s"))
            await wait_until(lambda: isinstance(first.runners.get("rising"), LaneRunner), 10, "served on its lane")
            assert first.lanes is not None and first.lanes.router.inline is not None
            first.lanes.router.inline.policy.attempted("rising", 0.01)  # seen answering fast: inline from now
            await publish(config, [slow])
            await asyncio.wait_for(held.wait(), 10)
            promotion = asyncio.ensure_future(apply_endpoint(config, endpoint(receiver, "rising", home="dedicated")))
            await wait_until(lambda: len(taken) == 1, 10, "the fence taken")
        # When that router stops before the event is routed: the event and the fence go back, unanswered
        assert answers == [] and not promotion.done()
        release.set()
        async with Worker(config) as second:
            # Then the next router routes the event and only then answers the fence: the promotion goes through
            await asyncio.wait_for(promotion, 30)
            assert taken == [False, True] and len(answers) == 1
            await receiver.wait_for(lambda r: slow.id in r.ok_ids("/hook/rising"), 10)
            await wait_until(lambda: not isinstance(second.runners.get("rising"), LaneRunner), 10, "re-served")
            await _nothing_left_anywhere(config, 1)
        assert {r.event_id for r in receiver.received} == {slow.id}


async def test_a_promotion_is_refused_at_once_while_an_earlier_releases_routing_queue_holds_events(
    make_config: Callable[..., WarrenConfig], management: ManagementClient, prefix: str
) -> None:
    async with Receiver() as receiver:
        # Given a lane endpoint, and the earlier release's single routing queue still holding an event (its moves
        # into the partitions would come behind any fence: route_migration.py)
        config = make_config([], lanes={"count": 1, "promote_wait": "60s"})
        await declare(config)
        await apply_endpoint(config, endpoint(receiver, "rising", home="lane"))
        connection = await aio_pika.connect(config.broker.url)
        async with connection:
            channel = await connection.channel()
            old = await channel.declare_queue(names.route_queue(prefix), durable=True)
            await channel.default_exchange.publish(aio_pika.Message(b"{}"), routing_key=old.name)
        # When it is promoted
        with pytest.raises(RoutingUnconfirmed) as refused:
            await asyncio.wait_for(apply_endpoint(config, endpoint(receiver, "rising", home="dedicated")), 30)
        # Then it is refused, naming that queue (without waiting out promote_wait), and undone
        assert refused.value.missing == [names.route_queue(prefix)]
        assert await management.queue(names.work_queue(prefix, "rising")) is None
