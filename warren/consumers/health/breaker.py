"""The circuit breaker's judgement: what an attempt says of the endpoint, and when failure is sustained enough to
stop. Pure. The transitions it decides are records (``warren.broker.endpoint_state.circuit``):

::

    closed ──trip: N consecutive failures, or a failure ratio over a window──▶ open
    open ──cool-down over, one worker wins the probe lock──▶ half-open
    half-open ──the probe succeeds──▶ closed (delivery ramps up again)
    half-open ──the probe fails──▶ open, with a longer cool-down (times the factor, bounded)
    open for longer than disable_after ──▶ disabled (an admin record: only an operator enables it again)

Each worker counts its own attempts (``FailureCounter``); the transition it decides is a record shared with
the whole fleet (``warren.broker.endpoint_state``), so one worker's verdict holds for all.
"""

from __future__ import annotations

from collections import deque
from typing import Literal

from warren.broker.endpoint_state.circuit import closed, cooldown_for, probe_failed, probe_started, restarted, trip
from warren.topology.config import CircuitSettings
from warren.transport.base import Outcome, SendResult

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
