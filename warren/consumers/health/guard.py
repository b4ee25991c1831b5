"""One endpoint's health inside one worker: the gate's logic (acquire/release) over the shared records.

``acquire`` lets an attempt go, makes it wait (concurrency, rate, a probe in progress), or refuses it with
EndpointBlocked (held: paused, disabled, throttled, circuit open), which hands the message back untouched.
``release`` feeds the breaker and the throttle. Decisions that the fleet must share come out through
``emit`` (the controller applies them here at once, then publishes them); nothing in this module does I/O.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from warren.broker.endpoint_state.records import (
    ACTIVE,
    ADMIN,
    CIRCUIT,
    CLOSED,
    DISABLED,
    HALF_OPEN,
    OPEN,
    THROTTLE,
    THROTTLED,
    EndpointView,
    StateRecord,
    standing,
)
from warren.consumers.health import breaker
from warren.consumers.health.limits import Ramp, TokenBucket, in_flight_share, rate_share
from warren.consumers.hooks import EndpointBlocked
from warren.core.deadlines import within
from warren.topology.config import Endpoint
from warren.transport.base import SendResult

__all__ = ["EndpointGuard"]

THROTTLE_SLACK = 0.25  # seconds: a 429 asking for no more than what the fleet already waits is not re-broadcast


class EndpointGuard:
    """The gate for one endpoint in this worker (see the module docstring)."""

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        throttle_cap: float,
        by: str,
        emit: Callable[[StateRecord], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint = endpoint
        self.settings = endpoint.circuit
        self.throttle_cap = throttle_cap
        self.by = by
        self.emit = emit
        self.clock = clock
        self.view = EndpointView(endpoint.name)
        self.failures = breaker.FailureCounter(endpoint.circuit)
        self.workers = 1
        self.in_flight = 0
        self.ramp: Ramp | None = None
        self.probing = False  # this worker holds the probe lock of the open circuit
        self.closing = False  # the worker is stopping: refuse everything so that waiting messages go back
        self.on_probe_done: Callable[[], None] = lambda: None
        self.on_view_change: Callable[[], None] = lambda: None  # the health control's tick looks at it again
        self._probe_task: asyncio.Task[object] | None = None
        self._wake = asyncio.Event()
        self._waiting = 0
        self._bucket: TokenBucket | None = None
        if endpoint.rate_limit is not None:
            rate, capacity = rate_share(endpoint.rate_limit, endpoint.burst, 1)
            self._bucket = TokenBucket(rate, capacity, time.monotonic())

    # --- state -----------------------------------------------------------------------------------------
    def apply(self, record: StateRecord) -> bool:
        """Take a record (ours or the fleet's); True when the view changed. Resets what a transition resets."""
        before, admin_before = self.view.circuit_state, self.view.admin_state
        if not self.view.apply(record):
            return False
        after = self.view.circuit_state
        if record.kind == CIRCUIT and before != after:
            self.failures.reset()
            if after == CLOSED and before in (OPEN, HALF_OPEN):
                self.ramp = Ramp(self.settings.ramp_start)
        if record.kind == ADMIN and admin_before != ACTIVE and self.view.admin_state == ACTIVE:
            self.ramp = Ramp(self.settings.ramp_start)  # back from a pause or a disable: gently too
        if self.probing and (self.view.circuit_state != HALF_OPEN or self.view.admin_state != ACTIVE):
            self.probing = False
            self.on_probe_done()
        self.on_view_change()
        self.changed()
        return True

    def changed(self) -> None:
        """Wake every waiting acquire so that it looks again."""
        if self._waiting:  # (most releases have nobody to wake: no event to allocate then)
            self._wake.set()
            self._wake = asyncio.Event()

    def set_workers(self, workers: int) -> bool:
        """The number of live workers sharing this endpoint's limits; True when it changed."""
        workers = max(1, workers)
        if workers == self.workers:
            return False
        self.workers = workers
        if self._bucket is not None and self.endpoint.rate_limit is not None:
            rate, capacity = rate_share(self.endpoint.rate_limit, self.endpoint.burst, workers)
            self._bucket.configure(rate, capacity, time.monotonic())
        self.changed()
        return True

    def ceiling(self) -> int:
        """Concurrent attempts this worker may make once fully ramped up."""
        ceiling = self.endpoint.concurrency
        if self.endpoint.max_in_flight is not None:
            ceiling = min(ceiling, in_flight_share(self.endpoint.max_in_flight, self.workers))
        return ceiling

    def limit(self) -> int:
        ceiling = self.ceiling()
        return self.ramp.limit(ceiling) if self.ramp is not None else ceiling

    def parks(self) -> bool:
        """After a retryable failure: leave the message untouched, because the endpoint is not delivering now."""
        return self.closing or standing(self.view, self.clock(), self.probing).mode != "deliver"

    # --- the gate ----------------------------------------------------------------------------------------
    async def _wait(self, timeout: float | None) -> None:
        wake = self._wake
        self._waiting += 1
        try:
            await within(wake.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._waiting -= 1

    async def acquire(self) -> None:
        while True:
            if self.closing:
                raise EndpointBlocked("the worker is stopping")
            now = self.clock()
            where = standing(self.view, now, self.probing)
            if where.mode == "hold":
                raise EndpointBlocked(where.reason)
            if where.mode == "probe":
                if self._probe_task is None:
                    self._probe_task = asyncio.current_task()
                    self.in_flight += 1
                    return
                await self._wait(None)  # one probe at a time; the others wait for its verdict
                continue
            if self.in_flight < self.limit():
                wait = self._bucket.take(time.monotonic()) if self._bucket is not None else 0.0
                if wait <= 0:
                    self.in_flight += 1
                    return
                await self._wait(wait)
                continue
            await self._wait(None)

    def release(self, result: SendResult | None) -> None:
        self.in_flight -= 1
        was_probe = self._probe_task is not None and asyncio.current_task() is self._probe_task
        if was_probe:
            self._probe_task = None
        try:
            if result is None:
                return  # not attempted (refused by a later gate, or cancelled)
            now = self.clock()
            self._throttle(result, now)
            judgement = breaker.judge(result)
            if was_probe:
                self._probe_verdict(judgement, result, now)
                return
            if not self.settings.enabled or self.view.circuit_state != CLOSED or judgement == "neutral":
                return
            if judgement == "success" and self.ramp is not None:
                self.ramp.success()
                if self.ramp.done(self.ceiling()):
                    self.ramp = None
            reason = self.failures.record(judgement == "success", now)
            if reason is not None:
                self.emit(breaker.trip(self.view, reason, now, self.by, self.settings))
        finally:
            self.changed()

    def _probe_verdict(self, judgement: breaker.Judgement, result: SendResult, now: float) -> None:
        if judgement == "neutral":
            return  # says nothing about the endpoint's health: the next attempt is the probe
        self.probing = False
        if judgement == "success":
            self.emit(breaker.closed(self.view, f"probe succeeded ({result.reason})", now, self.by))
        else:
            self.emit(breaker.probe_failed(self.view, result.reason, now, self.by, self.settings))
        self.on_probe_done()

    def _throttle(self, result: SendResult, now: float) -> None:
        """A throttled answer (HTTP 429) with Retry-After makes the whole fleet wait, bounded by the policy's cap."""
        seconds = result.retry_after
        if not result.throttled or not seconds:
            return
        until = now + min(seconds, self.throttle_cap)
        if until <= self.view.throttled_until + THROTTLE_SLACK:
            return
        reason = f"{result.answer or result.reason}, Retry-After {seconds:g}"
        self.emit(self.view.record(THROTTLE, THROTTLED, reason, now, self.by, until=until))

    # --- decisions the controller takes --------------------------------------------------------------------
    def disable(self, reason: str) -> StateRecord | None:
        """The admin record disabling this endpoint, or None when it already is."""
        if self.view.admin_state == DISABLED:
            return None
        return self.view.record(ADMIN, DISABLED, reason, self.clock(), self.by)
