"""The worker process: one robust connection, one transport (HTTP), one EndpointRunner per endpoint served.

Stateless by design: everything a message needs travels with it, so any worker can take any message, and a
worker killed at any moment loses nothing (its unacked messages go back to their queues).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

import aiohttp
from aio_pika.abc import AbstractRobustConnection

from warren.broker.amqp.channels import SETTLE_PAUSE
from warren.broker.amqp.connection import connect
from warren.broker.amqp.probe import all_exist
from warren.consumers.attempt_recorder import AttemptRecorder
from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.health.control import HealthControl
from warren.consumers.hooks import DeliveryHooks
from warren.consumers.lane_runners import Runners, deferrable
from warren.consumers.lane_stage import LaneStage, open_runner
from warren.consumers.live_endpoints import LiveEndpoints
from warren.consumers.metrics_server import MetricsServer, series_at_start, serve_worker_metrics
from warren.consumers.partition_claims import PartitionClaims
from warren.core.errors import WarrenError
from warren.serving.server import stop_on_signals
from warren.topology import names
from warren.topology.config import Endpoint, WarrenConfig
from warren.topology.planner import consumed_queues, delay_levels
from warren.transport.base import Transport
from warren.transport.http import HttpTransport

__all__ = ["Worker"]

log = logging.getLogger("warren.worker")

T = TypeVar("T")

# Shutdown bounds past the grace period: the drain's margin, and the end of closing connections.
CLOSE_BUDGET = 3.0
DRAIN_SLACK = 1.0


class Worker:
    """``async with Worker(config) as worker: ...`` delivers until the block ends (or ``run()`` until a signal)."""

    def __init__(
        self,
        config: WarrenConfig,
        endpoints: Sequence[str] | None = None,
        *,
        name: str = "warren-worker",
        hooks: DeliveryHooks | None = None,
        spread_partitions: bool = True,
        transport: Transport | None = None,
        live: bool | None = None,
    ) -> None:
        """``transport`` replaces the HTTP transport (tests prove the seam with one of their own).

        ``live`` serves the live endpoints announced on RabbitMQ besides the file's (consumers/live_endpoints.py);
        by default a worker does, unless it was given a list of ``endpoints`` to serve.
        """
        known = {e.name for e in config.endpoints}
        unknown = [n for n in endpoints or () if n not in known]
        if unknown:
            raise WarrenError(f"unknown endpoint(s): {', '.join(unknown)} (configured: {', '.join(sorted(known))})")
        on_lanes = [e.name for e in config.endpoints if e.home == "lane" and e.name in (endpoints or ())]
        if on_lanes:
            # Its routing stage would take events from the shared routing queue for these alone.
            raise WarrenError(f"lane endpoint(s) {', '.join(on_lanes)} are served by workers without --endpoints")
        self.config = config
        self.name = name
        self.hooks = hooks or DeliveryHooks()
        self.spread_partitions = spread_partitions
        served = [e for e in config.endpoints if not endpoints or e.name in endpoints]
        self.endpoints = [e for e in served if e.home == "dedicated"]
        self.lane_endpoints = [e for e in served if e.home == "lane"]
        self.delay_levels = delay_levels(config)
        self.transport = transport
        self.connection: AbstractRobustConnection | None = None
        self.session: aiohttp.ClientSession | None = None
        self.runners = Runners()  # a lane endpoint read at start gets its runner on its first message
        # The shared lanes (docs/architecture.md, "Lanes"), when [lanes] count is set: routing stage and lanes.
        # A worker given a list of endpoints routes nothing: its router would route events to those alone.
        self.lanes = LaneStage(config, self.runners, self.hooks) if config.lanes.count and not endpoints else None
        self.claims: dict[str, PartitionClaims] = {}
        self.ready = asyncio.Event()
        self.metrics_server: MetricsServer | None = None  # /metrics, /healthz, /readyz when worker.metrics_port
        self.health: HealthControl | None = None  # circuit breaker, limits, disable: docs/health.md
        self.live: LiveEndpoints | None = None
        self.serve_live = live if live is not None else not endpoints
        self._transport: Transport | None = None
        # The attempt log (warren/consumers/attempt_recorder.py): on by default when a store is configured.
        self.recorder: AttemptRecorder | None = None
        if config.attempt_log:
            settings = config.worker
            self.recorder = AttemptRecorder(
                config.broker.prefix,
                batch=settings.attempt_log_batch,
                interval=settings.attempt_log_interval,
                capacity=settings.attempt_log_buffer,
            )
            self.recorder.install(self.hooks)

    async def start(self) -> None:
        """Connect, open every endpoint's channels and start consuming."""
        # First, so that /healthz answers (and /readyz says 503) while the worker connects.
        self.metrics_server = await serve_worker_metrics(
            self.config.worker,
            series_at_start(self.endpoints, self.config.lanes.count if self.lanes else 0, self.config.worker),
            self.hooks,
            in_flight=lambda: {name: runner.in_flight for name, runner in self.runners.items()},
            endpoint_states=self._endpoint_states,
            is_ready=self._is_ready,
            attempt_log=self._attempt_log_figures if self.recorder is not None else None,
            lane_of=lambda name: getattr(self.runners.get(name), "lane", None),  # a SharedHomeRunner's
        )
        self.connection = await connect(self.config.broker.urls, name=f"{self.name}-{os.getpid()}")
        log.info("worker connected")  # the startup's steps are logged, so a start that does not end shows where
        top = names.delay_exchange(self.config.broker.prefix, self.delay_levels - 1)
        if not await all_exist(self.connection, exchanges=[top]):  # every retry and park would be refused
            log.error("the delay chain lacks %s (%d levels needed): run `warren setup`", top, self.delay_levels)
        if self.recorder is not None:
            await self.recorder.start(self.connection)
        delivery = self.config.delivery
        transport = self.transport
        if transport is None:
            self.session, transport = HttpTransport.for_settings(delivery)
        self._transport = transport
        for endpoint in [*self.endpoints, *(self.lane_endpoints if self.lanes else ())]:
            runner = self._runner(endpoint)
            await open_runner(runner, self.connection, self.lanes)
            self.runners[endpoint.name] = runner
        # Endpoint health: read the fleet's state before consuming; it pauses the endpoints held.
        self.health = HealthControl(self.config, self.runners, self.hooks, worker=f"{self.name}-{os.getpid()}")
        await self.health.start()
        log.info("endpoint states read")
        for runner in self.runners.values():
            if runner.partitioned and self.spread_partitions:
                # Partitions are consumed as they are claimed, so that several workers share them.
                runner.assigned = []
                self.claims[runner.endpoint.name] = PartitionClaims(
                    self.config.broker.urls, runner, self.config.worker.rebalance_interval
                )
            if runner.paused_reason is None:  # a held endpoint is resumed by self.health when it may deliver
                await runner.start_consuming()
        for claims in self.claims.values():
            await claims.start()
        self.health.activate()
        if self.serve_live:
            self.live = LiveEndpoints(
                self.config.broker.urls,
                self.config.broker.prefix,
                serve=self.serve_endpoint,
                unserve=self.unserve_endpoint,
                file_managed=[e.name for e in self.config.endpoints],
                keys=self.config.store.keys,
                routes=self.lanes is not None,
                route_unserved=self.lanes.route_unserved if self.lanes is not None else lambda layout: None,
                close_routing=self.lanes.close_routing if self.lanes is not None else lambda name, closed: None,
            )
            await self.live.start()
        if self.lanes is not None:
            if self.live is not None:
                self.lanes.router.index_current = self.live.current
            # Only now, with the live lane endpoints in the index: the router acks what nobody in it wants.
            await self.lanes.start(self.connection, self.lane_endpoints, self.health, transport)
            log.info("lanes consumed and routed", extra={"lanes": self.config.lanes.count})
        self.ready.set()
        log.info("worker consuming", extra={"endpoints": [e.name for e in [*self.endpoints, *self.lane_endpoints]]})

    def _runner(self, endpoint: Endpoint) -> EndpointRunner:
        assert self._transport is not None
        prefix = self.config.broker.prefix
        if endpoint.home == "lane":
            assert self.lanes is not None
            return self.lanes.runner(endpoint, self.delay_levels, self._transport)
        return EndpointRunner(
            endpoint,
            endpoint.retry_policy(self.config.retry),
            self.config.delivery,
            queues=consumed_queues(prefix, endpoint),
            prefix=prefix,
            delay_levels=self.delay_levels,
            transport=self._transport,
            hooks=self.hooks,
        )

    async def serve_endpoint(self, endpoint: Endpoint) -> None:
        """Start serving ``endpoint`` now (a live one): what ``start`` does for each of the file's endpoints."""
        assert self.connection is not None and self.health is not None, "start() first"
        if endpoint.home == "lane" and self.lanes is None:
            log.error("endpoint %s not served: it has home = 'lane', and [lanes] count is 0 here", endpoint.name)
            return
        if self.lanes is not None and deferrable(endpoint) and not self.ready.is_set():
            return self.lanes.defer(endpoint)  # read at start: its runner is built on its first message
        if self.lanes is not None and endpoint.home == "lane":
            # Routed to at once (before an await): a reconfigured endpoint, removed from the index at the end of
            # its unserve_endpoint, misses no event. Copies that reach its lane before its runner is ready wait.
            self.lanes.add(endpoint)
        runner = self._runner(endpoint)
        await open_runner(runner, self.connection, self.lanes)  # a lane endpoint stays routed to should it fail
        self.runners[endpoint.name] = runner
        try:
            may_consume = await self.health.serve(endpoint.name, runner)
            claims = None
            if runner.partitioned and self.spread_partitions:
                runner.assigned = []
                claims = PartitionClaims(self.config.broker.urls, runner, self.config.worker.rebalance_interval)
                self.claims[endpoint.name] = claims
            if may_consume:
                await runner.start_consuming()
            if claims is not None:
                await claims.start()
        except BaseException:
            await self.unserve_endpoint(endpoint.name)
            raise

    async def unserve_endpoint(self, name: str) -> None:
        """Stop serving ``name``: in-flight deliveries finish within the grace period, the rest go back."""
        runner = None if self.runners.forget(name) else self.runners.get(name)
        if runner is None:
            if self.lanes is not None:
                self.lanes.remove(name)
            return
        if self.health is not None:
            await self.health.remove_endpoint(name)
        claims = self.claims.pop(name, None)
        if claims is not None:
            await claims.halt()
        await runner.stop_consuming()
        handed_back = await runner.drain(self.config.delivery.grace_period)
        await runner.close()
        if claims is not None:
            await claims.close()
        self.runners.pop(name, None)
        if self.lanes is not None:  # last, with no await after it: a re-serve follows at once (serve_endpoint)
            self.lanes.remove(name)
        log.info("endpoint %s no longer served", name, extra={"endpoint": name, "handed_back": handed_back})

    def _is_ready(self) -> bool:
        connection = self.connection
        return self.ready.is_set() and connection is not None and not connection.is_closed

    def _attempt_log_figures(self) -> tuple[int, int]:
        assert self.recorder is not None
        return self.recorder.dropped, self.recorder.buffered

    def _endpoint_states(self) -> dict[str, tuple[str, str]]:
        """Endpoint -> (circuit state, admin state) as this worker's health control knows them (none before start)."""
        if self.health is None:
            return {}
        return {name: (g.view.circuit_state, g.view.admin_state) for name, g in self.health.guards.items()}

    async def stop(self, *, since: float | None = None) -> None:
        """Stop consuming, let in-flight deliveries finish within the grace period, hand the rest back.

        Bounded whatever state ``start`` reached and whether RabbitMQ answers or not: stopping the consumers and
        the drain share the grace period; the whole ends within ``CLOSE_BUDGET`` after it. A step that does not finish
        in its time (a broker that no longer answers a basic.cancel or a channel.close) is abandoned: its
        connection goes with the process, and RabbitMQ hands back whatever it had in flight. ``since`` (a loop
        time) is when the shutdown began, if before this call.
        """
        self.ready.clear()
        loop = asyncio.get_running_loop()
        deadline = (since if since is not None else loop.time()) + self.config.delivery.grace_period
        await _within(self._stop_consuming(), max(deadline - loop.time(), 0.0), "stopping the consumers")
        handed_back = 0
        if self.runners:
            results = await _within(
                asyncio.gather(*(r.drain(max(deadline - loop.time(), 0.0)) for r in self.runners.values())),
                max(deadline - loop.time(), 0.0) + DRAIN_SLACK,
                "the drain",
            )
            handed_back = sum(results or ())
        if self.recorder is not None:
            # The records of every attempt made, published within what is left of the grace (at least a second).
            left = max(deadline - loop.time(), 1.0)
            await _within(self.recorder.close(left), left + DRAIN_SLACK, "flushing the attempt log")
        await _within(self._close_broker(), max(deadline + CLOSE_BUDGET - loop.time(), 0.5), "closing the connections")
        if self.session is not None:
            await self.session.close()
        if self.metrics_server is not None:
            await _within(self.metrics_server.close(), 1.0, "closing the metrics server")
        log.info("worker stopped", extra={"handed_back": handed_back})

    async def _stop_consuming(self) -> None:
        if self.live is not None:
            await self.live.close()
        if self.health is not None:
            await self.health.halt()
        if self.lanes is not None:
            await self.lanes.stop()
        for claims in self.claims.values():
            await claims.halt()
        for runner in self.runners.values():
            await runner.stop_consuming()

    async def _close_broker(self) -> None:
        if self.runners:  # the drain's last acks apply before their channels close (warren/broker/amqp/channels.py)
            await asyncio.sleep(SETTLE_PAUSE)
        if self.health is not None:
            await self.health.close()
        if self.lanes is not None:  # its acks go before the lanes' channels close, and those before the runners'
            await self.lanes.close(CLOSE_BUDGET)
        for claims in self.claims.values():
            await claims.close()
        for runner in self.runners.values():
            await runner.close()
        if self.connection is not None:
            with contextlib.suppress(Exception):
                await self.connection.close()

    async def __aenter__(self) -> Worker:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    async def run(self) -> None:
        """Deliver until SIGTERM or SIGINT, then shut down gracefully (a signal during startup cancels it)."""
        stop = asyncio.Event()
        with stop_on_signals(stop):
            starting = asyncio.create_task(self.start(), name="worker-start")
            signalled = asyncio.create_task(stop.wait(), name="worker-signal")
            try:
                await asyncio.wait({starting, signalled}, return_when=asyncio.FIRST_COMPLETED)
                if starting.done():
                    starting.result()  # a failed start raises (after the stop below)
                    await signalled
                log.info("signal received: stopping")
            finally:
                since = asyncio.get_running_loop().time()
                signalled.cancel()
                if not starting.done():
                    starting.cancel()  # cancelling is immediate; the bound is for code that would swallow it
                    await _within(_settled(starting), self.config.delivery.grace_period, "cancelling the startup")
                await self.stop(since=since)


async def _settled(task: asyncio.Task[Any]) -> None:
    """Wait for a task that was cancelled to end, whatever it ends with."""
    with contextlib.suppress(BaseException):
        await task


async def _within(awaitable: Awaitable[T], timeout: float, what: str) -> T | None:
    """``awaitable``'s result, or None if it failed or did not finish within ``timeout`` (it is then cancelled
    and not waited for: a step of the shutdown must not hold the process)."""
    task = asyncio.ensure_future(awaitable)
    done, _ = await asyncio.wait({task}, timeout=timeout)
    if not done:
        task.cancel()
        log.warning("shutdown: %s did not finish within %.1fs; abandoned", what, timeout)
        return None
    if task.cancelled():
        return None
    exc = task.exception()
    if exc is not None:
        log.warning("shutdown: %s failed: %s", what, exc or type(exc).__name__)
        return None
    return task.result()
