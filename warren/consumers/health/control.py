"""The worker's endpoint-health shell: guards wired into the runners, and the fleet reached through RabbitMQ.

For each endpoint the worker serves it keeps an EndpointGuard (guard.py) and:

- plugs into the runner's seams (warren/consumers/hooks.py): the gate around every attempt, the park-failures
  check, the 410 ``on_disable`` callback, and an observer that reports ``message.exhausted``;
- applies every state record it hears on the control exchange, or reads from the state stream when it
  (re)connects, then reconciles the runner: paused while the endpoint is held, consuming otherwise;
- publishes the transitions its guards decide, with their operator events;
- when an open circuit's cool-down is over, tries the endpoint's probe lock; the one worker in the fleet
  that gets it goes half-open and lets exactly one delivery through, and releases the lock with the verdict;
  open for longer than ``disable_after``, the lock holder disables the endpoint instead;
- counts the workers serving each rate- or in-flight-limited endpoint (roster queues) to split the limits;
- re-appends the records still in force to the state stream every ``worker.state_refresh_interval`` (an hour),
  so retention never drops them.

The guards and the state records (applying, publishing, reconciling the runners) are HealthState's
(state_sync.py); this module adds the connection, the runner's seams, and the probe, roster and refresh timers.

Its connection is its own, and deliberately not a robust one: the probe locks are exclusive queues that
must vanish with it, and after a reconnect it rebuilds everything itself (and re-reads the stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import time
from collections.abc import Container, Coroutine, Mapping
from typing import Any

from warren.broker.amqp.connection import connect_once
from warren.broker.endpoint_state.operator_events import EXHAUSTED, PUBLISH_FAILURES, iso
from warren.broker.endpoint_state.records import ACTIVE, HALF_OPEN, OPEN, EndpointView, StateRecord, hold_end, standing
from warren.consumers.endpoint_runner import EndpointRunner
from warren.consumers.health import breaker
from warren.consumers.health.guard import EndpointGuard
from warren.consumers.health.state_sync import CLOSE_TIMEOUT as CLOSE_TIMEOUT
from warren.consumers.health.state_sync import RECONNECT_DELAY, HealthState
from warren.consumers.health.state_sync import UNSENT_FAILURES as UNSENT_FAILURES
from warren.consumers.hooks import AttemptRecord
from warren.core.errors import BrokerUnavailable, TopologyError
from warren.topology import names
from warren.transport.base import SendResult

__all__ = ["HealthControl"]

log = logging.getLogger("warren.health")

TICK = 0.05  # seconds between looks at held endpoints (cool-downs, throttles); cheap: only non-default ones
RECONNECT_FAILURES: tuple[type[Exception], ...] = (BrokerUnavailable, TopologyError, *PUBLISH_FAILURES)


async def _unguarded() -> None:
    """An endpoint without a guard (not served here) is let through."""


class HealthControl(HealthState):
    """Endpoint health for one worker process (see the module docstring); the guards' state is HealthState's."""

    # --- lifecycle ---------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect, learn the fleet's state, hook into the runners, and pause the endpoints held.

        Called before the worker starts consuming, so that a disabled or open endpoint never takes a message.
        """
        await self._connect()
        self.hooks.gates.append(self)
        self.hooks.park_failures.append(self._parks)
        self.hooks.hold_ends.append(self._hold_end)
        self.hooks.on_disable.append(self._on_disable)
        self.hooks.observers.append(self._observe)
        now = time.time()
        for name, guard in self.guards.items():
            where = standing(guard.view, now, guard.probing)
            if where.mode == "hold":
                await self.runners[name].pause(where.reason)
                log.warning("endpoint %s held at start: %s", name, where.reason, extra={"endpoint": name})

    def activate(self) -> None:
        """The worker has started its runners: from now on, follow the fleet's state."""
        self._active = True
        for name in self.guards:
            self._reconcile_soon(name)
        self._loops.append(asyncio.create_task(self._tick_loop(), name="health-tick"))
        # Always: a live endpoint with limits may be added later (the loop reads nothing while there is none).
        self._loops.append(asyncio.create_task(self._roster_loop(), name="health-roster"))

    async def halt(self) -> None:
        """Stop following the fleet (the worker is stopping): refuse new attempts, resume nothing."""
        self._halted = True
        for guard in self.guards.values():
            guard.closing = True
            guard.changed()
        for task in [*self._loops, *([self._reconnect_task] if self._reconnect_task else [])]:
            task.cancel()
        for task in self._loops:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loops = []
        for lock in self._runner_locks.values():
            async with lock:  # let a reconcile in progress finish before the worker cancels consumers
                pass

    async def close(self) -> None:
        """Publish what is pending (bounded wait), then close the connection (releasing every lock)."""
        await self.halt()
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=CLOSE_TIMEOUT)
        await self.events.flush(CLOSE_TIMEOUT)
        await self.events.close()
        if self._unsent:
            log.warning("%d endpoint state change(s) could not be published", len(self._unsent))
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close()

    async def _connect(self) -> None:
        try:
            connection = await connect_once(self.config.broker.urls, name=f"warren-health-{os.getpid()}")
        except BrokerUnavailable as exc:
            raise BrokerUnavailable(f"endpoint health cannot reach RabbitMQ: {exc}") from exc
        try:
            await self.store.attach(connection)
            await self.store.listen(self._apply)  # first, so nothing published while we read is missed
            for record in await self.store.load(connection):
                self._apply(record)
            await self.events.attach(connection)
            if self.roster.queues:
                await self.roster.join(connection)
                self._share_limits(await self.roster.counts(connection, self.roster.queues))
        except BaseException:
            with contextlib.suppress(Exception):
                await connection.close()
            raise
        self._connection = connection
        connection.close_callbacks.add(self._on_lost)
        unsent, self._unsent = self._unsent, []
        for record in unsent:
            self._spawn(self._publish(record))

    def _on_lost(self, *_: object) -> None:
        if self._halted or self._connection is None:
            return
        self._connection = None
        self.locks.forget_all()
        self.events.detach()
        log.warning("endpoint health lost its RabbitMQ connection; reconnecting")
        for name, guard in self.guards.items():
            if guard.probing:  # the probe lock went with the connection; another worker may take over
                guard.probing = False
                guard.changed()
                self._reconcile_soon(name)
        self._reconnect_task = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        while not self._halted:
            await asyncio.sleep(RECONNECT_DELAY)
            try:
                await self._connect()
            except RECONNECT_FAILURES as exc:
                log.warning("endpoint health: reconnect failed (%s); trying again", exc or type(exc).__name__)
                continue
            log.info("endpoint health reconnected")
            for name in self.guards:
                self._reconcile_soon(name)
            return

    # --- live endpoints ---------------------------------------------------------------------------------------
    async def serve(self, name: str, runner: EndpointRunner) -> bool:
        """Guard a live endpoint added to ``runners``; True when it may consume now (False: held, paused here).

        Like ``start`` for one endpoint: a disabled or open endpoint never takes a message.
        """
        guard = self.add_endpoint(name, runner)
        if runner.endpoint.rate_limit is not None or runner.endpoint.max_in_flight is not None:
            try:
                await self.roster.add(self._connection, name, names.health_roster(self.prefix, name))
                if self._connection is not None:
                    self._share_limits(await self.roster.counts(self._connection, [name]))
            except PUBLISH_FAILURES as exc:
                log.warning("endpoint %s: worker count not read yet (%s)", name, exc or type(exc).__name__)
        where = standing(guard.view, time.time(), guard.probing)
        if where.mode == "hold":
            await runner.pause(where.reason)
            log.warning("endpoint %s held when added: %s", name, where.reason, extra={"endpoint": name})
            return False
        return True

    # --- the seams of the runner --------------------------------------------------------------------------
    def acquire(self, endpoint: str) -> Coroutine[Any, Any, None]:
        """The guard's own acquire, awaited by the runner as it is (one coroutine an attempt, not two)."""
        guard = self.guards.get(endpoint)
        return guard.acquire() if guard is not None else _unguarded()

    def release(self, endpoint: str, result: SendResult | None) -> None:
        guard = self.guards.get(endpoint)
        if guard is not None:
            guard.release(result)

    def _parks(self, endpoint: str) -> bool:
        guard = self.guards.get(endpoint)
        return guard is not None and guard.parks()

    def _hold_end(self, endpoint: str) -> float | None:
        guard = self.guards.get(endpoint)
        return None if guard is None else hold_end(guard.view, time.time(), guard.probing)

    def _on_disable(self, endpoint: str, reason: str) -> None:
        guard = self.guards.get(endpoint)
        if guard is not None and (record := guard.disable(reason)) is not None:
            self._emit(endpoint, record)

    def _observe(self, record: AttemptRecord) -> None:
        if record.outcome == "exhausted":
            self.events.publish(
                EXHAUSTED,
                {
                    "endpoint": record.endpoint,
                    "event_id": record.event_id,
                    "attempts": record.attempt,
                    "last_status": record.status,
                    "last_error": record.error,
                    "age_seconds": round(record.age, 3),
                },
            )

    # --- timers ---------------------------------------------------------------------------------------------
    async def _tick_loop(self) -> None:
        # Re-append the records in force to the state stream (see state_store.py), each worker at its own time.
        refresh_interval = self.config.worker.state_refresh_interval
        next_refresh = time.monotonic() + refresh_interval * random.uniform(0.9, 1.1)
        while True:
            await asyncio.sleep(TICK)
            now = time.time()
            for name in list(self.watched):
                guard, runner = self.guards.get(name), self.runners.get(name)
                if guard is None or runner is None or (_quiet(guard) and runner.paused_reason is None):
                    self.watched.discard(name)  # nothing for the tick to do until a record changes its view
                    continue
                where = standing(guard.view, now, guard.probing)
                held = where.mode == "hold"
                drifted = held != (runner.paused_reason is not None) or (held and runner.paused_reason != where.reason)
                if drifted and time.monotonic() >= self._not_before.get(name, 0.0):
                    self._reconcile_soon(name)
                if guard.probing and not runner.probes_here():
                    # An ordered endpoint whose partitions all went to other workers, or an ordered lane endpoint
                    # whose park queue another worker drains now: let the one with a message to probe with.
                    guard.probing = False
                    self._probe_done(name)
                    self._reconcile_soon(name)
                if self._probe_due(name, guard, now):
                    self._trying_probe.add(name)
                    self._spawn(self._try_probe(name))
            if time.monotonic() >= next_refresh:
                next_refresh = time.monotonic() + refresh_interval * random.uniform(0.9, 1.1)
                self._spawn(self._refresh())

    def _probe_due(self, name: str, guard: EndpointGuard, now: float) -> bool:
        circuit = guard.view.circuit
        if circuit is None or circuit.state not in (OPEN, HALF_OPEN) or guard.view.admin_state != ACTIVE:
            return False
        if guard.probing or name in self._trying_probe or self._connection is None:
            return False
        if not self.runners[name].probes_here() or guard.view.throttled_until > now:
            return False
        due = (circuit.retry_at or 0.0) if circuit.state == OPEN else 0.0  # half-open: whenever the lock is free
        return now >= max(due, self._next_probe.get(name, 0.0))

    async def _try_probe(self, name: str) -> None:
        guard = self.guards[name]
        settings = guard.settings
        lock = names.probe_lock(self.prefix, name)
        try:
            connection = self._connection
            won = connection is not None and await self.locks.try_take(connection, lock)
            if not won:
                # Someone else probes (or just did): look again after a while, in case that worker dies.
                self._next_probe[name] = time.time() + max(1.0, settings.cooldown)
                return
            now = time.time()
            circuit = guard.view.circuit
            still_due = (
                circuit is not None
                and guard.view.admin_state == ACTIVE
                and (circuit.state == HALF_OPEN or (circuit.state == OPEN and now >= (circuit.retry_at or 0.0)))
            )
            if circuit is None or not still_due:
                await self.locks.release(lock)
                return
            if circuit.opened_at is not None and now - circuit.opened_at >= settings.disable_after:
                record = guard.disable(
                    f"circuit open since {iso(circuit.opened_at)}, longer than disable_after "
                    f"({settings.disable_after:g}s); last: {circuit.reason}"
                )
                if record is not None:
                    self._emit(name, record)
                await self._release_after_publish(name)
                return
            self._emit(name, breaker.probe_started(guard.view, now, self.by))
            guard.probing = True
            guard.changed()
            self._reconcile_soon(name)
        except PUBLISH_FAILURES as exc:
            log.warning("probe lock of %s not taken (%s)", name, exc or type(exc).__name__)
        finally:
            self._trying_probe.discard(name)

    async def _roster_loop(self) -> None:
        interval = self.config.worker.rebalance_interval
        while True:
            await asyncio.sleep(interval * random.uniform(0.8, 1.2))
            connection = self._connection
            if connection is None or not self.roster.queues:
                continue
            try:
                counts = await self.roster.counts(connection, list(self.roster.queues))
            except PUBLISH_FAILURES as exc:
                log.warning("worker count not read (%s)", exc or type(exc).__name__)
                continue
            self._share_limits(counts)

    def _share_limits(self, counts: Mapping[str, int]) -> None:
        for name, workers in counts.items():
            guard = self.guards.get(name)
            if guard is not None and guard.set_workers(workers):
                log.info("endpoint %s: limits shared by %d workers", name, workers, extra={"endpoint": name})

    async def _refresh(self) -> None:
        now = time.time()
        records = [record for guard in self.guards.values() for record in guard.view.in_force(now)]
        records += _deferred_in_force(self._others, getattr(self.runners, "deferred", {}), now)
        if records and self._connection is not None:
            try:
                await self.store.refresh(records)
            except PUBLISH_FAILURES as exc:
                log.warning("state stream refresh failed (%s)", exc or type(exc).__name__)


def _quiet(guard: EndpointGuard) -> bool:
    """No state record in its view and no probe: the tick has nothing to do for it (a record changes that)."""
    view = guard.view
    return view.admin is None and view.circuit is None and view.throttle is None and not guard.probing


def _deferred_in_force(
    others: dict[tuple[str, str], StateRecord], deferred: Container[str], now: float
) -> list[StateRecord]:
    """The records in force of lane endpoints whose runner is not built yet (warren/consumers/lane_runners.py):
    no guard holds them, and a record nobody refreshes would age out of the stream."""
    views: dict[str, EndpointView] = {}
    for (name, _), record in others.items():
        if name in deferred:
            views.setdefault(name, EndpointView(name)).apply(record)
    return [record for view in views.values() for record in view.in_force(now)]
