"""What a worker runs for the shared lanes: the routing stage, the lanes' consumer, the lane endpoints' runners.

The worker keeps its runners in one map (the lane endpoints' beside the dedicated ones', so that endpoint
health, metrics and the drain treat them alike); this stage makes the lane runners and keeps the router's
index in step with them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from aio_pika.abc import AbstractRobustConnection

from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.lane_index import SubscriptionIndex
from warren.consumers.lane_router import LaneRouter
from warren.consumers.lanes import LaneConsumer, LaneRunner
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.planner import delay_levels
from warren.transport.base import Transport

__all__ = ["LaneStage"]


class LaneStage:
    """``runners`` is the worker's map of runners; ``start`` once the lane endpoints' runners are in it."""

    def __init__(self, config: WarrenConfig, runners: Mapping[str, EndpointRunner], hooks: DeliveryHooks) -> None:
        self.config = config
        self.hooks = hooks
        self.runners = runners
        prefix, lanes = config.broker.prefix, config.lanes
        self.index = SubscriptionIndex()
        self.consumer = LaneConsumer(prefix, lanes.count, lanes.prefetch, runners, hooks, known=self.index.__contains__)
        self.router = LaneRouter(
            prefix,
            lanes.count,
            lanes.route_prefetch,
            self.index,
            delay_levels=delay_levels(config),
            attempts=lanes.route_attempts,
            retry_delay=lanes.route_retry_delay,
            settled=hooks.settled,
        )

    def runner(self, endpoint: Endpoint, delay_levels: int, transport: Transport) -> LaneRunner:
        """The runner of lane endpoint ``endpoint`` (not yet routed to: ``add`` it once it is in the worker's map)."""
        return LaneRunner(
            endpoint,
            endpoint.retry_policy(self.config.retry),
            self.config.delivery,
            prefix=self.config.broker.prefix,
            lanes=self.config.lanes.count,
            delay_levels=delay_levels,
            transport=transport,
            hooks=self.hooks,
            channel_acks=self.consumer.acks_of,
        )

    def route_unserved(self, layout: Endpoint) -> None:
        """Route to lane endpoint ``layout`` though this worker cannot serve it (its secrets cannot be opened here):
        its copies wait in its lane for a worker that can, instead of this router acking its events as wanted by
        nobody. The worker's ``unserve_endpoint`` takes it out."""
        if layout.home == "lane" and layout.name not in self.runners:
            self.index.add(layout)

    def add(self, endpoint: Endpoint) -> None:
        self.index.add(endpoint)

    def remove(self, name: str) -> None:
        self.index.remove(name)

    async def start(self, connection: AbstractRobustConnection, endpoints: Iterable[Endpoint]) -> None:
        for endpoint in endpoints:
            self.index.add(endpoint)
        await self.consumer.start(connection, delay_levels(self.config))
        await self.router.start(connection)

    async def stop(self) -> None:
        await self.router.stop()
        await self.consumer.stop()

    async def close(self, grace: float) -> None:
        await self.router.close(grace)
        await self.consumer.close(grace)
