"""The state half of the worker's endpoint health: each endpoint's guard, and the records that move it.

A HealthState keeps an EndpointGuard (guard.py) per endpoint the worker serves; applies every state record
heard from the fleet (or read back from the state stream); publishes the transitions its own guards decide,
with their operator events; and reconciles each runner with its endpoint's standing: paused while the endpoint
is held, consuming otherwise. HealthControl (control.py) adds the connection, the runner's seams and the
fleet-wide probe and roster coordination on top.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import Coroutine, Mapping
from typing import Any

from aio_pika.abc import AbstractConnection

from warren.broker.endpoint_state.operator_events import (
    PUBLISH_FAILURES,
    OperatorEvents,
    event_data,
    event_for,
    iso,
)
from warren.broker.endpoint_state.records import StateRecord, standing
from warren.broker.endpoint_state.stream import StateStore
from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.health.fleet import ExclusiveLocks, Roster
from warren.consumers.health.guard import EndpointGuard
from warren.consumers.hooks import DeliveryHooks
from warren.core.deadlines import within
from warren.topology import names
from warren.topology.config import WarrenConfig

__all__ = ["CLOSE_TIMEOUT", "RECONNECT_DELAY", "UNSENT_FAILURES", "HealthState"]

log = logging.getLogger("warren.health")

RECONNECT_DELAY = 1.0
CLOSE_TIMEOUT = 3.0  # seconds to publish what is pending when the worker stops
# AssertionError: the store is not attached yet (the first connection is still being made).
UNSENT_FAILURES: tuple[type[Exception], ...] = (*PUBLISH_FAILURES, AssertionError)


class HealthState:
    """The guards of one worker's endpoints, kept in step with the fleet's state records."""

    def __init__(
        self,
        config: WarrenConfig,
        runners: Mapping[str, EndpointRunner],
        hooks: DeliveryHooks,
        *,
        worker: str,
    ) -> None:
        self.config = config
        self.prefix = config.broker.prefix
        self.runners = runners
        self.hooks = hooks
        self.by = f"{worker}-{uuid.uuid4().hex[:6]}"
        self.guards: dict[str, EndpointGuard] = {}
        # The endpoints the tick looks at: those whose view a record changed since it last found them quiet (no
        # record, not probing, not paused). With 100,000 endpoints, looking at every one each tick took the CPU.
        self.watched: set[str] = set(runners)
        for name, runner in runners.items():
            self.guards[name] = self._guard(name, runner)
        self.store = StateStore(self.prefix)
        self.events = OperatorEvents(self.prefix)
        self.locks = ExclusiveLocks()
        self.roster = Roster(
            {
                name: names.health_roster(self.prefix, name)
                for name, runner in runners.items()
                if runner.endpoint.rate_limit is not None or runner.endpoint.max_in_flight is not None
            }
        )
        self._connection: AbstractConnection | None = None
        self._unsent: list[StateRecord] = []
        self._publishing: dict[str, asyncio.Task[None]] = {}  # endpoint -> its latest publish
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loops: list[asyncio.Task[None]] = []
        self._reconnect_task: asyncio.Task[None] | None = None
        self._runner_locks = {name: asyncio.Lock() for name in runners}
        self._next_probe: dict[str, float] = {}
        self._not_before: dict[str, float] = {}  # endpoint -> monotonic time before which not to reconcile
        self._trying_probe: set[str] = set()
        self._active = False
        self._halted = False
        # The latest record of each kind for endpoints this worker does not serve (yet): a live endpoint
        # added later starts from its fleet state (a disabled one stays disabled) without re-reading the stream.
        self._others: dict[tuple[str, str], StateRecord] = {}

    def _guard(self, name: str, runner: EndpointRunner) -> EndpointGuard:
        guard = EndpointGuard(
            runner.endpoint, throttle_cap=runner.policy.cap, by=self.by, emit=functools.partial(self._emit, name)
        )
        guard.on_probe_done = functools.partial(self._probe_done, name)
        guard.on_view_change = functools.partial(self.watched.add, name)
        return guard

    def add_endpoint(self, name: str, runner: EndpointRunner) -> EndpointGuard:
        """Guard an endpoint served from now on (a live one; the runner is already in ``runners``).

        Its state as last heard from the fleet applies at once; the caller reconciles (or starts) the runner.
        """
        guard = self._guard(name, runner)
        for kind in ("admin", "circuit", "throttle"):
            record = self._others.pop((name, kind), None)
            if record is not None:
                guard.apply(record)
        self.guards[name] = guard
        self.watched.add(name)
        self._runner_locks.setdefault(name, asyncio.Lock())
        return guard

    async def remove_endpoint(self, name: str) -> None:
        """Stop guarding ``name`` (a live endpoint no longer served): what it knew is kept for a later add."""
        guard = self.guards.pop(name, None)
        if guard is None:
            return
        guard.closing = True
        guard.changed()
        async with self._runner_locks.get(name, asyncio.Lock()):
            pass  # a reconcile in progress finishes before the runner goes
        self._runner_locks.pop(name, None)
        for record in guard.view.in_force(time.time()):
            self._others[(name, record.kind)] = record
        await self.roster.leave(name)

    @property
    def connected(self) -> bool:
        """Whether the health connection is up (the fleet's broadcasts are being heard)."""
        return self._connection is not None and not self._connection.is_closed

    # --- state ----------------------------------------------------------------------------------------------
    def _apply(self, record: StateRecord) -> None:
        """A record heard from the fleet (or read back from the stream)."""
        guard = self.guards.get(record.endpoint)
        if guard is None:
            known = self._others.get((record.endpoint, record.kind))
            if record.newer_than(known):
                self._others[(record.endpoint, record.kind)] = record
            return
        if guard.apply(record):
            if self._active and record.by != self.by:
                log.info(
                    "endpoint %s: %s %s (%s), decided by %s",
                    record.endpoint,
                    record.kind,
                    record.state,
                    record.reason,
                    record.by,
                    extra={"endpoint": record.endpoint, "state": record.state},
                )
            self._reconcile_soon(record.endpoint)

    def _emit(self, endpoint: str, record: StateRecord) -> None:
        """A decision of this worker: apply it here at once, then tell the fleet (and the operator)."""
        guard = self.guards[endpoint]
        previous = getattr(guard.view, f"{record.kind}_state", record.kind)
        event = event_for(guard.view, record)
        if not guard.apply(record):
            return
        log.warning(
            "endpoint %s: %s %s (%s)",
            endpoint,
            record.kind,
            record.state,
            record.reason,
            extra={"endpoint": endpoint, "state": record.state, "until": iso(record.until or record.retry_at)},
        )
        self._reconcile_soon(endpoint)
        self._publishing[endpoint] = self._spawn(self._publish(record))
        if event is not None:
            self.events.publish(event, event_data(record, previous))

    async def _publish(self, record: StateRecord) -> None:
        try:
            await self.store.publish(record)
        except UNSENT_FAILURES as exc:
            log.warning("state change of %s not published yet (%s)", record.endpoint, exc or type(exc).__name__)
            self._unsent.append(record)

    # --- runners --------------------------------------------------------------------------------------------
    def _reconcile_soon(self, endpoint: str) -> None:
        if self._active and not self._halted:
            self._spawn(self._reconcile(endpoint))

    async def _reconcile(self, endpoint: str) -> None:
        """Pause the runner while the endpoint is held; resume it when it may deliver (or probe)."""
        lock = self._runner_locks.get(endpoint)
        if lock is None:  # a live endpoint removed meanwhile
            return
        async with lock:
            if self._halted or endpoint not in self.guards or endpoint not in self.runners:
                return
            guard, runner = self.guards[endpoint], self.runners[endpoint]
            where = standing(guard.view, time.time(), guard.probing)
            try:
                if where.mode == "hold":
                    if runner.paused_reason != where.reason:
                        await runner.pause(where.reason)
                elif runner.paused_reason is not None:
                    log.info("endpoint %s: consuming again (%s)", endpoint, where.mode, extra={"endpoint": endpoint})
                    await runner.resume()
            except PUBLISH_FAILURES as exc:
                # The worker's own connection is still coming back (after a broker restart, say): stay paused,
                # and the tick tries again a little later.
                log.warning("endpoint %s: not resumed yet (%s)", endpoint, exc or type(exc).__name__)
                await runner.pause(f"waiting for RabbitMQ: {exc or type(exc).__name__}")
                self._not_before[endpoint] = time.monotonic() + RECONNECT_DELAY

    def _probe_done(self, name: str) -> None:
        self._spawn(self._release_after_publish(name))

    async def _release_after_publish(self, name: str) -> None:
        # The verdict reaches the fleet before the lock is free, so the next holder sees the new cool-down.
        publishing = self._publishing.get(name)
        if publishing is not None:
            with contextlib.suppress(Exception):
                await within(asyncio.shield(publishing), CLOSE_TIMEOUT)
        await self.locks.release(names.probe_lock(self.prefix, name))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("endpoint health task failed", exc_info=task.exception())
