"""The circuit breaker's state machine: when failure is sustained enough to stop, how long to wait. Pure.

::

    closed ──trip: N consecutive failures, or a failure ratio over a window──▶ open
    open ──cool-down over, one worker wins the probe lock──▶ half-open
    half-open ──the probe succeeds──▶ closed (delivery ramps up again)
    half-open ──the probe fails──▶ open, with a longer cool-down (times the factor, bounded)
    open for longer than disable_after ──▶ disabled (an admin record: only an operator enables it again)

Each worker counts its own attempts (``FailureCounter``); the transition it decides is a record shared with
the whole fleet (records.py, state_store.py), so one worker's verdict holds for all.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from warren.consumers.health.records import CIRCUIT, CLOSED, HALF_OPEN, OPEN, EndpointView, StateRecord
from warren.consumers.transport import Outcome, SendResult
from warren.topology.config import CircuitSettings

__all__ = [
    "FailureCounter",
    "Judgement",
    "closed",
    "cooldown_for",
    "judge",
    "probe_failed",
    "probe_started",
    "restarted",
    "trip",
]

Judgement = Literal["success", "failure", "neutral"]


def judge(result: SendResult) -> Judgement:
    """What an attempt says about the endpoint's health (not about the message).

    A verdict of "dead" on the message (an HTTP 4xx) is a success here: the endpoint is up and answering. A
    throttled answer (HTTP 429) is neutral: the endpoint is alive and asks to slow down, which the throttle
    handles. So is an attempt refused before sending (the egress guard: a configuration matter) and a
    "disable" (the endpoint is disabled instead).
    """
    if result.refused or result.throttled or result.outcome is Outcome.DISABLE:
        return "neutral"
    if result.outcome is Outcome.RETRY:
        return "failure"
    return "success"


class FailureCounter:
    """Consecutive failures, and successes/failures over a sliding window in one-second buckets."""

    def __init__(self, settings: CircuitSettings) -> None:
        self.settings = settings
        self.consecutive = 0
        self._buckets: deque[list[int]] = deque()  # [second, successes, failures]
        self._ok = 0
        self._failed = 0

    def reset(self) -> None:
        self.consecutive = 0
        self._buckets.clear()
        self._ok = self._failed = 0

    def _prune(self, now: float) -> None:
        horizon = int(now - self.settings.window)
        while self._buckets and self._buckets[0][0] <= horizon:
            _, ok, failed = self._buckets.popleft()
            self._ok -= ok
            self._failed -= failed

    def record(self, ok: bool, now: float) -> str | None:
        """Count one attempt; return why the circuit should open, or None."""
        second = int(now)
        if not self._buckets or self._buckets[-1][0] != second:
            self._buckets.append([second, 0, 0])
        bucket = self._buckets[-1]
        if ok:
            self.consecutive = 0
            bucket[1] += 1
            self._ok += 1
        else:
            self.consecutive += 1
            bucket[2] += 1
            self._failed += 1
        self._prune(now)
        if ok:
            return None
        settings = self.settings
        if self.consecutive >= settings.consecutive_failures:
            return f"{self.consecutive} consecutive failures"
        total = self._ok + self._failed
        ratio = settings.failure_ratio
        if ratio is not None and total >= settings.min_requests and self._failed / total >= ratio:
            return f"{self._failed} of {total} attempts failed in {settings.window:g}s"
        return None


def cooldown_for(failed_probes: int, settings: CircuitSettings) -> float:
    """Seconds to wait before the next probe: ``cooldown * factor^failed_probes``, at most ``cooldown_max``."""
    return min(settings.cooldown_max, settings.cooldown * settings.cooldown_factor**failed_probes)


def trip(view: EndpointView, reason: str, now: float, by: str, settings: CircuitSettings) -> StateRecord:
    """closed -> open: a new outage begins."""
    return view.record(
        CIRCUIT, OPEN, reason, now, by, opened_at=now, failures=0, retry_at=now + cooldown_for(0, settings)
    )


def probe_started(view: EndpointView, now: float, by: str) -> StateRecord:
    """open -> half-open: ``by`` holds the probe lock and lets one delivery through."""
    current = view.circuit
    opened_at = current.opened_at if current and current.opened_at else now
    return view.record(
        CIRCUIT,
        HALF_OPEN,
        current.reason if current else "probing",
        now,
        by,
        since=opened_at,
        opened_at=opened_at,
        failures=current.failures if current else 0,
    )


def probe_failed(view: EndpointView, reason: str, now: float, by: str, settings: CircuitSettings) -> StateRecord:
    """half-open -> open: the outage goes on, and the next probe waits longer."""
    current = view.circuit
    opened_at = current.opened_at if current and current.opened_at else now
    failures = (current.failures if current else 0) + 1
    return view.record(
        CIRCUIT,
        OPEN,
        f"probe failed: {reason}",
        now,
        by,
        since=opened_at,
        opened_at=opened_at,
        failures=failures,
        retry_at=now + cooldown_for(failures, settings),
    )


def restarted(view: EndpointView, reason: str, now: float, by: str) -> StateRecord:
    """An open circuit's outage clock restarted (an operator enabled the endpoint): probe at once.

    Without it, an endpoint auto-disabled for being open too long would be disabled again by the first
    worker to look, since its outage began more than ``disable_after`` ago.
    """
    return view.record(CIRCUIT, OPEN, reason, now, by, opened_at=now, failures=0, retry_at=now)


def closed(view: EndpointView, reason: str, now: float, by: str) -> StateRecord:
    """-> closed: the probe succeeded, or an operator enabled the endpoint."""
    return view.record(CIRCUIT, CLOSED, reason, now, by)
