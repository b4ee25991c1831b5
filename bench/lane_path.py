"""One event through the routing stage's inline path, without the broker or the network, in CPU µs (issue 34,
part 6): a route partition's delivery as aio-pika hands it over, through its key lanes' dispatch, the router
(headers, the index, the inline slot) and the lane endpoint's own runner (bench/delivery_path.py's canned 200
answer, signing, decision, attempt line, metrics), to the batched ack on the route partition. Beside it, the
dedicated path's whole delivery (bench/delivery_path.py): the difference is what a lane endpoint's event costs the
worker more. bench/per_delivery_micro.py measures it beside the dedicated path's whole delivery:

    .venv/bin/python bench/per_delivery_micro.py --compare /tmp/warren-main --rounds 5
"""

from __future__ import annotations

import asyncio
import time

ENDPOINTS = 16  # bench/lanes.py's throughput spread: each endpoint subscribed to its own event type


async def run(count: int, rounds: int) -> float:
    """CPU µs per event, the best of ``rounds`` runs of ``count`` events spread over ENDPOINTS lane endpoints."""
    from bench.delivery_path import SECRET, Channel, Session, deliveries, settings
    from bench.delivery_path import Message as Delivered

    class Message(Delivered):
        """A route partition's delivery: what the router and an inline copy read of it besides."""

        exchange = "bench.events"
        type = content_type = timestamp = app_id = correlation_id = None

    from warren.consumers.health.control import HealthControl
    from warren.consumers.hooks import DeliveryHooks
    from warren.consumers.key_lanes import PartitionLanes
    from warren.consumers.lane_index import SubscriptionIndex
    from warren.consumers.lane_inline import InlineDeliveries
    from warren.consumers.lane_router import LaneRouter
    from warren.consumers.lanes import LaneRunner
    from warren.consumers.metrics import WorkerMetrics
    from warren.transport.http import HttpTransport

    config = settings(
        [{"name": f"e{i}", "url": f"http://127.0.0.1:9/hook/e{i}", "secret": SECRET, "events": [f"bench.t{i}"],
          "concurrency": 32, "timeout": "10s", "home": "lane"} for i in range(ENDPOINTS)],
        {"count": 16, "prefetch": 64},
    )  # fmt: skip
    hooks = DeliveryHooks()
    WorkerMetrics([e.name for e in config.endpoints]).install(hooks)
    transport = HttpTransport(Session(), allow_private_networks=True, body_limit=config.delivery.response_body_limit)  # type: ignore[arg-type]
    runners = {
        e.name: LaneRunner(
            e, e.retry_policy(config.retry), config.delivery, prefix="bench", lanes=16, delay_levels=8,
            transport=transport, hooks=hooks, channel_acks=lambda message: None,  # LaneConsumer.acks_of's answer
        )
        for e in config.endpoints
    }  # fmt: skip
    health = HealthControl(config, runners, hooks, worker="bench")  # type: ignore[arg-type]
    hooks.gates.append(health)
    hooks.park_failures.append(health._parks)
    hooks.observers.append(health._observe)
    index = SubscriptionIndex(config.endpoints)
    router = LaneRouter("bench", 16, config.lanes.route_prefetch, index, delay_levels=8, partitions=1)
    router._publisher = object()  # type: ignore[assignment]  # asserted, never used: every event settles inline
    inline = router.inline = InlineDeliveries(runners, config.lanes.route_prefetch)  # type: ignore[arg-type]
    hooks.observers.append(lambda record: inline.attempted(record.endpoint, record.duration))
    for name, runner in runners.items():
        runner._accepting = True
        inline.policy.attempted(name, 0.001)  # proven fast: as after a worker's first answers

    async def returned() -> None:
        pass

    lanes = PartitionLanes(router._on_event, returned, apart=router._apart, prefetch=config.lanes.route_prefetch)
    router.partitions.lanes_of = lambda message: lanes  # type: ignore[method-assign]
    channel = Channel()
    bodies = deliveries(count)
    published = int(time.time() * 1000)
    best, tag = float("inf"), 0
    for _ in range(rounds):
        messages = []
        for n, (body, event_id) in enumerate(bodies):
            tag += 1
            message = Message(channel, tag, body, event_id, published)
            message.routing_key = f"bench.t{n % ENDPOINTS}"  # type: ignore[misc]
            messages.append(message)
        started = time.process_time()
        for i, message in enumerate(messages):
            await lanes.dispatch(message)  # type: ignore[arg-type]
            if i % 64 == 63:
                await asyncio.sleep(0)  # a turn of the loop: the acks' and the log lines' writes
        await asyncio.sleep(0.01)
        best = min(best, (time.process_time() - started) / count * 1e6)
    assert router.routed == count * rounds and inline.delivered == count * rounds, (router.routed, inline.delivered)
    return best
