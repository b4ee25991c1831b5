"""What a worker runs for the shared lanes: the routing stage, the lanes' consumer, the lane endpoints' runners.

The worker keeps its runners in one map (the lane endpoints' beside the dedicated ones', so that endpoint
health, metrics and the drain treat them alike); this stage makes the lane runners and keeps the router's
index in step with them. Lane runners publish on one confirming channel, the stage's; the runner of an endpoint
read at start is built on its first message (``defer``, ``build``: warren/consumers/lane_runners.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Any

from aio_pika.abc import AbstractRobustConnection

from warren.broker.amqp.confirm_channel import ConfirmChannel
from warren.broker.endpoint_state.records import standing
from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.health.control import HealthControl
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.lane_index import SubscriptionIndex
from warren.consumers.lane_inline import InlineDeliveries
from warren.consumers.lane_router import LaneRouter
from warren.consumers.lane_runners import Runners
from warren.consumers.lanes import LaneConsumer, LaneRunner, SharedHomeRunner
from warren.consumers.ordered_lanes import OrderedLaneRunner, OrderedLanes
from warren.consumers.ordered_parks import OrderedParks
from warren.consumers.park_link import ParkLink
from warren.consumers.partition_claims import PartitionClaims
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.planner import delay_levels
from warren.transport.base import Transport

__all__ = ["LaneStage", "open_runner"]

log = logging.getLogger("warren.worker")


class LaneStage:
    """``runners`` is the worker's map of runners; ``start`` once the lane endpoints' runners are in it."""

    def __init__(self, config: WarrenConfig, runners: Runners, hooks: DeliveryHooks) -> None:
        self.config = config
        self.hooks = hooks
        self.runners = runners
        prefix, lanes = config.broker.prefix, config.lanes
        self.index = SubscriptionIndex()
        known = self.index.__contains__
        self.consumer = LaneConsumer(
            prefix, lanes.count, lanes.prefetch, runners, hooks, known=known, ordered_count=lanes.ordered_count
        )
        self.ordered = OrderedLanes(
            prefix,
            lanes.ordered_count,
            lanes.prefetch,
            runners,
            hooks,
            known,
            config.delivery.ordered_hold_limit,
            lanes=lanes.count,
        )
        link = ParkLink(config.broker.urls)  # the parks' own connection (park_link.py)
        self.parks = self.ordered.parks = OrderedParks(prefix, lanes.prefetch, runners, hooks, known, link)
        self.router = LaneRouter(
            prefix,
            lanes.count,
            lanes.route_prefetch,
            self.index,
            delay_levels=delay_levels(config),
            attempts=lanes.route_attempts,
            retry_delay=lanes.route_retry_delay,
            settled=hooks.settled,
            partitions=lanes.route_partitions,
            ordered_lanes=lanes.ordered_count,
        )
        # Who consumes which route partition and which ordered lane: a fair share each (partition_claims.py).
        urls, interval = config.broker.urls, config.worker.rebalance_interval
        self.claims = (
            PartitionClaims(
                urls, self.ordered, interval, roster=names.ordered_lane_roster(prefix), label="ordered lanes"
            ),
            PartitionClaims(urls, self.router.partitions, interval, roster=names.route_roster(prefix), label="route"),
        )
        self.router.elsewhere = self._served_dedicated
        if lanes.inline:  # the first attempt made by the router, without a lane copy (lane_inline.py)
            claimed = self.router.partitions  # the route partitions it consumes, each with a window of its own
            self.router.inline = InlineDeliveries(
                runners, lanes.route_prefetch, partitions=lambda: len(claimed.assigned)
            )
            inline = self.router.inline  # which endpoints answer fast: told of every attempt
            hooks.observers.append(lambda record: inline.attempted(record.endpoint, record.duration))
        self._publishing: ConfirmChannel | None = None  # the lane runners' retries, dead letters and parks
        self._opening = asyncio.Lock()
        self._health: HealthControl | None = None
        self._transport: Transport | None = None

    def _served_dedicated(self, name: str) -> Endpoint | None:
        """``name``'s endpoint when this worker serves it on queues of its own (a copy owed to it from its lane time
        goes there: LaneRouter.elsewhere)."""
        runner = dict.get(self.runners, name)  # never builds a deferred lane runner (Runners.get would)
        return None if runner is None or isinstance(runner, SharedHomeRunner) else runner.endpoint

    def runner(self, endpoint: Endpoint, delay_levels: int, transport: Transport) -> LaneRunner | OrderedLaneRunner:
        """The runner of lane endpoint ``endpoint`` (not yet routed to: ``add`` it once it is in the worker's map)."""
        ordered = endpoint.ordering == "key"
        if ordered and self.ordered.parks is not None:
            self.ordered.parks.forget(endpoint.name)  # a move here may have declared its park queue meanwhile
        kind: type[LaneRunner | OrderedLaneRunner] = OrderedLaneRunner if ordered else LaneRunner
        feed: dict[str, Any] = {"ordered": self.ordered} if ordered else {"channel_acks": self.consumer.acks_of}
        return kind(
            endpoint,
            endpoint.retry_policy(self.config.retry),
            self.config.delivery,
            prefix=self.config.broker.prefix,
            lanes=self.config.lanes.count,
            delay_levels=delay_levels,
            transport=transport,
            hooks=self.hooks,
            **feed,
        )

    def route_unserved(self, layout: Endpoint) -> None:
        """Route to lane endpoint ``layout`` though this worker cannot serve it (its secrets cannot be opened here):
        its copies wait in its lane for a worker that can, instead of this router acking its events as wanted by
        nobody. The worker's ``unserve_endpoint`` takes it out."""
        if layout.home == "lane" and layout.name not in self.runners:
            self.index.add(layout)

    async def open(self, runner: EndpointRunner, connection: AbstractRobustConnection) -> None:
        """Open lane runner ``runner`` (instead of its ``open``): it publishes on the stage's one confirming
        channel, so that a worker serves any number of lane endpoints within RabbitMQ's channel_max (a channel
        each, as a dedicated endpoint has, stopped one near 2,000) and a live one is served without a round trip."""
        runner.settler.share(await self._publishing_channel(connection), self.config.broker.prefix)

    async def _publishing_channel(self, connection: AbstractRobustConnection) -> ConfirmChannel:
        async with self._opening:
            if self._publishing is None:
                self._publishing = await ConfirmChannel(connection).open()
            return self._publishing

    def defer(self, endpoint: Endpoint) -> None:
        """Route to ``endpoint`` now and build its runner on its first message (lane_runners.py)."""
        self.index.add(endpoint)
        self.runners.defer(endpoint)

    def build(self, endpoint: Endpoint) -> LaneRunner | OrderedLaneRunner:
        """A deferred endpoint's runner, now and without a wait: what ``Worker.serve_endpoint`` does for one.

        A held endpoint (paused, disabled, circuit open) does not accept yet: its messages are parked until
        endpoint health, whose tick looks at it (it has a state record), pauses or resumes it."""
        assert self._publishing is not None and self._health is not None and self._transport is not None
        runner = self.runner(endpoint, delay_levels(self.config), self._transport)
        runner.settler.share(self._publishing, self.config.broker.prefix)
        guard = self._health.add_endpoint(endpoint.name, runner)
        if standing(guard.view, time.time(), guard.probing).mode != "hold":
            runner._accepting = True  # what LaneRunner.start_consuming does (an await for nothing)
        return runner

    def add(self, endpoint: Endpoint) -> None:
        self.index.add(endpoint)

    def remove(self, name: str) -> None:
        """Route nothing more to ``name`` and keep nothing of it (removed, moved, or about to be served anew).

        Its routing closed or not stays as its record says (``close_routing``): a reconfigured endpoint is
        removed and added again while its promotion may be under way."""
        self.index.remove(name)
        self.consumer.forget(name)
        if self.router.inline is not None:
            self.router.inline.forget(name)

    def close_routing(self, name: str, closed: bool) -> None:
        """What the endpoint's latest record says: routed to no more while its promotion waits (lane_index.py)."""
        self.index.close(name, closed)

    async def start(
        self,
        connection: AbstractRobustConnection,
        endpoints: Iterable[Endpoint],
        health: HealthControl,
        transport: Transport,
    ) -> None:
        for endpoint in endpoints:
            self.index.add(endpoint)
        self._health, self._transport = health, transport
        self.ordered.publisher = await self._publishing_channel(connection)
        self.runners.build = self.build
        await self.consumer.start(connection, delay_levels(self.config))
        self.ordered.open(connection)
        self.parks.open(self.ordered.publisher)
        await self.router.start(connection)
        for claims in self.claims:  # the ordered lanes first: their copies wait for nobody else
            await claims.start()

    async def stop(self) -> None:
        for claims in self.claims:
            await claims.halt()
        await self.router.stop()
        await self.consumer.stop()
        await self.ordered.stop()

    async def close(self, grace: float) -> None:
        await self.router.close(grace)
        router, inline = self.router, self.router.inline
        log.info(
            "routing stage closed: %d events routed, %d lane copies",
            router.routed,
            router.copies,
            extra={
                "routed": router.routed,
                "copies": router.copies,
                "inline_delivered": inline.delivered if inline else 0,
                "inline_handed": inline.handed if inline else 0,
                "inline_cut": inline.cut if inline else 0,
                "inline_refused": dict(inline.refused) if inline else {},
            },
        )
        await self.consumer.close(grace)
        await self.ordered.close(grace)
        await self.parks.close(grace)
        for claims in self.claims:
            await claims.close()
        if self._publishing is not None:
            await self._publishing.close()


async def open_runner(runner: EndpointRunner, connection: AbstractRobustConnection, lanes: LaneStage | None) -> None:
    """Open a worker's runner: a lane endpoint's on the lanes' shared channel (``LaneStage.open``).

    Should a lane endpoint's fail, the worker leaves it in the router's index: its copies wait in its lane
    (parked as a known endpoint's) while the live follower tries again, rather than being routed to nobody.
    """
    if lanes is not None and runner.endpoint.home == "lane":
        await lanes.open(runner, connection)
    else:
        await runner.open(connection)
