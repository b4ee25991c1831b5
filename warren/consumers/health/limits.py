"""Per-endpoint limits shared by the fleet: a token bucket, each worker's share, and the ramp after an outage.

Pure. The fleet-wide rate is split evenly: each of W live workers takes ``rate / W`` with a bucket of
``burst / W`` (at least one token), W being the consumer count of the endpoint's roster queue. That holds the
fleet to the rate "closely enough" without a round trip per request; while W changes (a worker starts or
dies) the split lags by one roster refresh.
"""

from __future__ import annotations

__all__ = ["Ramp", "TokenBucket", "in_flight_share", "rate_share"]


def rate_share(rate: float, burst: int | None, workers: int) -> tuple[float, float]:
    """(rate, bucket capacity) for one of ``workers`` workers; the default burst is one second's worth."""
    workers = max(1, workers)
    return rate / workers, max(1.0, (burst if burst is not None else rate) / workers)


def in_flight_share(limit: int, workers: int) -> int:
    """Concurrent requests one of ``workers`` workers may make: floor of the even split, at least one.

    The floor keeps the fleet at or under the limit, except when there are more workers than the limit
    allows requests (each still needs one to make progress).
    """
    return max(1, limit // max(1, workers))


class TokenBucket:
    """Classic token bucket on a caller-supplied clock (seconds), so it can be tested without sleeping."""

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self._stamp = now

    def _refill(self, now: float) -> None:
        if now > self._stamp:
            self.tokens = min(self.capacity, self.tokens + (now - self._stamp) * self.rate)
        self._stamp = max(self._stamp, now)

    def configure(self, rate: float, capacity: float, now: float) -> None:
        self._refill(now)
        self.rate = rate
        self.capacity = capacity
        self.tokens = min(self.tokens, capacity)

    def take(self, now: float) -> float:
        """Take a token and return 0, or return how many seconds until one is available (taking nothing)."""
        self._refill(now)
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate


class Ramp:
    """Concurrency after the circuit closes: starts low and doubles with each success up to the ceiling."""

    def __init__(self, start: int) -> None:
        self.current = max(1, start)

    def success(self) -> None:
        self.current *= 2

    def limit(self, ceiling: int) -> int:
        return max(1, min(ceiling, self.current))

    def done(self, ceiling: int) -> bool:
        return self.current >= ceiling
